"""The house: `adapter/`'s subpackages, the one direction imports run, and the docs that draw it.

    errors → config → wire → engine → bridge → versions → samples → episodes → rollout → miles → reference → cli

A module may import its own subpackage and any subpackage to its left, never one to its right,
and none reaches into the test layer (`e2e`, `conformance`): the wheel ships the product alone.
Only `adapter/cli/reference_engine.py` reaches `adapter/reference/` (torch), and only inside functions.
Outside the package, `e2e/` keeps its map: no loose harness module at its top, every folder described.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "adapter"
DIRECTION = ("errors", "config", "wire", "engine", "bridge", "versions", "samples", "episodes", "rollout", "miles",
             "reference", "cli")
TEST_LAYER = ("conformance", "e2e")
BUNDLED = "episodes/bundled/"  # Verifiers' tasksets, package data imported by module name


def imported_modules(source: str) -> list[tuple[int, str]]:
    """Every absolute module an `import`/`from … import` names, with its line (nested ones too)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "adapter":
                found += [(node.lineno, f"adapter.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def _floor(relative: str) -> str:
    return relative.split("/")[0].removesuffix(".py")


def wrong_way(package: Path) -> list[str]:
    """Each import in `package` that runs against `DIRECTION`, or into the test layer, as one line."""
    problems: list[str] = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative == "__init__.py" or relative.startswith(BUNDLED):
            continue
        rank = DIRECTION.index(_floor(relative))
        for line, module in imported_modules(path.read_text()):
            top, _, rest = module.partition(".")
            if top in TEST_LAYER:
                problems.append(f"adapter/{relative}:{line} imports the test layer ({module})")
            if top == "adapter" and rest and rest.split(".")[0] in DIRECTION:
                target = rest.split(".")[0]
                if DIRECTION.index(target) > rank:
                    problems.append(f"adapter/{relative}:{line} imports {module}: {_floor(relative)} → {target}")
    return problems


def test_every_import_runs_along_the_direction() -> None:
    assert wrong_way(ADAPTER) == []


def test_a_planted_back_edge_is_named(tmp_path: Path) -> None:
    for floor in DIRECTION[1:]:
        (tmp_path / floor).mkdir()
        (tmp_path / floor / "__init__.py").write_text("")
    (tmp_path / "errors.py").write_text("")
    (tmp_path / "wire" / "translate.py").write_text("def f():\n    from adapter.bridge.handler import Reply\n")
    (tmp_path / "engine" / "client.py").write_text("from adapter import cli\nimport e2e.verify\n")
    (tmp_path / "cli" / "reference_engine.py").write_text("from conformance.engine import FakeEngine\n")
    assert wrong_way(tmp_path) == [
        "adapter/cli/reference_engine.py:1 imports the test layer (conformance.engine)",
        "adapter/engine/client.py:1 imports adapter.cli: engine → cli",
        "adapter/engine/client.py:2 imports the test layer (e2e.verify)",
        "adapter/wire/translate.py:2 imports adapter.bridge.handler: wire → bridge",
    ]


REFERENCE_DOOR = "cli/reference_engine.py"  # the one way into `adapter/reference/` (it loads torch)


def reference_reaches(package: Path) -> list[str]:
    """Each import of `adapter.reference` outside its own package that is not the door's, or is the
    door's at import time (the rest of the CLI stays torch-free), as one line."""
    problems: list[str] = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if _floor(relative) == "reference":
            continue
        source = path.read_text()
        top_level = {node.lineno for node in ast.parse(source).body}
        for line, module in imported_modules(source):
            if module != "adapter.reference" and not module.startswith("adapter.reference."):
                continue
            if relative != REFERENCE_DOOR:
                problems.append(f"adapter/{relative}:{line} imports {module}: only adapter/{REFERENCE_DOOR} may")
            elif line in top_level:
                problems.append(f"adapter/{relative}:{line} imports {module} at import time")
    return problems


def test_only_the_commands_door_reaches_the_reference_engine() -> None:
    assert reference_reaches(ADAPTER) == []


def test_a_reach_into_the_reference_engine_is_named(tmp_path: Path) -> None:
    for floor in ("cli", "miles", "reference"):
        (tmp_path / floor).mkdir()
    (tmp_path / "reference" / "server.py").write_text("from adapter.reference.generator import Generator\n")
    (tmp_path / "miles" / "launcher.py").write_text("def f():\n    from adapter import reference\n")
    (tmp_path / "cli" / "reference_engine.py").write_text(
        "from adapter.reference import TinyModelBuildError\n\n\ndef f():\n    from adapter.reference import server\n")
    assert reference_reaches(tmp_path) == [
        "adapter/cli/reference_engine.py:1 imports adapter.reference at import time",
        "adapter/miles/launcher.py:2 imports adapter.reference: only adapter/cli/reference_engine.py may",
    ]


def test_the_top_level_is_the_direction_and_nothing_else() -> None:
    entries = {p.name for p in ADAPTER.iterdir() if p.name not in {"__init__.py", "__pycache__", "py.typed"}}
    assert entries == {"errors.py", *DIRECTION[1:]}
    assert len(entries) <= 12


def package_lines(package: Path) -> dict[str, int]:
    """Lines of Python per top-level entry of `package` (bundled taskset data left out)."""
    counts: dict[str, int] = {}
    for path in package.rglob("*.py"):
        relative = path.relative_to(package).as_posix()
        if "/bundled/" in f"/{relative}":
            continue
        floor = _floor(relative)
        counts[floor] = counts.get(floor, 0) + len(path.read_text().splitlines())
    return counts


def test_no_subpackage_holds_more_than_a_quarter_of_the_package() -> None:
    counts = package_lines(ADAPTER)
    total = sum(counts.values())
    heavy = {name: f"{lines / total:.0%}" for name, lines in counts.items() if lines > total / 4}
    assert heavy == {}, f"split by concern: {heavy} of {total} lines"


def test_a_subpackage_over_a_quarter_is_named(tmp_path: Path) -> None:
    for name, lines in (("rollout", 30), ("wire", 40), ("cli", 30)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.py").write_text("x = 1\n" * lines)
    (tmp_path / "rollout" / "bundled").mkdir()
    (tmp_path / "rollout" / "bundled" / "t.py").write_text("x = 1\n" * 500)  # data, not counted
    assert package_lines(tmp_path) == {"rollout": 30, "wire": 40, "cli": 30}


@pytest.mark.parametrize("subpackage", DIRECTION[1:])
def test_each_subpackage_says_what_it_owns_and_may_import(subpackage: str) -> None:
    doc = ast.get_docstring(ast.parse((ADAPTER / subpackage / "__init__.py").read_text())) or ""
    assert "Owns:" in doc and "May import:" in doc, f"adapter/{subpackage}/__init__.py"


def _parts(subpackage: str) -> list[str]:
    """Its modules and its folders (`bundled/`, `generations/`), as the map names them."""
    folder = ADAPTER / subpackage
    return sorted([p.stem for p in folder.glob("*.py") if p.name != "__init__.py"]
                  + [p.name for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"])


def _unnamed(parts: list[str], text: str) -> list[str]:
    return [name for name in parts if not re.search(rf"`{re.escape(name)}(`|/)", text)]


@pytest.mark.parametrize("subpackage", DIRECTION[1:])
def test_every_module_is_named_in_its_subpackage_owns_and_in_the_architecture_table(subpackage: str) -> None:
    doc = ast.get_docstring(ast.parse((ADAPTER / subpackage / "__init__.py").read_text())) or ""
    owns = doc[doc.index("Owns:"):doc.index("May import:")]
    row = next(line for line in (ROOT / "ARCHITECTURE.md").read_text().splitlines()
               if line.startswith(f"| `adapter/{subpackage}/`"))
    parts = _parts(subpackage)
    assert _unnamed(parts, owns) == [], f"adapter/{subpackage}/__init__.py's Owns: leaves these out"
    assert _unnamed(parts, row) == [], f"ARCHITECTURE.md's row for adapter/{subpackage}/ leaves these out"


@pytest.mark.parametrize("document", ["ARCHITECTURE.md", "README.md"])
def test_the_docs_list_every_subpackage(document: str) -> None:
    text = (ROOT / document).read_text()
    missing = [name for name in DIRECTION[1:] if not re.search(rf"`adapter/{name}/`", text)]
    assert missing == [], f"{document} does not describe adapter/{missing}/"


# The design notes and the issue tracker are not in the repository: a comment says the fact, or
# points at docs/, ARCHITECTURE.md or README.md. `[/]` and `[(]` keep this line from matching itself.
OUTSIDE = re.compile(r"CONTRACT\.md|MILES\.md|MILES_CPU\.md|ROUTER\.md|SGLANG_CPU\.md|OFFLINE\.md|STYLE\.md"
                     r"|VERSIONS\.md|design[/]|\bissue \d+|[(]issue")
CODE_FOLDERS = ("adapter", "benchmarks", "conformance", "e2e", "tests", "tools")


def outside_references(root: Path, folder: str) -> list[str]:
    """`file:line` of every line in `root/folder`'s Python files that points outside the repository."""
    return [f"{p.relative_to(root).as_posix()}:{n}" for p in sorted((root / folder).rglob("*.py"))
            for n, line in enumerate(p.read_text().splitlines(), 1) if OUTSIDE.search(line)]


@pytest.mark.parametrize("folder", CODE_FOLDERS)
def test_no_comment_points_at_a_document_outside_the_repository(folder: str) -> None:
    hits = outside_references(ROOT, folder)
    assert hits == [], "say the fact, or point at the repository's docs:\n" + "\n".join(hits)


def test_every_outside_reference_is_named(tmp_path: Path) -> None:
    # The planted text is split so that this file itself passes the rule.
    (tmp_path / "e2e" / "sub").mkdir(parents=True)
    (tmp_path / "e2e" / "a.py").write_text('"""Per CONTRACT' + '.md §2."""\nx = 1  # fine\n# (iss' + 'ue 15.4)\n')
    (tmp_path / "e2e" / "sub" / "b.py").write_text("# see design" + "/MILES" + ".md\n# docs/contract.md §2\n")
    assert outside_references(tmp_path, "e2e") == ["e2e/a.py:1", "e2e/a.py:3", "e2e/sub/b.py:1"]


# `e2e/`'s map (e2e/README.md): at the top only the entry (`runner.py`) and the matrix's pins; every
# other harness lives in a folder: one per lane, the plans, the GPU tier's prechecks, the shared judges,
# the router, the common plumbing. Each folder says what it holds and the README names it.
E2E = ROOT / "e2e"
E2E_TOP_FILES = {"__init__.py", "README.md", "runner.py", "requirements-contract.txt"}


def e2e_map_problems(e2e: Path) -> list[str]:
    """Each loose file at `e2e`'s top level, and each folder its README or its `__init__.py` leaves
    undescribed, as one line."""
    readme = (e2e / "README.md").read_text() if (e2e / "README.md").is_file() else ""
    problems = [f"e2e/{p.name} is loose at the top: move it into its lane's (or the shared) folder"
                for p in sorted(e2e.iterdir()) if p.is_file() and p.name not in E2E_TOP_FILES]
    for folder in sorted(p for p in e2e.iterdir() if p.is_dir() and p.name != "__pycache__"):
        if f"`{folder.name}/`" not in readme:
            problems.append(f"e2e/README.md does not name e2e/{folder.name}/")
        init = folder / "__init__.py"
        if not (init.is_file() and ast.get_docstring(ast.parse(init.read_text()))):
            problems.append(f"e2e/{folder.name}/__init__.py does not say what the folder holds")
    return problems


def test_e2e_keeps_its_map() -> None:
    assert e2e_map_problems(E2E) == []


def test_a_loose_e2e_module_and_an_unmapped_folder_are_named(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("`judges/` hold the shared judges\n")
    (tmp_path / "runner.py").write_text("")
    (tmp_path / "router.py").write_text("")
    for folder, doc in (("judges", '"""The judges."""\n'), ("lane", "")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text(doc)
    assert e2e_map_problems(tmp_path) == [
        "e2e/router.py is loose at the top: move it into its lane's (or the shared) folder",
        "e2e/README.md does not name e2e/lane/",
        "e2e/lane/__init__.py does not say what the folder holds",
    ]


def test_the_tests_mirror_the_package_one_folder_per_subpackage() -> None:
    """A subpackage's unit tests live in tests/<subpackage>/ (cross-cutting suites, such as
    tests/contract or the lanes' own, sit beside them)."""
    subpackages = {p.name for p in ADAPTER.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in (ROOT / "tests").iterdir() if (p / "__init__.py").is_file()}
    assert sorted(subpackages - folders) == []


# `vf-sglang` (pyproject's [project.scripts]) is adapter.cli's door: a test that runs it reaches adapter.cli
SCRIPTS = {name: target.split(":")[0] for name, target in
           tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"].items()}


def _named_modules(path: Path) -> set[str]:
    """The modules a test file reaches: what it imports, what the programs it starts import or run
    (`-m adapter.x`, a script's text in a string, the `vf-sglang` script), and what the helper
    modules of the tests it imports reach, one level down."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.update(re.findall(r"\b(?:adapter|tests)(?:\.\w+)+", node.value))
            names.update(module for script, module in SCRIPTS.items() if script in node.value)
    for name in [n for n in names if n.startswith("tests.") and not n.split(".")[-1].startswith("test_")]:
        helper = ROOT / (name.replace(".", "/") + ".py")
        if helper.is_file() and helper != path:
            names |= _named_modules_shallow(helper)
    return names


def _named_modules_shallow(path: Path) -> set[str]:
    return {node.module for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module}


def test_each_subpackage_folder_of_tests_holds_tests_that_reach_that_subpackage() -> None:
    """tests/<subpackage>/test_*.py reaches adapter.<subpackage> (by `_named_modules`): a test
    of another subpackage's code sits in that subpackage's folder."""
    subpackages = {p.name for p in ADAPTER.iterdir() if (p / "__init__.py").is_file()}
    misplaced = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "tests").glob("*/test_*.py"))
                 if path.parent.name in subpackages
                 and not any(name == f"adapter.{path.parent.name}" or name.startswith(f"adapter.{path.parent.name}.")
                             for name in _named_modules(path))]
    assert misplaced == []
