"""Trace → Sample and group assembly (docs/contract.md §4), on real verifiers 0.2.0 traces."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from adapter.errors import EmptyTraceError, RewardKeyError, TraceConversionError
from adapter.samples.conversion import assemble_group, eval_reward_value, flatten, trace_to_samples
from adapter.samples.sample_type import Sample, Status
from conformance.traces import TraceSpec, Turn, build_trace, numpy_streams

SPEC = TraceSpec()


def one(spec: TraceSpec = SPEC, **kwargs) -> Sample:
    (sample,) = trace_to_samples(build_trace(spec), rollout_id=0, **kwargs)
    return sample


def test_single_turn_fields() -> None:
    trace = build_trace(SPEC)
    (sample,) = trace_to_samples(trace, rollout_id=7)
    scaffold, turn = SPEC.turns[0].scaffold_ids, SPEC.turns[0]
    assert sample.tokens == [*SPEC.prompt_ids, *scaffold, *turn.completion_ids]
    assert sample.response_length == len(turn.completion_ids)
    assert sample.loss_mask == [1, 1]
    assert sample.rollout_log_probs == list(turn.logprobs)
    assert sample.reward == 1.0
    assert sample.prompt == [{"role": "user", "content": "2+2"}]
    assert sample.response == "4"
    assert sample.label == "4"
    assert sample.status is Status.COMPLETED
    assert (sample.routing_key, sample.rollout_id) == (trace.id, None)  # a plain sample: no rollout_id
    assert not hasattr(sample, "session_id")
    assert sample.metadata["verifiers"] == {
        "branch_index": 0, "task_index": 0, "rewards": {"correct": 1.0}, "metrics": {},
        "stop_condition": "agent_completed"}
    sample.validate()


def test_multi_turn_tool_tokens_are_in_the_sample_but_not_trained_on() -> None:
    tool_ids = (151644, 872, 198, 99, 151645, 198)
    spec = dataclasses.replace(SPEC, turns=(
        Turn((151657, 5, 151658, 151645), (-0.1, -0.2, -0.3, -0.4), "", followup_ids=tool_ids),
        Turn((19, 151645), (-0.5, -0.6), "4"),
    ))
    sample = one(spec)
    scaffold = list(spec.turns[1].scaffold_ids)
    # response starts at the first sampled token; tool + scaffold tokens are masked out
    assert sample.loss_mask == [1, 1, 1, 1, *[0] * len(tool_ids), *[0] * len(scaffold), 1, 1]
    assert sample.rollout_log_probs == [-0.1, -0.2, -0.3, -0.4, *[0.0] * 9, -0.5, -0.6]
    assert len(sample.loss_mask) == len(sample.rollout_log_probs) == sample.response_length
    sample.validate()


def test_multi_branch_trace_gives_one_sample_per_branch_sharing_rollout_id_and_reward() -> None:
    trace = build_trace(dataclasses.replace(SPEC, extra_branches=2))
    samples = trace_to_samples(trace, rollout_id=5)
    assert [s.metadata["verifiers"]["branch_index"] for s in samples] == [0, 1, 2]
    assert {s.rollout_id for s in samples} == {5}
    assert {s.routing_key for s in samples} == {trace.id}
    assert {s.reward for s in samples} == {1.0}


def test_branchless_trace_is_an_empty_trace_error() -> None:
    spec = dataclasses.replace(SPEC, turns=(), stop_condition="context_length")
    with pytest.raises(EmptyTraceError, match="context_length"):
        trace_to_samples(build_trace(spec), rollout_id=0)


def test_length_mismatch_names_all_three_lengths() -> None:
    trace = build_trace(SPEC)
    trace.nodes[1].mask.append(True)  # one more mask entry than tokens
    with pytest.raises(TraceConversionError, match=r"got 13, 14, 14"):
        trace_to_samples(trace, rollout_id=0)


@pytest.mark.parametrize(
    ("overrides", "status"),
    [
        ({}, Status.COMPLETED),
        ({"turns": (Turn((19, 20), (-0.1, -0.2), "4", finish_reason="length"),)}, Status.TRUNCATED),
        ({"stop_condition": "max_turns"}, Status.TRUNCATED),
        ({"error": ("ProviderError", "boom"), "stop_condition": "error"}, Status.FAILED),
        ({"error": ("ProviderError", "boom"), "stop_condition": "max_turns"}, Status.FAILED),
    ],
    ids=["completed", "finish_length", "framework_limit", "error", "error_wins_over_truncation"],
)
def test_status(overrides, status) -> None:
    assert one(dataclasses.replace(SPEC, **overrides)).status is status


def test_error_is_recorded_as_json_in_metadata() -> None:
    sample = one(dataclasses.replace(SPEC, error=("ProviderError", "engine 502")))
    error = sample.metadata["verifiers"]["error"]
    assert error["type"] == "ProviderError" and error["message"] == "engine 502"
    assert None not in error.values(), "dumped with exclude_none, as Miles' example does"
    assert error == build_trace(dataclasses.replace(SPEC, error=("ProviderError", "engine 502"))).error.model_dump(
        mode="json", exclude_none=True)
    json.dumps(sample.metadata)


def test_reward_key_gives_every_component_plus_the_total() -> None:
    spec = dataclasses.replace(SPEC, rewards={"correct": 1.0, "fastest": 0.25})
    sample = one(spec, reward_key="fastest")
    assert sample.reward == {"correct": 1.0, "fastest": 0.25, "reward": 1.25}
    assert sample.get_reward_value(SimpleNamespace(reward_key="fastest")) == 0.25
    assert one(spec).get_reward_value(SimpleNamespace(reward_key=None)) == 1.25


@pytest.mark.parametrize(
    ("prompt", "fields", "expected_prompt", "label"),
    [
        ("plain text", {"answer": "4"}, "plain text", "4"),
        (None, {}, "", None),
        ([{"role": "user", "content": "hi"}], {"label": "L", "answer": "A"}, None, "L"),
    ],
    ids=["string_prompt", "absent", "label_over_answer"],
)
def test_prompt_and_label(prompt, fields, expected_prompt, label) -> None:
    sample = one(dataclasses.replace(SPEC, prompt=prompt, task_fields=fields))
    assert sample.label == label
    if expected_prompt is not None:
        assert sample.prompt == expected_prompt
    else:
        assert sample.prompt == [{"role": "user", "content": "hi"}]


def test_no_sampled_token_gives_zero_response_length() -> None:
    sample = one(dataclasses.replace(SPEC, turns=(Turn((), (), ""),)))
    assert (sample.response_length, sample.loss_mask, sample.rollout_log_probs) == (0, [], [])


def group(*specs: TraceSpec, n: int | None = None, **kwargs):
    traces = [build_trace(spec) for spec in specs]
    return assemble_group(traces, n=len(traces) if n is None else n, first_rollout_id=100, **kwargs)


def test_group_assigns_group_index_consecutive_indices_and_a_rollout_id_to_siblings_only() -> None:
    """Miles' test_convert_group_uses_standard_miles_group_shape (its example's plain groups carry no
    rollout_id), read with Miles main's `postprocess_rollout_data`: a batch is compact when ANY
    sample has a rollout_id (never trimmed to --global-batch-size, no dynamic batch size);
    `validate_compact_rollout_ids` needs it on siblings only."""
    outcome = group(SPEC, SPEC, dataclasses.replace(SPEC, extra_branches=1),
                    group_index=7, first_index=10)
    assert outcome.kept
    samples = list(flatten(outcome.samples))
    assert [s.group_index for s in samples] == [7, 7, 7, 7]
    assert [s.index for s in samples] == [10, 11, 12, 13]
    assert [s.rollout_id for s in samples] == [None, None, 102, 102]


def test_single_branch_traces_are_plain_entries_and_a_multi_branch_trace_is_one_nested_entry() -> None:
    outcome = group(SPEC, dataclasses.replace(SPEC, extra_branches=2), group_index=0, first_index=0)
    single, nested = outcome.samples
    assert isinstance(single, Sample)
    assert isinstance(nested, list) and len(nested) == 3 and all(isinstance(s, Sample) for s in nested)


@pytest.mark.parametrize(
    ("specs", "n", "reason"),
    [
        ((SPEC, dataclasses.replace(SPEC, error=("ProviderError", "x"))), None, "trace_error"),
        ((SPEC, dataclasses.replace(SPEC, turns=())), None, "empty_trace"),
        ((SPEC,), 2, "episode_error"),
        ((SPEC, dataclasses.replace(SPEC, dropped="rubric: correct=unsure")), None, "trace_dropped"),
    ],
    ids=["errored_trace", "branchless_trace", "wrong_count", "dropped_trace"],
)
def test_group_drops_by_reason(specs, n, reason) -> None:
    outcome = group(*specs, n=n, group_index=0, first_index=0)
    assert (outcome.kept, outcome.drop_reason, outcome.samples) == (False, reason, [])


def test_group_with_a_misaligned_trace_is_a_trace_error() -> None:
    traces = [build_trace(SPEC), build_trace(SPEC)]
    traces[1].nodes[1].logprobs.append(-1.0)
    traces[1].nodes[1].mask.append(True)
    outcome = assemble_group(traces, n=2, group_index=0, first_index=0, first_rollout_id=0)
    assert outcome.drop_reason == "trace_error" and "equal length" in outcome.detail


def test_sample_round_trips_through_dict() -> None:
    sample = one()
    data = sample.to_dict()
    assert data["status"] == "completed"
    json.dumps(data)
    assert Sample.from_dict(data) == sample


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("loss_mask", [1], "loss_mask length"), ("rollout_log_probs", [0.0], "rollout_log_probs"),
     ("response_length", 99, "tokens length"), ("response_length", -1, ">= 0")],
)
def test_sample_validate_names_the_broken_length(field, value, message) -> None:
    sample = one()
    setattr(sample, field, value)
    with pytest.raises(ValueError, match=message):
        sample.validate()


HEALTHY, ERRORED = SimpleNamespace(id="t", has_error=False), SimpleNamespace(id="t", has_error=True)


@pytest.mark.parametrize(
    ("reward", "key", "trace", "expected"),
    [
        (0.5, None, HEALTHY, 0.5),  # the scalar reward
        (1, "ignored", HEALTHY, 1.0),  # a scalar is used as-is even with a key
        ({"correct": 1.0, "reward": 2.0}, "correct", HEALTHY, 1.0),  # the key picks a component
        ({"reward": 0.0}, "correct", ERRORED, None),  # errored and lacking the key: None
        (None, None, ERRORED, None),  # a hook gave nothing
    ],
    ids=["scalar", "scalar_with_key", "picked", "errored_without_key", "none"],
)
def test_eval_reward_value_is_a_number_or_none(reward, key, trace, expected) -> None:
    assert eval_reward_value(reward, key=key, trace=trace) == expected


@pytest.mark.parametrize(("key", "fragment"), [("correct", "have no 'correct'"), (None, "no key picks a number")],
                         ids=["missing_key", "dict_without_key"])
def test_eval_reward_value_of_a_healthy_trace_without_the_key_names_the_flag(key, fragment) -> None:
    with pytest.raises(RewardKeyError, match=f"{fragment}.*--eval-reward-key"):
        eval_reward_value({"other": 1.0}, key=key, trace=HEALTHY)


def _plain_types(sample: Sample) -> set[type]:
    return {type(v) for v in (*sample.tokens, *sample.loss_mask, *sample.rollout_log_probs)}


EXACT = dataclasses.replace(SPEC, turns=(Turn((19, 151645), (-0.25, -0.125), "4"),))  # float32-exact logprobs


@pytest.mark.parametrize("spec", [EXACT, dataclasses.replace(SPEC, turns=(
    Turn((151657, 5, 151658, 151645), (-0.125, -0.25, -0.5, -1.0), "", followup_ids=(151644, 872, 198)),
    Turn((19, 151645), (-0.5, -0.75), "4"))), dataclasses.replace(EXACT, extra_branches=2)],
    ids=["single-turn", "tool-turn", "multi-branch"])
def test_numpy_streams_convert_to_the_same_samples_of_plain_python_values(spec) -> None:
    trace = build_trace(spec)
    from_lists = trace_to_samples(trace, rollout_id=3)
    from_arrays = trace_to_samples(numpy_streams(trace), rollout_id=3)
    assert [s.to_dict() for s in from_arrays] == [s.to_dict() for s in from_lists]
    for sample in from_arrays:
        assert _plain_types(sample) <= {int, float} and type(sample.loss_mask[0]) is int
        json.dumps(sample.to_dict())  # Miles dumps samples as JSON: numpy scalars would fail here


@pytest.mark.parametrize("as_array", [False, True], ids=["lists", "numpy"])
def test_streams_give_the_same_columns_as_lists_or_arrays_unsampled_logprobs_zeroed(as_array) -> None:
    import numpy as np

    from adapter.errors import StreamLengthError
    from adapter.samples.streams import columns

    ids, mask, logprobs = [5, 6, 7, 8, 9], [False, True, False, True, True], [0.0, -0.5, -9.0, -0.25, -0.125]
    if as_array:
        ids, mask, logprobs = (np.asarray(ids, dtype=np.int32), np.asarray(mask),
                               np.asarray(logprobs, dtype=np.float32))
    got = columns(ids, mask, logprobs)
    assert (got.tokens, got.start, got.loss_mask, got.rollout_log_probs) == (
        [5, 6, 7, 8, 9], 1, [1, 0, 1, 1], [-0.5, 0.0, -0.25, -0.125])
    assert {type(v) for v in (*got.tokens, *got.loss_mask)} == {int}
    assert {type(v) for v in got.rollout_log_probs} == {float}
    with pytest.raises(StreamLengthError, match="got 5, 4, 5"):
        columns(ids, mask[:4], logprobs)
