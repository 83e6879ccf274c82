"""Per-user cache directories: never a fixed path shared between users.

    user_cache_dir()          $XDG_CACHE_HOME/vf-sglang, else ~/.cache/vf-sglang
    harness_uv_cache(pin)     the uv cache of a harness whose resolution is pinned with
                              UV_EXCLUDE_NEWER: $UV_CACHE_DIR/vf-sglang-harness/<pin> when the
                              user chose a uv cache, else user_cache_dir()/uv-harness/<pin>

A pinned harness needs a cache of its own because uv reuses an existing script environment
without re-resolving it: a cache that once resolved the script without the pin keeps that
resolution. One cache per pin keeps different pins apart. Paths are absolute: harness
environment values are not shell-expanded and the harness runs in a temporary directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path


def user_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().absolute() / "vf-sglang"


def harness_uv_cache(pin: str, environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    slug = re.sub(r"[^0-9A-Za-z]+", "-", pin).strip("-") or "unpinned"
    if env.get("UV_CACHE_DIR"):
        return Path(env["UV_CACHE_DIR"]).expanduser().absolute() / "vf-sglang-harness" / slug
    return user_cache_dir(env) / "uv-harness" / slug


def with_harness_cache(harness_env: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A harness env with a per-user UV_CACHE_DIR added when it pins UV_EXCLUDE_NEWER and sets
    no cache itself (an explicit UV_CACHE_DIR always wins)."""
    out = dict(harness_env)
    pin = out.get("UV_EXCLUDE_NEWER")
    if pin and "UV_CACHE_DIR" not in out:
        out["UV_CACHE_DIR"] = str(harness_uv_cache(pin, environ))
    return out
