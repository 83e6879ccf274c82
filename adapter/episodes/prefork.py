"""The pre-forked harness runtime, generation-neutral: which program runs it takes over, and how.

Verifiers' subprocess runtime starts a fresh interpreter for every harness program and every
per-rollout tool server; this one forks each from a warm zygote of the same interpreter and
program (`adapter.episodes.zygotes`), giving it what the subprocess runtime gives (Verifiers
0.2.0 `runtimes/subprocess.py`): the host environment minus every name containing `API_KEY`,
then the call's env; the rollout's workdir as cwd; a session of its own; stdout and stderr.

`launch_for(argv, env, cwd)` recognises the two forms Verifiers starts Python with:

  * a uv script, as `Runtime.prepare_uv_script` wraps it: `sh -c '<exports>; shift; exec "$@"'
    uv-script VENV INTERPRETER SCRIPT ARGS...` (the harness program). Only a wrapper known here
    word for word is taken, and its exports are applied as sh would (with the `PWD` sh sets);
  * `INTERPRETER -m MODULE` (a tool server, `mcp/launch.py`);
  * `INTERPRETER -c CODE ARGS...` (the tool servers' readiness probe, `mcp/launch.py`; 0.2.x and
    0.3.x name `python3`, found on the call's PATH as exec would find it).

Anything else (`sh -c mv ...`, uv's own preparation) returns None and runs as Verifiers runs
it. So does a program whose zygote cannot start (the pool says why, once).

`run_program` runs a launch to its end (stdout, stderr, exit code); cancelled, it kills the
program's process group, as Verifiers does. After the program exits its group is killed too: a
child it left behind does not outlive the rollout. `start_background` starts a tool server with
its output to a log; `ForkedChild.kill_group` ends it.

This isolates no more than Verifiers' subprocess runtime does: same host, same user, same
trust. It adds one sharing: modules a zygote imported are imported, not re-executed, in every
child (a module that reads the environment when imported saw the zygote's first launch's).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from adapter.episodes.zygotes import ForkedChild, Launch, ZygotePool
from adapter.errors import ConfigurationError

RUNTIME_VAR = "VF_SGLANG_HARNESS_RUNTIME"  # the one switch; `--harness-runtime` sets it, Ray workers inherit it
RUNTIMES = ("prefork", "subprocess")
DEFAULT_RUNTIME = "prefork"
_POOLS: list[ZygotePool] = []
_HOLDS: list[int] = [0]  # loaded environments whose episodes run pre-forked (`acquire`/`release`)


def chosen(environ: Mapping[str, str] | None = None) -> str:
    """The harness runtime asked for: `VF_SGLANG_HARNESS_RUNTIME`, prefork by default."""
    value = (os.environ if environ is None else environ).get(RUNTIME_VAR) or DEFAULT_RUNTIME
    if value not in RUNTIMES:
        raise ConfigurationError(f"{RUNTIME_VAR}={value!r} is not a harness runtime: set prefork (warm "
                                 "interpreters, the default) or subprocess (Verifiers' own)")
    return value


def process_pool() -> ZygotePool:
    """This process' zygotes (they end with it: their control sockets close)."""
    if not _POOLS:
        _POOLS.append(ZygotePool())
    return _POOLS[0]


def close_process_pool() -> None:
    """End this process' zygotes now and reap them (a command's last step: what it started, it ends)."""
    if _POOLS:
        _POOLS[0].close()


def acquire() -> None:
    """A loaded environment runs its episodes pre-forked: the process' pool serves it until it
    `release`s (its rollout function's lifetime closes: `EpisodeBackend.release`)."""
    _HOLDS[0] += 1


def release() -> bool:
    """One environment is done with the pool; the last one ends its zygotes (a later environment
    starts them afresh). True when it was the last: the caller takes its plug out too."""
    _HOLDS[0] = max(0, _HOLDS[0] - 1)
    if _HOLDS[0]:
        return False
    close_process_pool()
    return True


def _uv_script_exports_020(venv: str, env: Mapping[str, str], cwd: str) -> dict[str, str]:
    home = env.get("HOME", "")
    return {"VIRTUAL_ENV": venv, "PATH": f"{venv}/bin:{home}/.local/bin:{env.get('PATH', '')}",
            "UV_INSTALL_DIR": f"{home}/.local/bin", "UV_RUN_RECURSION_DEPTH": "1", "PWD": cwd}


# `Runtime.prepare_uv_script`'s wrapper, word for word, per release that has it → what it exports.
UV_SCRIPT_WRAPPERS: dict[str, Callable[[str, Mapping[str, str], str], dict[str, str]]] = {
    ('export VIRTUAL_ENV="$1" PATH="${1}/bin:$HOME/.local/bin:$PATH" UV_INSTALL_DIR="$HOME/.local/bin" '
     'UV_RUN_RECURSION_DEPTH=1; shift; exec "$@"'): _uv_script_exports_020,
}


def host_environment(env: Mapping[str, str]) -> dict[str, str]:
    """What Verifiers' subprocess runtime hands a program: the host's, minus API keys, then `env`."""
    full = {k: v for k, v in os.environ.items() if "API_KEY" not in k.upper()}
    full.update(env)
    return full


def launch_for(argv: list[str], env: Mapping[str, str], cwd: str | None) -> Launch | None:
    """The launch a zygote runs for this argv, or None: run it as Verifiers does (module docstring)."""
    full = host_environment(env)
    if len(argv) >= 7 and argv[:2] == ["sh", "-c"] and argv[3] == "uv-script" and argv[2] in UV_SCRIPT_WRAPPERS:
        venv, interpreter, script = argv[4], argv[5], argv[6]
        if not (os.path.isabs(interpreter) and os.path.isabs(script)):
            return None
        where = os.path.realpath(cwd or os.getcwd())
        exported = UV_SCRIPT_WRAPPERS[argv[2]](venv, full, where)
        return Launch(interpreter, "path", script, (script, *argv[7:]), {**full, **exported}, cwd)
    if len(argv) == 3 and argv[1] == "-m" and os.path.isabs(argv[0]) and os.path.basename(argv[0]).startswith("python"):
        return Launch(argv[0], "module", argv[2], ("-m",), full, cwd)
    if len(argv) >= 3 and argv[1] == "-c" and os.path.basename(argv[0]).startswith("python"):
        found = argv[0] if os.path.isabs(argv[0]) else shutil.which(argv[0], path=full.get("PATH", ""))
        if found is None or (os.sep in argv[0] and not os.path.isabs(argv[0])):
            return None
        return Launch(found, "code", argv[2], ("-c", *argv[3:]), full, cwd)
    return None


@dataclass(frozen=True)
class Ran:
    exit_code: int
    stdout: bytes
    stderr: bytes


async def _drain(fd: int) -> bytes:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**31)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                os.fdopen(fd, "rb", buffering=0))
    try:
        return await reader.read()
    finally:
        transport.close()


@contextlib.contextmanager
def _devnull() -> Iterator[int]:
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        yield fd
    finally:
        os.close(fd)


async def run_program(pool: ZygotePool, launch: Launch) -> Ran | None:
    """Run `launch` forked from its zygote to its end; None when it has no zygote (run it plainly)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        with _devnull() as stdin:
            child = await pool.spawn(launch, stdin=stdin, stdout=out_w, stderr=err_w)
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    if child is None:
        os.close(out_r)
        os.close(err_r)
        return None
    readers = asyncio.gather(_drain(out_r), _drain(err_r))
    readers.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved when cancelled
    try:
        code = await child.wait()
    finally:
        child.kill_group(signal.SIGKILL)  # cancelled (the rollout's timeout), or what it left behind
        if child.returncode is None:
            readers.cancel()
    stdout, stderr = await readers
    return Ran(code, stdout, stderr)


async def run_as_result(pool: ZygotePool, launch: Launch | None) -> dict[str, Any] | None:
    """`run_program` as the fields of Verifiers' `ProgramResult` (exit code, stdout and stderr
    decoded as Verifiers decodes them), or None: run it as Verifiers does."""
    ran = None if launch is None else await run_program(pool, launch)
    if ran is None:
        return None
    return {"exit_code": ran.exit_code or 0, "stdout": ran.stdout.decode(errors="replace"),
            "stderr": ran.stderr.decode(errors="replace")}


async def start_background(pool: ZygotePool, launch: Launch, log_path: str) -> ForkedChild | None:
    """Start a tool server forked from its zygote, stdout and stderr to `log_path`; None: run it plainly."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with _devnull() as stdin:
            return await pool.spawn(launch, stdin=stdin, stdout=log, stderr=log)
    finally:
        os.close(log)


class ForkedServers:
    """The tool servers one runtime started forked, ended as Verifiers ends its own: `send`
    (its sync `cleanup`: SIGTERM to each group), `stop` (its async teardown: SIGTERM, up to
    `grace` s for them to exit, then SIGKILL)."""

    def __init__(self) -> None:
        self._children: list[ForkedChild] = []

    async def start(self, pool: ZygotePool, launch: Launch | None, log_path: str | None) -> bool:
        """Start a tool server forked (`start_background`), kept to be ended with the others;
        False: run it as Verifiers does."""
        child = None
        if launch is not None and log_path is not None:
            child = await start_background(pool, launch, log_path)
        if child is None:
            return False
        self._children = [c for c in self._children if c.returncode is None] + [child]
        return True

    def send(self, sig: int = signal.SIGTERM) -> None:
        children, self._children = self._children, []
        for child in children:
            child.kill_group(sig)

    async def stop(self, grace: float = 5.0) -> None:
        children, self._children = self._children, []
        for child in children:
            child.kill_group(signal.SIGTERM)
        if not children:
            return
        try:
            await asyncio.wait_for(asyncio.gather(*(c.wait() for c in children)), grace)
        except TimeoutError:
            for child in children:
                child.kill_group(signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(c.wait() for c in children)), grace)
