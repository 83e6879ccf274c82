"""A server that cannot start fails its lane within seconds, with its log.

Every lane waits for the servers it starts through `e2e.common.process.wait_ready`: SGLang
(`e2e.sglang_cpu.serving`), the runner's `wait_http` steps, the router lane's engines and smg
(`e2e.router.smg`), the miles lane's Ray head (`e2e.miles_cpu.services`). The fake servers here
are `python -c` children: one exits at once with an error; one tries to bind a port the test
holds, logs what uvicorn logs then ("error while attempting to bind on address ...: address
already in use") and stays alive, as SGLang's main process does while it waits on its children.
Each wait is given minutes; each must fail in seconds.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.common.ports import LOOPBACK, PortInUseError, ensure_port_free, port_holder
from e2e.common.process import LOG_TAIL_LINES, ServerNotReady, Watched, wait_ready
from e2e.plans.steps import Step
from e2e.runner import Runner

LONG_S = 120.0  # what every wait below is given; none may come near it
FAST_S = 10.0  # what "within seconds" means here, with room for a loaded machine

EXITS = "import sys; print('fatal: no such model /nowhere', flush=True); sys.exit(3)"
# What uvicorn does with a taken port (asyncio's create_server message), then stay alive.
CANNOT_BIND = """
import asyncio, sys, time
port = int(sys.argv[1])
async def bind():
    await asyncio.get_running_loop().create_server(asyncio.Protocol, "127.0.0.1", port)
try:
    asyncio.run(bind())
    print("bound", flush=True)
except OSError as exc:
    print(f"ERROR:    {exc}", flush=True)
time.sleep(300)
"""


@pytest.fixture(autouse=True)
def own_reservations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VF_SGLANG_PORTS_DIR", str(tmp_path / "ports"))


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port this test holds (listening), as another lane's server would."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        sock.listen()
        yield sock.getsockname()[1]


def spawn(code: str, log: Path, *args: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-c", code, *args], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def end(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def never() -> bool:
    return False


def test_a_server_that_exits_fails_the_wait_within_seconds_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    process = spawn(EXITS, log)
    started = time.monotonic()
    with pytest.raises(ServerNotReady) as failed:
        wait_ready(never, Watched(process, log, "the fake server"), timeout_s=LONG_S)
    assert time.monotonic() - started < FAST_S
    message = str(failed.value)
    assert "the fake server exited with status 3" in message
    assert "fatal: no such model /nowhere" in message and str(log) in message


def test_a_server_that_cannot_bind_a_held_port_fails_fast_naming_the_port_while_it_stays_alive(
        tmp_path: Path, held_port: int) -> None:
    log = tmp_path / "server.log"
    process = spawn(CANNOT_BIND, log, str(held_port))
    try:
        started = time.monotonic()
        with pytest.raises(ServerNotReady) as failed:
            wait_ready(never, Watched(process, log, "the fake server", port=held_port), timeout_s=LONG_S, poll_s=0.2)
        assert time.monotonic() - started < FAST_S
        assert process.poll() is None  # it would have waited out the whole timeout
    finally:
        end(process)
    message = str(failed.value)
    assert f"could not bind port {held_port}" in message
    assert f"pid {os.getpid()}" in message  # the holder: this test
    assert "address already in use" in message  # the log's tail


def test_a_bind_failure_on_another_port_does_not_end_the_wait(tmp_path: Path, held_port: int) -> None:
    log = tmp_path / "server.log"
    process = spawn(CANNOT_BIND, log, str(held_port))  # e.g. an internal port, retried elsewhere
    polls = iter(range(1000))
    try:
        while "address already in use" not in log.read_text():
            assert process.poll() is None
            time.sleep(0.05)
        wait_ready(lambda: next(polls) >= 3, Watched(process, log, "the fake server", port=held_port + 1),
                   timeout_s=LONG_S, poll_s=0.05)
    finally:
        end(process)


BINDS_THEN_LOGS = ("import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); "
                   "s.listen(); print(f'retrying: address already in use ({sys.argv[1]})', flush=True); "
                   "time.sleep(300)")
IN_A_CHILD = "import subprocess, sys; subprocess.run([sys.executable, '-c', sys.argv[2], sys.argv[1]])"


@pytest.mark.parametrize("who", ["itself", "a child of it"])
def test_a_port_the_server_bound_is_not_a_bind_failure(who: str, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port = probe.getsockname()[1]
    # It binds the port, then logs an "address already in use" naming it (some retried attempt).
    args = (BINDS_THEN_LOGS, str(port)) if who == "itself" else (IN_A_CHILD, str(port), BINDS_THEN_LOGS)
    process = spawn(args[0], log, *args[1:])
    try:
        while "retrying" not in log.read_text():
            assert process.poll() is None
            time.sleep(0.05)
        assert wait_ready(lambda: True, Watched(process, log, "the fake server", port=port), timeout_s=LONG_S) >= 0
    finally:
        end(process)


def test_a_server_still_starting_fails_only_at_its_timeout_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    process = spawn("import time; print('loading weights', flush=True); time.sleep(300)", log)
    try:
        while "loading" not in log.read_text():
            time.sleep(0.05)
        started = time.monotonic()
        with pytest.raises(ServerNotReady, match=r"(?s)not ready within 1s: timed out.*still running.*loading weights"):
            wait_ready(never, Watched(process, log, "the fake server"), timeout_s=1.0, poll_s=0.1)
        assert time.monotonic() - started >= 1.0
    finally:
        end(process)


def test_the_log_tail_is_the_last_lines_of_this_run(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("an earlier run's line\n")
    offset = log.stat().st_size
    process = spawn("import sys; [print(f'line {i}') for i in range(100)]; sys.exit(1)", log)
    with pytest.raises(ServerNotReady) as failed:
        wait_ready(never, Watched(process, log, "it", log_offset=offset), timeout_s=LONG_S)
    message = str(failed.value)
    assert "line 99" in message and f"line {100 - LOG_TAIL_LINES}\n" in message
    assert f"line {99 - LOG_TAIL_LINES}\n" not in message and "earlier run" not in message


def test_a_port_in_use_is_refused_before_a_launch_naming_the_port_and_its_holder(held_port: int) -> None:
    assert (port_holder(held_port) or "").startswith(f"pid {os.getpid()} (")
    with pytest.raises(PortInUseError, match=rf"cannot start the engine: port {held_port} .* by pid {os.getpid()}"):
        ensure_port_free(held_port, what="the engine")


def test_a_port_an_earlier_server_left_in_time_wait_passes_the_check() -> None:
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn and asyncio servers do
        server.bind((LOOPBACK, 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection((LOOPBACK, port))
        accepted, _ = server.accept()
        accepted.close()  # the server side closes first: its end waits in TIME_WAIT on `port`
        client.close()
    ensure_port_free(port)  # the next server binds with SO_REUSEADDR too: TIME_WAIT does not stop it
    assert port_holder(port) is None


# --- each lane's wait ------------------------------------------------------------------------


def test_serving_fails_within_seconds_when_sglang_exits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from e2e.sglang_cpu import server as server_module
    from e2e.sglang_cpu.errors import ServerStartError
    from e2e.sglang_cpu.venv import Venv

    monkeypatch.setattr(server_module, "ensure_venv", lambda version: Venv(version, tmp_path, "k", False, 0.0))
    monkeypatch.setattr(server_module, "launch_argv", lambda *_, **__: [sys.executable, "-c", EXITS])
    started = time.monotonic()
    with (pytest.raises(ServerStartError, match=r"(?s)exited with status 3.*fatal: no such model"),
          server_module.serving("0.5.23", model_dir=tmp_path, log_path=tmp_path / "sglang.log",
                                startup_timeout_s=LONG_S)):
        pytest.fail("the server never came up")
    assert time.monotonic() - started < FAST_S


def test_serving_fails_within_seconds_when_sglang_logs_its_port_taken_and_stays_alive(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CI failure: the port was free at launch, taken before SGLang bound it (after loading
    the model); uvicorn logged the error and SGLang waited out its 420 s start timeout."""
    from e2e.sglang_cpu import server as server_module
    from e2e.sglang_cpu.errors import ServerStartError
    from e2e.sglang_cpu.venv import Venv

    def argv(python: Path, model: Path, port: int, **_: object) -> list[str]:
        late = (f"import time; time.sleep(0.3); print(\"ERROR:    [Errno 98] error while attempting to bind on address "
                f"('127.0.0.1', {port}): address already in use\", flush=True); time.sleep(300)")
        return [sys.executable, "-c", late]

    monkeypatch.setattr(server_module, "ensure_venv", lambda version: Venv(version, tmp_path, "k", False, 0.0))
    monkeypatch.setattr(server_module, "launch_argv", argv)
    started = time.monotonic()
    with (pytest.raises(ServerStartError, match=r"could not bind port \d+"),
          server_module.serving("0.5.23", model_dir=tmp_path, log_path=tmp_path / "sglang.log",
                                startup_timeout_s=LONG_S)):
        pytest.fail("the server never came up")
    assert time.monotonic() - started < FAST_S + server_module.STOP_GRACE_S  # stop() may wait out its grace


def test_serving_refuses_a_port_in_use_without_launching(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         held_port: int) -> None:
    from e2e.sglang_cpu import server as server_module
    from e2e.sglang_cpu.errors import ServerStartError
    from e2e.sglang_cpu.venv import Venv

    monkeypatch.setattr(server_module, "ensure_venv", lambda version: Venv(version, tmp_path, "k", False, 0.0))
    monkeypatch.setattr(server_module, "_spawn", lambda *_: pytest.fail("launched onto a taken port"))
    taken = rf"port {held_port} on 127.0.0.1 is already in use, by pid {os.getpid()}"
    with (pytest.raises(ServerStartError, match=taken),
          server_module.serving("0.5.23", model_dir=tmp_path, port=held_port, log_path=tmp_path / "s.log")):
        pytest.fail("the server never came up")


def test_the_runners_wait_http_fails_fast_when_its_server_cannot_bind_the_port(tmp_path: Path, held_port: int) -> None:
    out = io.StringIO()
    runner = Runner(log_dir=tmp_path / "logs", out=out)
    steps = [Step("server", (sys.executable, "-c", CANNOT_BIND, str(held_port)), kind="background"),
             Step("wait", (f"http://127.0.0.1:{held_port}/health",), kind="wait_http", timeout_s=LONG_S)]
    started = time.monotonic()
    assert runner.run(steps) == 1
    assert time.monotonic() - started < FAST_S + 5.0  # the health probe to the silent holder may take its 5 s
    assert f"server could not bind port {held_port}" in out.getvalue() and "address already in use" in out.getvalue()


def test_the_runners_wait_http_shows_the_exit_status_and_log_of_a_server_that_exited(tmp_path: Path) -> None:
    out = io.StringIO()
    runner = Runner(log_dir=tmp_path / "logs", out=out)
    steps = [Step("server", (sys.executable, "-c", EXITS), kind="background"),
             Step("wait", ("http://127.0.0.1:9/health",), kind="wait_http", timeout_s=LONG_S)]
    started = time.monotonic()
    assert runner.run(steps) == 1
    assert time.monotonic() - started < FAST_S
    assert "server exited with status 3" in out.getvalue() and "fatal: no such model" in out.getvalue()


def test_a_router_lane_process_that_exits_fails_its_wait_within_seconds(tmp_path: Path) -> None:
    from e2e.router.smg import Started

    process = Started([sys.executable, "-c", EXITS], tmp_path / "engine.log")
    started = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match=r"(?s)exited with status 3.*fatal: no such model"):
            process.wait_for_line("reference engine ready at ", LONG_S)
    finally:
        process.end()
    assert time.monotonic() - started < FAST_S


def test_a_router_lane_engine_is_not_started_onto_a_port_in_use(tmp_path: Path, held_port: int) -> None:
    from e2e.router.smg import reference_engine

    started = time.monotonic()
    with pytest.raises(PortInUseError, match=rf"port {held_port} .* by pid {os.getpid()}"):
        reference_engine(held_port, tmp_path / "engine.log", timeout=LONG_S)
    assert time.monotonic() - started < FAST_S and not (tmp_path / "engine.log").exists()


def test_a_miles_lane_ray_head_that_exits_fails_within_seconds_with_its_log(tmp_path: Path) -> None:
    from e2e.miles_cpu.services import ServiceError, ray_head

    ray = tmp_path / "venv" / "bin" / "ray"
    ray.parent.mkdir(parents=True)
    ray.write_text("#!/bin/sh\necho 'ray: cannot start the GCS'\nexit 5\n")
    ray.chmod(0o755)
    started = time.monotonic()
    with (pytest.raises(ServiceError, match=r"(?s)the Ray head exited with status 5.*cannot start the GCS"),
          ray_head(tmp_path / "venv", tmp_path / "ray.log")):
        pytest.fail("the head never came up")
    assert time.monotonic() - started < FAST_S
