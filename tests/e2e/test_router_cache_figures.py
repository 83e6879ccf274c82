"""`e2e.router.cache.figures`: what a recorded run behind the router says about the prefix cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.judges.turns import Exchange
from e2e.router.cache import SECTION_BEGIN, SECTION_END, figures, markdown, write_section

SYSTEM = (1, 2, 3, 4)


def _trace(first: tuple[int, ...], workers: tuple[str, str], cached: tuple[int, int], key: str | None = None
           ) -> list[Exchange]:
    """Two turns: turn 2's prompt is turn 1's prompt + completion + a tool response."""
    key = key or f"trace-{first}"
    turn1 = Exchange(SYSTEM + first, (50, 51), cached[0], workers[0], key)
    turn2 = Exchange(turn1.input_ids + turn1.output_ids + (90, 91), (52,), cached[1], workers[1], key)
    return [turn1, turn2]


def test_a_later_turn_on_its_traces_worker_with_the_whole_prompt_cached_counts_as_served() -> None:
    run = [*_trace((10,), ("a", "a"), (0, 7)), *_trace((11,), ("b", "b"), (4, 7))]
    found = figures("consistent_hashing", run)
    assert (found.calls, found.later_turns, found.later_same_worker, found.later_prefix_served) == (4, 2, 2, 2)
    assert found.prompt_tokens == 5 + 9 + 5 + 9 and found.cached_tokens == 18
    assert found.later_hit_rate == pytest.approx(14 / 18)


def test_a_later_turn_on_the_other_worker_is_neither_same_worker_nor_served() -> None:
    run = [*_trace((10,), ("a", "b"), (0, 4)), *_trace((11,), ("b", "b"), (4, 7))]
    found = figures("round_robin", run)
    assert (found.later_turns, found.later_same_worker, found.later_prefix_served) == (2, 1, 1)
    assert found.later_hit_rate == pytest.approx(11 / 18)


def test_identical_turns_of_two_traces_are_paired_within_their_own_trace() -> None:
    # a group's episodes often sample the same turns: the routing key, not the prompt, says whose turn it is
    run = [*_trace((10,), ("a", "a"), (0, 7), key="one"), *_trace((10,), ("b", "b"), (4, 7), key="two")]
    assert figures("consistent_hashing", run).later_same_worker == 2


def test_a_call_without_a_routing_key_is_refused_naming_the_flag() -> None:
    with pytest.raises(ValueError, match="--router-policy consistent_hashing"):
        figures("round_robin", [Exchange(SYSTEM, (5,), 0, "a")])


def test_a_single_turn_run_has_no_later_turns_and_no_later_hit_rate() -> None:
    found = figures("round_robin", [Exchange(SYSTEM, (5,), 0, "a", "k")])
    assert (found.later_turns, found.later_hit_rate, found.hit_rate) == (0, 0.0, 0.0)


def test_the_table_has_one_row_per_policy_and_write_section_replaces_only_the_section(tmp_path: Path) -> None:
    rows = [figures(p, _trace((10,), ("a", "a" if p == "consistent_hashing" else "b"), (0, 7)))
            for p in ("consistent_hashing", "round_robin")]
    table = markdown(rows)
    assert [line.split("|")[1].strip() for line in table.splitlines()[2:]] == ["`consistent_hashing`", "`round_robin`"]
    doc = tmp_path / "router.md"
    doc.write_text(f"# Title\nbefore\n{SECTION_BEGIN}\nold figures\n{SECTION_END}\nafter\n")
    write_section(doc, table, "Measured:")
    text = doc.read_text()
    assert "old figures" not in text and table in text
    assert text.startswith("# Title\nbefore\n") and text.endswith(f"{SECTION_END}\nafter\n")
