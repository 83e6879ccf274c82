"""The run's assertions fail when they should (fast lane, synthetic runs), the report shows them,
and the CLI turns them into an exit status: `--from-run` replays a recorded run without a server."""

from __future__ import annotations

import dataclasses
import json

import pytest

from e2e.rl_cpu.__main__ import main
from e2e.rl_cpu.checks import failures, thresholds
from e2e.rl_cpu.config import RLConfig, contiguous_runs, control_runs, control_steps
from e2e.rl_cpu.records import RunRecord, StepRecord
from e2e.rl_cpu.report import markdown, table

CONFIG = {"steps": 4, "batch": 4, "n": 4, "lr": 5e-4, "epochs": 1, "temperature": 0.8, "window": 2,
          "kl_limit": 1e-3, "start_max": 0.35, "end_min": 0.8, "flat_tol": 0.2, "taskset": "echo-tool-v1",
          "model": "tool-rl", "max_response_len": 48, "seed": 1234}
LIMITS = {"kl_limit": 1e-3, "window": 2, "start_max": 0.35, "end_min": 0.8, "flat_tol": 0.2}


def step(k: int, reward: float, *, kl: float = 1e-4, versions: list[list[str]] | None = None,
         planted: float = 2.0, tool_kl: float | None = 2e-4, surprisal: float = 0.3) -> StepRecord:
    return StepRecord(step=k, reward_mean=reward, reward_std=0.3, mismatch_kl=kl,
                      planted_kl={"shift-logprobs": planted, "mask-one-early": planted},
                      tool_turn_kl=tool_kl, tool_turns=0 if tool_kl is None else 12, surprisal=surprisal,
                      samples=24, groups=6,
                      tokens=70, weight_versions=versions if versions is not None else [[str(k)]],
                      statuses={"completed": 24}, loss=0.01, clip_fraction=0.1, grad_norm=0.5, rollout_s=20.0,
                      train_s=3.0, sync_s=0.05, seconds=23.1)


def run_of(steps: list[StepRecord], control: list[StepRecord] | None = None) -> RunRecord:
    return RunRecord(config=dict(CONFIG), sglang_version="0.5.23", startup_s=60.0, total_s=300.0, cpus=2,
                     load_before=(1.0, 1.5, 2.0), load_after=(2.0, 2.0, 2.0), steps=steps,
                     control=CONTROL if control is None else control)


GOOD = [step(0, 0.20), step(1, 0.30), step(2, 0.80), step(3, 0.90)]
CONTROL = [step(0, 0.20), step(1, 0.25), step(2, 0.30), step(3, 0.20)]

FAILING = [
    # (id, the run's steps, what the failure line must say)
    ("kl_over_limit", [*GOOD[:2], dataclasses.replace(GOOD[2], mismatch_kl=5e-3), GOOD[3]], "step 2: mismatch KL"),
    ("kl_nan", [dataclasses.replace(GOOD[0], mismatch_kl=float("nan")), *GOOD[1:]], "step 0: mismatch KL nan"),
    ("tool_turn_kl_over_limit", [GOOD[0], step(1, 0.3, tool_kl=4e-3), *GOOD[2:]],
     "step 1: mismatch KL on the turns after a tool's answer"),
    ("planted_not_caught", [step(0, 0.3, planted=5e-4), *GOOD[1:]], "would not catch it"),
    ("never_uncertain", [step(k, r, planted=1e-5, surprisal=0.001) for k, r in enumerate((0.2, 0.3, 0.8, 0.9))],
     "never given data"),
    ("stale_version", [GOOD[0], step(1, 0.35, versions=[["0"]]), *GOOD[2:]], "step 1: samples carry"),
    ("mixed_versions", [*GOOD[:3], step(3, 0.55, versions=[["2"], ["3"]])], "expected only '3'"),
    ("a_turn_on_old_weights", [*GOOD[:3], step(3, 0.9, versions=[["3", "2"]])], "expected only '3'"),
    ("no_versions", [*GOOD[:3], step(3, 0.9, versions=[[]])], "expected only '3'"),
    ("reward_flat", [step(0, 0.3), step(1, 0.3), step(2, 0.3), step(3, 0.3)], "did not learn the task"),
    ("rose_short_of_the_bar", [*GOOD[:2], step(2, 0.7), step(3, 0.8)], "0.750 < 0.8"),
    ("started_good", [step(0, 0.4), step(1, 0.4), *GOOD[2:]], "does not start bad at the task"),
    ("too_few_steps", GOOD[:3], "needs at least 4"),
]
CONTROL_FAILING = [
    # (id, the control's steps, what the failure line must say)
    ("control_drifted", [step(0, 0.2), step(1, 0.2), step(2, 0.5), step(3, 0.6)], "control moved from 0.200 to 0.550"),
    ("control_kl", [dataclasses.replace(CONTROL[0], mismatch_kl=5e-3), *CONTROL[1:]], "control step 0: mismatch KL"),
    ("control_stale_version", [*CONTROL[:3], step(3, 0.2, versions=[["2"]])], "control step 3: samples carry"),
    ("control_too_short", CONTROL[:2], "2 control steps recorded"),
]


def test_a_good_run_passes_every_check() -> None:
    assert failures(run_of(GOOD), **LIMITS) == []


def test_a_step_sure_of_every_token_is_not_asked_to_show_a_planted_bug() -> None:
    sure = step(3, 1.0, planted=3e-5, surprisal=0.004)  # a trained policy: shifting log-probs ≈ 0 changes nothing
    assert failures(run_of([*GOOD[:3], sure]), **LIMITS) == []
    unsure = step(3, 0.9, planted=3e-5, surprisal=0.2)
    assert any("step 3: planted bug" in line for line in failures(run_of([*GOOD[:3], unsure]), **LIMITS))


def test_a_multi_turn_sample_carries_one_version_per_turn() -> None:
    assert failures(run_of([*GOOD[:3], step(3, 0.9, versions=[["3", "3"], ["3"]])]), **LIMITS) == []


def test_a_step_without_tool_turns_has_no_tool_turn_kl_to_judge() -> None:
    assert failures(run_of([step(0, 0.2, tool_kl=None), *GOOD[1:]]), **LIMITS) == []


def test_a_run_without_its_control_is_judged_on_the_learning_run_alone() -> None:
    assert failures(run_of(GOOD, control=[]), **LIMITS) == []


@pytest.mark.parametrize(("steps", "needle"), [c[1:] for c in FAILING], ids=[c[0] for c in FAILING])
def test_each_check_can_fail(steps, needle) -> None:
    found = failures(run_of(steps), **LIMITS)
    assert any(needle in line for line in found), found


@pytest.mark.parametrize(("control", "needle"), [c[1:] for c in CONTROL_FAILING], ids=[c[0] for c in CONTROL_FAILING])
def test_each_control_check_can_fail(control, needle) -> None:
    found = failures(run_of(GOOD, control=control), **LIMITS)
    assert any(needle in line for line in found), found


def test_thresholds_come_from_the_recorded_run_and_default_for_older_records() -> None:
    assert thresholds({**CONFIG, "end_min": 0.9}) == {**LIMITS, "end_min": 0.9}
    older = {name: value for name, value in CONFIG.items() if name not in ("start_max", "end_min", "flat_tol")}
    assert thresholds(older) == LIMITS


def test_report_has_a_row_per_step_the_load_and_the_failures() -> None:
    run = run_of(GOOD)
    rows = table(run.steps)
    assert len(rows) == 2 + len(GOOD)
    assert rows[2].startswith("| 0 | 0 | 0.200 | 0.300 | 1.00e-04 | 2.00e-04 | 2.00 | 2.00 | 0.300 | 12/24 | 70 |")
    text = markdown(run, ["step 2: mismatch KL too high"])
    assert "load average (1/5/15 min) 1.00 / 1.50 / 2.00 at the start" in text
    assert "- FAILED: step 2: mismatch KL too high" in text and "![reward and mismatch KL per step](rl-cpu.png)" in text
    assert "mean of steps 0-1 0.250, of steps 2-3 0.850; the lr-0 control: 0.225, then 0.250" in text
    assert "## Per step: the control (learning rate 0, same seeds)" in text


def test_one_step_windows_are_named_by_their_step() -> None:
    run = dataclasses.replace(run_of(GOOD), config={**CONFIG, "window": 1})
    assert "- Reward: mean of step 0 0.200, of step 3 0.900; the lr-0 control: 0.200, then 0.200." in markdown(run, [])


@pytest.mark.parametrize(("steps", "window", "expected", "runs"), [
    (5, 1, [0, 4], [[4]]),
    (6, 2, [0, 1, 4, 5], [[1], [4, 5]]),
    (4, 2, [0, 1, 2, 3], [[1, 2, 3]]),
    (8, 3, [0, 1, 2, 5, 6, 7], [[1, 2], [5, 6, 7]]),
], ids=["lane-default", "two-step-windows", "windows-meet", "wider-windows"])
def test_the_control_runs_only_the_windows_its_flat_check_reads_and_takes_step_0_from_the_learning_run(
        steps, window, expected, runs) -> None:
    config = RLConfig(steps=steps, window=window)
    assert control_steps(config) == expected and control_runs(config) == runs


def test_contiguous_steps_make_one_rollout_function_each() -> None:
    assert contiguous_runs([0, 1, 4, 5]) == [[0, 1], [4, 5]] and contiguous_runs([3]) == [[3]]


def test_run_record_round_trips_through_json() -> None:
    run = run_of(GOOD)
    assert RunRecord.from_json(run.to_json()) == run


def test_cli_replays_a_recorded_run_and_fails_on_its_checks(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib")  # the report's plot (group `demo`)
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(run_of(GOOD).to_json())
    bad.write_text(run_of([dataclasses.replace(s, mismatch_kl=0.02) for s in GOOD]).to_json())
    assert main(["--from-run", str(good), "--run-dir", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "rl-cpu.png").stat().st_size > 1000
    assert main(["--from-run", str(bad), "--run-dir", str(tmp_path / "out")]) == 1
    assert "FAILED: step 0: mismatch KL 0.02" in capsys.readouterr().err


def test_cli_refuses_settings_that_cannot_make_a_run(capsys) -> None:
    assert main(["--steps", "3", "--window", "2"]) == 2
    assert "--steps 3 must be at least twice --window 2" in capsys.readouterr().err


def test_recorded_run_json_is_plain_json(tmp_path) -> None:
    data = json.loads(run_of(GOOD).to_json())
    assert data["steps"][0]["weight_versions"] == [["0"]] and data["load_before"] == [1.0, 1.5, 2.0]
