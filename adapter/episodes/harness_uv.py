"""The harness program's uv script environment, made ready before the first episode, offline too.

Verifiers runs a harness program (the null harness' chat loop: a PEP 723 script, deps `openai`,
`mcp`) in its subprocess runtime as `uv sync --script P -q --no-config && uv python find --script
P`, in a shell that inherits this process' environment (names containing API_KEY removed) plus
the harness' `env` (`runtimes/base.py`, `Runtime.prepare_uv_script`):
  verifiers 0.2.x, 0.3.x  the harness env reaches uv unchanged: UV_OFFLINE=1 there makes uv use
                          its cache alone;
  verifiers 0.4.0         the preparation runs with `{**env, "UV_OFFLINE": "false"}`: it asks the
                          index whatever the harness env says.
With no route to a package index, uv retries the index, the episode fails after uv's timeouts, its
group is dropped and replaced, and nothing is printed (`vf-sglang demo` sat silent for 240 s).

`offline_env(script, harness_env, forced=...)` runs that same preparation here first, on a copy of
the script under the user cache (`adapter.episodes.caches.user_cache_dir`), each uv call under a
deadline, and returns what the harness env must add:
  1. from uv's cache alone (`--offline`): the cache holds the script's environment → {UV_OFFLINE: 1},
     so Verifiers' own preparation never waits on the network;
  2. else as Verifiers would, with the index (this fills the cache) → {UV_OFFLINE: 1} as well;
  3. else `HarnessEnvironmentError` before any episode, naming UV_OFFLINE=1, the cache and the
     command that fills it.
A UV_OFFLINE someone else already decided is kept: forced by the release (`forced`, 0.4.0: setting
it cannot help there), or set in the harness env or in this process' environment (the user's
choice). Then only step 2 runs, under that value: {} on success, refused the same way on failure.
Online as offline, a cached program then runs from the cache: an unpinned harness keeps the
versions uv resolved when it filled the cache (the bundled configs pin UV_EXCLUDE_NEWER).
Outcomes are decided by uv's exit status, never by its message text (errors only quote it). The
result is remembered per process for the same script and environment.

`prepared_env(...)` is what the shims apply: `offline_env` plus UV_COMPILE_BYTECODE=1, so
Verifiers' own `uv sync --script` compiles the program's environment once (~2.3 s for the null
harness' 2,838 files) and every later harness process reads bytecode instead of compiling openai
and mcp again (measured: `import openai, mcp` 4.1 s → 2.4 s per process where
PYTHONDONTWRITEBYTECODE is set, as in most containers). A UV_COMPILE_BYTECODE the user or the
harness env already set is kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from adapter.episodes.caches import user_cache_dir
from adapter.episodes.harness_pins import MARK, program_requirements
from adapter.errors import HarnessEnvironmentError

logger = logging.getLogger(__name__)

OFFLINE_DEADLINE_S = 60.0  # from the cache alone: links cached wheels, no network
FILL_DEADLINE_S = 180.0  # with the index: downloads the script's dependencies (~60 MB for null's)
OFFLINE = {"UV_OFFLINE": "1"}
BYTECODE = {"UV_COMPILE_BYTECODE": "1"}
# Who already decided the preparation's UV_OFFLINE (the release: 0.4.0 forces it), in that order.
FixedBy = Literal["the installed verifiers", "the harness env", "this process' environment"]
_ready: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, str]] = {}


def offline_env(script: str, harness_env: Mapping[str, str], *,
                forced: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the harness env must add so that Verifiers' preparation of `script` never waits on
    an unreachable index (see the module docstring); `HarnessEnvironmentError` when it cannot."""
    forced = dict(forced or {})
    env = _uv_env(harness_env, forced)
    uv = shutil.which("uv", path=env.get("PATH"))
    if uv is None:  # Verifiers installs uv itself where it can; nothing to check here
        logger.warning("uv is not on PATH: the harness program's environment is not checked before the first episode")
        return {}
    path = _script_copy(script, env)
    key = (str(path), tuple(sorted(env.items())))
    if key not in _ready:
        _ready[key] = _decide(uv, path, env, fixed_by=_fixed_by(harness_env, forced))
    return dict(_ready[key])


def prepared_env(script: str, harness_env: Mapping[str, str], *,
                 forced: Mapping[str, str] | None = None) -> dict[str, str]:
    """`offline_env`, plus UV_COMPILE_BYTECODE=1 unless the harness env or this process' environment
    already decides it (see the module docstring)."""
    added = offline_env(script, harness_env, forced=forced)
    if not any(name in env for env in (harness_env, os.environ, added) for name in BYTECODE):
        added.update(BYTECODE)
    return added


def _fixed_by(harness_env: Mapping[str, str], forced: Mapping[str, str]) -> FixedBy | None:
    """Who already decided the preparation's UV_OFFLINE, or None when the adapter may."""
    if "UV_OFFLINE" in forced:
        return "the installed verifiers"
    if "UV_OFFLINE" in harness_env:
        return "the harness env"
    if "UV_OFFLINE" in os.environ:
        return "this process' environment"
    return None


def _decide(uv: str, path: Path, env: Mapping[str, str], *, fixed_by: FixedBy | None) -> dict[str, str]:
    """Steps 1-3 of the module docstring; with UV_OFFLINE fixed by someone else, step 2 only,
    under that value."""
    cached = None if fixed_by else _uv_sync(uv, path, env, offline=True, deadline=OFFLINE_DEADLINE_S)
    if cached is not None and cached.ok:
        return dict(OFFLINE)
    logger.info("preparing the harness program's environment (%s) with uv", ", ".join(_dependencies(path)))
    fetched = _uv_sync(uv, path, env, offline=False, deadline=FILL_DEADLINE_S)
    if fetched.ok:
        return {} if fixed_by else dict(OFFLINE)
    raise HarnessEnvironmentError(_refusal(uv, path, env, cached, fetched, fixed_by))


@dataclass(frozen=True)
class _Sync:
    ok: bool
    detail: str  # for messages only: the exit status and uv's last lines, or the deadline


def _uv_sync(uv: str, path: Path, env: Mapping[str, str], *, offline: bool, deadline: float) -> _Sync:
    """`uv sync --script` as Verifiers runs it (plus `--offline`), in its own process group,
    killed with its children at the deadline."""
    argv = [uv, "sync", "--script", str(path), "-q", "--no-config", *(["--offline"] if offline else [])]
    proc = subprocess.Popen(argv, env=dict(env), cwd=path.parent, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return _Sync(False, f"no answer within {deadline:.0f} s")
    if proc.returncode == 0:
        return _Sync(True, "")
    lines = [line.strip() for line in err.decode(errors="replace").splitlines() if line.strip()]
    return _Sync(False, f"exit status {proc.returncode}: {' / '.join(lines[-3:])}")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # start_new_session: its group id is its pid
    with contextlib.suppress(subprocess.TimeoutExpired):  # a child that left the group holds the pipe
        proc.communicate(timeout=5)


def _uv_env(harness_env: Mapping[str, str], forced: Mapping[str, str]) -> dict[str, str]:
    """The environment Verifiers' subprocess runtime gives the preparation, `~/.local/bin` first."""
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k.upper()}
    env.update(harness_env)
    env.update(forced)
    home = env.get("HOME") or str(Path.home())
    env["PATH"] = os.pathsep.join(filter(None, [f"{home}/.local/bin", env.get("PATH")]))
    return env


def _script_copy(script: str, env: Mapping[str, str]) -> Path:
    """The script at a stable path (uv keys a script's environment by its path), written once."""
    data = script.encode()
    path = user_cache_dir(env) / "harness-scripts" / f"{hashlib.sha256(data).hexdigest()}.py"
    if not path.is_file() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path


def _dependencies(path: Path) -> list[str]:
    return [str(req) for req in program_requirements(path.read_text())]


def _refusal(uv: str, path: Path, env: Mapping[str, str], cached: _Sync | None, fetched: _Sync,
             fixed_by: FixedBy | None) -> str:
    cache = env.get("UV_CACHE_DIR")
    where = f"UV_CACHE_DIR={cache}" if cache else "uv's default cache (`uv cache dir`)"
    pins = [f"{k}={env[k]}" for k in ("UV_CACHE_DIR", "UV_EXCLUDE_NEWER") if env.get(k)]
    fill = "`" + " ".join([*pins, uv, "sync", "--script", str(path)]) + "`"
    held = ", held to this environment's versions (adapter.episodes.harness_pins)" if MARK in path.read_text() else ""
    head = (f"the harness program (a uv script; dependencies {', '.join(_dependencies(path)) or 'none'}{held}) "
            "cannot be prepared: ")
    if fixed_by == "the installed verifiers":
        return (head + f"the installed verifiers prepares it with UV_OFFLINE={env['UV_OFFLINE']}, so UV_OFFLINE=1 "
                f"cannot help, and asking the index failed (uv sync --script: {fetched.detail}). Make a package "
                "index reachable (UV_DEFAULT_INDEX may name a local mirror) or use verifiers 0.2.x/0.3.x, whose "
                "harness runs offline from a filled uv cache")
    if cached is None:
        return (head + f"{fixed_by} sets UV_OFFLINE={env['UV_OFFLINE']} and uv sync --script failed under it "
                f"({fetched.detail}). Fill {where} once with network: {fill} (or copy a filled cache there), "
                f"or drop UV_OFFLINE from {fixed_by}: the adapter then sets UV_OFFLINE=1 itself once the "
                "cache holds the program")
    return (head + f"{where} does not hold its environment (uv sync --script --offline: {cached.detail}) and "
            f"fetching it failed (uv sync --script: {fetched.detail}). Fill the cache once with network: {fill} "
            "(or copy a filled cache there); the adapter then runs the harness with UV_OFFLINE=1 from that cache")
