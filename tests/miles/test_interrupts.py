"""A process running the adapter's Miles rollout function, ended mid-train-call, leaves nothing
running, under Verifiers' own subprocess runtime (its harness programs and tool servers run in
sessions of their own): SIGTERM ends the process at once (its default action: Miles' process,
not the adapter's to handle), and the reaper ends what its episodes started. SIGINT, a
KeyboardInterrupt in Miles' main thread, ends it once the rollout function is closed (the class:
by its caller's `finally`; the legacy function: by the adapter's exit handler, which cancels the
call still in flight on the ABI's loop first, so its episodes end and the engine drops their
requests instead of the close waiting for the model). Both ABIs: the class awaited on the
process' loop, the legacy function from the main thread (its loop in a thread of its own)."""

from __future__ import annotations

import signal
import sys

import pytest

from adapter.episodes.prefork import RUNTIME_VAR
from benchmarks.stub import running
from tests.leftovers import EXIT_BOUND_S, interrupt


@pytest.mark.parametrize(("abi", "sig"), [("class", signal.SIGTERM), ("legacy", signal.SIGTERM),
                                          ("class", signal.SIGINT), ("legacy", signal.SIGINT)])
def test_a_miles_process_ended_mid_call_leaves_no_process(qwen3_tokenizer, tmp_path, monkeypatch, abi, sig) -> None:
    monkeypatch.setenv(RUNTIME_VAR, "subprocess")
    with running(delay=60.0) as (url, _):
        done = interrupt([sys.executable, "-m", "tests.miles.interrupted_run", url, str(qwen3_tokenizer), abi], sig,
                         tmp_path / "stderr.txt", at_least=10)
    # SIGTERM's default action: at once. SIGINT: the close (1 s idle); the bound is the CLI's
    # (tests/cli/test_interrupts.py), for a machine under load
    assert done.seconds_to_exit < (5 if sig == signal.SIGTERM else EXIT_BOUND_S), done.stderr[-3000:]
    assert done.left == [], f"{len(done.left)} of {done.in_flight} processes outlived the run: {done.left}"
