"""`echo-tool-v1`: a reward that is only reachable when a tool really ran (verifiers 0.2.0, V1).

Each task asks the model to call the tool `stamp` with a given word and to reply with exactly
what it returns. The tool belongs to the per-rollout MCP server `EchoTools` (a `Toolset` on
`Task.tools`), so the model sees it as **`echo_tools_stamp`** (Verifiers exposes tools as
`<snake_case_toolset_class>_<tool>`). The server process is this module run with
`python -m echo_tool_v1`; it learns its task over Verifiers' `/task` channel.

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

It needs at least 2 model turns (the call, then the reply), the `null` harness (which supports
MCP) and `mcp<2` on both sides (see adapter/episodes/bundled/a/envs/echo-tool-v1.toml). Importable by module
name: put `adapter/episodes/bundled/a/tasksets` on PYTHONPATH (the tool server subprocess inherits it).
"""

from __future__ import annotations

import hashlib
import hmac

import verifiers.v1 as vf
from verifiers.v1.types import content_text

__all__ = ["STAMP_DIGITS", "WORDS", "EchoToolData", "EchoToolTask", "EchoToolTaskset", "EchoTools", "stamp_for"]

# Fixture secret: never part of a prompt; the tool server and the scorer share it.
SECRET = b"vf-sglang/echo-tool-v1/fixture-secret"
WORDS: tuple[str, ...] = ("apple", "river", "lantern", "cobalt")
STAMP_DIGITS = 26


def stamp_for(idx: int, word: str) -> str:
    digest = hmac.new(SECRET, f"{idx}:{word}".encode(), hashlib.sha256).digest()
    return f"STAMP-{int.from_bytes(digest, 'big') % 10**STAMP_DIGITS:0{STAMP_DIGITS}d}"


class EchoToolData(vf.TaskData):
    word: str


class EchoTools(vf.Toolset[vf.ToolsetConfig]):
    """Per-rollout tool server: stamps words for the task it serves."""

    idx: int | None = None

    async def setup_task(self, task) -> None:
        self.idx = task.idx

    @vf.tool
    async def stamp(self, word: str) -> str:
        """Stamp a word. Returns a token; reply with that token exactly."""
        if self.idx is None:
            return "error: no task"
        return stamp_for(self.idx, word.strip().lower())


class EchoToolTask(vf.Task[EchoToolData]):
    tools = (EchoTools,)

    def _expected(self) -> str:
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


class EchoToolTaskset(vf.Taskset[EchoToolTask]):
    def load(self) -> list[EchoToolTask]:
        return [
            EchoToolTask(
                EchoToolData(
                    idx=i,
                    name=f"echo-tool-{i}",
                    prompt=(
                        f"Call the stamp tool with the word {word!r}, then reply with exactly "
                        "the token it returns and nothing else."
                    ),
                    word=word,
                ),
                self.config.task,
            )
            for i, word in enumerate(WORDS)
        ]


if __name__ == "__main__":  # Verifiers starts the tool server as `python -m echo_tool_v1`
    EchoTools.run()
