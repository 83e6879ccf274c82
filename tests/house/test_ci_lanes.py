"""CI as data (`tools/ci`): every tox env is in a lane, every lane runs in a stage, no two tracks of
a stage start an SGLang server, the developer's loop picks lanes by path, and docs/ci.md is written
from a run's results (its table, the fast lane's slowest tests read from the real pytest output)."""

from __future__ import annotations

import configparser
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tools.ci.affected import affected
from tools.ci.lanes import LANES, NOT_IN_CI, STAGES, lane_order
from tools.ci.report import document, slowest_tests, stage_wall, table
from tools.ci.runner import Result, run_stages

REPO = Path(__file__).resolve().parents[2]
# Lanes that start a real SGLang server (or two). SGLang refuses to start when more than its
# --mem-fraction-static of the memory free before its weights load goes elsewhere meanwhile: a lane
# beside it loading a model did that at 0.05. Two such lanes may share a stage only while the CPU
# servers keep a share that tolerates it; the RL lane, whose claim is numeric, runs alone.
STARTS_SGLANG = {"sglang-cpu", "sglang-cpu-0516", "rl-cpu", "miles"}
TOLERANT_SHARE = 0.25


def _tox_envs() -> set[str]:
    config = configparser.ConfigParser(interpolation=None)
    config.read(REPO / "tox.ini")
    envs = set()
    for section in config.sections():
        if section.startswith("testenv:"):
            name = section.removeprefix("testenv:")
            if "{" in name:  # contract-vf{020,...}
                head, rest = name.split("{", 1)
                envs |= {head + part for part in rest.rstrip("}").split(",")}
            else:
                envs.add(name)
    return envs


def test_every_tox_env_runs_in_exactly_one_lane_of_ci() -> None:
    in_lanes = [env for lane in lane_order() for env in LANES[lane].envs]
    assert sorted(in_lanes) == sorted(set(in_lanes)), "a tox env runs twice in CI"
    assert set(in_lanes) == _tox_envs() - set(NOT_IN_CI)
    assert sorted(lane_order()) == sorted(LANES), "every lane runs in exactly one stage"


def test_sglang_lanes_share_a_stage_only_when_the_servers_tolerate_each_other() -> None:
    from e2e.sglang_cpu.server import CPU_FLAGS

    share = float(CPU_FLAGS[CPU_FLAGS.index("--mem-fraction-static") + 1])
    for stage in STAGES:
        starting = [track for track in stage if STARTS_SGLANG & set(track)]
        if len(starting) > 1:
            assert share >= TOLERANT_SHARE, f"stage {stage} starts SGLang in {len(starting)} tracks at share {share}"
        if any("rl-cpu" in track for track in stage):
            assert stage == (("rl-cpu",),), "the RL lane runs alone"


def test_the_readmes_test_command_runs_first() -> None:
    assert STAGES[0][0][0] == "fast" and LANES["fast"].envs == ("fast",)


@pytest.mark.parametrize(("path", "runs", "skips"), [
    ("adapter/engine/client.py", {"fast", "lint", "sglang-cpu", "sglang-cpu-0516", "router"}, {"miles", "canary"}),
    ("adapter/miles/binding.py", {"fast", "lint", "miles", "rl-cpu"}, {"sglang-cpu", "router"}),
    ("e2e/miles_cpu/lane.py", {"fast", "miles"}, {"sglang-cpu", "rl-cpu"}),
    ("uv.lock", {"matrix", "canary", "fast"}, {"router"}),
    ("e2e/requirements-contract.txt", {"matrix", "canary"}, {"miles"}),
    ("docs/ci.md", set(), {"fast", "lint"}),
], ids=["engine-leg", "miles-binding", "miles-lane", "lock", "contract-pins", "docs-only"])
def test_a_change_runs_the_lanes_its_paths_touch(path: str, runs: set[str], skips: set[str]) -> None:
    lanes = affected([path])
    assert runs <= set(lanes) and not skips & set(lanes), lanes
    assert all(lanes[lane] == path for lane in lanes)


FAST_LOG = """\
fast: commands[1]> pytest -n auto --dist worksteal -m 'not e2e' --durations=10
........................................................................ [ 50%]
============================= slowest 10 durations =============================
12.00s call     tests/rollout/test_episodes.py::test_a_configuration_error_stops_the_run
29.47s call     tests/miles/test_miles_standin.py::test_real_episodes_inside_miles_pass_miles_checks
3.42s setup    tests/bridge/test_bridge_contract.py::test_single_turn_is_exact
=========================== short test summary info ============================
================= 1245 passed, 105 skipped in 98.22s (0:01:38) =================
"""


def test_the_fast_lanes_slowest_tests_are_read_from_pytests_own_output() -> None:
    assert slowest_tests(FAST_LOG) == [
        (29.47, "tests/miles/test_miles_standin.py::test_real_episodes_inside_miles_pass_miles_checks (call)"),
        (12.0, "tests/rollout/test_episodes.py::test_a_configuration_error_stops_the_run (call)"),
        (3.42, "tests/bridge/test_bridge_contract.py::test_single_turn_is_exact (setup)"),
    ]


def _results(**seconds: float) -> list[Result]:
    return [Result(lane, seconds.get(lane.replace("-", "_"), 1.0), "passed", None) for lane in lane_order()]


def test_the_runs_wall_time_counts_the_longest_track_of_each_stage() -> None:
    results = _results(fast=100.0, lint=10.0, lane_isolation=10.0, wheel=10.0, sglang_schema=200.0)
    first_stage = 230.0  # lint + lane-isolation + wheel + sglang-schema beside fast's 100 s
    assert stage_wall(results) == first_stage + sum(
        max(sum(1.0 for _ in track) for track in stage) for stage in STAGES[1:])


def test_docs_ci_lists_every_lane_with_its_time_and_claims() -> None:
    text = document(_results(fast=98.0), machine="2 cores", fast_log=FAST_LOG,
                    when=datetime(2026, 12, 3, tzinfo=UTC))
    for lane in LANES.values():
        assert all(claim in text for claim in lane.claims)
    assert "| fast | `fast` | 98 s | — | passed |" in text
    assert "1245 passed, 105 skipped in 98.22s" in text and "test_real_episodes_inside_miles" in text
    assert table(_results()).splitlines()[-1].startswith("total")


def test_a_failed_stage_ends_the_run_and_the_table_says_what_never_ran(tmp_path: Path, monkeypatch) -> None:
    """The runner's own stage logic, with each lane's tox call replaced by a command that exits
    0 or 1 (the lane named `fails` fails)."""
    from tools.ci import runner

    def argv(lane: str) -> list[str]:
        return [sys.executable, "-c", f"print('lane {lane}'); raise SystemExit({int(lane == 'matrix')})"]

    monkeypatch.setattr(runner, "tox_argv", argv)
    stages = (
        (("fast",), ("lint", "wheel")),
        (("e2e", "canary"), ("matrix",)),
        (("sglang-cpu",),),
    )
    out = tmp_path / "out.txt"
    with out.open("w") as stream:
        results = run_stages(stages, tmp_path / "logs", stream=stream)
    status = {r.lane: r.status for r in results}
    assert status == {"fast": "passed", "lint": "passed", "wheel": "passed", "e2e": "passed", "canary": "passed",
                      "matrix": "failed (exit 1)", "sglang-cpu": "not run"}
    printed = out.read_text()
    assert "lane fast" in printed and "----- lint, wheel (run beside fast) -----" in printed and "lane wheel" in printed
    assert (tmp_path / "logs" / "matrix.log").read_text() == "lane matrix\n"


def test_a_lanes_cpu_time_counts_the_processes_it_started(tmp_path: Path, monkeypatch) -> None:
    """CPU spent in a grandchild the lane's command waited for is the lane's; sleeping is not."""
    from tools.ci import runner

    busy = "import time; t = time.process_time(); exec('while time.process_time() - t < 0.4: pass')"
    child = f"import subprocess, sys, time; subprocess.run([sys.executable, '-c', {busy!r}]); time.sleep(0.3)"
    monkeypatch.setattr(runner, "tox_argv", lambda lane: [sys.executable, "-c", child])
    result = runner.run_lane("fast", tmp_path, stream=None)
    assert result.ok and result.cpu_seconds is not None
    assert 0.4 <= result.cpu_seconds < result.seconds
    assert " cores)" in table([result]).splitlines()[2]


def test_ci_run_is_the_tools_ci_runner() -> None:
    text = (REPO / ".ci" / "run").read_text()
    assert "python3 -m tools.ci run --write docs/ci.md" in text and "UV_COMPILE_BYTECODE=1" in text
    done = subprocess.run([sys.executable, "-m", "tools.ci", "changed", "--base", "HEAD"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
