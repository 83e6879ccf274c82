"""Every benchmark scenario at a tiny size, so the benchmarks cannot rot: they run end to end
(stub engine and serve-bridge in their own processes) and report what the docs quote."""

from __future__ import annotations

import re

import pytest

from benchmarks import load, overhead
from benchmarks.common import ratio_ci


def test_load_scenarios_run_at_tiny_size_without_errors() -> None:
    text = "\n".join(load.main(["--tiny"]))
    for title in ("queue depth", "sessions × 2 turns", "Miles' concurrency", "concurrent sessions × 2 turns"):
        assert title in text
    errors = re.findall(r"^\| (?:in-process|served) \| \d \| \d+ \| (\d+) \|", text, flags=re.M)
    assert errors == ["0"] * 4
    # the engine saw every request of the Miles scenario in flight at once (4 of 4)
    assert re.search(r"^\| 4 \| 0 \| [\d.]+ \| 0\.05 \| [\d.]+ \| 4 \|$", text, flags=re.M), text


def test_overhead_scenarios_run_at_tiny_size() -> None:
    text = "\n".join(overhead.main(["--tiny"]))
    for path in ("| raw |", "| in-process |", "| served |", "| served+openai |"):
        assert path in text
    assert "µs per 1k prompt tokens" in text and "M tokens/s" in text


@pytest.mark.e2e  # the reference engine needs torch: the e2e lane has it
def test_the_reference_engine_scenario_runs_at_tiny_size() -> None:
    pytest.importorskip("torch", reason="the reference engine needs torch (the demo group; tox -e e2e)")
    from benchmarks import reference

    text = "\n".join(reference.main(["--tiny"]))
    for path in ("| raw |", "| in-process |", "| served |"):
        assert path in text
    assert "4 decoded tokens" in text and "(4-token decoding, reference engine)" in text


def test_paired_ratio_ci_brackets_the_median() -> None:
    ratio, low, high = ratio_ci([2.0, 2.2, 1.8, 2.1], [1.0, 1.0, 1.0, 1.0])
    assert low <= ratio <= high
    assert low >= 1.8 and high <= 2.2
