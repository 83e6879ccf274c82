"""`echo-tool-v1` for verifiers 0.2.x (generation A): rows, tool server and scoring are
`adapter.episodes.bundled.shared.echo_tool`'s; here the task declares its server as 0.2.x does,
on `Task.tools`.

It needs `mcp<2` on both sides (see adapter/episodes/bundled/a/envs/echo-tool-v1.toml).
Importable by module name: put `adapter/episodes/bundled/a/tasksets` on PYTHONPATH.
"""

from __future__ import annotations

import verifiers.v1 as vf

from adapter.episodes.bundled.shared.echo_tool import (
    STAMP_DIGITS,
    WORDS,
    EchoToolData,
    EchoTools,
    EchoToolScoring,
    echo_tool_rows,
    stamp_for,
)

__all__ = ["STAMP_DIGITS", "WORDS", "EchoToolData", "EchoToolTask", "EchoToolTaskset", "EchoTools", "stamp_for"]


class EchoToolTask(EchoToolScoring):
    tools = (EchoTools,)


class EchoToolTaskset(vf.Taskset[EchoToolTask]):
    def load(self) -> list[EchoToolTask]:
        return [EchoToolTask(row, self.config.task) for row in echo_tool_rows()]
