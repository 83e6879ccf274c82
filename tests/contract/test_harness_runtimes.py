"""The same episode under both harness runtimes: identical samples.

The same seeded tasks through Miles' class, once with Verifiers' own subprocess runtime and once
with the pre-forked one, on the installed verifiers (every matrix cell runs it; the fast lane's
locked pair is contract-vf020's, so the fast lane leaves it to that cell: 31 CPU-s of its
budget, Verifiers' own runtime costing 1.5-5.6 CPU-s an episode), against a scripted engine that answers
by the prompt: token ids, loss masks, log-probs, rewards and statuses must be equal, sample for
sample. Three tasksets: one model turn (arith-v1), a tool server started per rollout
(echo-tool-v1: its server, its readiness probe and the program all go through the runtime), and a group
reward (group-v1).
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path
from typing import Any

import pytest

from adapter.bridge.serve import served
from adapter.episodes import prefork
from adapter.episodes.generations import installed
from adapter.miles.abi import RolloutFnConstructorInput, RolloutFnTrainInput
from adapter.miles.binding import VerifiersRolloutFn
from adapter.samples.conversion import flatten
from conformance.engine import ScriptedEngine, asgi_app
from conformance.plugin import loaded_tokenizer
from conformance.policies import TextPolicy
from tests.miles.test_episodes import arith_policy, miles_args, tool_policy

pytestmark = pytest.mark.skipif(
    os.environ.get("VF_SGLANG_RUNTIME_EQUIVALENCE") != "1",
    reason="every matrix cell runs it (tox.ini sets VF_SGLANG_RUNTIME_EQUIVALENCE=1 there; contract-vf020 holds the "
           "fast lane's verifiers/renderers pair)")


def _group_policy(tokenizer: Any) -> TextPolicy:
    verbose = itertools.count()
    return TextPolicy(tokenizer, lambda prompt: (
        re.search(r"Say the word '(\w+)'", prompt).group(1) if next(verbose) % 2 else "Sure, here it is!"))


# taskset → (its policy, its Miles args, the kinds of program its episodes fork: a harness
# program is a script ("path"), a tool server a module ("module"), its readiness probe a `-c`
# program ("code"))
CASES = {
    "arith-v1": (arith_policy, {}, {"path"}),
    "echo-tool-v1": (tool_policy, {}, {"path", "module", "code"}),
    "group-v1": (_group_policy, {"reward_key": "shortest"}, {"path"}),
}


def _warm_kinds() -> set[str]:
    """What the pool's zygotes run, read off their command lines (`PYTHON zygote_program.py FD KIND TARGET ...`)."""
    return {Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[3].decode()
            for pid in prefork.process_pool().zygote_pids()}


def _samples(out: Any) -> list[tuple[Any, ...]]:
    return sorted((s.metadata["verifiers"]["task_index"], tuple(s.tokens), tuple(s.loss_mask),
                   tuple(s.rollout_log_probs), repr(s.reward), s.status.value)
                  for group in out.samples for s in flatten(group))


async def _run(qwen3_tokenizer: Any, tokenizer: Any, taskset: str) -> tuple[list[tuple[Any, ...]], set[str]]:
    """One Miles train call of the taskset against the scripted engine, served on a real port
    (generation B's TrainClient reaches the bridge over HTTP: nothing in process is mocked): its
    samples, and the kinds of program the zygotes run before the rollout function closes (its
    close ends them when no other loaded environment holds the pool)."""
    policy, extra, _ = CASES[taskset]
    engine = ScriptedEngine(default=policy(tokenizer))
    async with served(asgi_app(engine)) as url:
        engine.url = url
        args = miles_args(qwen3_tokenizer, engine, taskset, rollout_batch_size=1,
                          sglang_enable_deterministic_inference=True,
                          verifiers_config=str(installed().bundled_config(taskset)), **extra)
        function = VerifiersRolloutFn(RolloutFnConstructorInput(args, None))
        try:
            return _samples(await function(RolloutFnTrainInput(rollout_id=0))), _warm_kinds()
        finally:
            await function.aclose()


@pytest.mark.parametrize("taskset", list(CASES))
async def test_samples_are_identical_under_both_harness_runtimes(qwen3_tokenizer, monkeypatch, taskset) -> None:
    tokenizer = loaded_tokenizer(qwen3_tokenizer)
    prefork.close_process_pool()  # what an earlier test in this process left warm
    monkeypatch.setenv(prefork.RUNTIME_VAR, "subprocess")
    plain, none = await _run(qwen3_tokenizer, tokenizer, taskset)
    assert not none, "Verifiers' own runtime started a zygote"
    monkeypatch.setenv(prefork.RUNTIME_VAR, "prefork")
    warm, kinds = await _run(qwen3_tokenizer, tokenizer, taskset)
    assert kinds == CASES[taskset][2], "the pre-forked runtime did not fork what the episode runs"
    prefork.close_process_pool()
    assert len(plain) == 2 and all(sample[5] == "completed" for sample in plain)
    assert warm == plain
