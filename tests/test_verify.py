"""The shared E2E verify function: passes a known-good dump, names each broken invariant."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from e2e.verify import VerificationError, expectation_for, load_samples, problems, verify

CODE_GOLF = expectation_for("code-golf-v1", groups=3, n=4)


def good_dump() -> list[dict[str, Any]]:
    """3 groups × 4 code-golf samples: one fastest pair per group shares 0.5."""
    samples = []
    for group in range(3):
        for i in range(4):
            fastest = 0.25 if i < 2 else 0.0
            rewards = {"correct": float(i % 2), "fastest": fastest, "most_concise": 0.5 if i == 0 else 0.0}
            samples.append({
                "group_index": group, "index": group * 4 + i, "status": "completed" if i else "truncated",
                "reward": sum(rewards.values()), "response_length": 3, "loss_mask": [1, 1, 1],
                "rollout_log_probs": [-0.1, -0.2, -0.3],
                "metadata": {"verifiers": {"rewards": rewards, "metrics": {"passed": float(i % 2)}}},
            })
    return samples


def test_known_good_dump_passes(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text("\n".join(json.dumps(s) for s in good_dump()))
    verify(load_samples(path), CODE_GOLF)


def _drop_member(d):
    del d[5]


def _nan_reward(d):
    d[0]["reward"] = math.nan


def _misaligned_mask(d):
    d[1]["loss_mask"] = [1, 1]


def _wrong_fastest(d):
    d[4]["metadata"]["verifiers"]["rewards"]["fastest"] = 0.5


def _extra_component(d):
    d[2]["metadata"]["verifiers"]["rewards"]["style"] = 0.0


def _bad_status(d):
    d[3]["status"] = "aborted"


def _non_binary_metric(d):
    d[3]["metadata"]["verifiers"]["metrics"]["passed"] = 0.5


def _no_pass(d):
    for s in d:
        s["metadata"]["verifiers"]["metrics"]["passed"] = 0.0


def _infinite_logprob(d):
    d[7]["rollout_log_probs"][0] = -math.inf


BREAKAGES = {
    "missing_group_member": (_drop_member, ["11 samples", "group sizes"]),
    "non_finite_reward": (_nan_reward, ["sample 0 (group 0): reward nan"]),
    "misaligned_mask": (_misaligned_mask, ["disagree: (3, 2, 3)"]),
    "wrong_fastest_sum": (_wrong_fastest, ["group 1: 'fastest' sums to 0.75, expected 0.5"]),
    "extra_reward_component": (_extra_component, ["reward components"]),
    "aborted_status": (_bad_status, ["only completed/truncated"]),
    "non_binary_metric": (_non_binary_metric, ["metric 'passed' is 0.5"]),
    "no_success": (_no_pass, ["0 successes, expected at least 1"]),
    "non_finite_logprob": (_infinite_logprob, ["non-finite"]),
}


@pytest.mark.parametrize("case", BREAKAGES)
def test_each_broken_invariant_is_named(case: str) -> None:
    dump = copy.deepcopy(good_dump())
    breaking, messages = BREAKAGES[case]
    breaking(dump)
    with pytest.raises(VerificationError) as caught:
        verify(dump, CODE_GOLF)
    for message in messages:
        assert message in str(caught.value)


def test_every_problem_is_listed_at_once() -> None:
    dump = copy.deepcopy(good_dump())
    _nan_reward(dump)
    _misaligned_mask(dump)
    assert len(problems(dump, CODE_GOLF)) == 2


def test_unknown_taskset_is_named() -> None:
    with pytest.raises(KeyError, match="known"):
        expectation_for("nope", groups=1, n=1)
