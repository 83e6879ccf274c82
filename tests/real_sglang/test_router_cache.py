"""Behind the real router, the prefix cache is why the adapter routes by trace: two real SGLang
workers behind smg, the same seeded multi-turn tool episodes (echo-tool-v1) under
`consistent_hashing` and `round_robin` (`e2e.router.cache`; the figures are in docs/router.md).

The two workers are the tests' server (`real_sglang`: in the sglang-cpu lane, the lane's own) and a
second one this module starts and ends (the only test that needs two). Needs smg (the sglang-cpu
lanes install it) and VF_SGLANG_CPU=1; measured on the main lane's SGLang (0.5.23) only: the routing
is smg's, and two more echo-tool runs are not worth a second lane.

Nothing here depends on scheduling: one trace per task (no twin warms the other worker's cache)
and one rollout at a time (a trace's next turn is the router's next call, so round_robin moves
every one of them), on deterministic workers with fixed seeds. The whole-run hit rate is not judged
(the workers' first calls find both caches cold, whichever policy sends them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.router.cache import POLICIES, TASKS, CacheFigures, markdown, measure
from e2e.router.smg import SMG_VERSION, smg_binary
from e2e.sglang_cpu.fixtures import ENABLE_ENV, lane_enabled
from e2e.sglang_cpu.server import DEFAULT_VERSION, serving

pytestmark = pytest.mark.sglang_cpu


@pytest.fixture(scope="module")
def workers(real_sglang) -> Iterator[list[str]]:
    if real_sglang.version != DEFAULT_VERSION:
        pytest.skip(f"measured on SGLang {DEFAULT_VERSION} (tox -e sglang-cpu), not {real_sglang.version}")
    if not lane_enabled():
        pytest.skip(f"starts a second real SGLang on CPU: set {ENABLE_ENV}=1 (tox -e sglang-cpu)")
    if smg_binary() is None:
        pytest.fail(f"needs smg=={SMG_VERSION} beside this Python: `uv pip install smg=={SMG_VERSION}` (the "
                    "sglang-cpu lanes install it), or name the binary in VF_SGLANG_SMG", pytrace=False)
    with serving(real_sglang.version, deterministic=True, model_dir=real_sglang.model_dir) as second:
        yield [real_sglang.url, second.url]


@pytest.fixture(scope="module")
def runs(workers: list[str], real_sglang, tmp_path_factory: pytest.TempPathFactory
         ) -> dict[str, tuple[CacheFigures, Path]]:
    run_dir = tmp_path_factory.mktemp("router-cache")
    found = {policy: measure(workers, policy, tokenizer=real_sglang.model_dir, run_dir=run_dir)
             for policy in POLICIES}
    print("\n" + markdown([figures for figures, _ in found.values()]))
    return found


def _samples(path: Path) -> list[tuple[int, ...]]:
    return sorted(tuple(json.loads(line)["tokens"]) for line in path.read_text().splitlines())


def test_consistent_hashing_keeps_every_turn_of_a_trace_on_one_worker(runs) -> None:
    hashed, _ = runs["consistent_hashing"]
    assert hashed.later_turns >= TASKS - 1, f"too few traces called the tool to judge routing: {hashed}"
    assert hashed.later_same_worker == hashed.later_turns, hashed
    assert hashed.later_prefix_served == hashed.later_turns, hashed


def test_round_robin_sends_every_later_turn_to_the_worker_that_never_saw_its_trace(runs) -> None:
    scattered, _ = runs["round_robin"]
    assert scattered.later_turns >= TASKS - 1, scattered
    assert scattered.later_same_worker == 0, scattered
    assert scattered.later_prefix_served == 0, scattered


def test_consistent_hashing_gets_the_higher_prefix_cache_hit_rate(runs) -> None:
    (hashed, _), (scattered, _) = runs["consistent_hashing"], runs["round_robin"]
    assert hashed.later_hit_rate > scattered.later_hit_rate, markdown([hashed, scattered])
    recomputed = [f.later_prompt_tokens - f.later_cached_tokens for f in (hashed, scattered)]
    assert recomputed[0] < recomputed[1], markdown([hashed, scattered])


def test_the_policy_changes_where_turns_run_never_what_they_sample(runs) -> None:
    # deterministic workers, the same seeds: the same episodes under either policy
    (_, hashed), (_, scattered) = runs["consistent_hashing"], runs["round_robin"]
    assert _samples(hashed) == _samples(scattered)
