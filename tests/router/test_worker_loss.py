"""A worker killed mid-run behind the real router: the run finishes on the other worker, the
groups that lost their worker are dropped with a reason and replaced, nothing is lost or
duplicated, the exit status (3) and the summary say so, and the teardown's `abort_all` reaches
the live worker.

The router here keeps the dead worker in its ring (`--disable-circuit-breaker
--disable-health-check`): every trace hashed to it fails for the rest of the run, so the drops
are certain and the test shows the adapter's side alone. (With smg's defaults the circuit
breaker takes a worker out after 10 failed calls; docs/router.md.)
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from adapter.cli.commands import EXIT_DROPPED
from e2e.common.ports import free_port
from e2e.router.smg import ADAPTER_FLAGS, reference_engine, smg_router, started
from tests.router.cassettes import by_key, exchanges, generate_calls
from tests.router.commands import vf_sglang
from tests.router.conftest import CHAT, ROUTER_ENVS

pytestmark = pytest.mark.router
GROUPS, TURNS = 4, 3
KEEP_DEAD_WORKER = ("--disable-circuit-breaker", "--disable-health-check")


def _mid_episode_on(cassettes: Path, worker: str) -> bool:
    """Whether some trace has had some, not all, of its turns answered by `worker`."""
    if not any(cassettes.glob("*.jsonl")):
        return False
    try:
        traces = by_key(generate_calls(cassettes))
    except (ValueError, KeyError):  # the recorder is writing a line right now
        return False
    return any(0 < len(calls) < TURNS and all(c.worker == worker and c.status == 200 for c in calls)
               for calls in traces.values())


def _kill_when_mid_episode(workers, cassettes: Path, deadline: float, killed: list) -> None:
    """Kill the first worker seen mid-episode. Trace ids are random, so which worker a key hashes
    to is chance: waiting on one chosen worker misses it whenever every key lands on the other."""
    while time.monotonic() < deadline and not killed:
        for worker in workers:
            if _mid_episode_on(cassettes, worker.url):
                worker.kill()
                killed.append(worker)
                return
        time.sleep(0.05)


def test_a_worker_killed_mid_run(smg, logs, tiny_model, tmp_path) -> None:
    out, cassettes = tmp_path / "samples.jsonl", tmp_path / "cassettes"
    with started(reference_engine(free_port(), logs / "loss-a.log")) as first, \
            started(reference_engine(free_port(), logs / "loss-b.log")) as second, \
            started(smg_router([first.url, second.url], logs / "smg-loss.log",
                               extra=(*ADAPTER_FLAGS, *KEEP_DEAD_WORKER))) as router:
        killed: list = []
        killer = threading.Thread(target=_kill_when_mid_episode,
                                  args=((first, second), cassettes, time.monotonic() + 300, killed), daemon=True)
        killer.start()
        ran = vf_sglang("rollout", "--sglang-url", router.url, "--config", str(CHAT), "--env-source-dir",
                        str(ROUTER_ENVS), "--model", "Qwen/Qwen3-0.6B", "--tokenizer", str(tiny_model),
                        "--groups", str(GROUPS), "--n", "1", "--max-response-len", "16",
                        "--router-policy", "consistent_hashing", "--quiet", "--record", str(cassettes),
                        "--out", str(out), timeout=600)
        killer.join(timeout=5)
    assert killed, f"no trace was ever mid-episode on a worker: {ran.output[-2000:]}"
    victim = killed[0]
    assert ran.code == EXIT_DROPPED, ran.output[-3000:]
    summary = next(line for line in ran.output.splitlines() if " samples in " in line)
    print(f"worker loss: {summary}")
    assert f" samples in {GROUPS} groups" in summary and "dropped and replaced (" in summary, summary

    samples = [json.loads(line) for line in out.read_text().splitlines()]
    traces = by_key(generate_calls(cassettes))
    # one kept trace per group (n = 1); a trace whose turn is no extension of the last splits into
    # branches: sibling samples with one key, one group and a rollout_id each
    group_of = {s["routing_key"]: {t["group_index"] for t in samples if t["routing_key"] == s["routing_key"]}
                for s in samples}
    kept = set(group_of)
    assert len(kept) == GROUPS and all(len(groups) == 1 for groups in group_of.values()), group_of
    assert sorted(next(iter(groups)) for groups in group_of.values()) == list(range(GROUPS))  # nothing duplicated
    keys = Counter(s["routing_key"] for s in samples)
    assert all(s.get("rollout_id") is not None for s in samples if keys[s["routing_key"]] > 1)
    for key in kept:  # every kept trace ran all its turns, answered, on one worker
        assert [c.status for c in traces[key]] == [200] * TURNS and len({c.worker for c in traces[key]}) == 1
    failed = {key for key, calls in traces.items() if any(c.status != 200 for c in calls)}
    assert failed and not failed & kept, "the traces that lost their worker are dropped, not kept"
    dropped = sum(int(n) for n in re.findall(r"×(\d+)", summary.split("dropped and replaced (")[1].split(")")[0]))
    # each group counted as dropped lost its trace's worker (n = 1); a failing trace still retrying when
    # the batch was complete is cancelled with the other pending episodes, not counted
    assert 1 <= dropped <= len(failed), (dropped, failed)

    aborts = [e for e in exchanges(cassettes) if e["request"]["path"] == "/abort_request"]
    # the teardown's abort_all: the live worker took it (a dead one's refused connection records nothing)
    assert [e["response"]["status"] for e in aborts] == [200]
    assert "did not accept the abort" in ran.output and victim.url in ran.output  # the dead one is named
