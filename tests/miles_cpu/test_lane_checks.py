"""The miles lane's judge (e2e.miles_cpu.checks) on synthetic runs shaped like real Miles' output:
a healthy run passes, and each planted defect is named. The lane itself (`tox -e miles`) applies
the same checks to what real Miles dumped, converted and logged."""

from __future__ import annotations

import copy
import dataclasses
import json
import tomllib
from pathlib import Path

import pytest

from adapter.miles.launcher import miles_command
from e2e.miles_cpu import checks, lane
from e2e.miles_cpu.venv import requirements_in

EXPECT = checks.Expectation(rollout_batch_size=2, n_samples_per_prompt=2, num_rollout=2, weight_version="default",
                            has_rollout_id=False)
REWARDS = [[1.0, 0.0, 0.5, 0.5], [0.0, 0.0, 1.0, 0.5]]


def _sample(group: int, index: int, reward: float) -> dict:
    return {"group_index": group, "index": index, "tokens": list(range(24)), "response_length": 3,
            "loss_mask": [1, 1, 1], "rollout_log_probs": [-0.5, -0.1, -0.01], "reward": reward,
            "weight_versions": ["default"], "session_id": f"trace-{index}", "status": "completed",
            "metadata": {"verifiers": {"task_index": group}}}


def healthy_run() -> tuple[dict, dict, dict]:
    dumps, converted, logged = {}, {}, {}
    for r, rewards in enumerate(REWARDS):
        samples = [_sample(2 * r + i // 2, 4 * r + i, reward) for i, reward in enumerate(rewards)]
        dumps[r] = {"rollout_id": r, "samples": samples}
        converted[r] = {"tokens": [24] * 4, "response_lengths": [3] * 4, "loss_masks": [3] * 4,
                        "rollout_log_probs": [3] * 4, "raw_reward": rewards,
                        "sample_indices": [4 * r + i for i in range(4)],
                        "rewards": checks.grpo_normalised(rewards, 2), "rollout_log_probs_finite": True}
        logged[r] = {**{k: 0.5 for k in checks.OUR_METRICS + checks.MILES_METRICS}, "verifiers/traces": 4.0}
    return dumps, converted, logged


def test_a_healthy_run_passes() -> None:
    assert checks.problems(*healthy_run(), EXPECT) == []


def test_grpo_normalisation_is_miles_own() -> None:
    # Miles: torch's unbiased std over the group, then / (std + 1e-6); a zero-std group stays 0
    assert checks.grpo_normalised([1.0, 0.0, 0.5, 0.5], 2) == pytest.approx([0.70710, -0.70710, 0.0, 0.0], abs=1e-4)


def _short_mask(run):
    run[0][1]["samples"][2]["loss_mask"] = [1, 1]


def _unnormalised(run):
    run[1][0]["rewards"] = [1.0, 0.0, 0.5, 0.5]


def _one_sample_lost(run):
    run[0][0]["samples"].pop()


def _stale_weights(run):
    run[0][1]["samples"][0]["weight_versions"] = ["3"]


def _our_metrics_missing(run):
    del run[2][1]["verifiers/reward_mean"]


def _group_split(run):
    run[0][0]["samples"][1]["group_index"] = 7


def _rollout_id_for_002(run):
    run[0][0]["samples"][0]["rollout_id"] = 0


def _converted_lengths_differ(run):
    run[1][0]["loss_masks"] = [3, 3, 2, 3]


def _repeated_groups(run):
    for s in run[0][1]["samples"]:
        s["group_index"] -= 2


PLANTED = [
    # (id, defect, fragment of the problem it must produce)
    ("loss_mask_one_short", _short_mask, "loss_mask, rollout_log_probs and response_length disagree: (2, 3, 3)"),
    ("rewards_not_grpo", _unnormalised, "are not GRPO's normalisation"),
    ("a_sample_lost", _one_sample_lost, "3 samples, expected 2 x 2 = 4"),
    ("stale_weight_version", _stale_weights, "are not the engine's 'default'"),
    ("our_metrics_not_logged", _our_metrics_missing, "lack ['verifiers/reward_mean']"),
    ("group_split", _group_split, "span group_index"),
    ("rollout_id_on_002", _rollout_id_for_002, "rollout_id present for this Miles"),
    ("converted_mask_lengths", _converted_lengths_differ, "loss_masks [3, 3, 2, 3] != the dump's"),
    ("groups_repeat_across_rollouts", _repeated_groups, "group_index values repeat"),
]


@pytest.mark.parametrize(("plant", "fragment"), [c[1:] for c in PLANTED], ids=[c[0] for c in PLANTED])
def test_each_planted_defect_is_named(plant, fragment) -> None:
    run = copy.deepcopy(healthy_run())
    plant(run)
    found = checks.problems(*run, EXPECT)
    assert any(fragment in p for p in found), found


def test_miles_logged_perf_lines_are_read_back() -> None:
    text = ("\x1b[36m(RolloutManager pid=1)\x1b[0m [2026-12-01] rollout.py:1191 - perf 1: {'verifiers/traces': 4.0, "
            "'rollout/response_len/max': 3, 'perf/rollout_time': np.float64(6.88)}\nnoise perf x: {}\n")
    assert checks.logged_metrics(text) == {1: {"verifiers/traces": 4.0, "rollout/response_len/max": 3,
                                               "perf/rollout_time": 6.88}}


def test_the_lane_runs_exactly_the_printed_line(tmp_path) -> None:
    config = tmp_path / "env.toml"
    config.write_text('[taskset]\nid = "arith-v1"\n[harness]\nid = "null"\n')
    launch = miles_command(config=str(config), hf_checkpoint="/ck pt/$(x)", miles_version="0.0.2", ambient={},
                           ray_address="127.0.0.1:6379", train_script="/t/train.py",
                           extra_env_vars={"A": "it's"}, miles_args=["--x", "a b"])
    assert lane.parse_printed(launch.shell()) == (launch.env, launch.argv)


def test_the_megatron_model_flags_come_from_the_checkpoints_config(tmp_path) -> None:
    config = {"hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 2, "intermediate_size": 128,
              "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 10000.0}, "tie_word_embeddings": True}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert lane.megatron_model_args(tmp_path) == [
        "--hidden-size", "64", "--num-attention-heads", "2", "--num-layers", "2", "--ffn-hidden-size", "128",
        "--norm-epsilon", "1e-06", "--rotary-base", "10000"]


def test_the_miles_venv_pins_the_projects_own_dependencies() -> None:
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    lines = requirements_in().read_text().split("# --- the project's runtime dependencies ---", 1)[1]
    pinned = [line.strip() for line in lines.splitlines() if line.strip() and not line.startswith("#")]
    assert pinned == project["project"]["dependencies"]


def test_every_case_is_judged_and_the_planted_one_must_fail() -> None:
    assert {c.legacy for c in lane.CASES if not c.planted} == {False, True}
    assert [c.name for c in lane.CASES if c.planted] == ["sglang-planted-loss-mask"]


def test_the_multi_turn_tool_case_runs_echo_tool_on_real_sglang_with_the_class_and_verifies_the_dump() -> None:
    (tools,) = [c for c in lane.CASES if c.multi_turn_share]
    assert (tools.legacy, tools.config.name) == (False, "echo-tool-v1.toml")
    assert tools.multi_turn_share >= 0.5 and tools.verify_env == "echo-tool-v1"
    assert tomllib.loads(tools.config.read_text())["max_turns"] >= 2
    assert set(lane.CONFIGS) == {c.config for c in lane.CASES}  # each made ready outside the namespace


# ---- The multi-turn tool case: model turns, masked tool responses, one weight version per turn.
TOOL_RESPONSE = 151665  # Qwen3's `<tool_response>` (the lane reads it from the served tokenizer)
TOOL_EXPECT = dataclasses.replace(EXPECT, tool_response_id=TOOL_RESPONSE, multi_turn_share=0.5)
PROMPT = list(range(20))
# call (3 sampled), the tool's response (4 masked, holding <tool_response>), the answer (2 sampled)
TOOL_RESPONSE_TOKENS = [198, TOOL_RESPONSE, 99, 198]


def _tool_sample(group: int, index: int, reward: float, *, calls: bool) -> dict:
    sample = _sample(group, index, reward)
    if calls:
        response = [40, 41, 42, *TOOL_RESPONSE_TOKENS, 43, 44]
        sample.update(tokens=PROMPT + response, response_length=len(response),
                      loss_mask=[1, 1, 1, 0, 0, 0, 0, 1, 1],
                      rollout_log_probs=[-0.5, -0.1, -0.01, 0.0, 0.0, 0.0, 0.0, -0.2, -0.3],
                      weight_versions=["default", "default"])
    return sample


def healthy_tool_run() -> tuple[dict, dict, dict]:
    dumps, converted, logged = healthy_run()
    for r, rewards in enumerate(REWARDS):
        samples = [_tool_sample(2 * r + i // 2, 4 * r + i, reward, calls=i != 3) for i, reward in enumerate(rewards)]
        dumps[r]["samples"] = samples
        converted[r].update(tokens=[len(s["tokens"]) for s in samples],
                            response_lengths=[s["response_length"] for s in samples],
                            loss_masks=[len(s["loss_mask"]) for s in samples],
                            rollout_log_probs=[len(s["rollout_log_probs"]) for s in samples])
    return dumps, converted, logged


def test_a_healthy_tool_run_passes() -> None:
    assert checks.problems(*healthy_tool_run(), TOOL_EXPECT) == []


def test_model_turns_are_the_loss_masks_runs() -> None:
    assert checks.model_turns([1, 1, 0, 0, 1, 0, 1, 1, 1, 0]) == [(0, 2), (4, 5), (6, 9)]
    assert checks.model_turns([0, 0]) == [] and checks.model_turns([1]) == [(0, 1)]


def _one_version_for_two_turns(run):
    run[0][0]["samples"][0]["weight_versions"] = ["default"]


def _log_prob_on_the_tool_response(run):
    run[0][1]["samples"][1]["rollout_log_probs"][4] = -0.7


def _tool_response_trained_on(run):  # the response's span unmasked: one model turn, and no gap
    sample = run[0][0]["samples"][2]
    sample["loss_mask"] = [1] * 9
    sample["weight_versions"] = ["default"]


def _gap_without_a_tool_response(run):
    tokens = run[0][1]["samples"][0]["tokens"]
    tokens[tokens.index(TOOL_RESPONSE)] = 77


def _tool_never_called(run):
    for dump in run[0].values():
        for sample in dump["samples"]:
            sample.update(loss_mask=[1, 1, 1], rollout_log_probs=[-0.5, -0.1, -0.01], response_length=3,
                          tokens=list(range(24)), weight_versions=["default"])
    for conv in run[1].values():
        conv.update(tokens=[24] * 4, response_lengths=[3] * 4, loss_masks=[3] * 4, rollout_log_probs=[3] * 4)


TOOL_PLANTED = [
    ("one_weight_version_for_two_turns", _one_version_for_two_turns, "1 weight versions for 2 model turns"),
    ("log_prob_on_a_masked_token", _log_prob_on_the_tool_response, "log-probs on masked (not sampled) tokens at "
                                                                   "response offsets [4]"),
    ("tool_response_unmasked", _tool_response_trained_on, "model turns [(0, 9)] hold a tool response"),
    ("gap_without_tool_response", _gap_without_a_tool_response, "masked spans [(3, 7)] between model turns hold no "
                                                                "tool response"),
    ("tool_never_called", _tool_never_called, "0 of 8 samples have two or more model turns; the case needs at least "
                                              "50%"),
]


@pytest.mark.parametrize(("plant", "fragment"), [c[1:] for c in TOOL_PLANTED], ids=[c[0] for c in TOOL_PLANTED])
def test_each_planted_turn_defect_is_named(plant, fragment) -> None:
    run = copy.deepcopy(healthy_tool_run())
    plant(run)
    found = checks.problems(*run, TOOL_EXPECT)
    assert any(fragment in p for p in found), found


def test_cases_on_real_sglang_are_seeded(tmp_path) -> None:
    """Real SGLang serves with deterministic inference (e2e.miles_cpu.__main__.engine) and Miles'
    flag makes the adapter seed each rollout, so a case's samples (and its multi-turn share) are
    the same on every run; without the flag Miles' default stays."""
    (tmp_path / "config.json").write_text(json.dumps({
        "hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 2, "intermediate_size": 128,
        "rms_norm_eps": 1e-06, "rope_theta": 10000.0}))
    flag = "--sglang-enable-deterministic-inference"
    assert flag in lane.miles_args("http://127.0.0.1:1", tmp_path, tmp_path, deterministic=True)
    assert flag not in lane.miles_args("http://127.0.0.1:1", tmp_path, tmp_path)


# ---- Miles' own router before the engine and a failing worker.
ENGINE, FAILING = "http://127.0.0.1:30001", "http://127.0.0.1:30002"


def test_only_the_engine_mode_points_miles_router_address_at_the_engine() -> None:
    assert lane.router_args(ENGINE, "engine") == ["--sglang-router-ip", "127.0.0.1", "--sglang-router-port", "30001"]
    own = lane.router_args(ENGINE, "miles", failing_url=FAILING, port=3999)
    assert "--sglang-router-ip" not in own  # Miles launches its router only without one
    assert own[own.index("--worker-urls") + 1:] == [ENGINE, FAILING]
    assert own[own.index("--sglang-router-policy") + 1] == "consistent_hashing"
    (case,) = [c for c in lane.CASES if c.router == "miles"]
    # miles-rl 0.0.2 asserts that --sglang-router-policy is not used under its class-ABI opt-in
    assert case.legacy


def test_the_printed_command_disables_miles_routers_retries(tmp_path) -> None:
    config = tmp_path / "env.toml"
    config.write_text('[taskset]\nid = "arith-v1"\n[harness]\nid = "null"\n')
    args = lane.router_args(ENGINE, "miles", failing_url=FAILING, port=3999)
    launch = miles_command(config=str(config), hf_checkpoint="/ckpt", miles_version="0.0.2", ambient={},
                           ray_address="127.0.0.1:6379", train_script="/t/train.py", miles_args=args)
    assert "--router-disable-retries" in launch.argv
    assert lane.router_problems("miles", launch.argv, [3, 3, 2, 2]) == []


ROUTER_CASES = [
    # (disable flag printed, calls per failing turn, fragment of the problem; "" = passes)
    (True, [3, 3, 2, 2], ""),
    (True, [15, 3], "a failing model turn cost 15 calls"),
    (True, [], "the failing worker got no model turn"),
    (False, [3], "lacks --router-disable-retries"),
]


@pytest.mark.parametrize(("printed", "per_turn", "fragment"), ROUTER_CASES)
def test_the_failing_worker_is_judged_by_the_calls_each_failing_turn_cost(printed, per_turn, fragment) -> None:
    argv = ["python3", "train.py", *(["--router-disable-retries"] if printed else [])]
    found = lane.router_problems("miles", argv, per_turn)
    assert (found == []) if not fragment else any(fragment in p for p in found), found
    assert lane.router_problems("engine", argv, per_turn) == []  # no router of Miles' own: nothing to count


@pytest.mark.parametrize(("ray_address", "submit", "problem"), [
    ("http://127.0.0.1:8265", True, ""),
    ("127.0.0.1:6379", False, ""),
    ("127.0.0.1:6379", True, "is not `ray job submit`"),
    ("http://127.0.0.1:8265", False, "not the driver"),
], ids=["dashboard-submits", "gcs-runs-the-driver", "submit-case-given-gcs", "driver-case-given-dashboard"])
def test_a_submit_case_runs_the_printed_ray_job_submit_form(tmp_path, ray_address, submit, problem) -> None:
    config = tmp_path / "env.toml"
    config.write_text('[taskset]\nid = "arith-v1"\n[harness]\nid = "null"\n')
    launch = miles_command(config=str(config), hf_checkpoint="/c", miles_version="0.0.2", ambient={},
                           ray_address=ray_address, train_script="/t/train.py")
    _, argv = lane.parse_printed(launch.shell())
    found = lane.launch_problems(dataclasses.replace(lane.CASES[0], submit=submit), argv)
    assert (problem in found[0]) if problem else found == []


def test_the_legacy_case_goes_through_ray_job_submit_behind_miles_own_router() -> None:
    # one Miles driver proves both: the job's printed form and the router Miles starts inside it
    (submitted,) = [c for c in lane.CASES if c.submit]
    assert not submitted.planted and submitted.legacy and submitted.router == "miles"


# ---- Miles #1845's start-up order: a resumed run against the run it resumed.
def _other_task(resumed):
    resumed["samples"][0]["metadata"]["verifiers"]["task_index"] = 9


def _counters_from_zero(resumed):
    for s in resumed["samples"]:
        s["group_index"] -= 2
        s["index"] -= 4


def _other_tokens(resumed):
    resumed["samples"][3]["tokens"] = list(range(1, 25))


@pytest.mark.parametrize(("plant", "fragment"), [
    (_other_task, "drew tasks [2, 2, 3, 9]"),
    (_counters_from_zero, "group_index [0, 0, 1, 1]; the uninterrupted run's [2, 2, 3, 3]"),
    (_other_tokens, "(or other tokens or rewards)"),
], ids=["another_task", "counters_from_zero", "other_tokens"])
def test_a_resume_that_draws_otherwise_is_named(plant, fragment) -> None:
    straight = healthy_run()[0][1]
    resumed = copy.deepcopy(straight)
    resumed["samples"].reverse()  # the order groups finish in may differ: not a defect
    assert checks.resume_problems(1, straight, resumed) == []
    plant(resumed)
    assert any(fragment in p for p in checks.resume_problems(1, straight, resumed))


def test_a_resumed_run_is_judged_from_its_first_rollout() -> None:
    dumps, converted, logged = healthy_run()
    for part in (dumps, converted, logged):
        del part[0]
    assert checks.problems(dumps, converted, logged, EXPECT)  # rollout 0 missing
    assert checks.problems(dumps, converted, logged, dataclasses.replace(EXPECT, first_rollout=1)) == []


def test_the_start_up_cases_run_1845s_order_with_save_load_and_the_start_rollout_id(tmp_path) -> None:
    cases = {c.name: c for c in lane.CASES}
    fresh, resumed = cases["sglang-class-echo-tool"], cases["sglang-class-echo-tool-resume"]
    bare = cases["sglang-class-load-without-state"]
    assert all(c.pr1845 and not c.legacy for c in (fresh, resumed, bare))
    assert fresh.resume is None and resumed.resume.load_from == fresh.name and bare.resume.load_from is None
    names = [c.name for c in lane.CASES]
    assert names.index(fresh.name) < names.index(resumed.name)  # its checkpoint exists by then
    args = lane.checkpoint_args(resumed, tmp_path / resumed.name)
    load = Path(args[args.index("--load") + 1])
    assert load == tmp_path / fresh.name / "ckpt" and (load / lane.MEGATRON_MARKER).is_file()
    assert args[args.index("--start-rollout-id") + 1] == "1"
    assert lane.checkpoint_args(fresh, tmp_path / fresh.name) == [
        "--save", str(tmp_path / fresh.name / "ckpt"), "--save-interval", "1"]


def test_a_start_from_a_checkpoint_without_state_must_carry_the_warning(tmp_path) -> None:
    (bare,) = [c for c in lane.CASES if c.resume is not None and c.resume.load_from is None]
    case_dir = tmp_path / bare.name
    state = lane.save_dir(case_dir) / "rollout" / "vf_sglang_state_1.json"
    state.parent.mkdir(parents=True)
    state.write_text("{}")
    missing = lane.load_dir(bare, case_dir) / "rollout" / "vf_sglang_state_0.json"
    assert any("no warning naming" in p for p in lane.startup_problems(bare, case_dir, {}, "quiet"))
    told = f"(RolloutManager pid=7) WARNING load(0): {lane.START_WARNING} {missing} (a base-model checkpoint ...)"
    assert lane.startup_problems(bare, case_dir, {}, told) == []
    state.unlink()
    assert lane.startup_problems(bare, case_dir, {}, told) == [f"save(1) wrote no rollout state at {state}"]
