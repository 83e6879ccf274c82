"""Generation B (verifiers 0.3.x, 0.4.0): episodes through the *served* bridge.

Differences from generation A that this shim absorbs, so everything else stays
generation-neutral:
  * the TrainClient is built inside Verifiers from `TrainClientConfig(base_url=...)`, so the
    bridge is served on a loopback port (`connect` yields a `BridgeEndpoint` handle, not a
    client); the orchestrator holds it, and `env.serving()`, open for the rollout function's
    lifetime (`adapter.rollout.orchestrator`);
  * a local tokenizer keeps its registered renderer identity through a typed renderer config
    (`RendererConfig(name=<renderer of the identity>)`), no hub needed;
  * a group is the n slots of one task (`env.slots`/`run_slot`), each with its own seeded
    context; an env that defines its own cross-rollout `finalize` over in-episode siblings
    (an `n` field in its config) runs as one episode of n traces — its siblings share one
    sampling seed (one context per episode). The trainer's n decides the group size: an env
    per distinct n is loaded and served once (nothing shared is mutated per group);
  * each agent harness' uv program is prepared before any episode (`ready_harness_programs`):
    offline from uv's cache where the release lets the harness env decide (0.3.x), refused fast
    where it cannot be prepared;
  * Verifiers' own TrainClient (and Renderers in it) runs in this process but out of the
    adapter's reach: a `NotImplementedError` it raises reaches the harness as a 502 and the trace
    as a harness error. The interception server records each model call's error type
    (`ModelCall.error.type`, the class name: 0.3.0, 0.3.1, 0.4.0), so a group whose calls failed
    with `NotImplementedError` raises `UnsupportedFeatureError` (`unsupported_call`), which stops
    the run, before any drop is considered;
  * an episode that failed (`episode.errors`, or a Verifiers rollout error raised) is an
    `EpisodeError`: its group is dropped; anything else a shim raises is a bug and propagates;
  * traces are read through `TraceView`: `Reward{score, weight}` → weighted values (the
    components stay in metadata), `last_error` → `error`, trainable branches only. An
    overlong first prompt ends `ok` with 0 branches in 0.4.0: it is dropped as an empty
    trace, never counted as a success with reward 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata as metadata
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from adapter.bridge.serve import served
from adapter.config.settings import Settings
from adapter.episodes import prefork
from adapter.episodes.generations import harness_runtime, release_process_holds, unsupported_feature
from adapter.episodes.harness_pins import hold
from adapter.episodes.harness_uv import prepared_env
from adapter.episodes.identity import renderer_identity
from adapter.episodes.tokenizer_imports import import_tokenizer_classes
from adapter.errors import ConfigurationError, EpisodeError, UnsupportedFeatureError

API_KEY_VAR = "VF_SGLANG_API_KEY"  # unset: Verifiers sends "EMPTY", which the bridge ignores
# What verifiers 0.4.0 sets on its uv script preparation over the harness env (runtimes/base.py,
# `Runtime.prepare_uv_script`); 0.3.x sets nothing there.
PREPARE_FORCES = {"UV_OFFLINE": "false"}
# The exception type the interception server records (`type(error).__name__`) when Verifiers'
# TrainClient or Renderers does not implement what a model call needs.
NOT_IMPLEMENTED = NotImplementedError.__name__


class TraceView:
    """A generation-B trace, read with the attribute names `adapter.samples.conversion` uses."""

    def __init__(self, trace: Any) -> None:
        self._trace = trace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trace, name)

    @property
    def error(self) -> Any:
        return self._trace.last_error

    @property
    def rewards(self) -> dict[str, float]:
        return {name: 0.0 if r is None else float(r.value) for name, r in self._trace.rewards.items()}

    @property
    def reward(self) -> float:
        return sum(self.rewards.values())

    @property
    def metrics(self) -> dict[str, float]:
        return {name: 0.0 if v is None else float(v) for name, v in self._trace.metrics.items()}

    @property
    def branches(self) -> list[Any]:
        return [b for b in self._trace.branches if getattr(b, "trainable", True)]


@dataclass
class BridgeEndpoint:
    """The bridge app with the renderer identity Verifiers must use; its URL once served."""

    app: Any
    renderer_model_name: str | None
    renderer: Any = None
    url: str | None = None
    pool_size: int = 1  # renderer slots (TrainClientConfig.pool_size where the release has it)

    def config(self) -> Any:
        import verifiers.v1 as vf

        if self.url is None:
            raise ConfigurationError("the bridge is not served yet: episodes run inside serving()")
        pool = {"pool_size": self.pool_size} if "pool_size" in vf.TrainClientConfig.model_fields else {}
        return vf.TrainClientConfig(base_url=f"{self.url}/v1", api_key_var=API_KEY_VAR,
                                    renderer_model_name=self.renderer_model_name, renderer=self.renderer, **pool)

    async def close(self) -> None:
        self.url = None


def renderer_for(tokenizer_path: str | None, renderer_model_name: str | None) -> tuple[str | None, Any]:
    """(name the pool loads the tokenizer by, typed renderer config or None)."""
    if not tokenizer_path:
        return renderer_model_name, None
    from pydantic import TypeAdapter
    from renderers import RendererConfig
    from renderers.base import MODEL_RENDERER_MAP

    identity = renderer_model_name or renderer_identity(tokenizer_path)
    name = MODEL_RENDERER_MAP.get(identity or "")
    if name is None:
        return tokenizer_path, None  # unregistered: Renderers' template fallback (no tool parsing)
    return tokenizer_path, TypeAdapter(RendererConfig).validate_python({"name": name})


def sampling_config(settings: Settings, seed: int | None) -> Any:
    """B's SamplingConfig: typed temperature/top_p/max_tokens, other SGLang keys flat."""
    import verifiers.v1 as vf

    values: dict[str, Any] = {
        "temperature": settings.rollout_temperature, "top_p": settings.rollout_top_p,
        "max_tokens": settings.rollout_max_response_len, "top_k": settings.rollout_top_k,
        "min_tokens": settings.rollout_min_new_tokens, "seed": seed,
        "min_p": settings.rollout_min_p if settings.rollout_min_p > 0 else None,
    }
    if settings.apply_chat_template_kwargs:
        values["chat_template_kwargs"] = dict(settings.apply_chat_template_kwargs)
    return vf.SamplingConfig(**{k: v for k, v in values.items() if v is not None})


class GenerationB:
    """The generation-B episode runner (see the module docstring)."""

    generation = "B"

    def __init__(self, config_data: Mapping[str, Any]) -> None:
        import verifiers.v1 as vf

        self._config_data = dict(config_data)
        self._held_programs: list[type] = []  # harness classes whose program loading held (`release`)
        self._prefork = harness_runtime(prefork.chosen())[0] == "prefork"
        self.env = _load_env(self._config_data, self._held_programs)
        if self._prefork:
            prefork.acquire()
        self.tasks = list(self.env.taskset)
        self.in_episode_n = getattr(self.env.config, "n", None)
        overrides_finalize = type(self.env).finalize is not vf.Env.finalize
        self.has_group_reward = overrides_finalize and self.in_episode_n is not None
        self._sized: dict[int, tuple[Any, list[Any]]] = {}  # in-episode n → (env, tasks), while served

    @contextlib.asynccontextmanager
    async def connect(self, app: Any, *, tokenizer_path: str | None = None, renderer_model_name: str | None = None,
                      pool_size: int = 1) -> AsyncIterator[BridgeEndpoint]:
        """The bridge `app` served on a loopback port until the context exits."""
        name, renderer = renderer_for(tokenizer_path, renderer_model_name)
        import_tokenizer_classes()  # Verifiers' renderer pool builds on threads: no racing first import
        endpoint = BridgeEndpoint(app, name, renderer, pool_size=pool_size)
        async with served(app) as url:
            endpoint.url = url
            try:
                yield endpoint
            finally:
                await endpoint.close()

    def serving(self) -> Any:
        return self.env.serving()

    def sized_serving(self, n: int) -> contextlib.AbstractAsyncContextManager[None] | None:
        """A group-reward env runs its group inside one episode, of the TOML's n: for another n it
        is loaded again with that n and served (entered and exited by the run's holder, like
        `serving()`); None when the env needs none."""
        if not self.has_group_reward or n == self.in_episode_n:
            return None
        return self._serve_sized(n)

    def release(self) -> None:
        """Put back what loading changed for the whole process: the harness programs held to the
        host's versions (`adapter.episodes.harness_pins`); the zygotes and the runtime plug, once
        no other loaded environment runs pre-forked (`prefork.release`)."""
        held, forked, self._held_programs, self._prefork = self._held_programs, self._prefork, [], False
        release_process_holds(held, forked, lambda: use_harness_runtime(None, "subprocess"))

    @contextlib.asynccontextmanager
    async def _serve_sized(self, n: int) -> AsyncIterator[None]:
        env = _load_env({**self._config_data, "n": n}, self._held_programs)
        async with env.serving():
            self._sized[n] = (env, list(env.taskset))
            try:
                yield
            finally:
                self._sized.pop(n, None)

    def _sized_env(self, n: int) -> tuple[Any, list[Any]]:
        """The env whose in-episode group size is n (the TOML's own when it matches)."""
        if n == self.in_episode_n:
            return self.env, self.tasks
        if n not in self._sized:
            raise ConfigurationError(f"a group of {n} runs inside sized_serving({n})")
        return self._sized[n]

    async def run_group(self, task_index: int, *, n: int, client: BridgeEndpoint, model: str,
                        settings: Settings, seed_base: int | None, semaphore: Any) -> list[TraceView]:
        import verifiers.v1 as vf
        from verifiers.v1.errors import RolloutError

        config = client.config()

        def context(offset: int) -> Any:
            seed = None if seed_base is None else seed_base + offset
            return vf.ModelContext(model=model, client=config, sampling=sampling_config(settings, seed))

        try:
            if self.has_group_reward:
                env, tasks = self._sized_env(n)
                slot = env.slots(tasks[task_index], 1)[0]
                episodes = [await env.run_slot(slot, context(0), semaphore=semaphore)]
            else:
                slots = self.env.slots(self.tasks[task_index], n)
                episodes = await asyncio.gather(*(self.env.run_slot(slot, context(i), semaphore=semaphore)
                                                  for i, slot in enumerate(slots)))
        except RolloutError as exc:  # Verifiers' own "a rollout failed" family: data, not a bug
            raise EpisodeError(f"episode failed: {type(exc).__name__}: {exc}") from exc
        unsupported = unsupported_call(trace for episode in episodes for trace in episode.traces)
        if unsupported is not None:
            raise unsupported
        failed = [error for episode in episodes for error in episode.errors]
        if failed:
            raise EpisodeError(f"episode failed: {failed[0].type}: {failed[0].message}")
        return [TraceView(trace) for episode in episodes for trace in episode.traces]


def unsupported_call(traces: Iterable[Any]) -> UnsupportedFeatureError | None:
    """The refusal for the first model call Verifiers recorded as failed with `NotImplementedError`
    (`trace.calls[i].error.type`, the exception's class name), or None. Decided by that type
    field alone; the recorded message only goes into the refusal's text."""
    for trace in traces:
        for index, call in enumerate(getattr(trace, "calls", None) or ()):
            error = getattr(call, "error", None)
            if error is not None and error.type == NOT_IMPLEMENTED:
                return unsupported_feature(str(error.message), origin=f"trace {trace.id}, model call {index}")
    return None


def _load_env(config_data: Mapping[str, Any], held: list[type]) -> Any:
    """The env, its harness programs held (the classes appended to `held`) and prepared."""
    from verifiers.v1.utils.loaders import load_environment, resolve_env_config

    config = resolve_env_config(dict(config_data))
    held.extend(ready_harness_programs(config))
    use_harness_runtime(config, harness_runtime(prefork.chosen())[0])
    return load_environment(config)


def _agent_roles(config: Any) -> list[Any]:
    import verifiers.v1 as vf

    return [role for role in (getattr(config, name) for name in type(config).model_fields)
            if isinstance(role, vf.AgentConfig)]


def _has_runtime_backends() -> bool:
    """Whether the installed verifiers takes third-party runtime backends (0.4.1.dev86+)."""
    import verifiers.v1.runtimes as vf_runtimes

    return hasattr(vf_runtimes, "backend_cls")


def use_harness_runtime(config: Any, runtime: str) -> None:
    """`prefork`: the loaded EnvConfig's `type = "subprocess"` roles, and this process' tool
    servers, fork their programs from warm interpreters, plugged in as the release allows
    (a backend: adapter.episodes.generations.backend_runtime; the closed union's
    `make_runtime`: adapter.episodes.generations.union_runtime); `subprocess`: Verifiers' own."""
    if _has_runtime_backends():
        from adapter.episodes.generations import backend_runtime

        if runtime == "prefork":
            backend_runtime.route_agents(_agent_roles(config))
            backend_runtime.install()
        else:
            backend_runtime.uninstall()
        return
    from adapter.episodes.generations import union_runtime

    union_runtime.use(runtime)


def ready_harness_programs(config: Any) -> list[type]:
    """Hold each subprocess-runtime agent harness' uv program to this environment's versions
    (`adapter.episodes.harness_pins`) and prepare it before any episode (`adapter.episodes.harness_uv`),
    in the validated config Verifiers is about to load. 0.3.x hands
    the harness env to the preparation: it gains UV_OFFLINE=1 once uv's cache holds the program, and
    UV_COMPILE_BYTECODE=1.
    0.4.0 prepares with UV_OFFLINE=false (`PREPARE_FORCES`): the program is checked under that,
    against the index. `HarnessEnvironmentError` when it cannot be prepared. Returns the harness
    classes held (`harness_pins.release` each)."""
    from verifiers.v1.utils.loaders import harness_class

    forced = {} if metadata.version("verifiers").startswith("0.3.") else PREPARE_FORCES
    held: list[type] = []
    for agent in _agent_roles(config):
        if agent.harness is not None and agent.runtime.type == "subprocess":
            cls = harness_class(agent.harness.id)
            source = hold(cls, agent.harness.resolved_env)
            if source is not None:
                held.append(cls)
                agent.harness.env.update(prepared_env(source, agent.harness.resolved_env, forced=forced))
    return held
