"""The multi-turn rules on samples + the exchanges that made them (e2e/judges/turns.py): each must fail on
the defect it names."""

from __future__ import annotations

import json

import pytest

from e2e.judges.turns import Exchange, exchanges_from, later_turns, runs_of, turn_report

PROMPT, CALL, TOOL, REPLY = [1, 2, 3], [10, 11, 99], [20, 21, 22], [12, 99]


def _sample(tokens: list[int], mask: list[int]) -> dict:
    return {"tokens": tokens, "loss_mask": mask, "response_length": len(mask), "group_index": 0}


def _episode(cached: int | None = len(PROMPT) + len(CALL)) -> tuple[dict, list[Exchange]]:
    sample = _sample(PROMPT + CALL + TOOL + REPLY, [1] * 3 + [0] * 3 + [1] * 2)
    return sample, [Exchange(tuple(PROMPT), tuple(CALL), 0),
                    Exchange(tuple(PROMPT + CALL + TOOL), tuple(REPLY), cached)]


def test_a_two_turn_episode_recorded_as_sampled_passes_every_rule() -> None:
    sample, exchanges = _episode()
    report = turn_report([sample], exchanges, min_multi_turn=1.0)
    assert (report.problems, report.multi_turn, report.turns, report.later_turns_cached) == ((), 1, 2, 1)


@pytest.mark.parametrize(("defect", "message"), [
    ("tool tokens under 1", "is no recorded exchange"),
    ("a sampled token under 0", "is no recorded exchange"),
    ("second prompt re-tokenized", "is no recorded exchange"),
    ("cache miss", "the radix cache did not serve it"),
    ("no cached_tokens", "the radix cache did not serve it"),
])
def test_each_broken_rule_is_named(defect: str, message: str) -> None:
    sample, exchanges = _episode()
    if defect == "tool tokens under 1":
        sample["loss_mask"] = [1] * 3 + [1, 0, 0] + [1] * 2
    elif defect == "a sampled token under 0":
        sample["loss_mask"] = [1, 1, 0] + [0] * 3 + [1] * 2
    elif defect == "second prompt re-tokenized":
        exchanges[1] = Exchange(tuple([*PROMPT, 10, 77, *TOOL]), tuple(REPLY), 6)
    elif defect == "cache miss":
        exchanges[1] = Exchange(exchanges[1].input_ids, exchanges[1].output_ids, len(PROMPT) - 1)
    else:
        exchanges[1] = Exchange(exchanges[1].input_ids, exchanges[1].output_ids, None)
    problems = turn_report([sample], exchanges).problems
    assert problems and message in problems[0]


def test_too_few_multi_turn_samples_fail_the_run() -> None:
    two_turns, exchanges = _episode()
    one_turn = _sample([*PROMPT, 30, 99], [1, 1])
    exchanges.append(Exchange(tuple(PROMPT), (30, 99), 0))
    assert turn_report([two_turns, one_turn], exchanges, min_multi_turn=0.5).problems == ()
    problems = turn_report([two_turns, one_turn, one_turn], exchanges, min_multi_turn=0.5).problems
    assert problems == ("1 of 3 samples have two or more model turns, expected at least 50%",)


def test_a_mask_that_does_not_fit_the_response_is_named() -> None:
    sample, exchanges = _episode()
    sample["response_length"] = 4
    assert "loss_mask of 8 for response_length 4" in turn_report([sample], exchanges).problems[0]


def test_only_answered_generate_exchanges_are_read() -> None:
    rows = [{"kind": "header"},
            {"kind": "exchange", "request": {"path": "/health", "body": None}, "response": {"status": 200}},
            {"kind": "exchange", "request": {"path": "/generate", "body": {"input_ids": [1]}},
             "response": {"status": 400, "body": {"error": "x"}}},
            {"kind": "exchange", "request": {"path": "/generate", "body": {"input_ids": [1, 2]}},
             "response": {"status": 200, "body": {"output_ids": [3], "meta_info": {"cached_tokens": 1}}}}]
    assert exchanges_from(json.dumps(r) for r in rows) == [Exchange((1, 2), (3,), 1)]


def test_runs_are_maximal() -> None:
    assert runs_of([1, 1, 0, 1]) == [(1, 0, 2), (0, 2, 3), (1, 3, 4)]
    assert runs_of([]) == []


def test_a_later_turn_is_found_by_its_prefix_and_a_fresh_prompt_is_not() -> None:
    _, exchanges = _episode()
    fresh = Exchange((5, 6, 7), (8,), 0)
    assert later_turns([*exchanges, fresh]) == [(exchanges[0], exchanges[1])]
