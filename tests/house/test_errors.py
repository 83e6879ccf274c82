"""Every exception the product defines lives in `adapter/errors.py` and is drawn in its tree, so a
caller finds each type in one place. The demo engine's and the check command's live beside their
code (`adapter/reference/errors.py`, `adapter/cli/server_checks.py`), named by errors.py; and
generation A's `AdapterRequestError` subclasses Verifiers' own `ProviderError` (errors.py imports
nothing from Verifiers)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import adapter.errors

ADAPTER = Path(__file__).resolve().parents[2] / "adapter"
OUTSIDE = {
    ("episodes/generations/a.py", "AdapterRequestError"),  # must subclass Verifiers' ProviderError
    # the reference (demo) engine's own, beside its code
    ("reference/errors.py", "ReferenceEngineError"), ("reference/errors.py", "BadRequestError"),
    ("reference/errors.py", "ContextLengthError"), ("reference/errors.py", "AssetError"),
    ("reference/errors.py", "SGLangSourceError"), ("reference/errors.py", "TinyModelBuildError"),
    # `vf-sglang check`'s verdicts, beside the checks
    ("cli/server_checks.py", "CheckFailed"), ("cli/server_checks.py", "CheckSkipped"),
    # a command ended by a signal: its exit status, beside the one runner that raises it
    ("cli/interrupts.py", "Interrupted"),
}


def _defined_exceptions() -> set[tuple[str, str]]:
    """(module path, class name) of each class in adapter/ whose bases name an Error/Exception."""
    found = set()
    for path in ADAPTER.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base) for base in node.bases]
                if any(base.endswith(("Error", "Exception")) for base in bases):
                    found.add((path.relative_to(ADAPTER).as_posix(), node.name))
    return found


def test_every_exception_class_is_defined_in_errors_py_or_in_a_named_home() -> None:
    elsewhere = {found for found in _defined_exceptions() if found[0] != "errors.py"}
    assert elsewhere == OUTSIDE


def test_errors_py_names_where_each_exception_outside_it_lives() -> None:
    doc = adapter.errors.__doc__ or ""
    for path, name in OUTSIDE:
        module = "adapter." + path.removesuffix(".py").replace("/", ".")
        assert name in doc and (module in doc or path.startswith("episodes/")), f"{name} ({module})"


def test_errors_py_draws_every_class_it_defines() -> None:
    classes = [name for name, value in vars(adapter.errors).items()
               if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == "adapter.errors"]
    doc = adapter.errors.__doc__ or ""
    assert len(classes) > 20
    assert [name for name in classes if name not in doc] == []


def test_errors_py_draws_each_class_under_its_base() -> None:
    """Each `├── Name`/`└── Name` of the tree is a subclass of the name drawn one level up (a
    level is four columns)."""
    lines = (adapter.errors.__doc__ or "").split("\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    parents: dict[int, str] = {0: lines[0].strip()}
    drawn = 0
    for line in lines[1:]:
        match = re.search(r"[├└]── (\w+)", line)
        if match is None:
            continue
        depth = (match.start() - len(lines[0]) + len(lines[0].lstrip())) // 4 + 1
        name = match.group(1)
        parents[depth] = name
        base = getattr(adapter.errors, parents[depth - 1])
        assert issubclass(getattr(adapter.errors, name), base), f"{name} is drawn under {base.__name__}"
        drawn += 1
    assert drawn >= 20
