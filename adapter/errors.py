"""Typed errors: one hierarchy, so callers branch on the type and never on message text.

    VfSglangError
    ├── ConfigurationError        an unsupported combination, found before any episode runs;
    │   │                         the message names the flag/version and what to do instead.
    │   │                         The bridge answers these with HTTP 400 (never retried).
    │   ├── EnvConfigError        the EnvConfig TOML: path, suffix, shape, V0, dialect
    │   ├── UnsupportedVersionError  installed verifiers/renderers refused by the version gate
    │   ├── UnsupportedRequestError  a generate request the adapter cannot serve (multimodal
    │   │                         features, routing policy without a session id, ...)
    │   ├── RewardKeyError        --eval-reward-key/--reward-key names a reward a healthy
    │   │                         trace does not have (names the key and the ones it has)
    │   ├── TrainerSampleError    the installed trainer's Sample cannot represent a rollout
    │   │                         (multi-branch traces under miles-rl 0.0.2: no rollout_id)
    │   ├── UnsupportedFeatureError  Verifiers' TrainClient or Renderers raised NotImplementedError
    │   │                         for what an episode asked (a dialect, a tool kind, a content
    │   │                         part, a renderer option): names it; stops the run at the first
    │   │                         group, never resampled
    │   ├── HarnessEnvironmentError  the harness program's uv script environment cannot be
    │   │                         prepared (offline, uv's cache lacking it): names UV_OFFLINE=1,
    │   │                         the cache and the command that fills it
    │   ├── AmbiguousIdentityError  a checkpoint path matches more than one registered model
    │   │                         (carries the candidates and the path component)
    │   ├── UnknownMilesError     the importable `miles` reads neither ABI selector variable
    │   └── ResumeStateError      a run's saved rollout state is missing, corrupt or another
    │                             taskset's (names the file); never a silent start from zero
    ├── WireFormatError           the engine answered something that is not a valid sample:
    │   │                         missing/mismatched logprobs, non-finite or positive values,
    │   │                         a count that disagrees with `completion_tokens`.
    │   └── FinishReasonError     a finish reason that is missing or unknown (names the value)
    ├── RolloutStalledError       every recent group was dropped: the run cannot make progress
    ├── InternalBridgeError       the bridge's own code failed answering a model call (a bug):
    │                             the train call raises it at the next group, cause chained
    ├── EngineAbortedError        SGLang reported `abort`, or the run cut the model call off as
    │                             its episodes were cancelled: never reported as a completed turn
    ├── EpisodeError              an episode failed as data (Verifiers recorded or raised a rollout
    │                             error): its group is dropped with `reason`; any other exception
    │                             from a generation shim is a bug and stops the run at once
    ├── LifetimeError             something the run opened, used outside its lifetime
    │   ├── EngineSessionClosedError  an engine session after its close, or on another loop
    │   └── RolloutFunctionClosedError  a rollout function after aclose(), or on a second loop
    │                             while the first (holding what it opened) still runs
    ├── EngineError               the engine failed; carries the HTTP status when there was one
    │   ├── EngineStatusError     it answered an error or redirect status (4xx but 429 and
    │   │   │                     3xx are never retried; redirects are never followed)
    │   │   └── EngineBusyError   429, with the engine's Retry-After (the one retried 4xx)
    │   ├── EngineTimeoutError    no answer within the configured timeout
    │   └── EngineUnavailableError  no connection (refused, reset, DNS)
    └── TraceConversionError      a trace broke a Sample invariant (names the trace and lengths)
        ├── StreamLengthError     a branch's three streams differ in length (carries the lengths)
        └── EmptyTraceError       a trace with no branches: nothing to train on

Outside the tree, each where its callers need a standard base (defined here):
    JSONBodyError(ValueError)     a body that is not one strict JSON document (adapter.wire.strict_json)
    ServeError(RuntimeError)      the bridge server did not start listening in time
    ZygoteError(RuntimeError)     a warm harness interpreter could not start, or start a child
                                  (adapter.episodes.zygotes: never the program's own failure, never
                                  an episode's: its program then runs as a plain subprocess)

The product's errors live here; the demo engine's and the check command's live beside their code:
    adapter.reference.errors      the reference engine's (the demo's stand-in for SGLang, never SGLang):
                                  ReferenceEngineError, BadRequestError, ContextLengthError, the tiny
                                  model's TinyModelBuildError, the pinned tokenizer files' AssetError
                                  and sglang_source's SGLangSourceError
    adapter.cli.server_checks     `vf-sglang check`'s verdicts: CheckFailed, CheckSkipped
    adapter.cli.interrupts        Interrupted: a command ended by SIGTERM or SIGINT, its episodes
                                  cancelled (exit status 128 + the signal; not an error to report)
One more exception lives in a shim: generation A's `AdapterRequestError` must subclass Verifiers' own
`ProviderError` (TrainClient retries by that type), and this module imports nothing from Verifiers.

An exhausted length budget is a clean truncation, not a failure: `adapter.wire.translate` raises
Verifiers' own `OverlongPromptError` where the installed release has one (0.2.x, 0.3.x: the
in-process TrainClient must recognise it by type), and `PromptTooLongError` below otherwise
(0.4.0, where the bridge is served and the error only becomes a 400 `overlong_prompt`).
"""

from __future__ import annotations

from collections.abc import Sequence


class VfSglangError(Exception):
    """Base of every error the adapter raises on purpose."""


class ConfigurationError(VfSglangError):
    """An unsupported configuration. Found before any episode runs; never retried."""


class EnvConfigError(ConfigurationError):
    """The EnvConfig TOML cannot be used (missing, not .toml, not a table, V0, wrong dialect)."""


class UnsupportedVersionError(ConfigurationError):
    """The installed verifiers/renderers combination is refused by the version gate."""


class UnsupportedRequestError(ConfigurationError):
    """A generate request the adapter cannot serve; the bridge answers it with HTTP 400."""


class TrainerSampleError(ConfigurationError):
    """The installed trainer's `Sample` cannot represent a rollout the environment produced."""


class UnsupportedFeatureError(ConfigurationError):
    """Verifiers' TrainClient or Renderers does not implement what an episode asked for: it raised
    `NotImplementedError` (recognised by that type, in process, or by the exception type Verifiers
    recorded on a model call). Every episode would fail alike, so the run stops at once."""


class WireFormatError(VfSglangError):
    """The engine's output cannot be turned into exact token ids and sampling logprobs."""


class FinishReasonError(WireFormatError):
    """The engine's finish reason is missing or not one the adapter knows."""

    def __init__(self, message: str, *, value: object) -> None:
        super().__init__(message)
        self.value = value


class EngineAbortedError(VfSglangError):
    """The engine aborted the request; the turn is not complete and must not be trained on."""

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class EpisodeError(VfSglangError):
    """An episode failed in a way Verifiers treats as data: the group is dropped and replaced.

    Raised by the generation shims only; `reason` is the drop reason the train loop counts."""

    def __init__(self, message: str, *, reason: str = "episode_error") -> None:
        super().__init__(message)
        self.reason = reason


class EngineError(VfSglangError):
    """The engine could not be reached, timed out, or answered with an error status."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class LifetimeError(VfSglangError):
    """Something the run opened was used outside its lifetime (adapter.rollout.lifetime)."""


class EngineSessionClosedError(LifetimeError):
    """An engine session was used after it was closed, or from another event loop than its own."""


class RolloutFunctionClosedError(LifetimeError):
    """A rollout function was called after `aclose()`, or on a second event loop while the loop
    that holds what it opened still runs."""


class EngineStatusError(EngineError):
    """The engine answered with an error status; `status_code` is that status."""


class EngineTimeoutError(EngineError):
    """The engine did not answer within the configured timeout."""


class EngineUnavailableError(EngineError):
    """The engine could not be reached (connection refused or reset, name not resolved)."""


class PromptTooLongError(VfSglangError):
    """The prompt leaves no room to generate (used where Verifiers has no OverlongPromptError)."""

    def __init__(self, message: str = "", *, status_code: int = 400) -> None:
        super().__init__(message)
        self.status_code = status_code


class TraceConversionError(VfSglangError):
    """A trace cannot become a Sample without breaking an invariant."""

    def __init__(self, message: str, *, trace_id: str | None = None) -> None:
        super().__init__(message)
        self.trace_id = trace_id


class StreamLengthError(TraceConversionError):
    """A branch's token_ids, sampled_mask and logprobs differ in length (`adapter.samples.streams`);
    `lengths` holds the three, in that order."""

    def __init__(self, lengths: tuple[int, int, int]) -> None:
        super().__init__(f"got {lengths[0]}, {lengths[1]}, {lengths[2]}")
        self.lengths = lengths


class EmptyTraceError(TraceConversionError):
    """A trace has no branches (e.g. a provider error or an overlong first prompt)."""


class RewardKeyError(ConfigurationError):
    """The reward key picks a reward that a healthy trace does not report."""


class EngineBusyError(EngineStatusError):
    """The engine answered 429; `retry_after` is its `Retry-After` in seconds, when given."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message, status_code=429)
        self.retry_after = retry_after


class HarnessEnvironmentError(ConfigurationError):
    """The harness program's uv script environment cannot be prepared before the first episode
    (no package index answered and uv's cache lacks it): `adapter.episodes.harness_uv`."""


class AmbiguousIdentityError(ConfigurationError):
    """A checkpoint path matches more than one registered model."""

    def __init__(self, message: str, candidates: Sequence[str] = (), component: str = "") -> None:
        super().__init__(message)
        self.candidates = tuple(candidates)
        self.component = component


class UnknownMilesError(ConfigurationError):
    """The importable `miles` reads neither selector variable (not Miles, or an unknown release)."""


class ResumeStateError(ConfigurationError):
    """A run's saved rollout state (task cursor, counters) is missing, unreadable or from another
    run's taskset: resuming would silently start from zero or draw other tasks. Names the file."""

    def __init__(self, message: str, *, path: object) -> None:
        super().__init__(message)
        self.path = path


class InternalBridgeError(VfSglangError):
    """The bridge's own code failed while answering a model call (a bug, not the engine's or the
    client's fault). Recorded on the bridge's state and raised by the train call at the next group
    with the original exception chained, so a bug stops the run instead of becoming dropped data."""


class RolloutStalledError(VfSglangError):
    """Every recent group was dropped: the run cannot make progress (drop counts attached)."""


class JSONBodyError(ValueError):
    """A body that is not one strict JSON document (the message says why)."""


class ServeError(RuntimeError):
    """The server did not start listening in time (port taken, bad host)."""


class ZygoteError(RuntimeError):
    """A warm harness interpreter could not start, or could not start a child (the message says why)."""
