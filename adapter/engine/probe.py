"""Preflight: what a run needs from outside the process, resolved before the first episode.

    resolve_tokenizer(source)  a local directory holding the tokenizer: the source itself, its
                               HF cache snapshot, or a bounded download (one hub probe with a
                               short timeout, never a retry loop). Otherwise a
                               `ConfigurationError` naming `--tokenizer` and `HF_HUB_OFFLINE`.
    check_engine(client)       the engine answers SGLang's `GET /model_info` (or the older
                               `/get_model_info`, `first_served`) with a JSON object SGLang's
                               way (`speaks_sglang`): "cannot reach" (no connection) and "not
                               SGLang" (HTML, 404, another JSON) are different one-liners.
    check_vocab(info, size)    the engine's vocabulary (when it reports `vocab_size`) holds
                               every token id the tokenizer can emit.

Each step costs at most a few seconds; every failure is one `ConfigurationError` line that
names the flag or variable to change.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from adapter.errors import ConfigurationError, EngineTimeoutError, EngineUnavailableError

if TYPE_CHECKING:
    from adapter.engine.client import SGLangClient

R = TypeVar("R")

# Files a tokenizer (and Renderers' chat template) may need; nothing of the weights.
TOKENIZER_PATTERNS = ["tokenizer*", "vocab*", "merges.txt", "special_tokens_map.json", "added_tokens.json",
                      "config.json", "generation_config.json", "chat_template*", "*.tiktoken"]
TOKENIZER_MARKERS = ("tokenizer.json", "tokenizer_config.json")
HUB_PROBE_TIMEOUT = 5.0
ENGINE_PROBE_TIMEOUT = 10.0
FIX = ("pass --tokenizer DIR (a local checkpoint or tokenizer directory; under Miles, --hf-checkpoint), "
       "or download it once with network access (`hf download {source}`); with HF_HUB_OFFLINE=1 only the "
       "local HF cache is searched")


def _offline(environ: Mapping[str, str]) -> bool:
    return environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _looks_like_path(source: str) -> bool:
    return source.startswith((".", "/", "~")) or source.count("/") > 1 or "\\" in source


def _cached_snapshot(source: str) -> str | None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return str(snapshot_download(source, allow_patterns=TOKENIZER_PATTERNS, local_files_only=True))
    except (LocalEntryNotFoundError, ValueError, OSError):
        return None


def _download(source: str, environ: Mapping[str, str]) -> str:
    """One bounded probe of the hub, then the tokenizer files only."""
    from huggingface_hub import constants, snapshot_download

    endpoint = environ.get("HF_ENDPOINT", constants.ENDPOINT).rstrip("/")
    try:
        probe = httpx.get(f"{endpoint}/api/models/{source}", timeout=HUB_PROBE_TIMEOUT)
    except httpx.HTTPError as exc:
        raise ConfigurationError(
            f"tokenizer {source!r} is not a local directory nor in the HF cache, and the hub "
            f"({endpoint}) cannot be reached ({type(exc).__name__}: {exc}): {FIX.format(source=source)}"
        ) from exc
    if probe.status_code != 200:
        raise ConfigurationError(
            f"tokenizer {source!r} is not a local directory nor in the HF cache, and the hub answered "
            f"{probe.status_code} for it (a typo, or a gated/private repo): {FIX.format(source=source)}"
        )
    return str(snapshot_download(source, allow_patterns=TOKENIZER_PATTERNS, etag_timeout=HUB_PROBE_TIMEOUT))


def resolve_tokenizer(source: str, *, environ: Mapping[str, str] | None = None) -> str:
    """The local directory to load the tokenizer from (see the module docstring)."""
    env = os.environ if environ is None else environ
    path = Path(source).expanduser()
    if path.is_dir():
        if not any((path / marker).is_file() for marker in TOKENIZER_MARKERS):
            raise ConfigurationError(
                f"{path} has no tokenizer (neither {' nor '.join(TOKENIZER_MARKERS)}): pass --tokenizer DIR "
                "pointing at the checkpoint or tokenizer directory")
        return str(path)
    if path.exists() or _looks_like_path(source):
        raise ConfigurationError(f"tokenizer directory {path} does not exist: pass --tokenizer DIR")
    cached = _cached_snapshot(source)
    if cached is not None:
        return cached
    if _offline(env):
        raise ConfigurationError(
            f"tokenizer {source!r} is not a local directory and not in the HF cache, and HF_HUB_OFFLINE is "
            f"set: {FIX.format(source=source)}")
    return _download(source, env)


# SGLang answers its model and server facts on `/model_info` and `/server_info`; the older names
# `/get_model_info` and `/get_server_info` are still served but deprecated ("will be removed in a
# future version", sglang 0.5.15 and 0.5.23), and releases before the new names have only those.
# Probes ask the new name first and the old one only when the new one answers 404.
MODEL_INFO_PATHS = ("/model_info", "/get_model_info")
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")

# Keys every SGLang release's model-info route answers (its http_server's own dict literal; the
# sglang-schema lane reads them from the 0.5.15 and 0.5.23 wheels) and OpenAI-style servers lack.
SGLANG_MODEL_INFO_KEYS = ("model_path", "is_generation")


def speaks_sglang(info: object) -> bool:
    """Whether a model-info answer is SGLang's (or its router's, which forwards a worker's):
    one rule for preflight and the live checks."""
    return (isinstance(info, dict) and all(key in info for key in SGLANG_MODEL_INFO_KEYS)
            and isinstance(info["model_path"], str))


async def first_served(paths: Sequence[str], fetch: Callable[[str], Awaitable[R]],
                       not_served: Callable[[R], bool]) -> tuple[list[str], R]:
    """Fetch `paths` in order (the current name first) until one is served: the next is asked
    only when `not_served` says so of this one's answer (HTTP 404). Returns the paths asked and
    the last answer. One rule for preflight, the live checks and the cassette header."""
    asked: list[str] = []
    for path in paths:
        asked.append(path)
        answer = await fetch(path)
        if not not_served(answer):
            break
    return asked, answer


async def check_engine(engine: SGLangClient, *, timeout: float = ENGINE_PROBE_TIMEOUT) -> dict[str, Any]:
    """SGLang's model info (`MODEL_INFO_PATHS`) at the client's address, asked once per path with a
    `timeout`-second deadline and no retry, or one line saying the engine is unreachable or not SGLang."""
    url = engine.base_url
    try:
        asked, answer = await first_served(MODEL_INFO_PATHS, lambda path: engine.peek(path, deadline=timeout),
                                           lambda peeked: peeked.status == 404)
    except (EngineUnavailableError, EngineTimeoutError) as exc:
        raise ConfigurationError(f"cannot reach the engine at {url}: {exc}") from exc
    kind = answer.content_type.split(";")[0] or "no content type"
    try:
        info = json.loads(answer.body)
    except ValueError:
        info = None
    if answer.status != 200 or not speaks_sglang(info):
        raise ConfigurationError(
            f"the server at {url} is not SGLang: GET {' then '.join(asked)} answered {answer.status} {kind} "
            f"without {' and '.join(SGLANG_MODEL_INFO_KEYS)}: pass the SGLang server's (or its router's) URL")
    assert isinstance(info, dict)
    return info


def check_vocab(info: Mapping[str, Any], tokenizer_size: int, *, tokenizer: str) -> None:
    """The tokenizer must not emit ids the model has no embedding for (models pad upwards)."""
    vocab = info.get("vocab_size")
    if isinstance(vocab, int) and not isinstance(vocab, bool) and tokenizer_size > vocab:
        raise ConfigurationError(
            f"the tokenizer {tokenizer} has {tokenizer_size} tokens but the engine's model "
            f"{info.get('model_path')!r} has a vocabulary of {vocab}: they are different models; pass "
            "the served model's tokenizer with --tokenizer")
