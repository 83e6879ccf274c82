"""The loop's numbers in plain Python (fast lane, no torch): Miles' grpo advantages, the k3
mismatch KL over masked tokens, and the planted bugs it must catch, on synthetic samples and on
one step recorded from a real run (real SGLang 0.5.23 rollouts, the fp32 trainer's recompute).

Re-record the data (needs real SGLang on CPU, a few minutes), then copy DIR/step-0.json to
tests/rl_cpu/data/arith-v1-step0.json:
    python -m e2e.rl_cpu --steps 2 --window 1 --record-steps DIR
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from e2e.rl_cpu.errors import SampleShapeError
from e2e.rl_cpu.metrics import (
    PLANTED,
    TrainSample,
    group_advantages,
    k3,
    mask_one_early,
    mismatch_kl,
    reward_stats,
    shift_logprobs,
    surprisal,
    token_pairs,
    tool_turn_kl,
)
from e2e.rl_cpu.records import load_step

RECORDED = Path(__file__).parent / "data" / "arith-v1-step0.json"
KL_LIMIT = 1e-3


def sample(reward: float = 0.0, *, group: int = 0, key: int = 0, lps: tuple[float, ...] = (-0.5, -0.1),
           mask: tuple[int, ...] | None = None, prompt: int = 3) -> TrainSample:
    n = len(lps)
    return TrainSample(tokens=tuple(range(10, 10 + prompt + n)), response_length=n,
                       loss_mask=mask if mask is not None else (1,) * n, rollout_log_probs=lps, reward=reward,
                       group_index=group, rollout_key=key, weight_versions=("0",), status="completed")


# --- advantages: Miles' rule (docs/contract.md §8.5, train_data_conversion._normalize_rewards_by_rollout)


def _unbiased_std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


ADVANTAGE_CASES = [
    # (id, rewards of one group, expected advantages, reason)
    ("graded", [1.0, 0.5, 0.0, 0.0], [(r - 0.375) / (_unbiased_std([1.0, 0.5, 0.0, 0.0]) + 1e-6)
                                      for r in (1.0, 0.5, 0.0, 0.0)], "mean off, unbiased std + 1e-6"),
    ("all_equal", [0.5, 0.5, 0.5, 0.5], [0.0] * 4, "std 0: centred only, no division"),
    ("one_rollout", [1.0], [0.0], "a group of one: centred only"),
    ("two", [1.0, 0.0], [1.0 / (_unbiased_std([1.0, 0.0]) + 1e-6) * 0.5,
                         -1.0 / (_unbiased_std([1.0, 0.0]) + 1e-6) * 0.5], "n − 1 in the std"),
]


@pytest.mark.parametrize(("rewards", "expected"), [c[1:3] for c in ADVANTAGE_CASES],
                         ids=[c[0] for c in ADVANTAGE_CASES])
def test_advantages_follow_miles_grpo_rule(rewards, expected) -> None:
    got = group_advantages([sample(r, key=i) for i, r in enumerate(rewards)])
    assert got == pytest.approx(expected, abs=1e-9)


def test_advantages_group_by_group_index_not_by_position() -> None:
    rows = [sample(1.0, group=0, key=0), sample(0.0, group=1, key=1), sample(0.0, group=0, key=2),
            sample(0.0, group=1, key=3)]
    got = group_advantages(rows)
    assert got[0] == pytest.approx(-got[2]) and got[0] > 0
    assert got[1] == got[3] == 0.0  # group 1 is all zeros


def test_advantages_count_a_multi_branch_rollout_once_and_refuse_disagreeing_siblings() -> None:
    branches = [sample(1.0, key=0), sample(1.0, key=0), sample(0.0, key=1)]
    got = group_advantages(branches)
    two = group_advantages([sample(1.0, key=0), sample(0.0, key=1)])
    assert got == pytest.approx([two[0], two[0], two[1]])
    with pytest.raises(SampleShapeError, match="must share one reward"):
        group_advantages([sample(1.0, key=0), sample(0.5, key=0)])


def test_advantages_without_std_normalization_only_centre() -> None:
    assert group_advantages([sample(1.0, key=0), sample(0.0, key=1)], std_normalization=False) == [0.5, -0.5]


# --- the mismatch KL -------------------------------------------------------------------------


def test_k3_is_zero_only_on_agreement_and_matches_its_formula() -> None:
    assert k3(-0.3, -0.3) == 0.0
    for d in (-1.0, -1e-3, 1e-3, 2.0):
        assert k3(-1.0 + d, -1.0) == pytest.approx(math.exp(d) - d - 1, rel=1e-9) and k3(-1.0 + d, -1.0) > 0


def test_kl_counts_only_masked_tokens_token_weighted() -> None:
    # trainer_lp covers tokens[1:]: 2 prompt transitions, then the 2 response tokens
    a = sample(lps=(-0.5, -0.1), mask=(1, 0), prompt=3)
    b = sample(lps=(-1.0,), prompt=3)
    lp_a, lp_b = [9.0, 9.0, -0.4, -5.0], [9.0, 9.0, -1.2]  # the 9.0s are prompt positions: never read
    assert token_pairs(a, lp_a) == [(-0.4, -0.5)]
    assert mismatch_kl([a, b], [lp_a, lp_b]) == pytest.approx((k3(-0.4, -0.5) + k3(-1.2, -1.0)) / 2)


def test_tool_turn_kl_reads_only_the_turns_after_a_masked_out_tool_response() -> None:
    # response: the call (2 sampled), the tool's answer (2 not sampled), the reply (2 sampled)
    episode = sample(lps=(-0.5, -0.1, 0.0, 0.0, -0.3, -0.2), mask=(1, 1, 0, 0, 1, 1), prompt=2)
    single = sample(lps=(-1.0, -2.0), prompt=2)
    lp_episode = [9.0, -0.5, -0.1, 7.0, 7.0, -0.4, -0.2]  # the call's logprobs agree; the reply's first does not
    assert tool_turn_kl([episode, single], [lp_episode, [9.0, -1.5, -2.5]]) == pytest.approx(k3(-0.4, -0.3) / 2)
    assert tool_turn_kl([single], [[9.0, -1.5, -2.5]]) is None  # no tool turn: nothing to judge


def test_kl_refuses_misaligned_trainer_logprobs_and_empty_masks() -> None:
    with pytest.raises(SampleShapeError, match="cover tokens"):
        mismatch_kl([sample()], [[-0.1, -0.2]])
    with pytest.raises(SampleShapeError, match="no token is under loss_mask"):
        mismatch_kl([sample(mask=(0, 0))], [[0.0] * 4])


def test_sample_shape_is_checked_once() -> None:
    with pytest.raises(SampleShapeError, match="must agree"):
        TrainSample(tokens=(1, 2, 3), response_length=2, loss_mask=(1,), rollout_log_probs=(-0.1, -0.2), reward=0.0,
                    group_index=0, rollout_key=0, weight_versions=(), status="completed")
    miles_like = SimpleNamespace(tokens=[1, 2, 3], response_length=1, loss_mask=[1], rollout_log_probs=[-0.1],
                                 reward={"correct": 1.0}, group_index=0, index=0, rollout_id=None,
                                 weight_versions=["0"], status=SimpleNamespace(value="completed"))
    with pytest.raises(SampleShapeError, match="not a number"):
        TrainSample.from_miles(miles_like)
    miles_like.reward = 1.0
    assert TrainSample.from_miles(miles_like).rollout_key == 0  # no rollout_id: the index (Miles' fallback)


def test_surprisal_is_the_mean_negative_logprob_of_sampled_tokens_only() -> None:
    episode = sample(lps=(-0.5, 0.0, -0.1), mask=(1, 0, 1))  # the 0.0 is a tool response's token: not sampled
    assert surprisal([episode, sample(lps=(-0.3,))]) == pytest.approx((0.5 + 0.1 + 0.3) / 3)
    assert surprisal([]) == 0.0


def test_reward_stats_are_mean_and_population_std() -> None:
    assert reward_stats([sample(1.0), sample(0.0)]) == (0.5, 0.5)


# --- planted bugs ------------------------------------------------------------------------------


def test_planted_bugs_keep_the_miles_shape() -> None:
    s = sample(lps=(-0.5, -0.1, -0.2))
    shifted, early = shift_logprobs(s), mask_one_early(s)
    assert shifted.rollout_log_probs == (0.0, -0.5, -0.1) and shifted.loss_mask == s.loss_mask
    assert early.response_length == 4 and early.loss_mask == (1, 1, 1, 0) and early.tokens == s.tokens
    assert set(PLANTED) == {"shift-logprobs", "mask-one-early"}


def test_synthetic_exact_logprobs_pass_and_each_planted_bug_fails() -> None:
    # a trainer that agrees with the engine to 1e-3 per token, on varied log-probs
    lps = (-2.3, -0.05, -0.7, -1.6, -0.01)
    s = sample(lps=lps, prompt=4)
    trainer_lp = [-3.0, -1.0, -4.0, *[v + 1e-3 for v in lps]]
    assert mismatch_kl([s], [trainer_lp]) <= KL_LIMIT
    for name, bug in PLANTED.items():
        assert mismatch_kl([bug(s)], [trainer_lp]) > KL_LIMIT, name


def test_recorded_real_step_passes_and_each_planted_bug_fails() -> None:
    samples, trainer_lps = load_step(RECORDED)
    assert len(samples) >= 8 and all(s.weight_versions == ("0",) for s in samples)
    assert mismatch_kl(samples, trainer_lps) <= KL_LIMIT
    for name, bug in PLANTED.items():
        kl = mismatch_kl([bug(s) for s in samples], trainer_lps)
        assert kl > 100 * KL_LIMIT, f"{name}: KL {kl:.3g} is too close to the limit to be a reliable catch"
