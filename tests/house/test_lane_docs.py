"""Lane descriptions exist once (tools/ci/lanes.py): README.md, e2e/README.md and docs/testing.md
show them in generated blocks (tools/ci/lane_docs.py), and no doc states a lane's wall time by hand
(docs/ci.md holds the measured ones)."""

from __future__ import annotations

import re

import pytest

from tools.ci import lane_docs
from tools.ci.__main__ import main

HAND_TIMING = re.compile(r"~\s?\d+(?:\.\d+)?\s?(?:min|s)\b")


def test_every_lane_table_in_the_docs_is_the_rendering_of_tools_ci_lanes() -> None:
    assert lane_docs.stale() == [], "run: python3 -m tools.ci docs --write"


@pytest.mark.parametrize("doc", [*lane_docs.DOCS, "ARCHITECTURE.md"])
def test_no_doc_states_a_lane_wall_time_by_hand(doc: str) -> None:
    assert HAND_TIMING.findall((lane_docs.REPO / doc).read_text()) == []


def test_a_lane_described_anew_shows_in_every_doc(tmp_path, monkeypatch) -> None:
    for name in lane_docs.DOCS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text((lane_docs.REPO / name).read_text())
    monkeypatch.setattr(lane_docs, "REPO", tmp_path)
    lanes = dict(lane_docs.LANES)
    monkeypatch.setitem(lane_docs.LANES, "lint", lanes["lint"].__class__(
        lanes["lint"].envs, ("ruff and a new claim",), lanes["lint"].paths, summary="a new summary", harness="h"))
    assert main(["docs"]) == 1
    assert sorted(lane_docs.stale(tmp_path)) == sorted(lane_docs.DOCS)
    assert main(["docs", "--write"]) == 0 and lane_docs.stale(tmp_path) == []
    assert "a new summary" in (tmp_path / "README.md").read_text()
    assert "ruff and a new claim" in (tmp_path / "docs/testing.md").read_text()


def test_a_doc_without_its_markers_is_an_error() -> None:
    with pytest.raises(ValueError, match="lanes:begin"):
        lane_docs.with_block("no markers here", "| table |")
