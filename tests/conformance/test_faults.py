"""The fault matrix (conformance/faults.py), every case through both doors of the bridge:
status, error type, engine calls, a time bound, then a normal request that succeeds."""

from __future__ import annotations

import pytest

from adapter.bridge.handler import INTERNAL_ERROR
from conformance.faults import CASES, DEADLINE_MARGIN_S, MODES, ROOMY_DEADLINE, FaultCase, run_case


def test_the_matrix_has_at_least_40_cases_with_unique_ids() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_fault_is_typed_bounded_and_harmless(case: FaultCase, mode: str) -> None:
    outcome = await run_case(case, mode)
    assert (outcome.status, outcome.kind) == (case.status, case.kind), outcome
    assert outcome.kind != INTERNAL_ERROR
    assert outcome.engine_calls == case.engine_calls, outcome
    # Both bounds carry their margin (conformance/faults.py): a deadline case waited out each
    # attempt's deadline and not much more; any other case never waited for a deadline at all.
    assert case.min_seconds <= outcome.seconds <= case.max_seconds, outcome
    assert outcome.followup_status == 200, outcome


def test_only_the_deadline_cases_run_with_a_deadline_that_load_can_reach() -> None:
    short = {case.id for case in CASES if case.read_deadline < ROOMY_DEADLINE}
    assert short == {"trickling_body", "silent_engine"}
    for case in CASES:
        if case.deadline is None:  # its time bound fails a case that waited for a roomy deadline
            assert case.min_seconds == 0 and case.max_seconds < case.read_deadline, case.id
        else:  # each attempt's deadline, then the stated margin
            assert case.max_seconds - case.min_seconds >= DEADLINE_MARGIN_S, case.id
