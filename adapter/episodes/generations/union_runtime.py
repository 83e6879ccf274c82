"""The pre-forked harness runtime's plug where Verifiers' runtimes are a closed union (0.2.x,
0.3.x, 0.4.0: generations A and B's first releases; adapter.episodes.prefork says what it runs).

These releases have no third-party runtimes: each rollout's runtime, and each tool server's own,
is built by `make_runtime(config, name)` (`verifiers.v1.runtimes`), read by name in
`verifiers.v1.rollout` and `verifiers.v1.mcp.launch` (0.2.x, 0.3.x) and through the package's own
`provision_runtime` (0.4.0). `install(pool)` rebinds that one name in those modules (`ROUTED`),
for the whole process: a `type = "subprocess"` config then gets `PreforkRuntime`, the release's
own `SubprocessRuntime` whose program runs and background servers are forked from warm zygotes
where `prefork.launch_for` recognises them (everything else, and every other runtime type, is
Verifiers' own). `uninstall()` restores Verifiers' function. Verifiers' CLI (`vf debug`,
`vf validate`) keeps its own `make_runtime`. 0.4.1.dev86 and later plug in as a backend
(adapter.episodes.generations.backend_runtime).
"""

from __future__ import annotations

from typing import Any

import verifiers.v1.mcp.launch as vf_mcp_launch
import verifiers.v1.rollout as vf_rollout
import verifiers.v1.runtimes as vf_runtimes
from verifiers.v1.runtimes import ProgramResult, SubprocessConfig, SubprocessRuntime
from verifiers.v1.runtimes import make_runtime as verifiers_make_runtime
from verifiers.v1.runtimes.base import register

from adapter.episodes import prefork
from adapter.episodes.zygotes import Launch, ZygotePool

_POOL: list[ZygotePool] = []  # the installed pool (one), read by every PreforkRuntime
# the modules whose `make_runtime` builds rollouts' and tool servers' runtimes (each where it has one)
ROUTED = tuple(m for m in (vf_rollout, vf_mcp_launch, vf_runtimes) if hasattr(m, "make_runtime"))


class PreforkRuntime(SubprocessRuntime):  # type: ignore[misc]  # Verifiers is untyped (no py.typed)
    """The release's subprocess runtime, its Python programs forked from warm interpreters."""

    def __init__(self, config: SubprocessConfig, name: str | None = None) -> None:
        super().__init__(config, name)
        self._forked = prefork.ForkedServers()

    def _launch(self, argv: list[str], env: dict[str, str]) -> Launch | None:
        if not _POOL:
            return None
        merged = self.process_env(env) if hasattr(self, "process_env") else env  # 0.4.0 adds the runtime's env
        return prefork.launch_for(argv, merged, str(self.workdir) if self.workdir is not None else None)

    async def run(self, argv: list[str], env: dict[str, str]) -> ProgramResult:
        launch = self._launch(argv, env)  # None without a pool
        fields = None if launch is None else await prefork.run_as_result(_POOL[0], launch)
        if fields is None:
            result: ProgramResult = await super().run(argv, env)
            return result
        return ProgramResult(**fields)

    async def run_background(self, argv: list[str], env: dict[str, str], log: str) -> None:
        launch = self._launch(argv, env)  # None without a pool
        log_path = str(self.workdir / log) if self.workdir is not None else None
        if launch is None or not await self._forked.start(_POOL[0], launch, log_path):
            await super().run_background(argv, env, log)

    async def teardown(self) -> None:
        await self._forked.stop()  # as Verifiers stops its own (0.3.x+): SIGTERM, 5 s, SIGKILL
        await super().teardown()

    def cleanup(self) -> None:
        self._forked.send()  # as Verifiers ends its own: SIGTERM to the group
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


def use(runtime: str) -> None:
    """`prefork`: install this process' pool (`adapter.episodes.prefork.process_pool`); `subprocess`: uninstall."""
    if runtime == "prefork":
        install(prefork.process_pool())
    else:
        uninstall()


def uninstall() -> None:
    """Verifiers' own `make_runtime` again; the pool is the caller's to close."""
    _POOL.clear()
    for module in ROUTED:
        module.make_runtime = verifiers_make_runtime
