"""Warm harness interpreters: one zygote per (interpreter, program), forking a child per program run.

    pool = ZygotePool()
    child = await pool.spawn(Launch(...), stdin=fd, stdout=fd, stderr=fd)   # None: not warm; run it plainly
    code = await child.wait()
    pool.close()

A zygote (`adapter/episodes/zygote_program.py`, stdlib only) is started once per key, from the
program's own interpreter, with the first launch's environment, imports what the program
imports and what earlier zygotes of the same interpreter and program learned their children
import (`learned_path`, under the user's cache), and then forks one child per launch (module
docstring there: what a child gets). It is
never this process: nothing here is forked but that clean, single-threaded interpreter.

Each zygote has a reader thread that resolves the launch futures (so any event loop can await a
child). A zygote dies with this process, at once (a parent-death SIGTERM, bound to the one
long-lived thread that starts every zygote, `_Starter`; and its control socket closing), killing
its children's process groups first, and each child dies with its zygote (a parent-death SIGKILL). A zygote that died
is started again on the next launch; one that cannot start, or dies again, makes the pool answer
None for its key with the reason logged once: the caller runs that program as a plain subprocess.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import hashlib
import itertools
import logging
import os
import queue
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from adapter.episodes import zygote_program as protocol  # the frames, one implementation (stdlib only)
from adapter.episodes.caches import user_cache_dir
from adapter.errors import ZygoteError

logger = logging.getLogger(__name__)

PROGRAM = Path(__file__).with_name("zygote_program.py")
READY_TIMEOUT_S = 120.0  # a zygote's imports (verifiers.v1: ~4 s on 2 cores; far more under load)
START_TIMEOUT_S = 60.0  # from a launch sent to its child running
RESTARTS = 1  # a zygote that dies is started again this many times, then its key runs plainly
# The environment a zygote's interpreter reads only when it starts: a launch whose values differ
# needs a zygote of its own (part of the key).
STARTUP_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONUSERBASE",
                "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8",
                "PYTHONHASHSEED", "PYTHONOPTIMIZE", "PYTHONWARNINGS", "PYTHONPYCACHEPREFIX", "VIRTUAL_ENV")

Kind = Literal["path", "module", "code"]


@dataclass(frozen=True)
class Launch:
    """One program run: `interpreter` runs `target` (a script path, a module for `-m`, the
    program's text for `-c`) as `__main__` with `argv` (its `sys.argv`), the full `env` and `cwd`."""

    interpreter: str
    kind: Kind
    target: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(hash=False, compare=False)
    cwd: str | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.interpreter, self.kind, self.target, _fingerprint(self), tuple(
            (name, self.env.get(name)) for name in STARTUP_VARS))


def _fingerprint(launch: Launch) -> str:
    """The script's content digest ("" for a module, or a script that cannot be read), read once
    per version of the file (every episode's launch asks; Verifiers writes a script once per process)."""
    if launch.kind != "path":
        return ""
    try:
        stat = os.stat(launch.target)
    except OSError:
        return ""
    return _digest(launch.target, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _digest(path: str, _mtime_ns: int, _size: int) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def learned_path(launch: Launch) -> Path:
    """Where the zygotes of this interpreter and program keep the modules their children imported."""
    digest = hashlib.sha256(repr((launch.interpreter, launch.kind, launch.target,
                                  _fingerprint(launch))).encode()).hexdigest()[:24]
    return user_cache_dir() / "zygotes" / f"{digest}.txt"


class ForkedChild:
    """A program run forked from a zygote: its own session, so `pid` is its process group."""

    def __init__(self, pid: int, exited: concurrent.futures.Future[int]) -> None:
        self.pid = pid
        self._exited = exited

    async def wait(self) -> int:
        """Its exit code, or minus the signal that ended it (cancelling the wait leaves the child be)."""
        return await asyncio.shield(asyncio.wrap_future(self._exited))

    @property
    def returncode(self) -> int | None:
        done = self._exited.done() and not self._exited.cancelled() and self._exited.exception() is None
        return self._exited.result() if done else None

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        """Signal the child's whole process group (it and whatever it started)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)


def _kill_when_started(started: concurrent.futures.Future[int]) -> None:
    """A child whose spawn was given up (cancelled, timed out) is killed, with its group, as it starts."""
    if not started.cancelled() and started.exception() is None:
        with contextlib.suppress(OSError):
            os.killpg(started.result(), signal.SIGKILL)


class Zygote:
    """One warm interpreter (module docstring). Thread-safe: `spawn` from any thread or loop."""

    def __init__(self, launch: Launch) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock = ours
        self._send_lock = threading.Lock()
        self._ids = itertools.count()
        self._started: dict[int, concurrent.futures.Future[int]] = {}
        self._exited: dict[int, concurrent.futures.Future[int]] = {}
        self.ready: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self.closed = False
        self.target = launch.target
        # its own output (import warnings): a file never fills up; closed by `close`
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self.process = subprocess.Popen(
                [launch.interpreter, str(PROGRAM), str(theirs.fileno()), launch.kind, launch.target,
                 str(learned_path(launch)), str(os.getpid())],
                env=launch.env, cwd=launch.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=self._stderr, pass_fds=(theirs.fileno(),), start_new_session=True)
        except BaseException:
            self._stderr.close()
            raise
        finally:
            theirs.close()
        threading.Thread(target=self._read, name=f"vf-sglang zygote {launch.target}", daemon=True).start()

    @property
    def alive(self) -> bool:
        return not self.closed and self.process.poll() is None

    def _read(self) -> None:
        try:
            while (frame := protocol.receive(self._sock)) is not None:
                self._dispatch(frame[0])
        except OSError:
            pass
        self.closed = True
        code = self.process.wait()
        reason = ZygoteError(f"the zygote ended (exit {code}): {self._output_tail() or 'no output'}")
        futures: list[concurrent.futures.Future[Any]] = [self.ready, *self._started.values(), *self._exited.values()]
        for future in futures:
            if not future.done():
                future.set_exception(reason)

    def _dispatch(self, message: dict[str, Any]) -> None:
        if message.get("ready"):
            logger.debug("zygote %s ready: %d modules imported in %.2f s (skipped %s)", self.target,
                         message["imported"], message["import_s"], message["skipped"])
            if not self.ready.done():
                self.ready.set_result(message)
            return
        ident = message["id"]
        if "error" in message:
            started = self._started.pop(ident, None)
            self._exited.pop(ident, None)
            if started is not None and not started.done():
                started.set_exception(ZygoteError(message["error"]))
        elif "status" in message:
            logger.debug("zygote %s: child %d exited %d after %.3f CPU-s", self.target, message["pid"],
                         message["status"], message["cpu_s"])
            exited = self._exited.pop(ident, None)
            if exited is not None and not exited.done():
                exited.set_result(int(message["status"]))
        else:
            started = self._started.pop(ident, None)
            if started is not None and not started.done():
                started.set_result(int(message["pid"]))

    def _output_tail(self) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read().decode(errors="replace").strip()[-2000:]
        except (OSError, ValueError):
            return ""

    async def wait_ready(self) -> dict[str, Any]:
        """Shielded: a waiter cancelled (its episode's) leaves the zygote's readiness to the others."""
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(self.ready)), READY_TIMEOUT_S)
        except TimeoutError as exc:
            self.close()
            raise ZygoteError(f"the zygote did not finish its imports in {READY_TIMEOUT_S:.0f} s") from exc

    async def spawn(self, launch: Launch, *, stdin: int, stdout: int, stderr: int) -> ForkedChild:
        await self.wait_ready()
        ident = next(self._ids)
        started: concurrent.futures.Future[int] = concurrent.futures.Future()
        exited: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._started[ident], self._exited[ident] = started, exited
        request = {"id": ident, "argv": list(launch.argv), "env": launch.env, "cwd": launch.cwd}
        try:
            with self._send_lock:
                protocol.send(self._sock, request, fds=(stdin, stdout, stderr))
        except OSError as exc:
            self._started.pop(ident, None)
            self._exited.pop(ident, None)
            raise ZygoteError(f"the zygote is gone: {exc}") from exc
        try:
            pid = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(started)), START_TIMEOUT_S)
        except BaseException as exc:  # cancelled or timed out: the child, once it runs, is nobody's
            started.add_done_callback(_kill_when_started)
            if isinstance(exc, TimeoutError):
                raise ZygoteError(f"the zygote started no child in {START_TIMEOUT_S:.0f} s") from exc
            raise
        return ForkedChild(pid, exited)

    def close(self) -> None:
        """End the zygote (it kills its children's groups when its socket closes)."""
        self.closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._stderr.close()


class _Starter:
    """One thread that lives as long as the process and starts every zygote: a zygote's
    parent-death signal follows the thread that started it, so it must never be a thread that
    ends before the process (an executor's, a loop's that closes)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="vf-sglang zygote starter", daemon=True)
                self._thread.start()
        self._jobs.put((job, future))
        return future

    def _serve(self) -> None:
        while True:
            job, future = self._jobs.get()
            if not future.set_running_or_notify_cancel():  # its caller was cancelled before it ran
                continue
            try:
                result = job()
            except BaseException as exc:  # handed to the awaiting caller
                future.set_exception(exc)
            else:
                future.set_result(result)


_STARTER = _Starter()


class ZygotePool:
    """The zygotes of one process, by launch key (module docstring)."""

    def __init__(self) -> None:
        self._zygotes: dict[tuple[Any, ...], Zygote] = {}
        self._starts: dict[tuple[Any, ...], int] = {}
        self._refused: dict[tuple[Any, ...], str] = {}
        self._lock = threading.Lock()

    def _zygote(self, launch: Launch) -> Zygote | None:
        key = launch.key
        with self._lock:
            if key in self._refused:
                return None
            zygote = self._zygotes.get(key)
            if zygote is not None and zygote.alive:
                return zygote
            if zygote is not None:
                zygote.close()  # dead: what it held goes before its successor starts
            if self._starts.get(key, 0) > RESTARTS:
                self._refuse(key, launch, "it died again after a restart")
                return None
            self._starts[key] = self._starts.get(key, 0) + 1
            try:
                zygote = Zygote(launch)
            except OSError as exc:
                self._refuse(key, launch, f"it could not start: {exc}")
                return None
            self._zygotes[key] = zygote
            return zygote

    def _refuse(self, key: tuple[Any, ...], launch: Launch, reason: str) -> None:
        self._refused[key] = reason
        logger.warning("harness runtime: no warm interpreter for %s (%s): its runs start a fresh interpreter, as "
                       "Verifiers' own subprocess runtime does (--harness-runtime subprocess, or %s=subprocess, "
                       "says so from the start)", launch.target, reason, "VF_SGLANG_HARNESS_RUNTIME")

    async def spawn(self, launch: Launch, *, stdin: int, stdout: int, stderr: int) -> ForkedChild | None:
        """A child of the launch's zygote, or None when its key runs plainly (logged once)."""
        for _ in range(RESTARTS + 1):
            zygote: Zygote | None = await asyncio.wrap_future(_STARTER.submit(lambda: self._zygote(launch)))
            if zygote is None:
                return None
            try:
                return await zygote.spawn(launch, stdin=stdin, stdout=stdout, stderr=stderr)
            except ZygoteError as exc:
                zygote.close()
                reason = str(exc)
        with self._lock:
            self._refuse(launch.key, launch, reason)
        return None

    def zygote_pids(self) -> list[int]:
        with self._lock:
            return [z.process.pid for z in self._zygotes.values() if z.alive]

    def close(self) -> None:
        """End every zygote; a later launch starts afresh (a deliberate close is no death: counts reset)."""
        with self._lock:
            zygotes, self._zygotes = list(self._zygotes.values()), {}
            self._starts.clear()
            self._refused.clear()
        for zygote in zygotes:
            zygote.close()
