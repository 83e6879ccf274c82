"""An interrupted `vf-sglang rollout` ends within seconds and leaves nothing running, under
both harness runtimes: SIGTERM (a pod eviction) and Ctrl-C cancel the episodes in flight and
close what they opened; a SIGKILL, which nothing can catch, is cleaned up after by the reaper
(adapter.episodes.reaper). The engine answers after 60 s, so every episode is in flight when
the signal comes."""

from __future__ import annotations

import signal
import sys

import pytest

from benchmarks.stub import running
from tests.leftovers import EXIT_BOUND_S, interrupt
from tests.miles.test_episodes import ENVS


@pytest.fixture(scope="module")
def slow_engine():
    with running(delay=60.0) as (url, _):
        yield url


# (runtime, signal, taskset, processes in flight before the signal: the CLI, its reaper, and
# harness programs, tool servers and zygotes)
CASES = [
    ("subprocess", signal.SIGTERM, "echo-tool-v1", 10),
    ("prefork", signal.SIGINT, "arith-v1", 9),
    ("subprocess", signal.SIGKILL, "arith-v1", 9),
]


@pytest.mark.parametrize(("runtime", "sig", "taskset", "in_flight"), CASES,
                         ids=[f"{r}-{signal.Signals(s).name}-{t}" for r, s, t, _ in CASES])
def test_an_interrupted_rollout_ends_within_seconds_and_leaves_no_process(
        slow_engine, qwen3_tokenizer, tmp_path, runtime, sig, taskset, in_flight) -> None:
    argv = [sys.executable, "-m", "adapter.cli", "rollout", "--sglang-url", slow_engine,
            "--config", str(ENVS / f"{taskset}.toml"), "--model", "Qwen/Qwen3-0.6B",
            "--tokenizer", str(qwen3_tokenizer), "--groups", "4", "--n", "2", "--quiet",
            "--harness-runtime", runtime, "--out", str(tmp_path / "out.jsonl")]
    done = interrupt(argv, sig, tmp_path / "stderr.txt", at_least=in_flight)
    assert done.seconds_to_exit < EXIT_BOUND_S, done.stderr[-3000:]
    assert done.left == [], f"{len(done.left)} of {done.in_flight} processes outlived the run: {done.left}"
    if sig == signal.SIGKILL:
        assert done.status == -signal.SIGKILL
    else:
        assert done.status == 128 + sig, done.stderr[-3000:]
        assert done.stderr.splitlines()[-1] == (f"vf-sglang: interrupted by {signal.Signals(sig).name}: the "
                                                "episodes in flight were cancelled"), done.stderr[-3000:]
        assert "KeyboardInterrupt" not in done.stderr
    assert not (tmp_path / "out.jsonl").exists()
