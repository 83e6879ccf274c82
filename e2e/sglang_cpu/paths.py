"""Where `e2e.sglang_cpu` keeps things: the committed files next to this module, and the cache.

    STANDIN_DIR         standin/: the `sgl_kernel` stand-in and the SGLang plugin (with its
                        dist-info); put ONLY on the launched server's PYTHONPATH
    REQUIREMENTS_DIR    requirements/: `sglang-<V>.in` (filtered Requires-Dist) and the pinned
                        `sglang-<V>.txt` compiled from it (`python -m e2e.sglang_cpu lock`)
    cache_root()        $VF_SGLANG_CACHE, else $XDG_CACHE_HOME/vf-sglang, else ~/.cache/vf-sglang
                        (the same root as the tiny model's cache; kept here so this package
                        imports nothing from `adapter`)
    venvs_dir(), logs_dir()   <cache_root>/sglang-cpu/venvs and .../logs
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
STANDIN_DIR = PACKAGE_DIR / "standin"
REQUIREMENTS_DIR = PACKAGE_DIR / "requirements"
CACHE_ENV = "VF_SGLANG_CACHE"


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser().absolute()
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().absolute() / "vf-sglang"


def venvs_dir(environ: Mapping[str, str] | None = None) -> Path:
    return cache_root(environ) / "sglang-cpu" / "venvs"


def logs_dir(environ: Mapping[str, str] | None = None) -> Path:
    return cache_root(environ) / "sglang-cpu" / "logs"


def requirements_in(version: str) -> Path:
    return REQUIREMENTS_DIR / f"sglang-{version}.in"


def requirements_txt(version: str) -> Path:
    return REQUIREMENTS_DIR / f"sglang-{version}.txt"


def locked_versions() -> tuple[str, ...]:
    """The sglang versions with committed pinned requirements, oldest first."""
    names = (p.name.removeprefix("sglang-").removesuffix(".txt") for p in REQUIREMENTS_DIR.glob("sglang-*.txt"))
    return tuple(sorted(names, key=lambda v: tuple(int(part) if part.isdigit() else 0 for part in v.split("."))))
