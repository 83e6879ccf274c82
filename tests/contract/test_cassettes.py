"""Every cassette under fixtures/cassettes/ replays through the adapter with no engine running.

A cassette is a recorded run (`vf-sglang demo|rollout|serve-bridge|check --record DIR`, see
docs/sglang.md): dropping one recorded against real SGLang on a GPU box into the directory
makes it a test here, in the fast lane and in every matrix cell. Replay is strict
(`sglang_replay`): each recorded `/generate` request is sent again through the adapter's
SGLang client, answered from the cassette, and the adapter's reading of every answer (token
ids, logprobs, finish reason, or the error type) must equal the reading recorded with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.replay import replay_generate_calls

pytestmark = pytest.mark.contract

CASSETTES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "cassettes").glob("*.jsonl"))


def test_there_are_cassettes_to_replay() -> None:
    assert CASSETTES, "fixtures/cassettes/ holds no *.jsonl cassette"


@pytest.mark.parametrize("cassette", CASSETTES, ids=[p.stem for p in CASSETTES])
async def test_cassette_replays_through_the_adapter(cassette: Path, sglang_replay) -> None:
    replay = sglang_replay(cassette)
    generate_calls = [e for e in replay.cassette.exchanges if e["request"]["path"] == "/generate"]
    assert generate_calls, f"{cassette.name} records no /generate exchange"
    assert await replay_generate_calls(replay) == []
    assert replay.served == len(generate_calls)
