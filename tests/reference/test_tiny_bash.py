"""The default-harness lessons (`adapter.reference.tiny_bash`) are the token ids Verifiers' default harness
and Renderers produce: the system turn and tool block, the bash call Renderers parse, the command's
output bridged back as a tool message."""

from __future__ import annotations

import json
import random

import pytest

from adapter.reference import tiny_bash, tiny_tools
from adapter.reference.tiny_model import RECIPE
from e2e.tiny.variants import default_harness

WORDS = RECIPE["train"]["tools"]["words"]
TOOLS = [json.loads(spec) for spec in tiny_bash.TOOL_SPECS]


def _ids(tokenizer: object, text: str) -> list[int]:
    return tiny_tools.encode(tokenizer, text)


@pytest.mark.parametrize("word", WORDS)
def test_turn_one_is_renderers_rendering_of_the_harness_prompt_and_its_three_tools(tokenizer, renderer, word) -> None:
    question = tiny_tools.QUESTION_TEMPLATE.format(word=word)
    rendered = renderer.render([{"role": "system", "content": tiny_bash.HARNESS_PROMPT},
                                {"role": "user", "content": question}], tools=TOOLS, add_generation_prompt=True)
    assert list(rendered.token_ids) == _ids(tokenizer, tiny_bash.turn1_prompt(word))


def test_the_bash_call_parses_and_its_output_comes_back_as_renderers_bridge(tokenizer, renderer) -> None:
    for word in WORDS:
        prompt = _ids(tokenizer, tiny_bash.turn1_prompt(word))
        call = _ids(tokenizer, tiny_bash.bash_call(word) + tiny_tools.END_OF_TURN)
        parsed = renderer.parse_response(call, tools=TOOLS)
        assert [(c.name, c.arguments, c.status.name) for c in parsed.tool_calls] == [
            ("bash", {"command": f"echo {word}"}, "OK")]
        output = tiny_bash.command_output(word)
        bridged = renderer.bridge_to_next_turn(
            prompt, call, [{"role": "tool", "content": output, "tool_call_id": "call_0"}], tools=TOOLS)
        assert bridged is not None
        assert list(bridged.token_ids) == prompt + call + _ids(tokenizer, tiny_tools.bridge(output))


def test_an_episode_scores_only_the_models_turns_bash_then_stamp_then_reply(tokenizer) -> None:
    bash = default_harness(RECIPE)["train"]["bash"]
    calls = {True: 0, False: 0}
    for seed in range(20):
        ids, spans = tiny_bash.bash_episode(tokenizer, random.Random(seed), bash)
        texts = [tokenizer.decode(ids[a:b]) for a, b in spans]  # type: ignore[attr-defined]
        called_bash = '"name": "bash"' in texts[0]
        calls[called_bash] += 1
        assert len(texts) == (3 if called_bash else 2)
        assert '"name": "echo_tools_stamp"' in texts[-2] and texts[-1].startswith("STAMP-")
        assert all(text.endswith(tiny_tools.END_OF_TURN) for text in texts)
        assert spans[-1][1] == len(ids)
    assert calls[True] and calls[False]  # the teacher sometimes skips bash


def test_the_variant_keeps_the_architecture_so_a_server_can_load_it() -> None:
    variant = default_harness(RECIPE)
    assert variant["model"] == RECIPE["model"] and variant["save_dtype"] == RECIPE["save_dtype"]
    assert "bash" not in RECIPE["train"]  # the recipe's own model is unchanged
