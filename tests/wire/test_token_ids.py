"""Token ids on both wire edges are strict: ints in [0, 2**31), never bools, floats, strings or
lists, checked without a Python loop per id; a refusal names the first bad id and its index."""

from __future__ import annotations

import enum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.errors import UnsupportedRequestError, WireFormatError
from adapter.wire.types import MAX_TOKEN_ID, logprob_items, parse_generate_body


def _prompt(ids: object) -> list[int]:
    return parse_generate_body({"model": "m", "token_ids": ids}).token_ids


@pytest.mark.parametrize(("ids", "index"), [
    ([5, True], 1), ([False, 5], 0), ([5, -1], 1), ([5, MAX_TOKEN_ID + 1], 1), ([2**32], 0), ([2**70], 0),
    ([1.0], 0), ([5, "7"], 1), ([5, None], 1), ([5, [6]], 1), ([5, {"id": 6}], 1), ([5, 6, 7, -(2**40)], 3),
], ids=["true", "false", "negative", "2**31", "2**32", "2**70", "float", "str", "none", "list", "object", "-2**40"])
def test_a_bad_prompt_id_is_refused_naming_its_index(ids: list[object], index: int) -> None:
    with pytest.raises(UnsupportedRequestError, match=rf"token_ids: token id at index {index} is "):
        _prompt(ids)


@pytest.mark.parametrize("ids", ["5", (5, 6), None, {"0": 5}], ids=["str", "tuple", "none", "object"])
def test_a_prompt_that_is_not_a_list_is_refused(ids: object) -> None:
    with pytest.raises(UnsupportedRequestError, match="token_ids: Input should be a valid list"):
        _prompt(ids)


def test_the_bounds_themselves_are_token_ids() -> None:
    assert _prompt([0, MAX_TOKEN_ID]) == [0, MAX_TOKEN_ID]


class _Token(enum.IntEnum):
    EOS = 7


def test_an_int_subclass_other_than_bool_is_an_int() -> None:
    assert _prompt([_Token.EOS]) == [7]


def test_the_refusal_names_the_bad_id_not_an_int_subclass_before_it() -> None:
    with pytest.raises(UnsupportedRequestError, match="token id at index 1 is -3"):
        _prompt([_Token.EOS, -3])


@given(st.lists(st.integers(0, MAX_TOKEN_ID), min_size=1, max_size=300))
def test_every_list_of_ids_in_range_passes_unchanged(ids: list[int]) -> None:
    assert _prompt(ids) == ids


@given(st.lists(st.integers(0, MAX_TOKEN_ID), min_size=1, max_size=50), st.data())
def test_one_bad_id_anywhere_is_found(ids: list[int], data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(ids) - 1))
    bad = data.draw(st.one_of(st.booleans(), st.integers(max_value=-1), st.integers(min_value=MAX_TOKEN_ID + 1),
                              st.floats(allow_nan=False), st.text(max_size=3)))
    ids[index] = bad  # type: ignore[call-overload]
    with pytest.raises(UnsupportedRequestError, match=rf"token id at index {index} is "):
        _prompt(ids)


@pytest.mark.parametrize("bad", [True, -1, MAX_TOKEN_ID + 1, 3.0, "3"])
def test_a_bad_sampled_id_is_a_wire_format_error_naming_the_item(bad: object) -> None:
    with pytest.raises(WireFormatError, match=rf"output_token_logprobs\[1\]: token id {bad!r} is invalid"):
        logprob_items([[-0.5, 4], [-0.25, bad]])
