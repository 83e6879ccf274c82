"""Every benchmark scenario at a tiny size, so the benchmarks cannot rot: they run end to end
(stub engine and serve-bridge in their own processes) and report what the docs quote."""

from __future__ import annotations

import math
import re

import pytest

from benchmarks import conversion, load, overhead
from benchmarks.common import goal_rows, ratio_ci


def _goals_reported(text: str, count: int) -> list[tuple[str, float, str, float, bool]]:
    """The goal rows: `count` of them, each with a finite measured value (a tiny run cannot judge
    µs goals, so only that the row is there and its number is real is asserted)."""
    rows = goal_rows(text)
    assert len(rows) == count, text
    assert all(math.isfinite(measured) for *_, measured, _ in rows), rows
    return rows


def test_load_scenarios_run_at_tiny_size_without_errors() -> None:
    text = "\n".join(load.main(["--tiny"]))
    for title in ("queue depth", "sessions × 2 turns", "Miles' concurrency", "concurrent sessions × 2 turns"):
        assert title in text
    errors = re.findall(r"^\| (?:in-process|served) \| \d \| \d+ \| (\d+) \|", text, flags=re.M)
    assert errors == ["0"] * 4
    # the engine saw every request of the Miles scenario in flight at once (4 of 4)
    assert re.search(r"^\| 4 \| 0 \| [\d.]+ \| 0\.05 \| [\d.]+ \| 4 \|$", text, flags=re.M), text


def test_overhead_scenarios_run_at_tiny_size_and_report_every_goal() -> None:
    text = "\n".join(overhead.main(["--tiny"]))
    for path in ("floor", "miles", "handler", "gen-A door", "gen-B", "serve-bridge", "gen-B client"):
        assert f"| {path} | " in text
    goals = [goal for goal, *_ in _goals_reported(text, 3)]
    for words in ("generation A door", "generation B path", "per-turn growth"):
        assert any(words in goal for goal in goals), goals
    assert "µs per 1k prompt tokens" in text and "Peer: Miles' own call" in text


def test_conversion_runs_at_tiny_size_for_list_and_numpy_streams() -> None:
    text = "\n".join(conversion.main(["--tiny"]))
    goals = [goal for goal, *_ in _goals_reported(text, 2)]
    assert any("lists" in goal for goal in goals) and any("numpy" in goal for goal in goals)
    assert "numpy / lists = " in text


@pytest.mark.e2e  # the reference engine needs torch: the e2e lane has it
def test_the_reference_engine_scenario_runs_at_tiny_size() -> None:
    pytest.importorskip("torch", reason="the reference engine needs torch (the demo group; tox -e e2e)")
    from benchmarks import reference

    text = "\n".join(reference.main(["--tiny"]))
    for path in ("| raw |", "| in-process |", "| served |"):
        assert path in text
    assert "4 decoded tokens" in text and "(4-token decoding, reference engine)" in text
    _goals_reported(text, 2)


def test_paired_ratio_ci_brackets_the_median() -> None:
    ratio, low, high = ratio_ci([2.0, 2.2, 1.8, 2.1], [1.0, 1.0, 1.0, 1.0])
    assert low <= ratio <= high
    assert low >= 1.8 and high <= 2.2


def test_call_setup_counts_what_each_call_opens_before_and_after_the_held_session(monkeypatch) -> None:
    """One round at a test's size: a reopened call opens one engine pool (and, on generation B, one
    served bridge); a call on the held session opens nothing."""
    import os
    import sys

    from benchmarks import call_setup

    monkeypatch.setattr(sys, "path", list(sys.path))  # add_env_sources edits both; restored afterwards
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    text = "\n".join(call_setup.main(["--tiny"]))
    servers = 1 if "Generation B" in text else 0
    assert re.search(rf"\(before\) \| [\d.]+ \| 1 pool, {servers} server \|", text), text
    assert re.search(r"after the first\) \| [\d.]+ \| 0 pool, 0 server \|", text), text
