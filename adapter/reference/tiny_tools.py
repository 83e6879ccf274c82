"""The tiny model's tool-calling lessons: echo-tool-v1's two turns, rendered as the engine sees them.

Consumes: the real Qwen3 tokenizer and the recipe's `train.tools` section (see `tiny_model.py`).
Emits: training episodes (token ids, the spans the model writes) for `tiny_train.py`, and the
distances the planted copy heads must look back (`copy_offsets`).

The episode. echo-tool-v1 asks the model to call `echo_tools_stamp(word)` and to reply with the
stamp the tool returns (an HMAC the model cannot guess). Turn 1's prompt is Renderers' Qwen3
rendering of the tool block and the user message; the model answers with a Qwen3 tool call
(`<tool_call>\\n{json}\\n</tool_call><|im_end|>`, the format Renderers parse). Turn 2's prompt is
turn 1's prompt ids + the call's ids + Renderers' bridge ids (the tool response and a new
generation prompt), each piece tokenized on its own exactly as the engine receives them
(`tests/reference/test_tiny_model.py` checks both turns against Renderers); the model answers with the
stamp it reads there. One episode is one sequence: both turns are scored, the prompt and the
tool's bridge are not.

The noisy teacher (`behaviour`), so a policy has something to learn: in turn 1 it calls the tool
(prob. `call`) with the task's word (prob. `right_word`, else another word), or replies at once
with a made-up stamp (or, with `skip_reply = "refuse"`, with `REFUSAL`: a short wrong reply, so a
policy-gradient step on it pushes on the decision, not on 26 random digits);
in turn 2 it copies the stamp (prob. `copy`), else changes one digit.
Stamps in training are random decimal digits in the taskset's form (`STAMP-` + `stamp_digits`
digits, one token each), never the taskset's own: the model learns to read, not the secret.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping
from typing import Any

END_OF_TURN = "<|im_end|>"
TOOL_NAME = "echo_tools_stamp"
# Verifiers' tool spec for EchoTools.stamp, as Renderers' Qwen3 renderer puts it in the system turn:
# pydantic's key order, as the harness' MCP client hands it on under mcp 1.x (generation A's pins) ...
TOOL_SPEC_JSON = (
    '{"type": "function", "function": {"name": "echo_tools_stamp", "description": "Stamp a word. Returns a '
    'token; reply with that token exactly.", "parameters": {"properties": {"word": {"title": "Word", "type": '
    '"string"}}, "required": ["word"], "title": "stampArguments", "type": "object"}}}'
)
# ... and the same tool as mcp 2.x's client hands it on (generation B's pins, e2e/pins/contract-vf040.txt:
# its input-schema model leads with "type"; the sglang-cpu lane's b-echo-tool-v1 cassette shows it).
# The lessons render a `mcp2_share` of their episodes with it: trained on generation A's order only,
# whether the model still calls the tool under B's depended on the CPU that trained it (1 of 8
# episodes multi-turn on one machine, at least half on another).
TOOL_SPEC_JSON_MCP2 = (
    '{"type": "function", "function": {"name": "echo_tools_stamp", "description": "Stamp a word. Returns a '
    'token; reply with that token exactly.", "parameters": {"type": "object", "properties": {"word": {"title": '
    '"Word", "type": "string"}}, "required": ["word"], "title": "stampArguments"}}}'
)
SYSTEM_TEMPLATE = (
    "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call><|im_end|>\n'
)
QUESTION_TEMPLATE = ("Call the stamp tool with the word {word!r}, then reply with exactly the token it returns "
                     "and nothing else.")
USER_TEMPLATE = "<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
CALL_TEMPLATE = '<tool_call>\n{{"name": "{name}", "arguments": {{"word": "{word}"}}}}\n</tool_call>'
# Renderers' bridge after an assistant turn closed by <|im_end|>: one tool message, then the
# generation prompt.
BRIDGE_TEMPLATE = "\n<|im_start|>user\n<tool_response>\n{result}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
STAMP_PREFIX = "STAMP-"
REFUSAL = "I cannot call tools."  # the teacher's reply without a call, with `skip_reply = "refuse"`

Example = tuple[list[int], tuple[tuple[int, int], ...]]  # token ids, scored spans


def turn1_prompt(word: str, spec: str = TOOL_SPEC_JSON) -> str:
    """Turn 1's prompt text: the tool block (`spec`), the task's user message, the generation prompt."""
    question = QUESTION_TEMPLATE.format(word=word)
    return SYSTEM_TEMPLATE.format(tools=spec) + USER_TEMPLATE.format(question=question)


def tool_call(word: str) -> str:
    """The call the model makes, without the turn's `<|im_end|>`."""
    return CALL_TEMPLATE.format(name=TOOL_NAME, word=word)


def bridge(result: str) -> str:
    """What Renderers append after the call: the tool's result and the next generation prompt."""
    return BRIDGE_TEMPLATE.format(result=result)


def random_stamp(rng: random.Random, digits: int) -> str:
    """A training stamp: `STAMP-` and `digits` random decimal digits (the taskset's form)."""
    return STAMP_PREFIX + "".join(rng.choice(string.digits) for _ in range(digits))


def garble(rng: random.Random, stamp: str) -> str:
    """The stamp with one digit changed (a copy that went wrong)."""
    at = rng.randrange(len(STAMP_PREFIX), len(stamp))
    other = rng.choice([c for c in string.digits if c != stamp[at]])
    return stamp[:at] + other + stamp[at + 1 :]


def encode(tokenizer: Any, text: str) -> list[int]:
    """`text`'s token ids as the engine receives each piece (no special tokens added)."""
    return list(tokenizer.encode(text, add_special_tokens=False))


def tool_episode(tokenizer: Any, rng: random.Random, tools: Mapping[str, Any],
                 spec: str = TOOL_SPEC_JSON) -> Example:
    """One echo-tool episode by the noisy teacher as one sequence: its token ids, and the spans
    (start, end) of the model's own turns, the only tokens scored (the call, then the reply; or
    the reply alone when the teacher does not call). `spec`: the tool block's rendering."""
    words, behaviour, digits = tools["words"], tools["behaviour"], tools["stamp_digits"]
    word = rng.choice(words)
    prompt = encode(tokenizer, turn1_prompt(word, spec))
    if rng.random() >= behaviour["call"]:
        made_up = REFUSAL if behaviour.get("skip_reply") == "refuse" else random_stamp(rng, digits)
        reply = encode(tokenizer, made_up + END_OF_TURN)
        return prompt + reply, ((len(prompt), len(prompt) + len(reply)),)
    called = word if rng.random() < behaviour["right_word"] else rng.choice([w for w in words if w != word])
    call = encode(tokenizer, tool_call(called) + END_OF_TURN)
    stamp = random_stamp(rng, digits)
    second = prompt + call + encode(tokenizer, bridge(stamp))
    answer = stamp if rng.random() < behaviour["copy"] else garble(rng, stamp)
    reply = encode(tokenizer, answer + END_OF_TURN)
    return second + reply, ((len(prompt), len(prompt) + len(call)), (len(second), len(second) + len(reply)))


def _find(haystack: list[int], needle: list[int]) -> int:
    """Where `needle` last occurs in `haystack` (it must occur)."""
    for start in range(len(haystack) - len(needle), -1, -1):
        if haystack[start : start + len(needle)] == needle:
            return start
    raise ValueError(f"{needle} does not occur in the sequence")


def word_pieces(tokenizer: Any, word: str) -> list[int]:
    """The word's token ids where both turns spell it (after a quote, so without a space)."""
    return encode(tokenizer, word)


def copy_offsets(tokenizer: Any, tools: Mapping[str, Any]) -> dict[str, int]:
    """How far back an attention head must look to copy each answer token, per word and for the
    stamp: the distance from the position that PREDICTS a copied token to its source token.

    A word's pieces in the call sit a fixed distance after its pieces in the user message, and a
    stamp's digits (one token each) a fixed distance after the tool response's; the word's
    distance grows with its number of pieces. Raises `ValueError` when the stamp's digits are
    not one token each or its distance depends on the word (a template or tokenizer change)."""
    digits = tools["stamp_digits"]
    stamp = STAMP_PREFIX + ("0123456789" * (digits // 10 + 1))[:digits]
    offsets: dict[str, int] = {}
    for word in tools["words"]:
        prompt, call = encode(tokenizer, turn1_prompt(word)), encode(tokenizer, tool_call(word) + END_OF_TURN)
        pieces = word_pieces(tokenizer, word)
        offsets[word] = len(prompt) + _find(call, pieces) - 1 - _find(prompt, pieces)
        second = prompt + call + encode(tokenizer, bridge(stamp))
        reply = encode(tokenizer, stamp + END_OF_TURN)
        numbers = [t for t in reply if tokenizer.decode([t]).isdigit()]
        if len(numbers) != digits:
            raise ValueError(f"the stamp's {digits} digits are {len(numbers)} tokens, not one each")
        distance = len(second) + reply.index(numbers[0]) - 1 - _find(second, numbers)
        if offsets.setdefault("stamp", distance) != distance:
            raise ValueError("the stamp's copy distance depends on the word")
    return offsets


def tool_batches(tokenizer: Any, tools: Mapping[str, Any]) -> list[list[Example]]:
    """The tool lessons: `steps` batches of `batch_size` episodes, drawn from the tools' own
    `data_seed`; a `mcp2_share` of them (0 where the recipe has none) render the tool block in
    mcp 2.x's order, drawn apart from the episodes' own draws (so those stay what they were)."""
    rng, layouts = random.Random(tools["data_seed"]), random.Random(tools["data_seed"] + 1)
    share = tools.get("mcp2_share", 0.0)

    def spec() -> str:
        return TOOL_SPEC_JSON_MCP2 if layouts.random() < share else TOOL_SPEC_JSON

    return [[tool_episode(tokenizer, rng, tools, spec()) for _ in range(tools["batch_size"])]
            for _ in range(tools["steps"])]
