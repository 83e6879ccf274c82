"""CI as data (`tools/ci`): every tox env is in a lane, every lane runs in a stage, SGLang lanes
overlap only at a memory share that tolerates it, the stages' tracks run on without waiting for
each other, a failed lane stops every track, the developer's loop picks lanes by path, and
docs/ci.md is written from a run's results (its table, the fast lane's slowest tests read from the
real pytest output)."""

from __future__ import annotations

import configparser
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tools.ci.affected import affected
from tools.ci.lanes import LANES, NOT_IN_CI, STAGES, lane_order, tracks_of
from tools.ci.report import document, run_wall, slowest_tests, table
from tools.ci.runner import Result, run_stage, run_stages

REPO = Path(__file__).resolve().parents[2]
# Lanes that start a real SGLang server (or two). SGLang refuses to start when more than its
# --mem-fraction-static of the memory free before its weights load goes elsewhere meanwhile: a lane
# beside it loading a model did that at 0.05. Two such lanes may overlap only while the CPU servers
# keep a share that tolerates it (CI's tracks run on without stage barriers, so any two may).
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


def test_sglang_lanes_overlap_only_when_the_servers_tolerate_each_other() -> None:
    from e2e.sglang_cpu.server import CPU_FLAGS

    share = float(CPU_FLAGS[CPU_FLAGS.index("--mem-fraction-static") + 1])
    starting = [track for track in tracks_of() if STARTS_SGLANG & set(track)]
    if len(starting) > 1:
        assert share >= TOLERANT_SHARE, f"tracks {starting} start SGLang side by side at share {share}"


def test_ci_runs_the_ith_track_of_every_stage_as_its_track_i() -> None:
    stages = ((("a",), ("b", "c")), (("d", "e"), ("f",)), (("g",),))
    assert tracks_of(stages) == [["a", "d", "e", "g"], ["b", "c", "f"]]
    assert sorted(lane for track in tracks_of() for lane in track) == sorted(lane_order())


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


def test_the_runs_wall_time_is_its_longest_track() -> None:
    results = _results(fast=100.0, lint=10.0, lane_isolation=10.0, sglang_schema=400.0)
    first, second = ([sum(400.0 if lane == "sglang-schema" else 100.0 if lane == "fast" else
                          10.0 if lane in {"lint", "lane-isolation"} else 1.0 for lane in track)
                      for track in tracks_of()])
    assert run_wall(results) == max(first, second)
    assert "sglang-schema" in tracks_of()[0] and run_wall(results) == first, "the schema lane's track is longest"


def test_docs_ci_lists_every_lane_with_its_time_and_claims() -> None:
    text = document(_results(fast=98.0), machine="2 cores", fast_log=FAST_LOG,
                    when=datetime(2026, 12, 3, tzinfo=UTC))
    for lane in LANES.values():
        assert all(claim in text for claim in lane.claims)
    assert "| fast | `fast` | 98 s | — | passed |" in text
    assert "1245 passed, 105 skipped in 98.22s" in text and "test_real_episodes_inside_miles" in text
    assert table(_results()).splitlines()[-1].startswith("total")


def test_a_failed_lane_ends_every_track_and_the_table_says_what_never_ran(tmp_path: Path, monkeypatch) -> None:
    """The runner's own track logic, with each lane's tox call replaced by a command that exits 0
    or 1 (matrix fails): the tracks run on without stage barriers, so the lanes before the failure
    on its own track and the other track's running lane finish; no lane starts after it."""
    from tools.ci import runner

    def argv(lane: str) -> list[str]:
        return [sys.executable, "-c", f"print('lane {lane}'); raise SystemExit({int(lane == 'matrix')})"]

    monkeypatch.setattr(runner, "tox_argv", argv)
    stages = (
        (("fast",), ("lint", "wheel")),
        (("e2e",), ("matrix", "canary")),
        (("sglang-cpu",),),
    )
    failed = threading.Event()
    real_run_lane = runner.run_lane

    def first_track_waits_for_the_failure(lane: str, logs: Path, **kwargs) -> Result:
        if lane == "e2e":  # still running when matrix fails on the other track
            assert failed.wait(30), "matrix never failed"
        return real_run_lane(lane, logs, **kwargs)

    monkeypatch.setattr(runner, "run_lane", first_track_waits_for_the_failure)
    out = tmp_path / "out.txt"
    with out.open("w") as stream:
        results = run_stage(tracks_of(stages), tmp_path / "logs", stream=stream, failed=failed)
    status = {r.lane: r.status for r in results}
    assert status == {"fast": "passed", "lint": "passed", "wheel": "passed", "e2e": "passed",
                      "matrix": "failed (exit 1)", "canary": "not run", "sglang-cpu": "not run"}
    printed = out.read_text()
    assert "lane fast" in printed and "----- lint, wheel, matrix, canary (run beside fast, e2e, sglang-cpu) -----" \
        in printed and "lane wheel" in printed
    assert (tmp_path / "logs" / "matrix.log").read_text() == "lane matrix\n"


def test_run_stages_reports_its_lanes_in_the_stages_order(tmp_path: Path, monkeypatch) -> None:
    from tools.ci import runner

    monkeypatch.setattr(runner, "tox_argv", lambda lane: [sys.executable, "-c", f"print('lane {lane}')"])
    stages = ((("fast",), ("lint", "wheel")), (("e2e",), ("matrix",)))
    with (tmp_path / "out.txt").open("w") as stream:
        results = run_stages(stages, tmp_path / "logs", stream=stream)
    assert [r.lane for r in results] == ["fast", "lint", "wheel", "e2e", "matrix"] and all(r.ok for r in results)


def test_every_lane_is_told_the_lanes_of_its_run(tmp_path: Path, monkeypatch) -> None:
    """The canary reads it (`CI_LANES_ENV`) to leave a cell to the matrix cell beside it."""
    from tools.ci import runner

    monkeypatch.setattr(runner, "tox_argv", lambda lane: [
        sys.executable, "-c", f"import os; print('{lane} sees', os.environ[{runner.CI_LANES_ENV!r}])"])
    with (tmp_path / "out.txt").open("w") as stream:
        run_stages(((("canary",), ("matrix",)),), tmp_path / "logs", stream=stream)
    assert (tmp_path / "logs" / "canary.log").read_text() == "canary sees canary,matrix\n"
    assert runner.run_lane("canary", tmp_path / "alone", stream=None).ok
    assert (tmp_path / "alone" / "canary.log").read_text() == "canary sees canary\n"


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
