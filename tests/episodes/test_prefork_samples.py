"""The same episode under both harness runtimes: identical samples.

The same seeded tasks through Miles' class, once with Verifiers' own subprocess runtime and once
with the pre-forked one (generation A: verifiers 0.2.x), against a scripted engine that answers
by the prompt: token ids, loss masks, log-probs, rewards and statuses must be equal, sample for
sample. Three tasksets: one model turn (arith-v1), a tool server started per rollout
(echo-tool-v1: its server, the probe and the program all go through the runtime), and a group
reward (group-v1).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from renderers.base import load_tokenizer

from adapter.episodes import prefork
from adapter.miles.abi import RolloutFnConstructorInput, RolloutFnTrainInput
from adapter.miles.binding import VerifiersRolloutFn
from adapter.samples.conversion import flatten
from conformance.policies import TextPolicy
from tests.rollout.test_episodes import arith_policy, miles_args, tool_policy


def _group_policy(tokenizer: Any) -> TextPolicy:
    verbose = itertools.count()
    return TextPolicy(tokenizer, lambda prompt: (
        re.search(r"Say the word '(\w+)'", prompt).group(1) if next(verbose) % 2 else "Sure, here it is!"))


CASES = {
    "arith-v1": (arith_policy, {}),
    "echo-tool-v1": (tool_policy, {}),
    "group-v1": (_group_policy, {"reward_key": "shortest"}),
}


def _samples(out: Any) -> list[tuple[Any, ...]]:
    return sorted((s.metadata["verifiers"]["task_index"], tuple(s.tokens), tuple(s.loss_mask),
                   tuple(s.rollout_log_probs), repr(s.reward), s.status.value)
                  for group in out.samples for s in flatten(group))


async def _run(qwen3_tokenizer: Any, sglang_mock: Any, tokenizer: Any, taskset: str) -> list[tuple[Any, ...]]:
    policy, extra = CASES[taskset]
    sglang_mock.default = policy(tokenizer)
    args = miles_args(qwen3_tokenizer, sglang_mock, taskset, rollout_batch_size=1,
                      sglang_enable_deterministic_inference=True, **extra)
    function = VerifiersRolloutFn(RolloutFnConstructorInput(args, None))
    try:
        return _samples(await function(RolloutFnTrainInput(rollout_id=0)))
    finally:
        await function.aclose()


@pytest.mark.parametrize("taskset", list(CASES))
async def test_samples_are_identical_under_both_harness_runtimes(qwen3_tokenizer, sglang_mock, monkeypatch,
                                                                 taskset) -> None:
    tokenizer = load_tokenizer(str(qwen3_tokenizer))
    prefork.close_process_pool()  # what an earlier test in this process left warm
    monkeypatch.setenv(prefork.RUNTIME_VAR, "subprocess")
    plain = await _run(qwen3_tokenizer, sglang_mock, tokenizer, taskset)
    assert not prefork.process_pool().zygote_pids(), "Verifiers' own runtime started a zygote"
    monkeypatch.setenv(prefork.RUNTIME_VAR, "prefork")
    warm = await _run(qwen3_tokenizer, sglang_mock, tokenizer, taskset)
    assert prefork.process_pool().zygote_pids(), "the pre-forked runtime ran nothing"
    prefork.close_process_pool()
    assert len(plain) == 2 and all(sample[5] == "completed" for sample in plain)
    assert warm == plain
