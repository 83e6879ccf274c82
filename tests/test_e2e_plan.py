"""The E2E plans as data (snapshot-locked) and the runner, planned and partly run on CPU.

Regenerate the plan snapshots with `uv run pytest tests/test_e2e_plan.py --snapshot-update`.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.plan import REPO, PlanOptions, Step, cpu_plan, gpu_plan
from e2e.runner import Runner, describe, main

# Fixed interpreter and run dir so the snapshot does not depend on the machine.
OPTIONS = PlanOptions(run_dir=str(REPO / "runs" / "e2e-gpu"), python="python3.11", python_tag="python3.11")


def test_gpu_plan_is_snapshot_locked(snapshot) -> None:
    assert describe(gpu_plan(OPTIONS)) == snapshot


def test_cpu_plan_is_snapshot_locked(snapshot) -> None:
    assert describe(cpu_plan(str(REPO / "runs" / "e2e-cpu"), python="python3.11")) == snapshot


def test_miles_variant_replaces_the_rollout_step() -> None:
    names = [s.name for s in gpu_plan(PlanOptions(trainer="miles", python="python3.11"))]
    assert "miles-train" in names and "rollouts" not in names


@pytest.mark.parametrize(
    ("change", "expected"),
    [({"groups": 5}, "--groups 5"), ({"n": 8}, "--n 8"), ({"sglang_port": 31000}, "--port 31000"),
     ({"verifiers_tag": "v0.2.1"}, "--branch v0.2.1"), ({"prime_version": "9.9.9"}, "prime==9.9.9"),
     ({"model_id": "Qwen/Qwen3-1.7B"}, "download Qwen/Qwen3-1.7B")],
)
def test_option_changes_show_up_in_the_plan(change, expected) -> None:
    default = " ".join(" ".join(s.argv) for s in gpu_plan(OPTIONS))
    changed = " ".join(" ".join(s.argv) for s in gpu_plan(PlanOptions(**{**OPTIONS.__dict__, **change})))
    assert expected in changed and expected not in default


def test_setup_mistakes_that_broke_before_stay_fixed() -> None:
    steps = {s.name: s for s in gpu_plan(OPTIONS)}
    assert "--system-site-packages" in steps["venv"].argv
    assert steps["install-adapter"].argv[:4] == ("uv", "pip", "install", "--python")  # into the venv
    assert steps["install-env"].argv[0] == "{uv_tool_bin}/prime"  # not on PATH
    rollout_env = dict(steps["rollouts"].env)
    assert "venv/lib/python3.11/site-packages" in rollout_env["PYTHONPATH"]
    assert "code_golf_v1" in rollout_env["PYTHONPATH"]
    assert steps["stop-sglang"].always
    assert steps["start-sglang"].argv[0].endswith("sglang-venv/bin/python")  # its own environment


def test_gpu_only_steps_are_marked() -> None:
    gpu = {s.name for s in gpu_plan(OPTIONS) if s.gpu}
    assert {"install-sglang", "start-sglang", "wait-sglang", "rollouts"} <= gpu
    assert "venv" not in gpu


def test_dry_run_prints_the_plan(capsys) -> None:
    assert main(["--tier", "gpu", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "uv venv --clear" in out and "{uv_tool_bin}/prime --plain env install code-golf-v1" in out


def test_step_one_really_builds_a_venv_that_sees_system_site_packages(tmp_path: Path) -> None:
    """The venv step runs here; an install lands in the venv; `uv tool dir --bin` resolves."""
    options = PlanOptions(run_dir=str(tmp_path / "run"), python=sys.executable)
    venv_step = gpu_plan(options)[0]
    assert Runner(log_dir=tmp_path / "logs", out=io.StringIO()).run([venv_step]) == 0
    venv_python = tmp_path / "run" / "venv" / "bin" / "python"
    probe = "import sys, pytest; print(sys.prefix); print(pytest.__file__)"
    prefix, seen = subprocess.run([str(venv_python), "-c", probe], capture_output=True, text=True,
                                  check=True).stdout.split()
    assert Path(prefix) == tmp_path / "run" / "venv"
    assert not seen.startswith(str(tmp_path))  # a package from outside the venv is visible
    install = Step("install", ("uv", "pip", "install", "--python", str(venv_python), "--no-deps", "six==1.16.0"))
    assert Runner(log_dir=tmp_path / "logs", out=io.StringIO()).run([install]) == 0
    located = subprocess.run([str(venv_python), "-c", "import six; print(six.__file__)"], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert located.startswith(str(tmp_path / "run" / "venv"))
    tool_bin = subprocess.run(["uv", "tool", "dir", "--bin"], capture_output=True, text=True, check=True).stdout
    assert Path(tool_bin.strip()).is_absolute()


def test_runner_stops_at_the_first_failure_runs_cleanup_and_names_the_step(tmp_path: Path) -> None:
    out = io.StringIO()
    marker = tmp_path / "cleanup-ran"
    steps = [
        Step("ok", (sys.executable, "-c", "print('hello')")),
        Step("sleeper", (sys.executable, "-c", "import time; time.sleep(60)"), kind="background"),
        Step("boom", (sys.executable, "-c", "import sys; print('bad thing'); sys.exit(3)")),
        Step("skipped", (sys.executable, "-c", "print('must not run')")),
        Step("cleanup", (str(marker),), kind="write", content="x", always=True),
        Step("stop", ("sleeper",), kind="stop", always=True),
    ]
    runner = Runner(log_dir=tmp_path / "logs", out=out)
    assert runner.run(steps) == 1
    text = out.getvalue()
    assert "step 'boom' failed: exit status 3" in text and "bad thing" in text
    assert "must not run" not in text
    assert marker.exists() and runner.background == {}


def test_wait_http_fails_fast_when_the_server_died(tmp_path: Path) -> None:
    steps = [Step("server", (sys.executable, "-c", "raise SystemExit(4)"), kind="background"),
             Step("wait", ("http://127.0.0.1:9/health",), kind="wait_http", timeout_s=60)]
    out = io.StringIO()
    assert Runner(log_dir=tmp_path / "logs", out=out).run(steps) == 1
    assert "server exited with status 4" in out.getvalue()
