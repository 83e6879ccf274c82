"""docs/performance.md is generated; its goal tables must agree with their own numbers: a row
that says "yes" while its measured value is over (or under) the goal fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.common import goal_is_met, goal_rows

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "performance.md"
# A figure docs/demo.md quotes (its "What the adapter costs"): a signed µs value or a ratio with
# four decimals (goals are unsigned).
QUOTED = re.compile(r"[+-][\d,]+ µs|\d\.\d{4}×|\d+(?:\.\d)? µs per 1k")


def quoted_figures() -> list[str]:
    text = (ROOT / "docs" / "demo.md").read_text()
    paragraph = text.split("Overhead numbers (", 1)[1].split("\n\n", 1)[0]
    return QUOTED.findall(" ".join(paragraph.split()))


def test_the_demo_doc_quotes_only_figures_the_generated_doc_reports() -> None:
    figures, doc = quoted_figures(), " ".join(DOC.read_text().split())
    assert len(figures) >= 8, figures
    missing = [f for f in figures if f.removesuffix(" per 1k").removesuffix(" µs").removesuffix("×") not in doc]
    assert missing == [], "docs/demo.md's figures not in docs/performance.md (rerun the benchmarks or fix docs/demo.md)"


def test_every_goal_row_says_met_exactly_when_its_number_meets_it() -> None:
    rows = goal_rows(DOC.read_text())
    assert len(rows) >= 9, "the goal tables of docs/performance.md were not found"
    wrong = [goal for goal, limit, op, measured, met in rows if met != goal_is_met(op, limit, measured)]
    assert wrong == []


@pytest.mark.parametrize(("row", "consistent"), [
    ("| in-process ≤ 1.2× raw (instant stub) | 1.300× (CI 1.2 – 1.4) | yes |", False),
    ("| in-process ≤ 1.2× raw (instant stub) | 1.300× (CI 1.2 – 1.4) | **no** |", True),
    ("| per-turn added time ≤ 10 µs per 1k prompt tokens | 29 µs | yes |", False),
    ("| gen-A door ≤ 60 µs over the floor per turn | +75 µs (CI +70 – +80) | yes |", False),
    ("| gen-A door ≤ 60 µs over the floor per turn | -5 µs (CI -9 – +1) | yes |", True),
    ("| gen-A door ≤ 60 µs over the floor per turn | -75 µs (CI -80 – -70) | **no** |", False),
    ("| served ≤ 1.01× raw (64-token decoding) | nan× (CI nan – nan) | yes |", False),
])
def test_a_row_claiming_a_goal_its_number_misses_is_caught(row: str, consistent: bool) -> None:
    ((_, limit, op, measured, met),) = goal_rows(row)
    assert (met == goal_is_met(op, limit, measured)) is consistent
