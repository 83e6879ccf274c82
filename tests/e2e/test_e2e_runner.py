"""The E2E runner on CPU: failures named, cleanup run, deadlines held without output (the
step's whole process group killed), plan values passed literally, loopback never proxied."""

from __future__ import annotations

import io
import socket
import sys
import time
from pathlib import Path

import pytest

from e2e.common.ports import free_port
from e2e.plans.steps import Step
from e2e.runner import Runner


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def run(steps: list[Step], tmp_path: Path) -> tuple[int, str, Runner]:
    out = io.StringIO()
    runner = Runner(log_dir=tmp_path / "logs", out=out)
    return runner.run(steps), out.getvalue(), runner


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def test_runner_stops_at_the_first_failure_runs_cleanup_and_names_the_step(tmp_path: Path) -> None:
    marker = tmp_path / "cleanup-ran"
    steps = [
        Step("ok", python("print('hello')")),
        Step("sleeper", python("import time; time.sleep(60)"), kind="background"),
        Step("boom", python("import sys; print('bad thing'); sys.exit(3)")),
        Step("skipped", python("print('must not run')")),
        Step("cleanup", (str(marker),), kind="write", content="x", always=True),
        Step("stop", ("sleeper",), kind="stop", always=True),
    ]
    code, text, runner = run(steps, tmp_path)
    assert code == 1
    assert "step 'boom' failed: exit status 3" in text and "bad thing" in text
    assert "must not run" not in text and "FAILED at step 'boom'" in text
    assert marker.exists() and runner.background == {}


def test_wait_http_fails_fast_when_the_server_died(tmp_path: Path) -> None:
    steps = [Step("server", python("raise SystemExit(4)"), kind="background"),
             Step("wait", ("http://127.0.0.1:9/health",), kind="wait_http", timeout_s=60)]
    code, text, _ = run(steps, tmp_path)
    assert code == 1 and "server exited with status 4" in text


SPAWN_SILENT_GRANDCHILD = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(120)
"""


def test_a_silent_step_is_killed_at_its_deadline_with_its_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    steps = [Step("silent", (sys.executable, "-c", SPAWN_SILENT_GRANDCHILD, str(pid_file)), timeout_s=1.5),
             Step("after", python("print('must not run')"))]
    started = time.monotonic()
    code, text, runner = run(steps, tmp_path)
    elapsed = time.monotonic() - started
    assert code == 1 and elapsed < 10, elapsed
    assert "step 'silent' failed: timed out after 1.5s" in text and "FAILED at step 'silent' (timed out)" in text
    assert runner.failure is not None and runner.failure.timed_out and runner.failure.step.name == "silent"
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_a_chatty_step_is_killed_at_its_deadline_too(tmp_path: Path) -> None:
    chatty = python("import time\nwhile True:\n    print('tick', flush=True); time.sleep(0.1)")
    code, text, runner = run([Step("chatty", chatty, timeout_s=1)], tmp_path)
    assert code == 1 and "tick" in text and runner.failure is not None and runner.failure.timed_out


def test_processes_a_finished_step_leaves_behind_are_ended(tmp_path: Path) -> None:
    pid_file = tmp_path / "leftover.pid"
    leave = ("import subprocess, sys\n"
             "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],"
             " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
             "open(sys.argv[1], 'w').write(str(child.pid))")
    code, _, _ = run([Step("leaves", (sys.executable, "-c", leave, str(pid_file)))], tmp_path)
    assert code == 0
    leftover = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(leftover) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(leftover)


def test_plan_values_reach_the_step_literally(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", "/root-home")
    show = python("import os; print(os.environ['TARGET']); print(os.environ['PATH'])")
    steps = [Step("show", show, env=(("TARGET", "/runs/$HOME/x"),), path_prepend=("/opt/$USER/bin",))]
    code, text, _ = run(steps, tmp_path)
    assert code == 0
    assert "/runs/$HOME/x" in text and "/runs//root-home/x" not in text
    path_line = next(line for line in text.splitlines() if "/opt/" in line)
    assert path_line.split("] ", 1)[1] == f"/opt/$USER/bin:{__import__('os').environ['PATH']}"


def _closed_port() -> int:
    with socket.socket() as sock:  # bound, never listening: a proxy that is nowhere
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


GET = "import httpx, sys; r = httpx.get(sys.argv[1], timeout=5); print('status', r.status_code)"
# The control: the same call with the NO_PROXY entries removed must reach the (absent) proxy.
GET_PROXIED = """
import os, sys, httpx
for name in ("NO_PROXY", "no_proxy"):
    os.environ.pop(name, None)
try:
    httpx.get(sys.argv[1], timeout=5)
except httpx.TransportError as exc:
    print("without NO_PROXY:", type(exc).__name__)
else:
    sys.exit("the proxy variable did not point nowhere: the control reached the server")
"""


def test_loopback_calls_in_steps_bypass_a_proxy_pointing_nowhere(tmp_path: Path, monkeypatch) -> None:
    nowhere = f"http://127.0.0.1:{_closed_port()}"
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, nowhere)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    steps = [Step("server", (sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port), "--directory",
                             str(tmp_path)), kind="background"),
             Step("wait", (url,), kind="wait_http", timeout_s=60),
             Step("get", (sys.executable, "-c", GET, url), timeout_s=60),
             Step("control", (sys.executable, "-c", GET_PROXIED, url), timeout_s=60),
             Step("stop", ("server",), kind="stop", always=True)]
    code, text, _ = run(steps, tmp_path)
    assert code == 0, text
    assert "status 200" in text and "without NO_PROXY: " in text


@pytest.mark.parametrize("kind", ["run", "wait_http"])
def test_every_timed_kind_reports_its_deadline(kind: str, tmp_path: Path) -> None:
    argv = python("import time; time.sleep(30)") if kind == "run" else (f"http://127.0.0.1:{_closed_port()}/",)
    code, text, _ = run([Step("slow", argv, kind=kind, timeout_s=1)], tmp_path)  # type: ignore[arg-type]
    assert code == 1 and "step 'slow' failed" in text and ("timed out" in text or "did not answer" in text)


@pytest.mark.parametrize("kind", ["run", "background"])
def test_a_missing_program_fails_its_step_by_name(kind: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-program")
    steps = [Step("absent", (missing, "--flag"), kind=kind), Step("after", python("print('must not run')"))]  # type: ignore[arg-type]
    code, text, runner = run(steps, tmp_path)
    assert code == 1 and f"step 'absent' failed: could not start '{missing}'" in text and "must not run" not in text
    assert runner.failure is not None and runner.failure.step.name == "absent"


def test_a_step_that_succeeds_without_its_produces_fails_naming_them(tmp_path: Path) -> None:
    made, missing = tmp_path / "made.txt", tmp_path / "never.pt"
    steps = [Step("writes-one", python(f"open({str(made)!r}, 'w').write('x')"), produces=(str(made), str(missing))),
             Step("after", python("print('must not run')"))]
    code, text, runner = run(steps, tmp_path)
    assert code == 1 and f"step 'writes-one' failed: succeeded but did not produce {missing}" in text
    assert str(made) not in text.split("did not produce", 1)[1].splitlines()[0] and "must not run" not in text
    assert runner.failure is not None and runner.failure.step.name == "writes-one"
    code, _, _ = run([Step("writes", python(f"open({str(missing)!r}, 'w').write('x')"), produces=(str(missing),))],
                     tmp_path / "again")
    assert code == 0
