"""The miles lane's venv: `miles-rl==0.0.2 --no-deps` plus the committed pins, cached by their hash.

    ensure_miles_venv() -> Venv      `python -m e2e.miles_cpu install`

Built like the real-SGLang venvs (`e2e.sglang_cpu.venv.ensure_pinned_venv`: a temporary sibling,
marked, renamed into place; a changed pin names a new directory) under
`<cache_root>/miles-cpu/venvs/miles-rl-0.0.2-<key>`. It never holds a real sglang (miles-rl ships a
`sglang` tree of its own) and never the project: the project reaches the driver and every Ray
worker through the PYTHONPATH that `vf-sglang miles-command` prints.
"""

from __future__ import annotations

from pathlib import Path

from e2e.sglang_cpu.paths import cache_root
from e2e.sglang_cpu.venv import Venv, ensure_pinned_venv

MILES_VERSION = "0.0.2"
REQUIREMENTS_DIR = Path(__file__).resolve().parent / "requirements"


def requirements_in() -> Path:
    return REQUIREMENTS_DIR / f"miles-rl-{MILES_VERSION}.in"


def requirements_txt() -> Path:
    return REQUIREMENTS_DIR / f"miles-rl-{MILES_VERSION}.txt"


def venvs_dir() -> Path:
    return cache_root() / "miles-cpu" / "venvs"


def ensure_miles_venv(*, root: Path | None = None, force: bool = False) -> Venv:
    return ensure_pinned_venv(f"miles-rl-{MILES_VERSION}", version=MILES_VERSION, requirements=requirements_txt(),
                              packages=[f"miles-rl=={MILES_VERSION}"], root=root or venvs_dir(), force=force)
