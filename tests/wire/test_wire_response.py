"""SGLang /generate output → Renderers generate response (docs/contract.md §3).

Our responses are fed to renderers' own response validation (0.1.10 checks `token_id:<id>`
labels, counts and finite logprobs), so a dropped or mislabelled entry fails here.
Regenerate snapshots with `uv run pytest tests/wire/test_wire_response.py --snapshot-update`.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from renderers.client import _parse_completion_logprobs, parse_generate_response

from adapter.errors import (
    EngineAbortedError,
    FinishReasonError,
    VfSglangError,
    WireFormatError,
)
from adapter.wire.translate import FINISH_REASONS, to_renderers_response
from conformance.sglang_outputs import sglang_output

IDS = [40, 1079, 151645]
LOGPROBS = [-0.5, -1.25, -0.01]


def renderers_accepts(response: dict[str, Any]) -> tuple[list[int], list[float]]:
    """What Renderers itself reads from our response (raises on anything malformed)."""
    parsed = parse_generate_response(json.dumps(response).encode())
    choice = parsed["choices"][0]
    return choice["token_ids"], _parse_completion_logprobs(choice, choice["token_ids"])


@pytest.mark.parametrize("finish", sorted(FINISH_REASONS))
def test_response_matches_snapshot(finish: str, snapshot) -> None:
    response = to_renderers_response(sglang_output(IDS, LOGPROBS, finish=finish))
    assert response == snapshot
    assert renderers_accepts(response) == (IDS, LOGPROBS)


def test_finish_reason_may_be_a_bare_string() -> None:
    output = sglang_output(IDS, LOGPROBS)
    output["meta_info"]["finish_reason"] = "length"
    assert to_renderers_response(output)["choices"][0]["finish_reason"] == "length"


def test_request_id_falls_back_when_the_engine_sends_none() -> None:
    output = sglang_output(IDS, LOGPROBS)
    del output["meta_info"]["id"]
    assert to_renderers_response(output, request_id="bridge-7")["request_id"] == "bridge-7"


def test_empty_completion_is_valid() -> None:
    response = to_renderers_response(sglang_output([], [], finish="length"))
    assert renderers_accepts(response) == ([], [])


def test_stop_with_no_sampled_token_is_an_engine_fault() -> None:
    with pytest.raises(WireFormatError, match="stop but no token was sampled"):
        to_renderers_response(sglang_output([], [], finish="stop"))


def test_abort_is_never_reported_as_complete() -> None:
    with pytest.raises(EngineAbortedError, match="Abort request"):
        to_renderers_response(sglang_output(IDS, LOGPROBS, finish="abort"))


def test_abort_without_logprobs_is_still_an_abort() -> None:
    output = sglang_output([], [], finish="abort")
    del output["meta_info"]["output_token_logprobs"]
    with pytest.raises(EngineAbortedError):
        to_renderers_response(output)


@pytest.mark.parametrize(
    ("finish_reason", "named"),
    [(None, "no finish_reason"), ({"type": "eos"}, "eos"), ("tool_calls", "tool_calls"),
     ({"type": None}, "no finish_reason")],
    ids=["missing", "unknown_dict", "unknown_str", "dict_without_type"],
)
def test_missing_or_unknown_finish_reason_is_an_error_naming_it(finish_reason, named) -> None:
    output = sglang_output(IDS, LOGPROBS)
    output["meta_info"]["finish_reason"] = finish_reason
    with pytest.raises(FinishReasonError, match=named) as caught:
        to_renderers_response(output)
    assert caught.value.value == finish_reason


def _broken(mutate) -> dict[str, Any]:
    output = sglang_output(IDS, LOGPROBS)
    mutate(output)
    return output


MALFORMED = {
    "logprobs_missing": (lambda o: o["meta_info"].pop("output_token_logprobs"), "return_logprob"),
    "logprob_nan": (lambda o: o["meta_info"]["output_token_logprobs"][1].__setitem__(0, math.nan),
                    "not finite"),
    "logprob_inf": (lambda o: o["meta_info"]["output_token_logprobs"][0].__setitem__(0, -math.inf),
                    "not finite"),
    "logprob_positive": (lambda o: o["meta_info"]["output_token_logprobs"][0].__setitem__(0, 0.5),
                         "positive"),
    "logprob_none": (lambda o: o["meta_info"]["output_token_logprobs"][0].__setitem__(0, None),
                     "not a number"),
    "logprob_bool": (lambda o: o["meta_info"]["output_token_logprobs"][0].__setitem__(0, True),
                     "not a number"),
    "item_too_short": (lambda o: o["meta_info"]["output_token_logprobs"].__setitem__(0, [-0.1]),
                       r"\[logprob, token_id"),
    "token_id_str": (lambda o: o["meta_info"]["output_token_logprobs"][0].__setitem__(1, "40"),
                     "token id"),
    "count_mismatch": (lambda o: o["meta_info"].__setitem__("completion_tokens", 4),
                       "completion_tokens is 4"),
    "output_ids_disagree": (lambda o: o.__setitem__("output_ids", [40, 1080, 151645]),
                            "first difference at 1"),
    "output_ids_longer": (lambda o: o.__setitem__("output_ids", [*IDS, 1]), "lengths differ"),
    "meta_info_missing": (lambda o: o.pop("meta_info"), "meta_info"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_output_is_a_typed_wire_error(case: str) -> None:
    mutate, message = MALFORMED[case]
    with pytest.raises(WireFormatError, match=message):
        to_renderers_response(_broken(mutate))


def test_batched_output_is_refused() -> None:
    with pytest.raises(WireFormatError, match="batch of 2"):
        to_renderers_response([sglang_output(IDS, LOGPROBS)] * 2)


def test_rounding_noise_above_zero_is_tolerated() -> None:
    response = to_renderers_response(sglang_output([5], [1e-7]))
    assert renderers_accepts(response) == ([5], [1e-7])


logprob_values = st.floats(min_value=-60.0, max_value=0.0, allow_nan=False)
token_ids = st.integers(min_value=0, max_value=151935)


@given(st.lists(st.tuples(token_ids, logprob_values), min_size=1, max_size=40),
       st.sampled_from(sorted(FINISH_REASONS)))
def test_any_well_formed_output_is_accepted_by_renderers_one_to_one(pairs, finish) -> None:
    ids = [i for i, _ in pairs]
    logprobs = [lp for _, lp in pairs]
    response = to_renderers_response(sglang_output(ids, logprobs, finish=finish))
    assert renderers_accepts(response) == (ids, logprobs)
    assert response["choices"][0]["finish_reason"] == finish


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _typed_error_or_exactly_what_was_sent(output: object) -> None:
    """Either a typed error, or a response that carries exactly the engine's sampled ids and
    logprobs with a known finish reason: a malformed output is never silently accepted."""
    try:
        response = to_renderers_response(output)
    except VfSglangError:
        return
    items = output["meta_info"]["output_token_logprobs"]
    choice = response["choices"][0]
    assert choice["token_ids"] == [item[1] for item in items]
    logprobs = [entry["logprob"] for entry in choice["logprobs"]["content"]]
    assert logprobs == [item[0] for item in items]
    assert all(math.isfinite(value) and value <= 1e-6 for value in logprobs)
    assert choice["finish_reason"] in {"stop", "length"}
    assert choice["finish_reason"] != "stop" or choice["token_ids"], "a stop needs its stop token"


@given(st.dictionaries(st.sampled_from(["text", "output_ids", "meta_info"]), json_values))
def test_malformed_outputs_raise_only_typed_errors(output) -> None:
    _typed_error_or_exactly_what_was_sent(output)


@given(st.fixed_dictionaries({
    "id": st.text(max_size=5),
    "finish_reason": json_values,
    "completion_tokens": json_values,
    "output_token_logprobs": json_values,
}))
def test_malformed_meta_info_raises_only_typed_errors(meta) -> None:
    _typed_error_or_exactly_what_was_sent({"meta_info": meta})


def test_the_malformed_output_check_fails_on_a_silently_accepted_output(monkeypatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "to_renderers_response", lambda output: {"choices": [
        {"token_ids": [9], "logprobs": {"content": [{"logprob": -0.1}]}, "finish_reason": "stop"}]})
    with pytest.raises(AssertionError):
        _typed_error_or_exactly_what_was_sent({"meta_info": {"output_token_logprobs": [[-0.5, 3, None]]}})


def test_every_answer_carries_its_weight_version_spans_over_completion_indexes() -> None:
    single = to_renderers_response(sglang_output(IDS, LOGPROBS, weight_version="7"))
    assert single["choices"][0]["weight_versions"] == [{"version": "7", "start": 0, "end": 3}]
    output = sglang_output(IDS, LOGPROBS)
    output["meta_info"]["weight_versions"] = [{"version": 3, "start": 0, "end": 2}, {"version": 4, "start": 2}]
    spans = to_renderers_response(output)["choices"][0]["weight_versions"]
    assert spans == [{"version": "3", "start": 0, "end": 2}, {"version": "4", "start": 2, "end": 3}]
    del output["meta_info"]["weight_versions"], output["meta_info"]["weight_version"]
    assert to_renderers_response(output)["choices"][0]["weight_versions"] == []


def test_a_requested_top_k_head_comes_back_that_wide_on_every_token() -> None:
    response = to_renderers_response(sglang_output(IDS, LOGPROBS, top_logprobs_num=4), top_logprobs=4)
    content = response["choices"][0]["logprobs"]["content"]
    assert [len(item["top_logprobs"]) for item in content] == [4, 4, 4]
    assert [item["top_logprobs"][0] for item in content] == [
        {"token": f"token_id:{i}", "logprob": lp} for i, lp in zip(IDS, LOGPROBS, strict=True)]
    assert renderers_accepts(response) == (IDS, LOGPROBS)  # older clients read past the head


@pytest.mark.parametrize(("meta", "message"), [
    ({}, r"meta_info.output_top_logprobs: 4 candidates per token were asked \(logprobs=4\) for 3 sampled "
         r"tokens, the engine sent none"),
    ({"output_top_logprobs": [[[-0.5, 40, None]]] * 3}, r"output_top_logprobs\[0\]: 4 candidates asked"),
    ({"output_top_logprobs": [[[-0.5, 40, None]] * 4] * 2}, r"the engine sent 2 positions"),
    ({"output_top_logprobs": [[[float("nan"), 40, None]] * 4] * 3}, r"output_top_logprobs\[0\].*not finite"),
])
def test_a_head_the_engine_did_not_send_is_a_wire_error_naming_the_field_never_a_sample_without_it(
        meta, message) -> None:
    output = sglang_output(IDS, LOGPROBS)
    output["meta_info"].update(meta)
    with pytest.raises(WireFormatError, match=message):
        to_renderers_response(output, top_logprobs=4)
