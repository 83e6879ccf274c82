"""The GPU tier's base interpreter: the runner image's own Python, never a venv's.

The GPU tier builds `uv venv --system-site-packages` so that the runner image's preinstalled
stack (CUDA torch, ...) is visible. uv builds a venv on the *base* of the interpreter it is
given, so under `tox`/`uv run` (`sys.executable` is a venv Python) the venv would sit on
pyenv's or uv's Python and see none of the image's packages. The base interpreter is therefore
taken explicitly: `--base-python`, or by default the first `python3` on PATH that is not inside
a virtual environment. The plan reports which, and a plan step then proves a package of that
system site imports in the new venv.

`resolve_base_python(requested)` → `BaseInterpreter(executable, version, how)`, or
`BaseInterpreterError` saying what was wrong and which flag to pass.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

MIN_VERSION = (3, 11)  # pyproject's requires-python
PROBE = "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.prefix != sys.base_prefix); print(sys.executable)"


class BaseInterpreterError(RuntimeError):
    """No usable base interpreter: the message names the interpreter and `--base-python`."""


@dataclass(frozen=True)
class BaseInterpreter:
    executable: str  # passed to `uv venv --python`: a real interpreter, not a shim
    version: str  # "3.11": the venv's lib/pythonX.Y directory
    how: str  # how it was chosen, shown in the plan

    @property
    def lib_tag(self) -> str:
        return f"python{self.version}"


def _inspect(executable: str) -> tuple[str, bool, str]:
    """(X.Y version, is a venv, sys.executable) of an interpreter, by running it."""
    try:
        out = subprocess.run([executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise BaseInterpreterError(f"base interpreter {executable!r} does not run: {exc}") from exc
    version, in_venv, real = out.stdout.split("\n")[:3]
    return version, in_venv == "True", real


def _venv_bin_dir(directory: Path) -> bool:
    return (directory.parent / "pyvenv.cfg").is_file()


def system_python_candidates(path: str | None = None, name: str = "python3") -> list[str]:
    """Every `name` on PATH whose directory is not a virtual environment's bin directory."""
    found = []
    for entry in (os.environ.get("PATH", "") if path is None else path).split(os.pathsep):
        candidate = Path(entry) / name
        if entry and not _venv_bin_dir(Path(entry)) and candidate.is_file() and os.access(candidate, os.X_OK):
            found.append(str(candidate))
    return list(dict.fromkeys(found))


def _checked(executable: str, version: str, how: str) -> BaseInterpreter:
    if tuple(int(part) for part in version.split(".")) < MIN_VERSION:
        needed = ".".join(map(str, MIN_VERSION))
        raise BaseInterpreterError(f"base interpreter {executable} is Python {version}; the adapter needs "
                                   f"Python >= {needed}: pass --base-python with the runner image's newer Python")
    return BaseInterpreter(executable, version, how)


def resolve_base_python(requested: str | None = None, *, path: str | None = None) -> BaseInterpreter:
    """The explicit `--base-python` (refused if it is a venv's interpreter), else the system
    `python3` on PATH outside any venv (shims such as pyenv's are resolved to the real file)."""
    if requested:
        version, in_venv, real = _inspect(requested)
        if in_venv:
            raise BaseInterpreterError(
                f"--base-python {requested} is a virtual environment's interpreter: uv would build on its base "
                "and --system-site-packages would not see this venv's packages; pass the runner image's "
                "system python instead")
        return _checked(real, version, f"--base-python {requested}")
    for candidate in system_python_candidates(path):
        version, in_venv, real = _inspect(candidate)
        if not in_venv:
            shown = candidate if candidate == real else f"{candidate} -> {real}"
            return _checked(real, version, f"the first python3 on PATH outside any venv: {shown}")
    raise BaseInterpreterError("no python3 on PATH outside a virtual environment: pass --base-python "
                               "with the runner image's system interpreter")


def system_site_problem(name: str) -> str | None:
    """Run inside the new venv: why package `name` does not come from the base's site, or None."""
    import importlib
    import sys

    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        return (f"{name} is not importable in the venv {sys.prefix} ({exc}): it must come from the base "
                f"interpreter's site ({sys.base_prefix}); pass --base-python with the runner image's Python "
                f"that has {name}, or check that the venv was built with --system-site-packages")
    where = str(Path(getattr(module, "__file__", None) or "").resolve())
    if where.startswith(str(Path(sys.prefix).resolve()) + os.sep):
        return f"{name} was found inside the venv ({where}), not in the base interpreter's site"
    return None


def main(argv: list[str] | None = None) -> int:
    import argparse
    import importlib
    import sys

    parser = argparse.ArgumentParser(prog="python -m e2e.gpu.interpreter",
                                     description="check, inside a venv, that system-site packages import from "
                                                 "the system site (not shadowed by the venv's own)")
    parser.add_argument("--expect-system-package", required=True, metavar="NAME", action="append",
                        help="repeatable: every one is checked, every problem printed")
    names = parser.parse_args(argv).expect_system_package
    problems = [problem for problem in map(system_site_problem, names) if problem]
    for problem in problems:
        print(f"e2e.gpu.interpreter: {problem}", file=sys.stderr)
    if problems:
        return 1
    for name in names:
        module = importlib.import_module(name)
        print(f"{name} {getattr(module, '__version__', '')} imports from the system site: {module.__file__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
