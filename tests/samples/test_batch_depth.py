"""Every entry of a train batch has one depth, so Miles' own flattening (expand while the FIRST
entry of a level is a list) flattens it completely: `uniform_depth` on the adapter's side,
`miles_flatten` as Miles does it on the checking side."""

from __future__ import annotations

import dataclasses

import pytest

from adapter.samples.conversion import assemble_group, uniform_depth
from adapter.samples.sample_type import Sample
from conformance.miles_checks import _depth_problems, miles_flatten
from conformance.traces import TraceSpec, build_trace

SPEC = TraceSpec()
MULTI = dataclasses.replace(SPEC, extra_branches=1)


def _group(*specs: TraceSpec, group_index: int) -> list:
    traces = [build_trace(spec) for spec in specs]
    return assemble_group(traces, n=len(traces), group_index=group_index, first_index=0,
                          first_rollout_id=10 * group_index).samples


BATCHES = {
    "plain_then_nested": lambda: [_group(SPEC, MULTI, group_index=0)],
    "nested_then_plain": lambda: [_group(MULTI, SPEC, group_index=0)],
    "group_without_then_group_with": lambda: [_group(SPEC, SPEC, group_index=0), _group(SPEC, MULTI, group_index=1)],
}


@pytest.mark.parametrize("shape", BATCHES)
def test_a_mixed_batch_breaks_miles_flattening(shape: str) -> None:
    assert _depth_problems(BATCHES[shape]()) != []


@pytest.mark.parametrize("shape", BATCHES)
def test_a_uniform_batch_flattens_to_samples_only_as_miles_flattens(shape: str) -> None:
    batch = uniform_depth(BATCHES[shape]())
    flat = miles_flatten(batch)
    assert flat and all(isinstance(item, Sample) for item in flat)
    assert len(flat) == sum(len(entry) for group in batch for entry in group)
    assert _depth_problems(batch) == []


def test_a_batch_without_branches_stays_plain() -> None:
    batch = [_group(SPEC, SPEC, group_index=0)]
    assert uniform_depth(batch) == batch and all(isinstance(e, Sample) for e in batch[0])
