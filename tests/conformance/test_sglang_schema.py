"""The adapter's wire against SGLang's own code (lane `sglang-schema`):

    uvx --with tox-uv tox -e sglang-schema

The lane installs sglang 0.5.15, 0.5.16 and 0.5.23 with `--no-deps` into separate directories, names
them in `VF_SGLANG_TREES`, and runs `pytest -m sglang_schema`. Without the trees these tests
skip, naming the lane. Everything compared here is read from the wheels
(adapter/reference/sglang_source.py): `SamplingParams` itself, `GenerateReqInput`'s fields, the
finish-reason classes, the logprob entry builder and the `meta_info` keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.config.settings import Settings
from adapter.engine.probe import MODEL_INFO_PATHS, SERVER_INFO_PATHS, SGLANG_MODEL_INFO_KEYS, speaks_sglang
from adapter.errors import UnsupportedRequestError
from adapter.reference.sglang_source import SGLangSource
from adapter.wire.translate import (
    RENAMED_KEYS,
    SGLANG_CHECKED_VERSIONS,
    SGLANG_SAMPLING_KEYS,
    overlong_error_class,
    to_sglang_request,
)
from conformance.engine import Completion, ScriptedEngine
from conformance.sglang_schema import assert_accepted, assert_sglang_shaped, output_problems, sources_from_env
from tests.wire.test_wire_request import SCENARIOS, renderer_body, translate

pytestmark = pytest.mark.sglang_schema

VOCAB = 151936  # Qwen3's vocabulary (the tokenizer the payloads are built for)
SOURCES = sources_from_env()
needs_trees = pytest.mark.skipif(
    not SOURCES, reason="needs the sglang wheels: run `tox -e sglang-schema` (it sets VF_SGLANG_TREES)")


@pytest.fixture(scope="module")
def tokenizer(qwen3_tokenizer: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(qwen3_tokenizer))


@needs_trees
def test_the_lane_checks_every_version_the_adapter_names() -> None:
    assert sorted(s.version for s in SOURCES) == sorted(SGLANG_CHECKED_VERSIONS)


@needs_trees
@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.version)
def test_the_meta_info_counters_the_stats_read_are_keys_sglang_sets(source: SGLangSource) -> None:
    from adapter.bridge.stats import SPEC_FIELDS

    read = {key for _, key in SPEC_FIELDS} | {"cached_tokens", "prompt_tokens", "weight_version"}
    if source.version >= "0.5.23":
        read.add("weight_versions")
    assert sorted(read - source.meta_info.known) == [], f"sglang {source.version}"


@needs_trees
@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.version)
def test_the_keys_the_adapter_lets_through_are_sampling_params_fields(source: SGLangSource) -> None:
    assert not SGLANG_SAMPLING_KEYS - source.sampling_keys


@needs_trees
@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.version)
def test_sglangs_own_model_info_passes_the_is_this_sglang_rule(source: SGLangSource) -> None:
    assert set(SGLANG_MODEL_INFO_KEYS) <= source.model_info_keys
    assert speaks_sglang(dict.fromkeys(source.model_info_keys, "x"))


@needs_trees
@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.version)
def test_every_info_path_the_adapter_asks_is_served(source: SGLangSource) -> None:
    assert set(MODEL_INFO_PATHS) | set(SERVER_INFO_PATHS) <= set(source.get_routes)


@needs_trees
@pytest.mark.parametrize("name", SCENARIOS)
def test_every_snapshot_payload_is_accepted_by_sglang(name: str, tokenizer: Any) -> None:
    case, overrides = SCENARIOS[name]
    assert_accepted(SOURCES, translate(case, Settings(**overrides)).payload, tokenizer=tokenizer, vocab_size=VOCAB)


SAMPLING_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "temperature": st.floats(0.0, 2.0), "top_p": st.floats(0.01, 1.0), "max_tokens": st.integers(1, 4096),
    "min_tokens": st.integers(0, 64), "seed": st.integers(0, 2**31), "min_p": st.floats(0.0, 1.0),
    "top_k": st.one_of(st.just(-1), st.integers(1, 200)), "repetition_penalty": st.floats(0.5, 2.0),
    "presence_penalty": st.floats(-2.0, 2.0), "frequency_penalty": st.floats(-2.0, 2.0), "n": st.integers(1, 4),
    "stop": st.lists(st.text(min_size=1, max_size=6), max_size=3), "ignore_eos": st.booleans(),
    "routed_experts_prompt_start": st.integers(0, 64), "logit_bias": st.dictionaries(
        st.integers(0, VOCAB - 1).map(str), st.floats(-10, 10), max_size=2),
    "stop_regex": st.sampled_from(["\\d+$", "(yes|no)"]), "stream_interval": st.integers(1, 8),
    "custom_params": st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 3), max_size=2),
    "spaces_between_special_tokens": st.booleans(), "no_stop_trim": st.booleans(),
    "skip_special_tokens": st.booleans(), "stop_token_ids": st.lists(st.integers(0, VOCAB - 1), max_size=2),
}  # fmt: skip
SAMPLING = st.fixed_dictionaries({}, optional=SAMPLING_VALUES)
# SGLang accepts at most one grammar per request (verify): one, or none.
GRAMMARS = [
    {"json_schema": '{"type": "object"}'}, {"regex": "[0-9]+"}, {"ebnf": 'root ::= "yes" | "no"'},
    {"structural_tag": '{"type": "structural_tag", "structures": [], "triggers": []}'},
]  # fmt: skip
GRAMMAR = st.one_of(st.just({}), st.sampled_from(GRAMMARS))
RENAMED_BACK = {sglang: renderers for renderers, sglang in RENAMED_KEYS.items()}
SETTINGS = st.fixed_dictionaries({}, optional={
    "rollout_max_context_len": st.integers(8, 4096), "rollout_max_response_len": st.integers(1, 2048),
    "rollout_max_prompt_len": st.integers(4, 4096),
    "rollout_stop": st.lists(st.text(min_size=1, max_size=4), max_size=2).map(tuple),
    "rollout_stop_token_ids": st.lists(st.integers(0, VOCAB - 1), max_size=3).map(tuple),
    "rollout_skip_special_tokens": st.booleans(), "lora_rank": st.sampled_from([0, 8]),
})  # fmt: skip


def test_the_generated_requests_cover_every_key_the_adapter_lets_through() -> None:
    generated = {RENAMED_BACK.get(k, k) for k in SGLANG_SAMPLING_KEYS}
    covered = set(SAMPLING_VALUES) | {key for grammar in GRAMMARS for key in grammar}
    assert not generated - covered, f"no generated request carries {sorted(generated - covered)}"


@needs_trees
@given(sampling=SAMPLING, grammar=GRAMMAR, settings=SETTINGS,
       prompt=st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=64),
       priority=st.none() | st.integers(-5, 5), cache_salt=st.none() | st.text(min_size=1, max_size=8))
def test_every_payload_from_a_renderers_request_is_accepted_by_sglang(
    sampling: dict[str, Any], grammar: dict[str, Any], settings: dict[str, Any], prompt: list[int], priority: Any,
    cache_salt: Any, tokenizer: Any,
) -> None:
    body = renderer_body(**sampling, **grammar)
    body.update(token_ids=prompt, priority=priority, cache_salt=cache_salt)
    try:
        request = to_sglang_request(body, settings=Settings(**settings), session_id="trace-1", first_turn=True)
    except overlong_error_class():
        return  # a clean truncation for Verifiers: nothing reaches SGLang
    assert_accepted(SOURCES, request.payload, tokenizer=tokenizer, vocab_size=VOCAB)


@needs_trees
@pytest.mark.parametrize(
    ("extra", "needle"),
    [({"logprobs": 1}, "logprobs"), ({"reasoning_effort": "low"}, "reasoning_effort"),
     ({"top_k": 0}, "top_k"), ({"top_p": 0.0}, "top_p"),
     ({"min_new_tokens": 9, "max_new_tokens": 4}, "min_new_tokens")],
    ids=["unknown-key-logprobs", "unknown-key-reasoning-effort", "top_k-0", "top_p-0", "min-over-max"],
)  # fmt: skip
def test_the_lane_fails_naming_the_version_on_a_payload_sglang_refuses(
    extra: dict[str, Any], needle: str, tokenizer: Any
) -> None:
    payload = translate({}, Settings()).payload
    payload["sampling_params"].update(extra)
    with pytest.raises(AssertionError) as failure:
        assert_accepted(SOURCES, payload, tokenizer=tokenizer, vocab_size=VOCAB)
    for source in SOURCES:
        assert f"sglang {source.version} rejects" in str(failure.value) and needle in str(failure.value)


@needs_trees
def test_a_top_level_key_sglang_would_drop_fails_the_lane(tokenizer: Any) -> None:
    payload = {**translate({}, Settings()).payload, "return_logprobs": True}
    with pytest.raises(AssertionError, match="'return_logprobs' is not a GenerateReqInput field"):
        assert_accepted(SOURCES, payload, tokenizer=tokenizer, vocab_size=VOCAB)


def test_keys_sglang_refuses_are_refused_by_the_adapter_before_any_call() -> None:
    body = renderer_body(reasoning_effort="low")
    with pytest.raises(UnsupportedRequestError, match="reasoning_effort"):
        to_sglang_request(body, settings=Settings(), session_id="t", first_turn=True)


def scripted_output(completion: Completion) -> Any:
    engine = ScriptedEngine().script(completion)
    request = httpx.Request("POST", f"{engine.url}/generate", json=translate({}, Settings()).payload)
    return json.loads(engine.handle(request).content)


@needs_trees
@pytest.mark.parametrize("finish", ["stop", "length", "abort"])
def test_scripted_engine_outputs_have_sglangs_shape(finish: str) -> None:
    assert_sglang_shaped(SOURCES, scripted_output(Completion([40, 151645], [-0.5, -0.01], finish=finish)))


@needs_trees
def test_an_output_with_a_finish_reason_sglang_never_produces_fails_the_lane() -> None:
    output = scripted_output(Completion([40], [-0.5], finish="tool_calls"))
    for source in SOURCES:
        assert any("'tool_calls'" in p and source.version in p for p in output_problems(source, output))


@needs_trees
def test_an_output_missing_sglangs_abort_fields_fails_the_lane() -> None:
    output = scripted_output(Completion([40], [-0.5], finish="abort"))
    output["meta_info"]["finish_reason"] = {"type": "abort", "message": "Abort request"}
    with pytest.raises(AssertionError, match="not SGLang's serialisation"):
        assert_sglang_shaped(SOURCES, output)


@needs_trees
@pytest.mark.parametrize(("sampling", "needle"), [({"top_k": 0}, "top_k"), ({"best_of": 2}, "best_of")])
def test_the_reference_engine_refuses_what_sglang_refuses_with_sglangs_message(
    sampling: dict[str, Any], needle: str, tokenizer: Any
) -> None:
    from adapter.reference.errors import BadRequestError
    from adapter.reference.params import parse_sampling_params

    newest = max(SOURCES, key=lambda s: tuple(int(x) for x in s.version.split(".")))
    with pytest.raises(BadRequestError, match=rf"sglang {newest.version}'s SamplingParams refuses.*{needle}"):
        parse_sampling_params({"max_new_tokens": 4, **sampling}, tokenizer=tokenizer, vocab_size=VOCAB)


@pytest.fixture(scope="module")
def reference_engine() -> Any:
    pytest.importorskip("torch", reason="the reference engine needs torch (dependency group `demo`)")
    from adapter.reference import build_tiny_model
    from adapter.reference.server import ReferenceEngine

    return ReferenceEngine(build_tiny_model(progress=False), "Qwen/Qwen3-0.6B")


def reference_output(engine: Any, body: dict[str, Any], *, aborted: bool = False) -> Any:
    import threading

    request = engine.parse(body)
    flag = threading.Event()
    if aborted:
        flag.set()
    outputs = [engine.output(job, engine.run(job, flag), request, 0.01) for job in request.jobs]
    return json.loads(json.dumps(outputs if request.batched else outputs[0]))


REFERENCE_CASES = {
    "stop": ({"max_new_tokens": 48, "temperature": 0.0}, False),
    "length": ({"max_new_tokens": 2, "ignore_eos": True}, False),
    "stop-string": ({"max_new_tokens": 16, "stop": [" ", "1", "2", "3", "4", "5", "6", "7"]}, False),
    "abort": ({"max_new_tokens": 8}, True),
    "batched": ({"max_new_tokens": 4}, False),
}


@needs_trees
@pytest.mark.parametrize("case", REFERENCE_CASES)
def test_reference_engine_outputs_have_sglangs_shape(case: str, reference_engine: Any) -> None:
    from adapter.reference.tiny_train import render_prompt

    sampling, aborted = REFERENCE_CASES[case]
    prompt = reference_engine.tokenizer.encode(render_prompt("What is 3 + 4?"), add_special_tokens=False)
    for return_logprob in (True, False):
        ids = [prompt, prompt] if case == "batched" else prompt
        body = {"input_ids": ids, "sampling_params": sampling, "return_logprob": return_logprob}
        output = reference_output(reference_engine, body, aborted=aborted)
        assert_sglang_shaped(SOURCES, output, return_logprob=return_logprob)


CASSETTES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "cassettes").glob("*.jsonl"))


@needs_trees
@pytest.mark.parametrize("cassette", CASSETTES, ids=[p.stem for p in CASSETTES])
def test_every_recorded_exchange_is_what_sglang_accepts_and_answers(cassette: Path, tokenizer: Any) -> None:
    from conformance.replay import load_cassette

    loaded = load_cassette(cassette)
    recorded_on = (loaded.header or {}).get("sglang_version")
    # a cassette from real SGLang answers for its own version; the reference engine's for every one
    sources = [s for s in SOURCES if s.version == recorded_on] or SOURCES
    for exchange in loaded.exchanges:
        request, response = exchange["request"], exchange["response"]
        if request["path"] != "/generate" or response["status"] != 200:
            continue
        assert_accepted(sources, request["body"], tokenizer=tokenizer, vocab_size=VOCAB)
        assert_sglang_shaped(sources, response["body"], return_logprob=bool(request["body"].get("return_logprob")))
