"""The fault matrix (conformance/faults.py), every case through both doors of the bridge:
status, error type, engine calls, a time bound, then a normal request that succeeds."""

from __future__ import annotations

import pytest

from adapter.bridge.handler import INTERNAL_ERROR
from conformance.faults import CASES, MODES, FaultCase, run_case


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
    assert outcome.seconds <= case.max_seconds, outcome
    assert outcome.followup_status == 200, outcome
