"""The default-harness lessons: echo-tool-v1 under Verifiers' default (bash + edit) harness.

Consumes: the real Qwen3 tokenizer and the recipe's `train.bash` section (present only in the
`e2e.tiny.variants.default_harness` variant). Emits: training episodes for `tiny_train.py`.

Under the default harness (verifiers 0.2.0 `[harness] id = "default"`, 0.4.0 `[agent.harness]
id = "bash"`) the model is a coding agent: its system turn is the harness's prompt, then Renderers'
Qwen3 tool block with `bash`, `edit` and the taskset's `echo_tools_stamp`, in that order
(`tests/reference/test_tiny_bash.py` checks the rendering against Renderers). The teacher's episode:

  1. a bash call, `echo <word>` (prob. `bash`; else it goes straight to step 2);
  2. after the command's output (stdout, so the word and a newline), the stamp call with the word;
  3. after the stamp, the stamp (prob. `copy`, else one digit changed).

The bash output comes back as a tool message, exactly as the null harness's tool results do, so
the stamp's copy distance is the one the planted heads already look back (`tiny_tools.copy_offsets`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from adapter.reference.tiny_tools import (
    END_OF_TURN,
    QUESTION_TEMPLATE,
    SYSTEM_TEMPLATE,
    TOOL_SPEC_JSON,
    USER_TEMPLATE,
    Example,
    bridge,
    encode,
    garble,
    random_stamp,
    tool_call,
)

# The harness's system prompt with its edit tool on (verifiers' DefaultHarness / BashHarness).
HARNESS_PROMPT = ("You are a coding agent. You have access to a bash tool for running shell commands. You also have "
                  "an edit tool for single-occurrence string replacement in a file.")
BASH_SPEC_JSON = (
    '{"type": "function", "function": {"name": "bash", "description": "Run a bash command and return its combined '
    'stdout and stderr.", "parameters": {"type": "object", "properties": {"command": {"type": "string", '
    '"description": "The bash command to run."}}, "required": ["command"]}}}'
)
EDIT_SPEC_JSON = (
    '{"type": "function", "function": {"name": "edit", "description": "Replace a unique string in a file. old_str '
    'must appear exactly once in the file.", "parameters": {"type": "object", "properties": {"path": {"type": '
    '"string", "description": "File path (relative to cwd or absolute)."}, "old_str": {"type": "string", '
    '"description": "Exact string to find (must appear exactly once)."}, "new_str": {"type": "string", '
    '"description": "Replacement string."}}, "required": ["path", "old_str", "new_str"]}}}'
)
TOOL_SPECS = (BASH_SPEC_JSON, EDIT_SPEC_JSON, TOOL_SPEC_JSON)
BASH_CALL_TEMPLATE = '<tool_call>\n{{"name": "bash", "arguments": {{"command": "echo {word}"}}}}\n</tool_call>'


def turn1_prompt(word: str) -> str:
    """Turn 1's prompt text: the harness's system prompt and tool block, the task, the generation prompt."""
    system = SYSTEM_TEMPLATE.format(tools="\n".join(TOOL_SPECS))
    head = "<|im_start|>system\n"
    return head + HARNESS_PROMPT + "\n\n" + system[len(head):] + USER_TEMPLATE.format(
        question=QUESTION_TEMPLATE.format(word=word))


def bash_call(word: str) -> str:
    """The teacher's bash call, without the turn's `<|im_end|>`."""
    return BASH_CALL_TEMPLATE.format(word=word)


def command_output(word: str) -> str:
    """What `echo <word>` prints, as the harness returns it (stdout with its newline)."""
    return word + "\n"


def bash_episode(tokenizer: Any, rng: random.Random, bash: Mapping[str, Any]) -> Example:
    """One default-harness episode by the teacher as one sequence, and its scored spans (the model's
    turns: the bash call when it makes one, the stamp call, the reply)."""
    words, behaviour, digits = bash["words"], bash["behaviour"], bash["stamp_digits"]
    word = rng.choice(words)
    ids, spans = encode(tokenizer, turn1_prompt(word)), []
    if rng.random() < behaviour["bash"]:
        call = encode(tokenizer, bash_call(word) + END_OF_TURN)
        spans.append((len(ids), len(ids) + len(call)))
        ids += call + encode(tokenizer, bridge(command_output(word)))
    stamp_call = encode(tokenizer, tool_call(word) + END_OF_TURN)
    spans.append((len(ids), len(ids) + len(stamp_call)))
    stamp = random_stamp(rng, digits)
    ids += stamp_call + encode(tokenizer, bridge(stamp))
    reply = encode(tokenizer, (stamp if rng.random() < behaviour["copy"] else garble(rng, stamp)) + END_OF_TURN)
    spans.append((len(ids), len(ids) + len(reply)))
    return ids + reply, tuple(spans)


def bash_batches(tokenizer: Any, bash: Mapping[str, Any], steps: int) -> list[list[Example]]:
    """`steps` batches of `bash.batch_size` episodes, drawn from `bash.data_seed`."""
    rng = random.Random(bash["data_seed"])
    return [[bash_episode(tokenizer, rng, bash) for _ in range(bash["batch_size"])] for _ in range(steps)]
