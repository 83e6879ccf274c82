"""Generation A's (verifiers 0.2.x) seam for the pre-forked harness runtime (adapter.episodes.prefork).

0.2.x has no third-party runtime backends: `verifiers.v1.rollout` builds each rollout's runtime,
and `verifiers.v1.mcp.launch` each tool server's own, with `make_runtime(config, name)`, a closed
union. `install(pool)` rebinds that one name in those two modules (`ROUTED`), for the whole
process: a `type = "subprocess"` config then gets `PreforkRuntime`, a
`SubprocessRuntime` whose program runs and background servers are forked from warm zygotes
where `prefork.launch_for` recognises them (everything else, and every other runtime type, is
Verifiers' own). `uninstall()` restores Verifiers' function. Verifiers' CLI (`vf debug`,
`vf validate`) keeps its own `make_runtime`.
"""

from __future__ import annotations

import signal
from typing import Any

import verifiers.v1.mcp.launch as vf_mcp_launch
import verifiers.v1.rollout as vf_rollout
from verifiers.v1.runtimes import ProgramResult, SubprocessConfig, SubprocessRuntime
from verifiers.v1.runtimes import make_runtime as verifiers_make_runtime
from verifiers.v1.runtimes.base import register

from adapter.episodes import prefork
from adapter.episodes.zygotes import ForkedChild, Launch, ZygotePool

_POOL: list[ZygotePool] = []  # the installed pool (one), read by every PreforkRuntime
ROUTED = (vf_rollout, vf_mcp_launch)  # the modules whose `make_runtime` builds rollouts' and tool servers' runtimes


class PreforkRuntime(SubprocessRuntime):  # type: ignore[misc]  # Verifiers is untyped (no py.typed)
    """Verifiers 0.2.x's subprocess runtime, its Python programs forked from warm interpreters."""

    def __init__(self, config: SubprocessConfig, name: str | None = None) -> None:
        super().__init__(config, name)
        self._forked_background: list[ForkedChild] = []

    def _launch(self, argv: list[str], env: dict[str, str]) -> Launch | None:
        if not _POOL:
            return None
        return prefork.launch_for(argv, env, str(self.workdir) if self.workdir is not None else None)

    async def run(self, argv: list[str], env: dict[str, str]) -> ProgramResult:
        launch = self._launch(argv, env)
        ran = None if launch is None else await prefork.run_program(_POOL[0], launch)
        if ran is None:
            result: ProgramResult = await super().run(argv, env)
            return result
        return ProgramResult(exit_code=ran.exit_code or 0, stdout=ran.stdout.decode(errors="replace"),
                             stderr=ran.stderr.decode(errors="replace"))

    async def run_background(self, argv: list[str], env: dict[str, str], log: str) -> None:
        launch = self._launch(argv, env)
        child = None
        if launch is not None and self.workdir is not None:
            child = await prefork.start_background(_POOL[0], launch, str(self.workdir / log))
        if child is None:
            await super().run_background(argv, env, log)
            return
        self._forked_background.append(child)

    def cleanup(self) -> None:
        for child in self._forked_background:  # as Verifiers ends its own: SIGTERM to the group
            child.kill_group(signal.SIGTERM)
        self._forked_background = []
        super().cleanup()


def _make_runtime(config: Any, name: str | None = None) -> Any:
    if _POOL and isinstance(config, SubprocessConfig):
        runtime = PreforkRuntime(config, name)
        register(runtime)
        return runtime
    return verifiers_make_runtime(config, name)


def install(pool: ZygotePool) -> None:
    """Route every `type = "subprocess"` rollout of this process through `pool` (module docstring)."""
    _POOL[:] = [pool]
    for module in ROUTED:
        module.make_runtime = _make_runtime


def uninstall() -> None:
    """Verifiers' own `make_runtime` again; the pool is the caller's to close."""
    _POOL.clear()
    for module in ROUTED:
        module.make_runtime = verifiers_make_runtime
