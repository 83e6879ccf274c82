"""The pre-forked harness runtime's plug where Verifiers takes third-party runtime backends
(0.4.1.dev86 and later; adapter.episodes.prefork says what it runs).

These releases build each runtime from its config's backend class, and a config of
`type = "custom"` names its own (`import_path`, `runtimes/backends/custom.py`):

  * `PreforkConfig` is that config, naming `PreforkBackend`: Verifiers' `SubprocessBackend`
    whose program runs and background servers are forked from warm zygotes where
    `prefork.launch_for` recognises them. The backend holds a plain `SubprocessConfig` as its
    config, so every check Verifiers makes on a runtime (`runtime.type == "subprocess"`: a tool
    server runs on the host interpreter, its TMPDIR in the workdir) reads what it reads for its
    own subprocess runtime;
  * `route_agents(roles)` puts `PreforkConfig` in place of each agent role's
    `type = "subprocess"` runtime of a loaded EnvConfig (the TOML's own runtime tables);
  * a task's tool servers get their runtime config from the task's Python code
    (`ToolsetConfig().runtime`, a `SubprocessConfig`), never from the TOML: `install()` rebinds
    `provision_backend` in `verifiers.v1.mcp.launch`, the one place those become backends, to
    hand it `PreforkConfig` for a subprocess config; `uninstall()` restores Verifiers' own.

Closed-union releases (0.2.x-0.4.0) plug in by `make_runtime` instead
(adapter.episodes.generations.union_runtime).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import verifiers.v1.mcp.launch as vf_mcp_launch
from verifiers.v1.configs.runtime import CustomRuntimeConfig, SubprocessConfig
from verifiers.v1.runtimes import provision_backend as verifiers_provision_backend
from verifiers.v1.runtimes.backends.subprocess import SubprocessBackend
from verifiers.v1.runtimes.base import ProgramResult

from adapter.episodes import prefork
from adapter.episodes.zygotes import Launch

IMPORT_PATH = f"{__name__}.PreforkBackend"


class PreforkConfig(CustomRuntimeConfig):  # type: ignore[misc]  # Verifiers is untyped (no py.typed)
    """`type = "custom"`, naming `PreforkBackend`; no fields of its own (a subprocess runtime has none)."""

    import_path: str = IMPORT_PATH


class PreforkBackend(SubprocessBackend):  # type: ignore[misc]
    """Verifiers' subprocess backend, its Python programs forked from warm interpreters."""

    config_class: ClassVar[type[CustomRuntimeConfig]] = PreforkConfig

    def __init__(self, config: PreforkConfig, name: str | None = None) -> None:
        super().__init__(SubprocessConfig(), name)  # reads, everywhere, as the subprocess runtime it is
        self.plug = config
        self._forked = prefork.ForkedServers()

    def _launch(self, runtime: Any, argv: list[str], env: dict[str, str]) -> Launch | None:
        workdir = str(self.workdir) if self.workdir is not None else None
        return prefork.launch_for(argv, runtime.process_env(env), workdir)

    async def run(self, runtime: Any, argv: list[str], env: dict[str, str]) -> ProgramResult:
        fields = await prefork.run_as_result(prefork.process_pool(), self._launch(runtime, argv, env))
        if fields is None:
            result: ProgramResult = await super().run(runtime, argv, env)
            return result
        return ProgramResult(**fields)

    async def run_background(self, runtime: Any, argv: list[str], env: dict[str, str], log: str) -> None:
        log_path = str(self.workdir / log) if self.workdir is not None else None
        if not await self._forked.start(prefork.process_pool(), self._launch(runtime, argv, env), log_path):
            await super().run_background(runtime, argv, env, log)

    async def teardown(self) -> None:
        await self._forked.stop()  # as Verifiers stops its own: SIGTERM, 5 s, SIGKILL
        await super().teardown()

    def cleanup(self) -> None:
        self._forked.send()  # as Verifiers ends its own: SIGTERM to the group
        super().cleanup()


def route_agents(agents: Iterable[Any]) -> None:
    """Each agent role (a loaded EnvConfig's `AgentConfig`) whose runtime is `type = "subprocess"` runs pre-forked."""
    for agent in agents:
        if isinstance(agent.runtime, SubprocessConfig):
            agent.runtime = PreforkConfig()


def _provision_backend(config: Any, *args: Any, **kwargs: Any) -> Any:
    return verifiers_provision_backend(PreforkConfig() if isinstance(config, SubprocessConfig) else config,
                                       *args, **kwargs)


def install() -> None:
    """Route tool servers' subprocess runtimes through `PreforkBackend` (module docstring)."""
    vf_mcp_launch.provision_backend = _provision_backend


def uninstall() -> None:
    vf_mcp_launch.provision_backend = verifiers_provision_backend
