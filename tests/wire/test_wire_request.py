"""Renderers generate body → SGLang /generate payload (docs/contract.md §2).

Snapshots lock the common base once (the "plain" scenario: payload and headers) and, for
every other scenario, only its difference from that base (`changed` keys with their new
values, `removed` keys), so one intended change to the base touches one snapshot.
Regenerate with `uv run pytest tests/wire/test_wire_request.py --snapshot-update` and review the diff.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapter.config.settings import Settings
from adapter.errors import UnsupportedRequestError
from adapter.wire.translate import (
    DROPPED_KEYS,
    RENAMED_KEYS,
    ROUTER_DROPPED_KEYS,
    length_budget,
    router_dropped_keys,
    to_sglang_request,
)

PROMPT = [151644, 872, 198, 17, 10, 17, 151645, 198, 151644, 77091, 198]


def renderer_body(**sampling: Any) -> dict[str, Any]:
    """The body `renderers.client.generate` posts (it always sets these three keys)."""
    params = {"temperature": 0.7, "max_tokens": 64, **sampling}
    params.update(stop_token_ids=[151645, 151643], logprobs=1, skip_special_tokens=False)
    return {"model": "Qwen/Qwen3-0.6B", "token_ids": list(PROMPT), "sampling_params": params}


SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # id: (body overrides / sampling, settings overrides)
    "plain": ({}, {}),
    "renames": ({"sampling": {"min_tokens": 2, "seed": 7}}, {}),
    "passthrough_keys": ({"sampling": {"top_k": 20, "repetition_penalty": 1.1}}, {}),
    "trainer_stop_when_renderer_gave_none": ({}, {"rollout_stop": ("</answer>",)}),
    "renderer_stop_wins": ({"sampling": {"stop": ["###"]}}, {"rollout_stop": ("</answer>",)}),
    "stop_ids_merged_in_order": ({}, {"rollout_stop_token_ids": (7, 151643, 8)}),
    "skip_special_tokens_from_trainer": ({}, {"rollout_skip_special_tokens": True}),
    "budget_capped_by_context": ({}, {"rollout_max_context_len": 40}),
    "budget_capped_by_response_len": ({}, {"rollout_max_response_len": 16}),
    "budget_from_trainer_when_renderer_gave_none": (
        {"drop_max_tokens": True},
        {"rollout_max_response_len": 32},
    ),
    "lora_live": ({}, {"lora_rank": 8}),
    "lora_train_only": ({}, {"lora_rank": 8, "lora_train_only": True}),
    "priority_and_cache_salt": ({"priority": 3, "cache_salt": "salt-1"}, {}),
    "routing_key": ({}, {"sglang_router_policy": "consistent_hashing"}),
    # renderers 0.1.13's client: top_k/min_p defaults on every request, and a top-k head of k asked as k+2
    "new_client_defaults_pass_through": ({"sampling": {"top_k": -1, "min_p": 0.0}}, {}),
    "top_k_head": ({"logprobs": 4, "sampling": {"extra_args": {"prl_compact_logprobs": True}}}, {}),
}


def translate(case: dict[str, Any], settings: Settings, session: str | None = "trace-1"):
    body = renderer_body(**case.get("sampling", {}))
    if case.get("drop_max_tokens"):
        del body["sampling_params"]["max_tokens"]
    for key in ("priority", "cache_salt"):
        if key in case:
            body[key] = case[key]
    if "logprobs" in case:
        body["sampling_params"]["logprobs"] = case["logprobs"]
    return to_sglang_request(body, settings=settings, session_id=session, first_turn=True)


def scenario_request(name: str) -> dict[str, Any]:
    case, overrides = SCENARIOS[name]
    request = translate(case, Settings(**overrides))
    return {"payload": request.payload, "headers": request.headers}


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts → {"payload.sampling_params.n": 1, ...}; lists stay whole values."""
    if not isinstance(value, dict) or not value:
        return {prefix: value}
    flat: dict[str, Any] = {}
    for key, item in value.items():
        flat.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def difference(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    before, after = flatten(base), flatten(other)
    changed = {key: value for key, value in after.items() if key not in before or before[key] != value}
    return {"changed": changed, "removed": sorted(set(before) - set(after))}


def test_the_base_payload_matches_its_snapshot(snapshot) -> None:
    assert scenario_request("plain") == snapshot


@pytest.mark.parametrize("name", [name for name in SCENARIOS if name != "plain"])
def test_each_scenario_differs_from_the_base_as_snapshotted(name: str, snapshot) -> None:
    # An empty difference is a claim too (e.g. train-only LoRA leaves the request as it is).
    assert difference(scenario_request("plain"), scenario_request(name)) == snapshot


def test_difference_names_changed_added_and_removed_keys() -> None:
    base = {"payload": {"a": 1, "b": {"c": 2, "d": 3}}, "headers": {}}
    other = {"payload": {"a": 1, "b": {"c": 5}, "e": [1]}, "headers": {"x": "y"}}
    assert difference(base, other) == {"changed": {"payload.b.c": 5, "payload.e": [1], "headers.x": "y"},
                                       "removed": ["headers", "payload.b.d"]}


def test_renderer_only_keys_never_reach_sglang() -> None:
    case = {"sampling": {"routed_experts_prompt_start": 10}}
    assert "logprobs" in renderer_body()["sampling_params"]
    params = translate(case, Settings()).payload["sampling_params"]
    assert not DROPPED_KEYS & set(params)


@pytest.mark.parametrize(("renderer_key", "sglang_key"), sorted(RENAMED_KEYS.items()))
def test_renamed_keys_keep_their_value(renderer_key: str, sglang_key: str) -> None:
    params = translate({"sampling": {renderer_key: 5}}, Settings()).payload["sampling_params"]
    assert params[sglang_key] == 5
    assert renderer_key not in params


def test_forced_params_override_the_renderer() -> None:
    case = {"sampling": {"n": 4, "no_stop_trim": False}}
    params = translate(case, Settings(rollout_skip_special_tokens=True)).payload["sampling_params"]
    assert (params["n"], params["no_stop_trim"]) == (1, True)
    assert params["skip_special_tokens"] is True


def test_the_adapter_sends_no_key_the_router_drops() -> None:
    """The router re-serializes /generate without ROUTER_DROPPED_KEYS: the adapter's own payload
    (every scenario, every trainer option it maps) carries none of them, so it is the same
    whether a router is in front of the engine or not. `spaces_between_special_tokens` is no longer
    forced: it only changes SGLang's detokenized `text`, which the adapter never reads."""
    carried = {name: sorted(ROUTER_DROPPED_KEYS & set(scenario_request(name)["payload"]["sampling_params"]))
               for name in SCENARIOS}
    assert {name: keys for name, keys in carried.items() if keys} == {}


def test_a_user_key_the_router_drops_is_found_by_name() -> None:
    request = translate({"sampling": {"logit_bias": {"7": 1.0}, "stop_regex": "x"}}, Settings())
    assert router_dropped_keys(request) == ["logit_bias", "stop_regex"]
    assert router_dropped_keys(translate({}, Settings())) == []


def test_the_payload_always_asks_for_logprobs() -> None:
    assert translate({}, Settings()).payload["return_logprob"] is True


@pytest.mark.parametrize(
    ("prompt_len", "requested", "settings", "expected"),
    [
        (10, 64, {}, 64),
        (10, None, {}, None),
        (10, None, {"rollout_max_response_len": 32}, 32),
        (10, 64, {"rollout_max_context_len": 40}, 30),
        (10, 64, {"rollout_max_context_len": 100, "rollout_max_response_len": 20}, 20),
        (10, None, {"rollout_max_context_len": 40}, 30),
        (39, 64, {"rollout_max_context_len": 40}, 1),
    ],
    ids=["request", "unbounded", "trainer", "context", "response_cap", "context_only", "one_left"],
)
def test_length_budget(prompt_len, requested, settings, expected) -> None:
    assert length_budget(prompt_len, requested, Settings(**settings)) == expected


@pytest.mark.parametrize("prompt_len", [40, 41, 500])
def test_exhausted_budget_is_verifiers_overlong_prompt(prompt_len: int) -> None:
    from verifiers.v1.errors import OverlongPromptError

    with pytest.raises(OverlongPromptError, match="maximum context length"):
        length_budget(prompt_len, 64, Settings(rollout_max_context_len=40))


@pytest.mark.parametrize(
    ("session", "first_turn", "refused"),
    [("trace-1", True, True), ("trace-1", False, False), (None, True, True)],
    ids=["first_turn_capped", "later_turn_not_capped", "sessionless_capped"],
)
def test_prompt_cap_applies_to_first_turns(session, first_turn, refused) -> None:
    from verifiers.v1.errors import OverlongPromptError

    settings = Settings(rollout_max_prompt_len=len(PROMPT) - 1)
    call = lambda: to_sglang_request(  # noqa: E731
        renderer_body(), settings=settings, session_id=session, first_turn=first_turn)
    if refused:
        with pytest.raises(OverlongPromptError):
            call()
    else:
        assert call().payload["input_ids"] == PROMPT


def test_prompt_at_the_cap_is_served() -> None:
    settings = Settings(rollout_max_prompt_len=len(PROMPT))
    request = to_sglang_request(renderer_body(), settings=settings, session_id="t", first_turn=True)
    assert request.payload["input_ids"] == PROMPT


def test_multimodal_features_are_refused() -> None:
    body = {**renderer_body(), "features": {"mm_hashes": {"image": ["h"]}}}
    with pytest.raises(UnsupportedRequestError, match="multimodal"):
        to_sglang_request(body, settings=Settings(), session_id="t", first_turn=True)


@pytest.mark.parametrize("policy", ["consistent_hashing", "manual"])
def test_routing_policy_without_session_id_is_an_error(policy: str) -> None:
    with pytest.raises(UnsupportedRequestError, match="X-Session-ID"):
        translate({}, Settings(sglang_router_policy=policy), session=None)


@pytest.mark.parametrize(("flags", "named"), [(None, "--sglang-router-policy"),
                                              ({"sglang_router_policy": "--router-policy"}, "--router-policy")],
                         ids=["miles", "vf-sglang"])
def test_the_missing_session_refusal_names_the_running_commands_flag(flags, named) -> None:
    body = renderer_body()
    with pytest.raises(UnsupportedRequestError) as refused:
        to_sglang_request(body, settings=Settings(sglang_router_policy="manual", flag_names=flags), session_id=None,
                          first_turn=True)
    assert str(refused.value).startswith(f"{named} manual routes every request by session")


@pytest.mark.parametrize("policy", [None, "cache_aware", "round_robin"])
def test_other_policies_send_no_routing_header(policy) -> None:
    assert translate({}, Settings(sglang_router_policy=policy)).headers == {}


@pytest.mark.parametrize(
    "token_ids", [[], None, "abc", [1, -2], [1, True]], ids=["empty", "none", "str", "neg", "bool"])
def test_malformed_prompt_ids_are_refused(token_ids) -> None:
    body = {**renderer_body(), "token_ids": token_ids}
    with pytest.raises(UnsupportedRequestError, match="token_ids"):
        to_sglang_request(body, settings=Settings(), session_id="t", first_turn=True)


@pytest.mark.parametrize("key", ["reasoning_effort", "best_of", "beam_width"])
def test_sampling_keys_sglang_does_not_accept_are_refused_naming_the_versions(key: str) -> None:
    with pytest.raises(UnsupportedRequestError, match=rf"{key}.*sglang 0\.5\.15, 0\.5\.16 and 0\.5\.23"):
        translate({"sampling": {key: 1}}, Settings())


def test_min_tokens_above_a_cut_budget_is_lowered_to_the_budget() -> None:
    settings = Settings(rollout_max_context_len=len(PROMPT) + 4)
    params = translate({"sampling": {"min_tokens": 10}}, settings).payload["sampling_params"]
    assert (params["max_new_tokens"], params["min_new_tokens"]) == (4, 4)


@pytest.mark.parametrize(("logprobs", "top"), [(1, None), (True, None), (None, None), (2, 2), (4, 4)])
def test_logprobs_above_one_ask_sglang_for_that_many_top_candidates(logprobs, top) -> None:
    payload = translate({"logprobs": logprobs}, Settings()).payload
    assert payload.get("top_logprobs_num") == top and payload["return_logprob"] is True
    assert "logprobs" not in payload["sampling_params"]


def test_the_clients_own_extra_args_are_understood_and_never_reach_sglang() -> None:
    payload = translate({"logprobs": 4, "sampling": {"extra_args": {"prl_compact_logprobs": True}}}, Settings()).payload
    assert "extra_args" not in payload["sampling_params"] and payload["top_logprobs_num"] == 4


def test_an_unknown_extra_args_key_is_refused_naming_it() -> None:
    with pytest.raises(UnsupportedRequestError, match=r"sampling_params.extra_args \['my_key'\]"):
        translate({"sampling": {"extra_args": {"prl_compact_logprobs": True, "my_key": 1}}}, Settings())
