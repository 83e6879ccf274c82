"""Per-session SGLang meta_info stats (adapter.bridge.stats): accumulation, the bridge hook,
the fields they fill on samples, and the prefix-cache hit-rate metric."""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from adapter.bridge.handler import create_app
from adapter.bridge.stats import RolloutStats, SessionStats
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from adapter.samples.conversion import trace_to_samples
from adapter.samples.metrics import prefix_cache_hit_rate
from adapter.samples.sample_type import Status
from adapter.wire.types import parse_engine_output
from conformance.engine import Completion
from conformance.sglang_outputs import sglang_output
from conformance.traces import TraceSpec, build_trace


def meta(**fields) -> dict:
    output = sglang_output([5, 6], [-0.1, -0.2], prompt_tokens=10)
    output["meta_info"].update(fields)
    return output


@pytest.mark.parametrize(
    ("outputs", "expected"),
    [
        ([meta(cached_tokens=0, weight_version="1"), meta(cached_tokens=8, weight_version="2")],
         RolloutStats(calls=2, weight_versions=["1", "2"], cached_tokens=8, prompt_tokens=20, last_finish="stop")),
        ([meta(spec_num_correct_drafts=3, spec_num_proposed_drafts=4, spec_verify_ct=1)],
         RolloutStats(calls=1, weight_versions=["default"], prompt_tokens=10, last_finish="stop",
                      spec={"spec_accept_token_num": 3, "spec_draft_token_num": 4, "spec_verify_ct": 1,
                            "completion_token_num": 2})),
        ([meta(), meta(finish_reason={"type": "abort", "message": "x"})],
         RolloutStats(calls=2, weight_versions=["default"] * 2, prompt_tokens=20, last_finish="abort")),
        ([{"meta_info": {"finish_reason": {"type": "length"}}}], RolloutStats(calls=1, last_finish="length")),
        # SGLang 0.5.23: the spans of one answer, in order, each version once per answer
        ([meta(weight_version="3", weight_versions=[{"version": "2", "start": 0, "end": 38},
                                                    {"version": "3", "start": 38, "end": 40},
                                                    {"version": "2", "start": 40, "end": 41}]),
          meta(weight_version="3", weight_versions=[{"version": "3", "start": 0, "end": 2}])],
         RolloutStats(calls=2, weight_versions=["2", "3", "3"], prompt_tokens=20, last_finish="stop")),
    ],
    ids=["turns_sum_and_versions_append", "spec_under_sglangs_names", "last_finish_wins", "sparse_meta",
         "weight_version_spans"],
)
def test_a_session_accumulates_its_turns(outputs, expected) -> None:
    stats = SessionStats()
    for output in outputs:
        stats.record("trace-1", parse_engine_output(output).meta_info)
    assert stats.get("trace-1") == expected


def test_miles_old_spec_key_names_are_not_read_as_counters() -> None:
    stats = SessionStats()
    stats.record("s", parse_engine_output(meta(spec_accept_token_num=3, spec_draft_token_num=4)).meta_info)
    assert stats.get("s").spec is None


def test_an_output_without_a_session_is_skipped() -> None:
    stats = SessionStats()
    stats.record(None, parse_engine_output(meta()).meta_info)
    assert len(stats) == 0


def test_the_store_is_bounded_oldest_evicted_first() -> None:
    stats = SessionStats(max_size=2)
    for session in ("a", "b", "a", "c"):
        stats.record(session, parse_engine_output(meta()).meta_info)
    assert (stats.get("a") is not None, stats.get("b"), stats.get("c") is not None) == (True, None, True)
    with pytest.raises(ValueError, match=">= 1"):
        SessionStats(max_size=0)


@pytest.mark.parametrize(
    ("stats", "rate"),
    [([RolloutStats(cached_tokens=6, prompt_tokens=10), RolloutStats(cached_tokens=0, prompt_tokens=10)], 0.3),
     ([None, RolloutStats()], 0.0), ([], 0.0)],
    ids=["token_weighted", "nothing_reported", "no_rollouts"],
)
def test_prefix_cache_hit_rate_is_cached_over_prompt_tokens(stats, rate) -> None:
    assert prefix_cache_hit_rate(stats) == pytest.approx(rate)


async def test_the_bridge_records_every_engine_answer_by_session(sglang_mock) -> None:
    engine = SGLangClient(sglang_mock.url)
    app = create_app(Settings(), engine, model="m")
    sglang_mock.script(Completion([40, 151645], [-0.3, -0.01]), Completion([41], [-0.2], finish="length"))
    body = {"model": "m", "token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 4, "logprobs": 1}}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bridge") as client:
        for _ in range(2):
            response = await client.post("/inference/v1/generate", json=body, headers={"X-Session-ID": "trace-9"})
            assert response.status_code == 200
    await engine.aclose()
    recorded = app.state.bridge.stats.get("trace-9")
    assert (recorded.calls, recorded.prompt_tokens, recorded.weight_versions, recorded.last_finish) == (
        2, 6, ["default", "default"], "length")


async def test_the_bridge_records_an_engine_abort_for_the_status(sglang_mock) -> None:
    engine = SGLangClient(sglang_mock.url)
    app = create_app(Settings(), engine, model="m")
    sglang_mock.script(Completion([40], [-0.3]), Completion([1], [-0.1], finish="abort"))
    body = {"model": "m", "token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 4, "logprobs": 1}}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bridge") as client:
        statuses = [(await client.post("/inference/v1/generate", json=body, headers={"X-Session-ID": "t"})).status_code
                    for _ in range(2)]
    await engine.aclose()
    recorded = app.state.bridge.stats.get("t")
    assert (statuses, recorded.calls, recorded.last_finish) == ([200, 410], 1, "abort")
    assert app.state.bridge.stats.aborted == 1  # the one abort, counted for the bridge's whole life


def test_stats_fill_weight_versions_everywhere_and_counters_on_the_main_branch() -> None:
    stats = RolloutStats(calls=2, weight_versions=["4", "5"], cached_tokens=7, prompt_tokens=9,
                         spec={"spec_accept_token_num": 1, "spec_draft_token_num": 2, "spec_verify_ct": 3,
                               "completion_token_num": 4})
    samples = trace_to_samples(build_trace(TraceSpec(extra_branches=1)), rollout_id=0, stats=stats)
    assert [s.weight_versions for s in samples] == [["4", "5"], ["4", "5"]]
    assert [s.prefix_cache_info.to_dict() for s in samples] == [
        {"cached_tokens": 0, "total_prompt_tokens": 0}, {"cached_tokens": 7, "total_prompt_tokens": 9}]
    assert samples[-1].spec_info.to_dict() == stats.spec and samples[0].spec_info.spec_verify_ct == 0


@pytest.mark.parametrize(
    ("error", "last_finish", "status"),
    [(None, "abort", Status.COMPLETED), (("ProviderError", "503"), "abort", Status.ABORTED),
     (("ProviderError", "502"), "stop", Status.FAILED)],
    ids=["healthy", "errored_by_an_engine_abort", "errored_otherwise"],
)
def test_an_engine_abort_makes_an_errored_rollout_aborted(error, last_finish, status) -> None:
    spec = dataclasses.replace(TraceSpec(), error=error)
    (sample,) = trace_to_samples(build_trace(spec), rollout_id=0, stats=RolloutStats(last_finish=last_finish))
    assert sample.status is status
