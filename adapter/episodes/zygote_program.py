"""The zygote: a warm, single-threaded Python process that forks one child per harness program.

Run by the harness program's own interpreter (stdlib only; it never imports `adapter`):

    <interpreter> zygote_program.py CONTROL_FD KIND TARGET LEARNED PARENT_PID

KIND/TARGET name what its children run, and so what it imports once, up front: `path` a script
file (every module the script imports, wherever in the script), `module` a module run with `-m`
(the imports of the module's own source), `code` a program given with `-c` (TARGET is its text).
Imports that fail are skipped: the child then imports them itself, as a fresh interpreter would.
It then learns from its children: each child reports, as it exits, the modules it imported that
the zygote had not (a library's lazy imports: openai's resources and types, httpx's transport),
and the zygote imports them before its next fork. Once QUIET_AFTER children in a row taught it
nothing, only one child in SAMPLE_EVERY reports (listing a process' modules touches each one, and
so copies pages of the zygote's memory: ~6 ms in a tool server's child); a report that teaches
something makes every child report again. What it learns it keeps in the file LEARNED
(one module a line, written whole, then renamed), and a zygote of the same interpreter and
program imports that file's modules up front, so the next run starts warm. After each import its
objects are frozen out of the garbage collector's reach (`gc.freeze`), so a child's collections
do not copy the zygote's pages.

The control socket (a Unix stream socket, CONTROL_FD) carries length-prefixed JSON frames
(`send`/`receive`, which the adapter's side, adapter.episodes.zygotes, imports from here). The
adapter sends `{"id", "argv", "env", "cwd"}` with the child's stdin, stdout and stderr attached
(SCM_RIGHTS); the zygote answers `{"id", "pid"}` once the child runs and `{"id", "pid",
"status", "cpu_s"}` when it ends (`status`: the exit code, or minus the signal, as `subprocess`
reports it; `cpu_s`: the child's CPU). It first sends `{"ready": true, "imported": count,
"skipped": [...], "import_s": seconds}`.

Each child: its own session (`setsid`, so `killpg(pid)` reaches it and whatever it starts), a
parent-death signal (SIGKILL when the zygote dies), the episode's argv, environment and cwd,
default signal handlers (a reporting child's SIGTERM first writes its module report: `_Report`),
then the target as `__main__`, then the interpreter's own exit steps (non-daemon threads joined,
`atexit` handlers, streams flushed). Nothing but imported modules
carries over: every child is a fresh fork, never reused.

The zygote ends when its parent does (a parent-death SIGTERM, set first thing, so even while it
imports) or its control socket closes, killing every child's process group first.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import ctypes
import gc
import importlib
import importlib.util
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import threading
import time
import traceback
import types
from typing import Any

HEADER = struct.Struct("!I")
PR_SET_PDEATHSIG = 1
MAX_FDS = 3
REPORT_LIMIT = 60_000  # bytes of a child's module report: below a pipe's buffer, so its exit never blocks
QUIET_AFTER = 8  # children in a row whose reports taught the zygote nothing, before it samples them
SAMPLE_EVERY = 16  # then one child in this many reports


def imported_names(source: str) -> list[str]:
    """Every absolute module a source imports, anywhere in it, in order, each once."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return list(dict.fromkeys(names))


def import_all(names: list[str]) -> tuple[list[str], list[str]]:
    """Import each name: (imported, skipped). A failure is the child's to meet, as a fresh interpreter would."""
    imported, skipped = [], []
    for name in names:
        if name == "__main__":
            continue
        try:
            importlib.import_module(name)
            imported.append(name)
        except BaseException:  # SystemExit included: an import must not end the zygote
            skipped.append(name)
    return imported, skipped


def target_source(kind: str, target: str) -> str | None:
    if kind == "code":
        return target
    if kind == "path":
        with open(target, encoding="utf-8") as handle:
            return handle.read()
    spec = importlib.util.find_spec(target)
    origin = getattr(spec, "origin", None)
    if origin is None or not origin.endswith(".py"):
        return None
    with open(origin, encoding="utf-8") as handle:
        return handle.read()


def send(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    """One frame: a 4-byte length (carrying `fds`, SCM_RIGHTS, in its own sendmsg), then the JSON."""
    body = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [HEADER.pack(len(body))], list(fds))
        sock.sendall(body)
    else:
        sock.sendall(HEADER.pack(len(body)) + body)


def receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """One frame and the fds sent with it; None at end of stream."""
    head, fds, _flags, _addr = socket.recv_fds(sock, HEADER.size, MAX_FDS)
    if not head:
        return None
    while len(head) < HEADER.size:
        more = sock.recv(HEADER.size - len(head))
        if not more:
            return None
        head += more
    (size,) = HEADER.unpack(head)
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return json.loads(body), list(fds)


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


class _Report:
    """A child's module report (module docstring): written once, at its exit, or when SIGTERM ends
    it (a background server's usual end: the report first, then SIGTERM's default action, so it
    still dies of SIGTERM; a program that installs its own SIGTERM handler replaces this one)."""

    def __init__(self, known: frozenset[str], fd: int) -> None:
        self.known, self.fd = known, fd

    def write(self) -> None:
        if self.fd < 0:
            return
        fd, self.fd = self.fd, -1
        new = [name for name in list(sys.modules) if name not in self.known]  # names first: each object touched
        names = [name for name in new  # is a page copied from the zygote
                 if name != "__main__" and getattr(sys.modules.get(name), "__spec__", None) is not None]
        try:
            os.write(fd, "\n".join(names).encode()[:REPORT_LIMIT])
        except OSError:
            pass
        finally:
            os.close(fd)

    def on_sigterm(self, signum: int, _frame: object) -> None:
        self.write()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _finish(code: int) -> None:
    """The interpreter's own exit steps, then leave without running the zygote's cleanup."""
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads, as Py_Finalize does
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(code & 0xFF)  # SystemExit(-1) leaves as 255, as in a fresh interpreter


def _become(request: dict[str, Any], fds: list[int], zygote_pid: int) -> None:
    """The episode's session, streams, signals, environment, cwd and argv."""
    os.setsid()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != zygote_pid:
        os._exit(137)
    for number, fd in enumerate(fds):
        os.dup2(fd, number)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    signal.set_wakeup_fd(-1)
    for name in ("SIGCHLD", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("cwd"):
        os.chdir(request["cwd"])
    sys.argv = list(request["argv"])


def run_code(code: str) -> None:
    """What `python -c CODE` runs: CODE in a fresh `__main__`, `sys.path[0]` the empty string."""
    sys.path[0] = ""
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    exec(compile(code, "<string>", "exec"), main.__dict__)  # the program Verifiers runs, as `-c` runs it


def run_child(kind: str, target: str, request: dict[str, Any], fds: list[int], zygote_pid: int, *,
              known: frozenset[str], report: int) -> None:
    """In the forked child: become the episode's program, run it, report, exit. Never returns."""
    _become(request, fds, zygote_pid)
    reporter = _Report(known, report)
    if report >= 0:
        signal.signal(signal.SIGTERM, reporter.on_sigterm)
    code = 0
    try:
        if kind == "path":
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
        elif kind == "code":
            run_code(target)
        else:
            sys.path[0] = os.getcwd()
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:  # what an uncaught exception does to a fresh interpreter
        sys.excepthook(*sys.exc_info())
        code = 1
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    reporter.write()
    _finish(code)


def _read_report(fd: int) -> bytes:
    data = b""
    try:
        while chunk := os.read(fd, 65536):
            data += chunk
    except OSError:  # a child killed before it reported
        pass
    finally:
        os.close(fd)
    return data


def _close(*fds: int) -> None:
    """Close each descriptor; -1 (a report not asked for) is none."""
    for fd in fds:
        if fd >= 0:
            os.close(fd)


def read_learned(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            return [line.strip() for line in handle if line.strip()]
    except OSError:
        return []


def write_learned(path: str, names: list[str]) -> None:
    """Atomically (a temporary file renamed over the old one); a cache, so a failure is ignored."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write("\n".join(names) + "\n")
        os.replace(temporary, path)
    except OSError:
        pass


class Zygote:
    def __init__(self, sock: socket.socket, kind: str, target: str, learned: str) -> None:
        self.sock, self.kind, self.target, self.learned = sock, kind, target, learned
        self.learned_names = read_learned(learned)
        self.children = _LIVE_CHILDREN  # pid -> (request id, its module report's read end, or -1: none asked)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        self.selector = selectors.DefaultSelector()
        self.failed: set[str] = set()  # learned names that would not import here
        self.quiet = 0  # reports in a row that taught nothing
        self.forks = 0
        self.known = frozenset(sys.modules)
        gc.freeze()

    def learn(self, report: bytes) -> None:
        """Import what a child imported and the zygote had not (module docstring)."""
        fresh = [name for name in report.decode(errors="replace").split("\n")
                 if name and name not in sys.modules and name not in self.failed]
        self.quiet = 0 if fresh else self.quiet + 1
        if not fresh:
            return
        imported, skipped = import_all(fresh)
        self.failed.update(skipped)
        self.known = frozenset(sys.modules)
        gc.freeze()
        if imported:
            self.learned_names = list(dict.fromkeys([*self.learned_names, *imported]))
            write_learned(self.learned, self.learned_names)

    def wants_report(self) -> bool:
        """Whether the next child reports its modules (module docstring: every child while the
        zygote learns, then one in SAMPLE_EVERY)."""
        self.forks += 1
        return self.quiet < QUIET_AFTER or self.forks % SAMPLE_EVERY == 0

    def spawn(self, request: dict[str, Any], fds: list[int]) -> None:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        report_r, report_w = os.pipe() if self.wants_report() else (-1, -1)
        try:
            pid = os.fork()
        except OSError as exc:
            _close(*fds, report_r, report_w)
            send(self.sock, {"id": request["id"], "error": f"fork failed: {exc}"})
            return
        if pid == 0:
            try:
                self.sock.close()
                self.selector.close()
                _close(self.wake_r, self.wake_w, report_r, *(r for _, r in self.children.values()))
                run_child(self.kind, self.target, request, fds, os.getppid(), known=self.known, report=report_w)
            finally:
                os._exit(70)
        _close(*fds, report_w)
        if report_r >= 0:
            os.set_blocking(report_r, False)
        self.children[pid] = (request["id"], report_r)
        send(self.sock, {"id": request["id"], "pid": pid})

    def reap(self) -> None:
        while self.children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            entry = self.children.pop(pid, None)
            if entry is None:
                continue
            ident, report = entry
            send(self.sock, {"id": ident, "pid": pid, "status": os.waitstatus_to_exitcode(status),
                             "cpu_s": round(usage.ru_utime + usage.ru_stime, 4)})
            if report >= 0:
                self.learn(_read_report(report))

    def kill_all(self) -> None:
        for pid in list(self.children):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)

    def serve(self) -> None:
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        self.selector.register(self.sock, selectors.EVENT_READ)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        try:
            while True:
                for key, _ in self.selector.select():
                    if key.fileobj is self.wake_r:
                        with contextlib.suppress(BlockingIOError):
                            os.read(self.wake_r, 4096)
                        self.reap()
                        continue
                    frame = receive(self.sock)
                    if frame is None:
                        return
                    self.spawn(*frame)
                self.reap()
        finally:
            self.kill_all()


_LIVE_CHILDREN: dict[int, tuple[int, int]] = {}  # the serving zygote's children: pid -> (request id, report fd)


def _kill_children_and_exit(_signum: int, _frame: object) -> None:
    for pid in list(_LIVE_CHILDREN):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    os._exit(0)


def main(argv: list[str]) -> int:
    control, kind, target, learned, parent = int(argv[1]), argv[2], argv[3], argv[4], int(argv[5])
    signal.signal(signal.SIGTERM, _kill_children_and_exit)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the signal was set
        return 0
    sock = socket.socket(fileno=control)
    sock.setblocking(True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the adapter ends it (its socket closes), not the terminal
    if kind == "path":
        sys.path[0] = os.path.dirname(os.path.abspath(target))
    else:
        sys.path[0] = os.getcwd() if kind == "module" else ""
    started = time.monotonic()
    source = target_source(kind, target)
    names = [*(imported_names(source) if source is not None else []), *read_learned(learned)]
    imported, skipped = import_all(list(dict.fromkeys(names)))
    send(sock, {"ready": True, "imported": len(imported), "skipped": skipped,
                "import_s": round(time.monotonic() - started, 3)})
    Zygote(sock, kind, target, learned).serve()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (BrokenPipeError, ConnectionResetError):
        sys.exit(0)
