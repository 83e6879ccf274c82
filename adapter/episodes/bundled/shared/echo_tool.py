"""`echo-tool-v1`, for both generations: a reward that is only reachable when a tool really ran.

Each task asks the model to call the tool `stamp` with a given word and to reply with exactly
what it returns. The tool belongs to the per-rollout MCP server `EchoTools`, so the model sees it
as **`echo_tools_stamp`** (Verifiers names a server after its snake-cased class and qualifies its
tools as `<server>_<tool>`). Verifiers starts the server as `python -m <its class's module>` with
the host's interpreter, i.e. this module (the `__main__` block below); it learns its task over
Verifiers' `/task` channel.

The stamp is `STAMP-` + `STAMP_DIGITS` (26) decimal digits: HMAC-SHA256(`SECRET`, "<idx>:<word>")
read as a number, modulo 10**26, zero-padded; `SECRET` is a module-level constant that no prompt
shows. Decimal, so the Qwen3 tokenizer gives every stamp one token per digit (the project's tiny
model copies it by position: adapter/reference/tiny_plant.py). A model cannot guess it; it
can only copy it from the tool's reply. Calling the tool with a different word gives a
different stamp.

Scoring (decided here, on purpose strict):
  * reward `used_tool` (weight 1.0): 1.0 iff the expected stamp appears in one of the trace's
    tool messages (the tool ran in this rollout, with the right word, for this task) AND the
    final reply contains it; else 0.0;
  * metric `tool_ran`: 1.0 iff the expected stamp appears in a tool message (tells "tool ran
    but the reply did not repeat it" apart from "never called");
  * metric `tool_messages`: how many tool messages the trace holds.

It needs at least 2 model turns (the call, then the reply) and the `null` harness (which supports
MCP). The generation's module (`echo_tool_v1`) declares the server on its task.
"""

from __future__ import annotations

import hashlib
import hmac

import verifiers.v1 as vf
from verifiers.v1.types import content_text

__all__ = ["STAMP_DIGITS", "WORDS", "EchoToolData", "EchoToolScoring", "EchoTools", "echo_tool_rows", "stamp_for"]

# Fixture secret: never part of a prompt; the tool server and the scorer share it.
SECRET = b"vf-sglang/echo-tool-v1/fixture-secret"
WORDS: tuple[str, ...] = ("apple", "river", "lantern", "cobalt")
STAMP_DIGITS = 26


def stamp_for(idx: int, word: str) -> str:
    digest = hmac.new(SECRET, f"{idx}:{word}".encode(), hashlib.sha256).digest()
    return f"STAMP-{int.from_bytes(digest, 'big') % 10**STAMP_DIGITS:0{STAMP_DIGITS}d}"


class EchoToolData(vf.TaskData):
    word: str


def echo_tool_rows() -> list[EchoToolData]:
    """The 4 rows, `idx` set (0.3.x needs it; 0.4.0 re-assigns the same value on iteration)."""
    return [
        EchoToolData(
            idx=i,
            name=f"echo-tool-{i}",
            prompt=f"Call the stamp tool with the word {word!r}, then reply with exactly the token it returns and "
            "nothing else.",
            word=word,
        )
        for i, word in enumerate(WORDS)
    ]


class EchoTools(vf.Toolset[vf.ToolsetConfig]):
    """Per-rollout tool server: stamps words for the task it serves."""

    idx: int | None = None

    async def setup_task(self, task) -> None:
        # `task` is the rollout's TaskData (an EchoToolData), fetched over the /task channel.
        self.idx = task.idx

    @vf.tool
    async def stamp(self, word: str) -> str:
        """Stamp a word. Returns a token; reply with that token exactly."""
        if self.idx is None:
            return "error: no task"
        return stamp_for(self.idx, word.strip().lower())


class EchoToolScoring(vf.Task[EchoToolData]):
    """The reward and metrics; a generation's `EchoToolTask` adds how it declares `EchoTools`."""

    def _expected(self) -> str:
        assert self.data.idx is not None
        return stamp_for(self.data.idx, self.data.word)

    def _tool_ran(self, trace: vf.Trace) -> bool:
        expected = self._expected()
        return any(expected in content_text(m.content) for m in trace.tool_messages)

    @vf.reward
    async def used_tool(self, trace: vf.Trace) -> float:
        return 1.0 if self._tool_ran(trace) and self._expected() in trace.last_reply else 0.0

    @vf.metric
    async def tool_ran(self, trace: vf.Trace) -> float:
        return 1.0 if self._tool_ran(trace) else 0.0

    @vf.metric
    async def tool_messages(self, trace: vf.Trace) -> float:
        return float(len(trace.tool_messages))


if __name__ == "__main__":  # Verifiers starts the tool server as `python -m adapter.episodes.bundled.shared.echo_tool`
    EchoTools.run()
