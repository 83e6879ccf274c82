"""The shared E2E verify function: passes a known-good dump, names each broken invariant.

`BREAKAGES` holds one case per invariant of the E2E it replaces (Miles' own verifiers E2E; docs/contract.md §7), each
breaking exactly that invariant of an otherwise good code-golf dump.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

from e2e.judges.verify import VerificationError, expectation_for, load_samples, problems, verify

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
                "metadata": {"verifiers": {"rewards": rewards,
                                           "metrics": {"passed": float(i % 2), "latency": 0.01 * (i + 1)},
                                           "stop_condition": "agent_completed"}},
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


def _moved_member(d):
    d[8]["group_index"] = 1  # 12 samples still, but counts {0: 4, 1: 5, 2: 3}


def _shifted_groups(d):
    for s in d:
        s["group_index"] += 1  # {1: 4, 2: 4, 3: 4}: right sizes, wrong indices


def _no_completed(d):
    for s in d:
        s["status"] = "truncated"


def _failed_status(d):
    d[6]["status"] = "failed"


def _missing_component(d):
    del d[2]["metadata"]["verifiers"]["rewards"]["most_concise"]


def _error_in_metadata(d):
    d[9]["metadata"]["verifiers"]["error"] = {"type": "ProviderError", "message": "engine 400"}


def _infinite_latency(d):
    d[10]["metadata"]["verifiers"]["metrics"]["latency"] = math.inf


def _missing_latency(d):
    del d[11]["metadata"]["verifiers"]["metrics"]["latency"]


def _wrong_response_length(d):
    d[2]["response_length"] = 4


BREAKAGES = {
    "missing_group_member": (_drop_member, ["11 samples", "group_index counts"]),
    "member_moved_to_another_group": (_moved_member, ["group_index counts {0: 4, 1: 5, 2: 3}"]),
    "group_indices_not_from_zero": (_shifted_groups, ["group_index counts {1: 4, 2: 4, 3: 4}, expected {0: 4"]),
    "non_finite_reward": (_nan_reward, ["sample 0 (group 0): reward nan"]),
    "misaligned_mask": (_misaligned_mask, ["disagree: (3, 2, 3)"]),
    "response_length_disagrees": (_wrong_response_length, ["disagree: (3, 3, 4)"]),
    "wrong_fastest_sum": (_wrong_fastest, ["group 1: 'fastest' sums to 0.75, expected 0.5"]),
    "extra_reward_component": (_extra_component, ["reward components"]),
    "missing_reward_component": (_missing_component, ["reward components ['correct', 'fastest'] !="]),
    "aborted_status": (_bad_status, ["only completed/truncated"]),
    "failed_status": (_failed_status, ["only completed/truncated"]),
    "no_completed_sample": (_no_completed, ["no completed sample"]),
    "non_binary_metric": (_non_binary_metric, ["metric 'passed' is 0.5"]),
    "no_success": (_no_pass, ["0 successes, expected at least 1"]),
    "non_finite_logprob": (_infinite_logprob, ["non-finite"]),
    "non_finite_latency": (_infinite_latency, ["metric 'latency' is inf, expected a finite number"]),
    "missing_latency": (_missing_latency, ["metric 'latency' is None, expected a finite number"]),
    "error_in_metadata": (_error_in_metadata, ["sample 9 (group 2): metadata carries an error"]),
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


# ---- Miles' own dump (`--dump-details DIR` → DIR/rollout_data/0.pt), as the GPU plan's Miles variant
# verifies it: built here on CPU from real `Sample`s (the adapter's class has Miles' fields exactly) and
# saved the way `miles/ray/rollout/debug_data.py:save_debug_rollout_data` saves it. torch writes and reads
# the dump: it is in the `demo` group, which the e2e lane installs and the fast lane leaves out.
needs_torch = [pytest.mark.e2e, pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                                    reason="needs torch (the demo group: uv sync, tox -e e2e)")]


def with_torch(test):
    for mark in needs_torch:
        test = mark(test)
    return test


def miles_samples() -> list[dict[str, Any]]:
    """3 groups × 4 code-golf samples as `Sample.to_dict()` rows, shaped as the adapter builds them."""
    from adapter.samples.sample_type import Sample

    rows = []
    for group in range(3):
        for i in range(4):
            fastest = 0.5 if i == 1 else 0.0  # one winner per group (weight 0.5)
            rewards = {"correct": float(i % 2), "fastest": fastest, "most_concise": 0.5 if i == 3 else 0.0}
            response = [151644 + i, 872, 198, 151645][: 2 + i % 3]
            sample = Sample(
                group_index=group, index=group * 4 + i, prompt=[{"role": "user", "content": "Print 5050."}],
                tokens=[151644, 872, 198, *response], response="```python\nprint(5050)\n```",
                response_length=len(response), label=None, reward=sum(rewards.values()),
                loss_mask=[1] * len(response), rollout_log_probs=[-0.25] * len(response),
                status=Sample.Status.COMPLETED if i else Sample.Status.TRUNCATED,
                routing_key=f"trace-{group}-{i}", weight_versions=["0"],
                metadata={"verifiers": {"branch": 0, "task": {"idx": group}, "rewards": rewards,
                                        "metrics": {"passed": float(i % 2), "latency": 0.02 + 0.01 * i},
                                        "stop_condition": "agent_completed"}},
            )
            rows.append(sample.to_dict())
    return rows


def save_miles_dump(path: Path, samples: list[dict[str, Any]], *, rollout_id: int = 0) -> Path:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(dict(rollout_id=rollout_id, metadata={}, samples=samples), path)
    return path


@with_torch
def test_a_good_miles_dump_passes(tmp_path: Path) -> None:
    from e2e.judges.verify import verify_miles_dump

    path = save_miles_dump(tmp_path / "dump" / "rollout_data" / "0.pt", miles_samples())
    assert len(verify_miles_dump(path, CODE_GOLF)) == 12


def _mask_one_short(d):
    d[5]["loss_mask"] = d[5]["loss_mask"][:-1]


def _group_of_three(d):
    d[7]["group_index"] = 2  # {0: 4, 1: 3, 2: 5}


def _fastest_sums_to_one(d):
    d[0]["metadata"]["verifiers"]["rewards"]["fastest"] = 0.5  # group 0: two winners of 0.5


def _error_key_even_none(d):
    d[4]["metadata"]["verifiers"]["error"] = None


MILES_BREAKAGES = {
    "loss_mask_one_short": (_mask_one_short, ["sample 5 (group 1): rollout_log_probs, loss_mask, response_length "
                                              "disagree: (3, 2, 3)"]),
    "group_of_three": (_group_of_three, ["group_index counts {0: 4, 1: 3, 2: 5}, expected {0: 4, 1: 4, 2: 4}"]),
    "fastest_sums_to_one": (_fastest_sums_to_one, ["group 0: 'fastest' sums to 1.0, expected 0.5"]),
    "error_key_present": (_error_key_even_none, ["sample 4 (group 1): metadata['verifiers'] has an 'error' key"]),
}


@with_torch
@pytest.mark.parametrize("case", MILES_BREAKAGES)
def test_each_broken_miles_dump_is_named(case: str, tmp_path: Path) -> None:
    from e2e.judges.verify import verify_miles_dump

    samples = miles_samples()
    breaking, messages = MILES_BREAKAGES[case]
    breaking(samples)
    path = save_miles_dump(tmp_path / "0.pt", samples)
    with pytest.raises(VerificationError) as caught:
        verify_miles_dump(path, CODE_GOLF)
    assert f"Miles dump {path} verification failed" in str(caught.value)
    for message in messages:
        assert message in str(caught.value)
    assert len(str(caught.value).splitlines()) == 1 + len(messages)  # only the planted breakage


@with_torch
def test_a_dump_of_another_rollout_or_shape_is_named(tmp_path: Path) -> None:
    from e2e.judges.verify import load_miles_dump, miles_dump_problems

    other = load_miles_dump(save_miles_dump(tmp_path / "3.pt", miles_samples(), rollout_id=3))
    assert miles_dump_problems(other, CODE_GOLF) == ["the dump's rollout_id is 3, expected 0"]
    assert miles_dump_problems([1, 2], CODE_GOLF) == [
        "not a Miles rollout dump (a dict with a 'samples' list): got list"]


@with_torch
def test_the_cli_verifies_a_miles_dump_and_fails_a_bad_one(tmp_path: Path, capsys) -> None:
    from e2e.judges.verify import main

    good = save_miles_dump(tmp_path / "good" / "0.pt", miles_samples())
    args = ["--env", "code-golf-v1", "--groups", "3", "--n", "4"]
    assert main(["--miles-dump", str(good), *args]) == 0
    assert f"verified 12 samples of code-golf-v1 (3 groups × 4) in Miles' dump {good}" in capsys.readouterr().out
    samples = miles_samples()
    _mask_one_short(samples)
    assert main(["--miles-dump", str(save_miles_dump(tmp_path / "bad" / "0.pt", samples)), *args]) == 1
    assert "disagree: (3, 2, 3)" in capsys.readouterr().out
