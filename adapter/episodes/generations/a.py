"""Generation A (verifiers 0.2.x): the TrainClient wired to the bridge in-process.

`BridgeTrainClient` is Verifiers' own `TrainClient` (Renderers does the rendering, prompt-id
bridging across turns and response parsing) with four adapter duties:
  * the renderer pool loads the tokenizer from a local path (a trainer checkpoint) but gives it
    the registered renderer identity (`adapter.episodes.identity`), so a local Qwen3 checkpoint gets the
    Qwen3 renderer with tool and reasoning parsing, not the template fallback;
  * requests the adapter cannot serve (streaming relay, auxiliary dialect routes, non-chat
    dialects, tools with a renderer that cannot parse them) fail with `AdapterRequestError`,
    a 400 `ProviderError` naming the setting to change (Verifiers does not retry a 400); the
    typed `UnsupportedRequestError` behind it is recorded on the bridge (`BridgeState.refusal`),
    where the orchestrator finds it and stops the run, exactly as for the bridge's own refusals;
  * a `NotImplementedError` from Verifiers' TrainClient or Renderers (an unsupported tool kind,
    content part, renderer option) is caught by that type and refused the same way, as an
    `UnsupportedFeatureError` naming what was not implemented (Verifiers would otherwise answer
    the harness a retried 502 and record a harness error per trace, resampled until the stall);
  * the bridge's own `configuration_error` 400s come back as that same type.
`make_train_client(app)` calls the bridge's typed handler directly: no HTTP client, no port.
`GenerationA` runs episodes: the environment from the EnvConfig (its harness program prepared
first, offline from uv's cache where it can: `ready_harness_program`), its tasks, groups of n.
"""

from __future__ import annotations

import contextlib
import functools
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from openai import APIStatusError, AsyncOpenAI
from renderers.base import RendererPool, create_renderer, load_tokenizer
from verifiers.v1.clients.train import TrainClient
from verifiers.v1.dialects import ChatDialect, Dialect
from verifiers.v1.errors import ProviderError

from adapter.bridge.handler import CONFIGURATION_ERROR, BridgeState
from adapter.config.settings import Settings
from adapter.episodes import prefork
from adapter.episodes.caches import with_harness_cache
from adapter.episodes.generations import harness_runtime, release_process_holds, unsupported_feature
from adapter.episodes.harness_pins import hold
from adapter.episodes.harness_uv import prepared_env
from adapter.episodes.identity import explicit_advice, renderer_identity
from adapter.episodes.tokenizer_imports import import_tokenizer_classes
from adapter.errors import ConfigurationError, EpisodeError, UnsupportedRequestError

# The in-process bridge's address; nothing listens there (the ASGI transport answers). Each
# bridge gets its own host name: Renderers caches `/v1/models`' max_model_len per base URL for
# the whole process, and a train and an eval bridge may advertise different context lengths.
IN_PROCESS_HOST = "vf-sglang-bridge-{}"


class AdapterRequestError(ProviderError):  # type: ignore[misc]  # Verifiers is untyped (no py.typed)
    """A request this adapter cannot serve: a configuration problem, HTTP 400, never retried."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status_code=400)


def _configuration_error_message(exc: BaseException) -> str | None:
    """The bridge's message when `exc` came from a `configuration_error` 400, else None."""
    cause = exc.__cause__
    if not isinstance(cause, APIStatusError) or cause.status_code != 400:
        return None
    body = cause.body
    error = body.get("error", body) if isinstance(body, Mapping) else None
    if isinstance(error, Mapping) and error.get("type") == CONFIGURATION_ERROR:
        return str(error.get("message", ""))
    return None


class BridgeTrainClient(TrainClient):  # type: ignore[misc]  # Verifiers is untyped (no py.typed)
    """Verifiers' TrainClient with a local tokenizer, a registered renderer identity and
    typed refusals (see the module docstring)."""

    _pool: Any  # the base class's lazily built renderer pool

    def __init__(
        self,
        openai: AsyncOpenAI,
        *,
        tokenizer_path: str | None = None,
        renderer_model_name: str | None = None,
        pool_size: int = 1,
    ) -> None:
        super().__init__(openai, pool_size=pool_size, renderer_model_name=renderer_model_name)
        self.tokenizer_path = tokenizer_path
        self.bridge: BridgeState | None = None  # where refusals are recorded (set by GenerationA)

    def _refuse(self, message: str | ConfigurationError) -> AdapterRequestError:
        """Record the typed refusal on the bridge (a message: `UnsupportedRequestError`) and
        return the 400 Verifiers understands."""
        refusal = UnsupportedRequestError(message) if isinstance(message, str) else message
        if self.bridge is not None:
            self.bridge.refusal = refusal
        return AdapterRequestError(str(refusal))

    def renderer_name(self, model: str) -> str:
        """The name Renderers resolves its renderer by: the identity the job decided (explicit or
        inferred: `adapter.episodes.identity`), else that of the tokenizer path, else the model id."""
        if self.renderer_model_name:
            return str(self.renderer_model_name)
        if self.tokenizer_path:
            return renderer_identity(self.tokenizer_path) or model
        return model

    def _renderer_pool(self, model: str, *, chat_template_kwargs: Mapping[str, Any] | None = None) -> Any:
        if self._pool is None:
            source = self.tokenizer_path or self.renderer_name(model)
            kwargs = json.dumps(dict(chat_template_kwargs or {}), sort_keys=True)
            self._pool = _shared_pool(source, self.renderer_name(model), kwargs, self.pool_size)
        return self._pool

    async def get_response(self, dialect: Dialect, body: dict[str, Any], model: str, sampling_args: Any,
                           session_id: str | None = None, turn: Any = None, headers: Any = None) -> Any:
        try:
            return await self._get_response(dialect, body, model, sampling_args, session_id=session_id, turn=turn,
                                            headers=headers)
        except NotImplementedError as exc:  # by type: what Verifiers/Renderers say they do not implement
            raise self._refuse(unsupported_feature(str(exc), origin=_raised_in(exc))) from exc

    async def _get_response(self, dialect: Dialect, body: dict[str, Any], model: str, sampling_args: Any, *,
                            session_id: str | None, turn: Any, headers: Any) -> Any:
        if not isinstance(dialect, ChatDialect):
            raise self._refuse(
                f"the {type(dialect).__name__} dialect cannot be rendered to tokens: the TrainClient "
                "serves chat-completions only; use a harness that speaks chat completions"
            )
        if body.get("tools"):
            pool = self._renderer_pool(model, chat_template_kwargs=_template_kwargs(sampling_args))
            if not pool.supports_tools:
                advice = explicit_advice(self.bridge.settings if self.bridge is not None else Settings())
                raise self._refuse(
                    f"the task sends tools but the renderer for {self.renderer_name(model)!r} cannot "
                    f"parse tool calls: {advice} whose renderer parses them, or use a "
                    "tool-less taskset"
                )
        try:
            return await super().get_response(
                dialect, body, model, sampling_args, session_id=session_id, turn=turn, headers=headers
            )
        except ProviderError as exc:
            message = _configuration_error_message(exc)
            if message is not None:
                raise AdapterRequestError(message) from exc
            raise

    async def relay(self, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse(
            "streaming responses cannot be relayed: the TrainClient generates token ids and returns "
            "whole turns; configure the harness with stream=false"
        )

    async def relay_aux(self, dialect: Dialect, route: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise self._refuse(
            f"auxiliary route {route!r} of the {type(dialect).__name__} dialect is not served by "
            "the adapter: use a harness that only makes chat-completions calls"
        )


def _raised_in(exc: BaseException) -> str | None:
    """The module whose code raised `exc` (its innermost traceback frame), for the refusal."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    name = tb.tb_frame.f_globals.get("__name__") if tb is not None else None
    return name if isinstance(name, str) else None


@functools.cache
def _shared_pool(source: str, identity: str, template_kwargs: str, size: int) -> RendererPool:
    """One renderer pool per (tokenizer, identity, template kwargs, size) per process: loading
    a tokenizer costs seconds, and a train and an eval client can share the same renderers
    (the pool serialises access to each one)."""

    def factory() -> Any:
        tokenizer = load_tokenizer(source)
        tokenizer.name_or_path = identity
        return create_renderer(tokenizer, chat_template_kwargs=json.loads(template_kwargs) or None)

    import_tokenizer_classes()  # the pool's threads would otherwise race on transformers' first import
    return RendererPool(factory, size=size)


def _template_kwargs(sampling_args: Any) -> Mapping[str, Any] | None:
    extra = getattr(sampling_args, "extra_body", None) or {}
    return extra.get("chat_template_kwargs")


def make_train_client(
    app: Any,
    *,
    tokenizer_path: str | None = None,
    renderer_model_name: str | None = None,
    pool_size: int = 1,
) -> BridgeTrainClient:
    """A TrainClient calling the bridge `app`'s typed handler directly (`adapter.bridge.direct`): no
    HTTP client, no port. Nothing here retries: the bridge's per-turn attempt budget does."""
    from adapter.bridge.direct import DirectBridgeClient

    direct = DirectBridgeClient(app.state.bridge, base_url=f"http://{IN_PROCESS_HOST.format(uuid.uuid4().hex[:12])}/v1")
    return BridgeTrainClient(
        direct,  # type: ignore[arg-type]  # the slice of AsyncOpenAI that TrainClient and Renderers use
        tokenizer_path=tokenizer_path, renderer_model_name=renderer_model_name, pool_size=pool_size,
    )


# --- episodes ---------------------------------------------------------------------------------

def sampling_config(settings: Settings) -> Any:
    """Verifiers' SamplingConfig from the trainer's rollout options (keys SGLang knows pass
    through the bridge; `seed` becomes `sampling_seed` there)."""
    import verifiers.v1 as vf

    extra: dict[str, Any] = {}
    if settings.apply_chat_template_kwargs:
        extra["chat_template_kwargs"] = dict(settings.apply_chat_template_kwargs)
    if settings.rollout_min_p > 0:
        extra["min_p"] = settings.rollout_min_p
    values: dict[str, Any] = {
        "temperature": settings.rollout_temperature,
        "top_p": settings.rollout_top_p,
        "max_tokens": settings.rollout_max_response_len,
        "top_k": settings.rollout_top_k,
        "min_tokens": settings.rollout_min_new_tokens,
        "extra_body": extra or None,
    }
    return vf.SamplingConfig(**{k: v for k, v in values.items() if v is not None})


def with_pinned_harness_cache(config_data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the config whose harness, when it pins UV_EXCLUDE_NEWER without its own
    UV_CACHE_DIR, gets a per-user cache for that pin (`adapter.episodes.caches`): uv reuses a script
    environment without re-resolving, so a pinned harness must not share the default cache."""
    data = dict(config_data)
    harness = data.get("harness")
    if isinstance(harness, Mapping) and isinstance(harness.get("env"), Mapping):
        data["harness"] = {**harness, "env": with_harness_cache(harness["env"])}
    return data


def ready_harness_program(harness: Any) -> list[type]:
    """Hold a subprocess-runtime harness' uv program to this environment's versions
    (`adapter.episodes.harness_pins`) and prepare it before any episode (`adapter.episodes.harness_uv`):
    its env gains UV_OFFLINE=1 once uv's cache holds the program, and UV_COMPILE_BYTECODE=1 (0.2.x
    hands the harness env to the preparation), or `HarnessEnvironmentError`. A container or
    sandbox runtime has its own uv. Returns the harness classes held (`harness_pins.release` each)."""
    if harness.config.runtime.type != "subprocess":
        return []
    source = hold(type(harness), harness.config.resolved_env)
    if source is None:
        return []
    harness.config.env.update(prepared_env(source, harness.config.resolved_env))
    return [type(harness)]


def use_harness_runtime(runtime: str) -> None:
    """`prefork`: this process' `type = "subprocess"` rollouts fork their programs from warm
    interpreters (adapter.episodes.generations.union_runtime); `subprocess`: Verifiers' own runtime."""
    from adapter.episodes.generations import union_runtime

    union_runtime.use(runtime)


class GenerationA:
    """The generation-A episode runner: one `vf.Environment` from the EnvConfig, its tasks,
    and groups of n rollouts run inside `env.serving()` (group rewards applied by Verifiers)."""

    generation = "A"

    def __init__(self, config_data: Mapping[str, Any]) -> None:
        import verifiers.v1 as vf
        from verifiers.v1.decorators import discover_decorated

        self.env = vf.Environment(vf.EnvConfig.model_validate(with_pinned_harness_cache(config_data)))
        self._held_programs = ready_harness_program(self.env.harness)
        self._prefork = harness_runtime(prefork.chosen())[0] == "prefork"
        use_harness_runtime("prefork" if self._prefork else "subprocess")
        if self._prefork:
            prefork.acquire()
        self.tasks = list(self.env.taskset.load())
        self.has_group_reward = any(discover_decorated(task, "group_reward") for task in self.tasks)

    def serving(self) -> Any:
        """The env-level serving resources (interception pool, shared tool servers)."""
        return self.env.serving()

    def sized_serving(self, n: int) -> None:
        """Nothing: generation A runs a group of any n in the one env."""
        return None

    def release(self) -> None:
        """Put back what loading changed for the whole process: the harness program held to the
        host's versions (`adapter.episodes.harness_pins`); the zygotes and the runtime plug, once
        no other loaded environment runs pre-forked (`prefork.release`)."""
        held, forked, self._held_programs, self._prefork = self._held_programs, self._prefork, [], False
        release_process_holds(held, forked, lambda: use_harness_runtime("subprocess"))

    @staticmethod
    @contextlib.asynccontextmanager
    async def connect(
        app: Any, *, tokenizer_path: str | None = None, renderer_model_name: str | None = None,
        pool_size: int = 1,
    ) -> AsyncIterator[BridgeTrainClient]:
        """Generation A builds the TrainClient itself: the bridge in-process, closed on exit."""
        client = make_train_client(app, tokenizer_path=tokenizer_path, renderer_model_name=renderer_model_name,
                                   pool_size=pool_size)
        client.bridge = app.state.bridge
        try:
            yield client
        finally:
            await client.close()

    async def run_group(
        self,
        task_index: int,
        *,
        n: int,
        client: BridgeTrainClient,
        model: str,
        settings: Settings,
        seed_base: int | None,
        semaphore: Any,
    ) -> list[Any]:
        """Run the n rollouts of one task; with `seed_base`, rollout i samples with seed
        `seed_base + i` (deterministic inference)."""
        import verifiers.v1 as vf

        sampling = sampling_config(settings)
        ctx = vf.ModelContext(model=model, client=client, sampling=sampling)
        episode = self.env.episode(self.tasks[task_index], ctx, n)
        if seed_base is not None:
            for offset, rollout in enumerate(episode.rollouts):
                seeded = sampling.model_copy(update={"seed": seed_base + offset})
                rollout.ctx = vf.ModelContext(model=model, client=client, sampling=seeded)
        try:
            traces: list[Any] = await episode.run(semaphore=semaphore)
            return traces
        except vf.errors.RolloutError as exc:  # Verifiers' own "a rollout failed" family: data
            raise EpisodeError(f"episode failed: {type(exc).__name__}: {exc}") from exc
