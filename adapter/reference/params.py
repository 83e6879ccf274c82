"""SGLang `sampling_params` → one validated, typed `SamplingParams` for the reference engine.

Consumes: the `sampling_params` object of a `/generate` body (SGLang 0.5's `SamplingParams`
keyword names). Emits: a frozen `SamplingParams`, or `BadRequestError` (HTTP 400) naming the
key, the value and what is accepted.

Key policy (the reference engine never silently changes what a sampler would do):
  * honoured: max_new_tokens, min_new_tokens, temperature, top_p, top_k, min_p, stop,
    stop_token_ids, ignore_eos, skip_special_tokens, no_stop_trim, sampling_seed;
  * accepted, no effect on the sampled tokens: n (must be 1), spaces_between_special_tokens
    (`text` is decoded without spaces between special tokens), stream_interval;
  * accepted only at their neutral value (penalties, constrained decoding, logit bias), any
    other value is refused as unsupported;
  * any other key is refused: SGLang's own `SamplingParams(**params)` rejects unknown keys too.

When SGLang's own `SamplingParams` can be loaded (an sglang tree named by `VF_SGLANG_TREES`,
the newest wins, or an installed `sglang`; `msgspec` must be importable), every object first
goes through it exactly as SGLang's tokenizer manager does (`SamplingParams(**params)`,
`normalize(tokenizer)`, `verify(vocab_size)`), so this engine refuses everything SGLang refuses,
with SGLang's message and version.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapter.reference.errors import BadRequestError

DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's default
GREEDY_EPS = 1e-6  # SGLang treats a temperature below this as greedy

IGNORED_KEYS = frozenset({"n", "spaces_between_special_tokens", "stream_interval"})
NEUTRAL_ONLY: dict[str, Any] = {
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "repetition_penalty": 1.0,
    "json_schema": None,
    "regex": None,
    "ebnf": None,
    "structural_tag": None,
    "stop_regex": None,
    "custom_params": None,
    "logit_bias": None,
}


@dataclass(frozen=True)
class SamplingParams:
    """What one request's decode loop honours. `max_new_tokens` None: up to the context end."""

    max_new_tokens: int | None = DEFAULT_MAX_NEW_TOKENS
    min_new_tokens: int = 0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1  # -1 or 0: off
    min_p: float = 0.0
    stop: tuple[str, ...] = ()
    stop_token_ids: frozenset[int] = frozenset()
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    no_stop_trim: bool = False
    sampling_seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_EPS or self.top_k == 1


HONOURED = frozenset(SamplingParams.__dataclass_fields__)


def _int(key: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BadRequestError(f"sampling_params.{key} must be an integer ≥ {minimum}, got {value!r}")
    return value


def _float(key: str, value: Any, low: float, high: float, *, low_open: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and (value > low or (not low_open and value == low)) and value <= high:
        return float(value)
    bound = f"{'(' if low_open else '['}{low}, {high}]"
    raise BadRequestError(f"sampling_params.{key} must be a number in {bound}, got {value!r}")


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise BadRequestError(f"sampling_params.{key} must be true or false, got {value!r}")
    return value


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(s, str) and s for s in items):
        raise BadRequestError(f"sampling_params.stop must be a string or a list of non-empty strings, got {value!r}")
    return tuple(items)


def _stop_ids(value: Any) -> frozenset[int]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise BadRequestError(f"sampling_params.stop_token_ids must be a list of token ids, got {value!r}")
    return frozenset(value)


def _check_unsupported(raw: Mapping[str, Any]) -> None:
    for key, value in raw.items():
        if key in HONOURED or key in IGNORED_KEYS:
            continue
        if key in NEUTRAL_ONLY:
            if value is not None and value != NEUTRAL_ONLY[key]:
                raise BadRequestError(
                    f"sampling_params.{key}={value!r} is not supported by the reference engine: "
                    f"omit it or send {NEUTRAL_ONLY[key]!r}"
                )
            continue
        raise BadRequestError(
            f"unknown sampling_params key {key!r}: SGLang's SamplingParams accepts "
            f"{sorted(HONOURED | IGNORED_KEYS | set(NEUTRAL_ONLY))}"
        )
    if raw.get("n", 1) != 1:
        raise BadRequestError(f"sampling_params.n must be 1 (one sample per request), got {raw['n']!r}")


@functools.cache
def sglang_sampling_params() -> tuple[str, type] | None:
    """(version, SGLang's SamplingParams class) when an sglang tree is at hand, else None."""
    from adapter.reference.sglang_source import SAMPLING_MODULE, import_pure, version_of

    trees = [Path(p) for p in os.environ.get("VF_SGLANG_TREES", "").split(os.pathsep) if p]
    spec = importlib.util.find_spec("sglang") if not trees else None
    if spec is not None and spec.submodule_search_locations:
        trees = [Path(next(iter(spec.submodule_search_locations))).parent]
    if not trees or importlib.util.find_spec("msgspec") is None:
        return None
    newest = max(trees, key=lambda tree: tuple(int(x) for x in version_of(tree).split(".")[:3] if x.isdigit()))
    return version_of(newest), import_pure(newest, SAMPLING_MODULE).SamplingParams


def check_with_sglang(raw: Mapping[str, Any], *, tokenizer: Any, vocab_size: int) -> None:
    """Refuse what SGLang's own SamplingParams refuses (a no-op when it is not at hand)."""
    found = sglang_sampling_params()
    if found is None:
        return
    version, sglang_class = found
    try:
        params = sglang_class(**raw)
        params.normalize(tokenizer)
        params.verify(vocab_size)
    except (TypeError, ValueError) as exc:
        raise BadRequestError(f"sglang {version}'s SamplingParams refuses {dict(raw)!r}: {exc}") from exc


def parse_sampling_params(raw: Any, *, tokenizer: Any = None, vocab_size: int | None = None) -> SamplingParams:
    """Validate one `sampling_params` object (None or absent: every default). With `vocab_size`,
    SGLang's own SamplingParams checks it first when it can be loaded (`check_with_sglang`)."""
    if raw is None:
        return SamplingParams()
    if not isinstance(raw, Mapping):
        raise BadRequestError(f"sampling_params must be an object, got {type(raw).__name__}")
    if vocab_size is not None:
        check_with_sglang(raw, tokenizer=tokenizer, vocab_size=vocab_size)
    _check_unsupported(raw)
    get = raw.get
    raw_max = get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    max_new = None if raw_max is None else _int("max_new_tokens", raw_max, minimum=0)
    min_new = _int("min_new_tokens", get("min_new_tokens") or 0, minimum=0)
    if max_new is not None and min_new > max_new:
        raise BadRequestError(f"sampling_params.min_new_tokens ({min_new}) exceeds max_new_tokens ({max_new})")
    top_k = get("top_k", -1)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < -1:
        raise BadRequestError(f"sampling_params.top_k must be -1 or 0 (off) or an integer ≥ 1, got {top_k!r}")
    seed = get("sampling_seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequestError(f"sampling_params.sampling_seed must be an integer, got {seed!r}")
    return SamplingParams(
        max_new_tokens=max_new,
        min_new_tokens=min_new,
        temperature=_float("temperature", get("temperature", 1.0), 0.0, math.inf),
        top_p=_float("top_p", get("top_p", 1.0), 0.0, 1.0, low_open=True),
        top_k=top_k,
        min_p=_float("min_p", get("min_p", 0.0), 0.0, 1.0),
        stop=_stop(get("stop")),
        stop_token_ids=_stop_ids(get("stop_token_ids")),
        ignore_eos=_bool("ignore_eos", get("ignore_eos", False)),
        skip_special_tokens=_bool("skip_special_tokens", get("skip_special_tokens", True)),
        no_stop_trim=_bool("no_stop_trim", get("no_stop_trim", False)),
        sampling_seed=seed,
    )
