"""The echo-tool cassettes recorded on real SGLang (0.5.23 and 0.5.16, generations A and B: the
sglang-cpu lanes' `--record`) hold real multi-turn tool episodes: at least half the episodes have
a second turn whose prompt is the first turn's prompt + completion + a tool response, and SGLang's
radix cache served that whole first prompt (`meta_info.cached_tokens`). Replayed through the
adapter by tests/contract/test_cassettes.py like every cassette."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.judges.turns import later_turns, load_exchanges

CASSETTES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "cassettes").glob("sglang-*echo-tool-v1.jsonl"))


def test_every_real_sglang_line_recorded_tool_episodes() -> None:
    assert [p.name for p in CASSETTES] == sorted(f"sglang-{v}{g}-echo-tool-v1.jsonl" for v in ("0.5.16", "0.5.23")
                                                  for g in ("", "-b"))


@pytest.fixture(scope="module")
def tool_response_id(qwen3_tokenizer: Path) -> int:
    from transformers import AutoTokenizer

    return int(AutoTokenizer.from_pretrained(str(qwen3_tokenizer)).convert_tokens_to_ids("<tool_response>"))


@pytest.mark.parametrize("cassette", CASSETTES, ids=[p.stem for p in CASSETTES])
def test_recorded_tool_episodes_are_multi_turn_and_served_from_the_radix_cache(cassette: Path,
                                                                              tool_response_id: int) -> None:
    exchanges = load_exchanges(cassette)
    pairs = later_turns(exchanges)
    firsts = len(exchanges) - len({id(later) for _, later in pairs})
    assert pairs and 2 * len(pairs) >= firsts, f"{len(pairs)} second turns for {firsts} episodes"
    for previous, later in pairs:
        added = later.input_ids[len(previous.input_ids) + len(previous.output_ids):]
        assert tool_response_id in added, "the tokens between the turns hold no tool response"
        assert later.cached_tokens is not None and later.cached_tokens >= len(previous.input_ids)
