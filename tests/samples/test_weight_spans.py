"""Weight versions per model turn at absolute offsets (adapter.samples.weight_spans): the shape
Miles #1891's `WeightVersionsPerCall` holds, built from the bridge's per-call records."""

from __future__ import annotations

import httpx
import pytest

from adapter.bridge.handler import create_app
from adapter.bridge.stats import TurnVersions
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from adapter.samples.weight_spans import model_turns, turn_spans
from conformance.engine import Completion

P, S = False, True  # a prompt/tool token, a sampled token


def call(start: int, length: int, *spans: tuple[str, int, int]) -> TurnVersions:
    return TurnVersions(start, length, spans)


CASES = [
    # (id, sampled mask, the session's calls in order, the spans per model turn)
    ("one_turn", [P, P, S, S], [call(2, 2, ("7", 0, 2))], [[("7", 2, 4)]]),
    ("tool_turns", [P, P, S, S, P, P, S, P, S, S],
     [call(2, 2, ("1", 0, 2)), call(6, 1, ("1", 0, 1)), call(8, 2, ("1", 0, 2))],
     [[("1", 2, 4)], [("1", 6, 7)], [("1", 8, 10)]]),
    ("update_mid_answer", [P, S, S, S], [call(1, 3, ("2", 0, 1), ("3", 1, 3))], [[("2", 1, 2), ("3", 2, 4)]]),
    ("engine_without_versions", [P, S, P, S], [call(1, 1), call(3, 1)], [[], []]),
    ("a_turn_no_call_matches", [P, S, P, S], [call(3, 1, ("5", 0, 1))], [[], [("5", 3, 4)]]),
    ("a_retried_call_is_skipped", [P, S, S], [call(1, 2, ("4", 0, 2)), call(1, 2, ("5", 0, 2))],
     [[("4", 1, 3)]]),
    ("spans_clipped_to_the_turn", [P, S, S, P], [call(1, 3, ("6", 0, 3))], [[("6", 1, 3)]]),
    ("no_sampled_tokens", [P, P], [call(2, 0)], []),
]


@pytest.mark.parametrize(("mask", "calls", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_model_turn_gets_its_calls_spans_at_absolute_offsets(mask, calls, expected) -> None:
    assert turn_spans(mask, calls) == expected
    assert len(turn_spans(mask, calls)) == len(model_turns(mask))


async def test_the_bridge_records_where_each_answer_starts(sglang_mock) -> None:
    engine = SGLangClient(sglang_mock.url)
    app = create_app(Settings(), engine, model="m")
    sglang_mock.script(Completion([40, 41], [-0.3, -0.2]), Completion([42], [-0.1]))
    bodies = [[1, 2, 3], [1, 2, 3, 40, 41, 7, 8]]  # the second turn's prompt: all before its answer
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bridge") as client:
        for token_ids in bodies:
            body = {"model": "m", "token_ids": token_ids, "sampling_params": {"max_tokens": 4, "logprobs": 1}}
            response = await client.post("/inference/v1/generate", json=body, headers={"X-Session-ID": "t"})
            assert response.status_code == 200
    await engine.aclose()
    turns = app.state.bridge.stats.get("t").turns
    assert turns == [call(3, 2, ("default", 0, 2)), call(7, 1, ("default", 0, 1))]
    assert turn_spans([P, P, P, S, S, P, P, S], turns) == [[("default", 3, 5)], [("default", 7, 8)]]
