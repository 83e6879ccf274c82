"""docs/performance.md is generated; its goal tables must agree with their own numbers: a row
that says "yes" while its measured value is over (or under) the goal fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
ROW = re.compile(r"^\| (?P<goal>[^|]+) \| (?P<measured>[^|]+) \| (?P<met>yes|\*\*no\*\*) \|$", re.M)
BOUND = re.compile(r"(?P<op>[≤≥]) (?P<limit>[\d.,]+)\s*(?P<unit>×|µs|s\b|M tokens/s)")
NUMBER = re.compile(r"[\d][\d,]*(?:\.\d+)?")


def checkable_rows(text: str) -> list[tuple[str, float, str, float, bool]]:
    """(goal, limit, op, measured, met) for every goal row with one bound and a leading number."""
    rows = []
    for match in ROW.finditer(text):
        bounds = BOUND.findall(match["goal"])
        measured = NUMBER.search(match["measured"])
        if len(bounds) != 1 or measured is None or " vs " in match["measured"]:
            continue
        op, limit, _ = bounds[0]
        rows.append((match["goal"], float(limit.replace(",", "")), op, float(measured[0].replace(",", "")),
                     match["met"] == "yes"))
    return rows


def test_every_goal_row_says_met_exactly_when_its_number_meets_it() -> None:
    rows = checkable_rows(DOC.read_text())
    assert len(rows) >= 5, "the goal tables of docs/performance.md were not found"
    wrong = [goal for goal, limit, op, measured, met in rows
             if met != (measured <= limit if op == "≤" else measured >= limit)]
    assert wrong == []


@pytest.mark.parametrize(("row", "consistent"), [
    ("| in-process ≤ 1.2× raw (instant stub) | 1.300× (CI 1.2 – 1.4) | yes |", False),
    ("| in-process ≤ 1.2× raw (instant stub) | 1.300× (CI 1.2 – 1.4) | **no** |", True),
    ("| per-turn added time ≤ 10 µs per 1k prompt tokens | 29 µs | yes |", False),
])
def test_a_row_claiming_a_goal_its_number_misses_is_caught(row: str, consistent: bool) -> None:
    ((_, limit, op, measured, met),) = checkable_rows(row)
    assert (met == (measured <= limit if op == "≤" else measured >= limit)) is consistent
