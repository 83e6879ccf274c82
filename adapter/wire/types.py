"""Typed models of the two wire edges, validated strictly (pydantic-core, no Python loop per token).

    GenerateBody      the Renderers generate body (`POST /inference/v1/generate`), produced by
                      `renderers.client.generate`, consumed by `adapter.wire.translate.to_sglang_request`
    EngineOutput      one SGLang `/generate` output, produced by SGLang's tokenizer manager,
                      consumed by `adapter.wire.translate.to_renderers_response`

Strict means: ints are ints (not `true`, `1.5`, `"10"` or `1e30`), floats are finite, lists are
lists (a string is not a list of characters), objects are objects. Keys this adapter does not
read pass through (Renderers and SGLang add fields over time), but every key it reads or
forwards with a meaning is typed here. A failure is `UnsupportedRequestError` for the client's
body (a 400 `configuration_error`) and `WireFormatError` for the engine's output (a 502
`engine_error`), each naming the field (`sampling_params.max_tokens: ...`).
"""

from __future__ import annotations

import operator
import sys
from array import array
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from adapter.errors import UnsupportedRequestError, WireFormatError
from adapter.wire.strict_json import dumps

MAX_TOKEN_ID = 2**31 - 1


# 32-bit unsigned items (the C `unsigned int` of every platform CPython supports); the byte of
# each item holding its top bit, for the < 2**31 check below.
if array("I").itemsize != 4:  # pragma: no cover
    raise ImportError(f"array('I') items are {array('I').itemsize} bytes here, not 4: token id checks need 4")
_HIGH_BYTES = slice(3, None, 4) if sys.byteorder == "little" else slice(0, None, 4)


def _strict_token_ids(value: Any) -> list[int]:
    """Strict token ids in [0, MAX_TOKEN_ID] in three C-speed passes and no Python loop per id
    (~7 µs per 1k ids, a quarter of pydantic-core's strict `list[int]` plus `min`/`max`):
    `array("I")` refuses every item that is not an int in [0, 2**32) (floats, strings, None,
    lists, negatives); the top byte of each packed item is ASCII iff the id is < 2**31; and
    the JSON encoding of a list of ints has no `t`/`f` iff no item is a bool (`True` packs as 1).
    A failure names the first bad item (`_bad_token_id`, on failure only)."""
    if type(value) is not list:
        raise PydanticCustomError("list_type", "Input should be a valid list")
    try:
        ok = array("I", value).tobytes()[_HIGH_BYTES].isascii()
        encoded = dumps(value) if ok else b""
    except (TypeError, OverflowError):  # orjson's JSONEncodeError is a TypeError
        ok, encoded = False, b""
    if ok and b"t" not in encoded and b"f" not in encoded:
        return value
    index = next(i for i, item in enumerate(value) if _bad_token_id(item))
    raise PydanticCustomError("token_id", "token id at index {index} is {value}: ids are ints in [0, {limit}]",
                              {"index": index, "value": repr(value[index]), "limit": MAX_TOKEN_ID})


def _bad_token_id(item: Any) -> bool:
    """The slow path's verdict, the same as the fast path's: an int (a subclass too) that is not
    a bool, in [0, MAX_TOKEN_ID]."""
    return isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= MAX_TOKEN_ID


# Token ids: strict ints in [0, 2**31) (vocabularies are far smaller; the bound refuses 1e30).
TokenIds = Annotated[list[int], PlainValidator(_strict_token_ids)]
Count = Annotated[int, Field(ge=0, le=2**31 - 1)]
Positive = Annotated[int, Field(ge=1, le=2**31 - 1)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
Seed = Annotated[int, Field(ge=-(2**63), le=2**64 - 1)]

_STRICT = ConfigDict(strict=True, extra="allow", frozen=True)


class SamplingParams(BaseModel):
    """Renderers' `sampling_params`: Verifiers' SamplingConfig plus what Renderers sets
    (`logprobs=1`, `skip_special_tokens`, `stop_token_ids`). Other keys pass through to SGLang."""

    model_config = _STRICT

    max_tokens: Positive | None = None  # renamed max_new_tokens; None: the trainer's budget
    min_tokens: Count | None = None  # renamed min_new_tokens
    max_new_tokens: Positive | None = None  # SGLang's own names, when a caller sends them
    min_new_tokens: Count | None = None
    seed: Seed | None = None  # renamed sampling_seed
    sampling_seed: Seed | None = None
    temperature: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = None
    top_k: int | None = None
    min_p: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    repetition_penalty: Finite | None = None
    frequency_penalty: Finite | None = None
    presence_penalty: Finite | None = None
    stop: str | list[str] | None = None
    stop_token_ids: TokenIds | None = None
    # Renderers sets 1 (replaced by return_logprob); renderers 0.1.13 sends k+2 for a top-k head of k,
    # which becomes SGLang's top_logprobs_num (adapter.wire.translate.top_logprobs_num)
    logprobs: int | bool | None = None
    extra_args: dict[str, Any] | None = None  # keys the client sets for itself (CLIENT_EXTRA_ARGS)
    skip_special_tokens: bool | None = None
    ignore_eos: bool | None = None
    n: Positive | None = None


class GenerateBody(BaseModel):
    """The Renderers generate body."""

    model_config = _STRICT

    model: str | None = None  # the model id episodes use (not forwarded: SGLang serves one)
    token_ids: Annotated[TokenIds, Field(min_length=1)]  # the whole prompt of this turn
    sampling_params: SamplingParams = SamplingParams()
    features: Any = None  # multimodal inputs: refused when present
    cache_salt: str | None = None  # becomes SGLang's extra_key (prefix-cache isolation)
    priority: int | None = None  # SGLang's scheduling priority


class WeightSpan(BaseModel):
    """One span of SGLang 0.5.23's `meta_info.weight_versions`: tokens [start, end) were sampled
    under weights `version` (an update during a long answer splits it into several spans)."""

    model_config = _STRICT

    version: str | int
    start: Count | None = None
    end: Count | None = None


class MetaInfo(BaseModel):
    """SGLang's `meta_info`. `output_token_logprobs` items are `[logprob, token_id, text|None]`;
    their values are checked by `adapter.wire.translate.sampled_tokens`, which names the item."""

    model_config = _STRICT

    id: str | int | None = None  # SGLang's request id; None: the bridge makes one
    finish_reason: Any = None  # {"type": stop|length|abort, ...} or a bare string; see wire
    completion_tokens: Count | None = None  # must equal the number of sampled tokens
    output_token_logprobs: list[list[Any]] | None = None  # None: return_logprob was not set
    # per sampled token, its top_logprobs_num candidates `[logprob, token_id, text|None]` (asked only)
    output_top_logprobs: list[list[list[Any]] | None] | None = None
    # Read by adapter.bridge.stats into Miles' Sample fields (prefix-cache rate, spec decoding,
    # weight versions), under the names SGLang 0.5.16 and 0.5.23 send:
    prompt_tokens: Count | None = None
    cached_tokens: Count | None = None
    weight_version: str | int | None = None  # the weights of the whole answer (the last span's, 0.5.23)
    weight_versions: list[WeightSpan] | None = None  # 0.5.23: per-token spans; None before it
    spec_num_correct_drafts: Count | None = None  # speculative counters: only with a draft model
    spec_num_proposed_drafts: Count | None = None
    spec_verify_ct: Count | None = None


class EngineOutput(BaseModel):
    """One SGLang `/generate` output (not a batch)."""

    model_config = _STRICT

    output_ids: TokenIds | None = None  # must equal the ids in output_token_logprobs
    meta_info: MetaInfo


def _where(error: ErrorDetails) -> str:
    return ".".join(str(part) for part in error["loc"]) or "body"


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    value = repr(error.get("input"))
    shown = value if len(value) <= 60 else value[:57] + "..."
    return f"{_where(error)}: {error['msg']} (got {shown})"


def parse_generate_body(body: Any) -> GenerateBody:
    if isinstance(body, GenerateBody):
        return body
    if not isinstance(body, dict):
        raise UnsupportedRequestError(f"the generate body must be a JSON object, got {type(body).__name__}")
    try:
        return GenerateBody.model_validate(body)
    except ValidationError as exc:
        raise UnsupportedRequestError(f"bad generate request: {_first_error(exc)}") from exc


def parse_engine_output(output: Any) -> EngineOutput:
    if isinstance(output, EngineOutput):
        return output
    if isinstance(output, list):
        raise WireFormatError(f"expected one /generate output, got a batch of {len(output)}")
    if not isinstance(output, dict) or not isinstance(output.get("meta_info"), dict):
        raise WireFormatError("engine output must be an object with a meta_info object")
    try:
        return EngineOutput.model_validate(output)
    except ValidationError as exc:
        raise WireFormatError(f"malformed engine output: {_first_error(exc)}") from exc


TOKEN_IDS: TypeAdapter[list[int]] = TypeAdapter(TokenIds, config=ConfigDict(strict=True))
LOGPROBS: TypeAdapter[list[float]] = TypeAdapter(list[Finite], config=ConfigDict(strict=True))


_FIRST = operator.itemgetter(0)
_SECOND = operator.itemgetter(1)


def logprob_items(items: list[list[Any]]) -> tuple[list[int], list[float]]:
    """SGLang's `[logprob, token_id, ...]` items → (ids, logprobs), each column split out by a
    C-level `map(itemgetter)` and validated strictly by pydantic-core; errors name the item."""
    try:
        raw_logprobs = list(map(_FIRST, items))
        raw_ids = list(map(_SECOND, items))
    except IndexError:
        raise _bad_item(items) from None
    try:
        logprobs = LOGPROBS.validate_python(raw_logprobs)
    except ValidationError as exc:
        raise _logprob_error(items, exc) from exc
    try:
        ids = TOKEN_IDS.validate_python(raw_ids)
    except ValidationError as exc:
        raise _id_error(raw_ids, exc) from exc
    return ids, logprobs


def _bad_item(items: list[list[Any]]) -> WireFormatError:
    """The first malformed `[logprob, token_id, ...]` item, named (the error path only)."""
    for index, item in enumerate(items):
        if len(item) < 2:
            return WireFormatError(f"output_token_logprobs[{index}] is not [logprob, token_id, ...]")
    raise AssertionError("unreachable: called only when an item is too short")  # pragma: no cover


def _logprob_error(items: list[list[Any]], exc: ValidationError) -> WireFormatError:
    index = int(exc.errors(include_url=False)[0]["loc"][0])
    value = items[index][0]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return WireFormatError(f"output_token_logprobs[{index}]: logprob {value!r} is not a number")
    return WireFormatError(f"output_token_logprobs[{index}]: logprob {value} is not finite")


def _id_error(ids: list[Any], exc: ValidationError) -> WireFormatError:
    index = int(exc.errors(include_url=False)[0]["ctx"]["index"])  # `_strict_token_ids` names it
    return WireFormatError(f"output_token_logprobs[{index}]: token id {ids[index]!r} is invalid")
