"""Docs that cannot drift: every dotted name of this repository's own code that ARCHITECTURE.md,
README.md, docs/ and e2e/README.md name, and every one a docstring names, resolves to a module or
to a name defined in one. Full names (`adapter.rollout.job`, `e2e.judges.verify`) are checked
wherever they appear; names relative to adapter/ (`rollout.job`, `samples.conversion`) where they
are quoted in backticks in the docs and adapter/'s docstrings (elsewhere `config.steps` is a
variable's attribute). `miles.` names both adapter/miles (`miles.binding`) and Miles' own package
(`miles.utils.types`): one is checked when its next part is a module of adapter/miles or a name
its `__init__` defines, and left as Miles' own otherwise."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("adapter", "conformance", "e2e", "tools", "benchmarks")
SUBPACKAGES = tuple(sorted(p.name for p in (REPO / "adapter").iterdir()
                           if (p / "__init__.py").is_file()))
NAME = r"(?:\.[A-Za-z_]\w*)+"
FULL = re.compile(rf"(?<![\w./-])((?:{'|'.join(ROOTS)}){NAME})")
RELATIVE = re.compile(rf"`((?:{'|'.join(SUBPACKAGES)}){NAME})")
FILE_SUFFIXES = (".py", ".md", ".toml", ".txt", ".json", ".jsonl", ".log", ".in", ".pt", ".lock", ".sh")
DOCS = [REPO / "ARCHITECTURE.md", REPO / "README.md", REPO / "e2e" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CODE = [path for root in ROOTS for path in sorted((REPO / root).rglob("*.py"))]


@functools.cache
def _defined(module: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return frozenset(names)


def resolves(name: str) -> bool:
    """A package, a module, or a module then one name it defines (a class, function, constant or
    import); a method after a class is accepted once the class resolves."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        path = REPO.joinpath(*parts[:cut])
        module = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
        if not module.is_file():
            if cut == len(parts) and path.is_dir():
                return True
            continue
        rest = parts[cut:]
        return not rest or rest[0] in _defined(module)
    return False


def _ours(relative_name: str) -> bool:
    """A relative name of this repository's (module docstring: `miles.` is also Miles' own)."""
    package, _, rest = relative_name.partition(".")
    if package != "miles":
        return True
    miles = REPO / "adapter" / "miles"
    part = rest.split(".")[0]
    return (miles / f"{part}.py").is_file() or (miles / part).is_dir() or part in _defined(miles / "__init__.py")


def _names(text: str, *, relative: bool = True) -> set[str]:
    found = {m.group(1) for m in FULL.finditer(text)}
    if relative:
        found |= {f"adapter.{m.group(1)}" for m in RELATIVE.finditer(text) if _ours(m.group(1))}
    return {name.rstrip(".") for name in found if not name.endswith(FILE_SUFFIXES)}


def _docstrings(path: Path) -> str:
    tree = ast.parse(path.read_text())
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return "\n".join(doc for node in nodes if (doc := ast.get_docstring(node)))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_dotted_name_a_doc_gives_resolves(doc: Path) -> None:
    assert sorted(name for name in _names(doc.read_text()) if not resolves(name)) == []


def test_every_dotted_name_a_docstring_gives_resolves() -> None:
    broken = {f"{path.relative_to(REPO)}: {name}" for path in CODE
              for name in _names(_docstrings(path), relative=path.is_relative_to(REPO / "adapter"))
              if not resolves(name)}
    assert sorted(broken) == []


@pytest.mark.parametrize(("name", "expected"), [
    ("adapter.rollout.job", True), ("adapter.rollout.job.prepare_job", True), ("adapter.rollout", True),
    ("adapter.rollout.identity", False), ("adapter.rollout.job.no_such_name", False),
])
def test_the_resolver_tells_moved_names_from_real_ones(name: str, expected: bool) -> None:
    assert resolves(name) is expected
