"""`echo-tool-v1` for verifiers 0.3.x / 0.4.0 (generation B): rows, tool server and scoring are
`adapter.episodes.bundled.shared.echo_tool`'s, the same as generation A's; here the task declares
its server as 0.3.x/0.4.0 do, with the classmethod `Task.toolsets(config)` (instances, each built
with its own `ToolsetConfig`) instead of 0.2.x's `Task.tools`.

0.4.0's null harness pins `mcp==2.0.0` in its own script and the tool server runs on the host's
interpreter (0.4.0's own mcp 2.x), so no mcp pin is needed (adapter/episodes/bundled/b/envs/
echo-tool-v1.toml). Importable by module name: put `adapter/episodes/bundled/b/tasksets` on
PYTHONPATH; generation A's module of the same name lives under another root.
"""

from __future__ import annotations

import verifiers.v1 as vf

from adapter.episodes.bundled.shared.echo_tool import EchoTools, EchoToolScoring, echo_tool_rows

__all__ = ["EchoToolTask", "EchoToolTaskset", "EchoTools"]


class EchoToolTask(EchoToolScoring):
    @classmethod
    def toolsets(cls, config: vf.TaskConfig) -> list[vf.Toolset]:
        # Default ToolsetConfig: a subprocess runtime of its own on the host, not colocated.
        return [EchoTools(vf.ToolsetConfig())]


class EchoToolTaskset(vf.Taskset[EchoToolTask]):
    def load(self) -> list[EchoToolTask]:
        return [EchoToolTask(row, self.config.task) for row in echo_tool_rows()]
