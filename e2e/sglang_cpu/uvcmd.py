"""The one way this package runs uv: found on PATH (or next to the running interpreter, where the
project's test extra installs it), argv lists only, failures raised as the caller's error type."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from e2e.sglang_cpu.errors import SGLangCPUError

# Variables that would point uv (or the interpreters it finds) at another environment.
_FOREIGN_ENV = ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT")


def uv_executable() -> str:
    found = shutil.which("uv")
    if found:
        return found
    beside = Path(sys.executable).parent / "uv"
    if beside.exists():
        return str(beside)
    raise SGLangCPUError("uv is not on PATH: pip install uv (or `uv sync --extra test` in the project)")


def uv_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without the variables that select another Python environment."""
    env = dict(os.environ if environ is None else environ)
    for name in _FOREIGN_ENV:
        env.pop(name, None)
    return env


def run_uv(args: Sequence[str], *, cwd: Path, error: type[SGLangCPUError]) -> str:
    """Run `uv ARGS` in `cwd` and return its stdout; its progress and errors go to our stderr."""
    argv = [uv_executable(), *args]
    done = subprocess.run(argv, cwd=cwd, env=uv_env(), stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise error(f"`{' '.join(argv)}` failed with exit status {done.returncode} (its stderr is above)")
    return done.stdout
