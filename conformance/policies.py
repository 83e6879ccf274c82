"""Scripted policies: `/generate` answers chosen from the decoded prompt, as real Qwen3 ids.

A policy is a `ScriptedEngine` step (a function of the request body): it decodes
`input_ids` with the real tokenizer, picks a reply text, and answers the reply's token ids
followed by `<|im_end|>`, each with a fixed logprob. Tests use them to drive real Verifiers
episodes (tool calls included) without a model.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from conformance.engine import Completion

IM_END = 151645
USER_TURN = "<|im_start|>user\n"


class TextPolicy:
    def __init__(self, tokenizer: Any, reply: Callable[[str], str], *, logprob: float = -0.1) -> None:
        self.tokenizer = tokenizer
        self.reply = reply
        self.logprob = logprob
        self.calls = itertools.count()

    def completion(self, text: str) -> Completion:
        ids = [*list(self.tokenizer.encode(text, add_special_tokens=False)), IM_END]
        return Completion(ids, [self.logprob] * len(ids))

    def __call__(self, body: dict[str, Any]) -> Completion:
        next(self.calls)
        prompt = self.tokenizer.decode(body["input_ids"], skip_special_tokens=False)
        return self.completion(self.reply(prompt))


def last_user_text(prompt: str) -> str:
    """The text of the last user turn in a rendered Qwen3 prompt."""
    return prompt.rsplit(USER_TURN, 1)[-1].split("<|im_end|>", 1)[0]


def tool_call(name: str, arguments: dict[str, Any]) -> str:
    """A Qwen3 tool call as the model writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
