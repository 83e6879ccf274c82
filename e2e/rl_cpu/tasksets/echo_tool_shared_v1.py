"""`echo-tool-shared-v1`: echo-tool-v1's task with ONE taskset-scoped tool server (verifiers 0.2.0, V1),
the RL lane's task (`e2e/rl_cpu`).

The model sees exactly what echo-tool-v1 shows it (the same prompts, the same tool
`echo_tools_stamp(word)` with the same description, the same `STAMP-` + 26-digit form), so the tiny
model's tool lessons apply unchanged. The difference is where the tool runs: echo-tool-v1 starts a
tool server per rollout (a Python process importing Verifiers, ~8 s of CPU each, most of an
episode's cost on a 2-core machine), while here `EchoToolSharedTaskset.tools` declares one server
that Verifiers starts once per `env.serving()` and every rollout joins. A shared server gets no
task (Verifiers never calls its `setup_task`), so the stamp is an HMAC of the word alone
(`stamp_for_word`): each task still has its own stamp, because each task has its own word.

Scoring, as echo-tool-v1's: reward `used_tool` is 1.0 iff the task's stamp is in one of the trace's
tool messages (the tool ran, with the task's word) and in the final reply; metrics `tool_ran`,
`tool_messages`. Importable by module name: put this directory and generation A's bundled tasksets
(for `echo_tool_v1`) on PYTHONPATH; the server subprocess inherits it.
"""

from __future__ import annotations

import hashlib
import hmac

import verifiers.v1 as vf
from echo_tool_v1 import STAMP_DIGITS, EchoToolTask, EchoToolTaskset

__all__ = ["EchoToolSharedTask", "EchoToolSharedTaskset", "EchoTools", "stamp_for_word"]

SECRET = b"vf-sglang/echo-tool-shared-v1/fixture-secret"  # never part of a prompt


def stamp_for_word(word: str) -> str:
    digest = hmac.new(SECRET, word.encode(), hashlib.sha256).digest()
    return f"STAMP-{int.from_bytes(digest, 'big') % 10**STAMP_DIGITS:0{STAMP_DIGITS}d}"


class EchoTools(vf.Toolset[vf.SharedToolsetConfig]):
    """The shared tool server: stamps words, for every rollout of the run."""

    @vf.tool
    async def stamp(self, word: str) -> str:
        """Stamp a word. Returns a token; reply with that token exactly."""
        return stamp_for_word(word.strip().lower())


class EchoToolSharedTask(EchoToolTask):
    """echo-tool-v1's task and scoring, with the word's stamp and no tool server of its own."""

    tools = ()

    def _expected(self) -> str:
        return stamp_for_word(self.data.word)


class EchoToolSharedTaskset(vf.Taskset[EchoToolSharedTask]):
    tools = (EchoTools,)

    def load(self) -> list[EchoToolSharedTask]:
        """echo-tool-v1's rows (the same prompts, word for word), as tasks of this taskset."""
        return [EchoToolSharedTask(task.data, self.config.task) for task in EchoToolTaskset(self.config).load()]


if __name__ == "__main__":  # Verifiers starts the tool server as `python -m echo_tool_shared_v1`
    EchoTools.run()
