"""The fallback `Sample` and ABI types match Miles' field table (fixtures/miles/sample-31f1ca961.json).

A field added, removed, renamed, retyped or re-defaulted in `adapter.samples.sample_type` or
`adapter.miles.abi` without the table (or the other way round) fails here, naming every
difference. The table holds facts from radixark/miles@31f1ca961 (`miles/utils/types.py`, `miles/rollout/base_types.py`).
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace
from typing import Any

import pytest

from adapter.miles import abi as miles_types
from adapter.samples.sample_type import AdapterRef, RewardSpec, Sample, Status
from conformance.miles_table import load_table

TABLE = load_table()
MISSING = object()


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        made = f.default_factory()
        return {"factory": type(made).__name__}
    if f.default is dataclasses.MISSING:
        return MISSING
    return f.default.value if isinstance(f.default, Status) else f.default


def _expected(row: dict[str, Any]) -> Any:
    if "factory" in row:
        return {"factory": row["factory"]}
    return row.get("default", MISSING)


def differences(cls: type, rows: list[dict[str, Any]], *, types: bool = True) -> list[str]:
    ours = {f.name: f for f in dataclasses.fields(cls)}
    theirs = {row["name"]: row for row in rows}
    problems = [f"{cls.__name__}.{name}: not in Miles' table" for name in ours.keys() - theirs.keys()]
    problems += [f"{cls.__name__}.{name}: missing (Miles has it)" for name in theirs.keys() - ours.keys()]
    if list(n for n in ours if n in theirs) != [n for n in theirs if n in ours]:
        problems.append(f"{cls.__name__}: field order differs from Miles' (positional construction breaks)")
    for name in ours.keys() & theirs.keys():
        f, row = ours[name], theirs[name]
        if types and f.type != row["type"]:
            problems.append(f"{cls.__name__}.{name}: type {f.type!r}, Miles {row['type']!r}")
        if _default(f) != _expected(row):
            problems.append(f"{cls.__name__}.{name}: default {_default(f)!r}, Miles {_expected(row)!r}")
    return sorted(problems)


@pytest.mark.parametrize(
    ("cls", "rows"),
    [
        (Sample, TABLE["sample"]["fields"]),
        (Sample.SpecInfo, TABLE["nested"]["SpecInfo"]),
        (Sample.PrefixCacheInfo, TABLE["nested"]["PrefixCacheInfo"]),
        (AdapterRef, TABLE["nested"]["AdapterRef"]),
        (RewardSpec, TABLE["nested"]["RewardSpec"]),
    ],
    ids=["Sample", "SpecInfo", "PrefixCacheInfo", "AdapterRef", "RewardSpec"],
)
def test_fallback_types_have_exactly_miles_fields_types_and_defaults(cls, rows) -> None:
    assert differences(cls, rows) == []


@pytest.mark.parametrize("name", list(TABLE["abi"]))
def test_fallback_abi_types_have_exactly_miles_fields_and_defaults(name) -> None:
    # Annotations name Miles-internal classes (Namespace, DataSource, GenerateState): names
    # and defaults are compared, not annotations.
    assert differences(getattr(miles_types, name), TABLE["abi"][name], types=False) == []


def test_drift_is_detected_and_named() -> None:
    rows = [*TABLE["sample"]["fields"], {"name": "session_id", "type": "str | None", "default": None}]
    rows[0] = {**rows[0], "default": 0}
    assert differences(Sample, rows) == [
        "Sample.group_index: default None, Miles 0",
        "Sample.session_id: missing (Miles has it)",
    ]


def test_status_values_and_removed_fields() -> None:
    assert [s.value for s in Sample.Status] == TABLE["sample"]["status"]
    assert Sample.Status is Status and Sample().status is Sample.Status.PENDING
    names = {f.name for f in dataclasses.fields(Sample)}
    assert names.isdisjoint(TABLE["sample"]["removed"])
    with pytest.raises(TypeError, match="session_id"):
        Sample(session_id="trace-1")  # type: ignore[call-arg]


def test_fallback_has_every_method_miles_uses() -> None:
    assert [m for m in TABLE["sample"]["methods"] if not hasattr(Sample, m)] == []


def full_sample() -> Sample:
    return Sample(group_index=1, index=2, rollout_id=3, tokens=[1, 2, 3, 4], response="x", response_length=2,
                  reward={"correct": 1.0, "reward": 1.0}, loss_mask=[1, 0], rollout_log_probs=[-0.1, 0.0],
                  weight_versions=["5", "7"], status=Status.TRUNCATED, metadata={"verifiers": {"task_index": 0}},
                  routing_key="trace-1")


def test_to_dict_is_json_and_from_dict_inverts_it_keeping_unknown_keys() -> None:
    sample = full_sample()
    data = json.loads(json.dumps(sample.to_dict()))
    assert data["status"] == "truncated" and data["prefix_cache_info"] == {"cached_tokens": 0, "total_prompt_tokens": 0}
    assert Sample.from_dict(data) == sample
    assert Sample.from_dict({**data, "extra": 1}).extra == 1  # type: ignore[attr-defined]
    with pytest.raises(KeyError, match="status"):
        Sample.from_dict({k: v for k, v in data.items() if k != "status"})


@pytest.mark.parametrize(
    ("reward_key", "expected"),
    [(None, {"correct": 1.0, "reward": 1.0}), ("correct", 1.0)],
    ids=["no_key", "reward_key"],
)
def test_get_reward_value_reads_only_the_train_reward_key(reward_key, expected) -> None:
    args = SimpleNamespace(reward_key=reward_key, eval_reward_key="ignored")
    assert full_sample().get_reward_value(args) == expected


def test_effective_length_oldest_version_and_reset_for_retry() -> None:
    sample = full_sample()
    assert (sample.effective_response_length, sample.oldest_weight_version) == (1, 5)
    sample.reset_for_retry()
    assert (sample.tokens, sample.reward, sample.status, sample.routing_key, sample.rollout_id) == (
        [], None, Status.ABORTED, "trace-1", 3)


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"finish_reason": {"type": "stop"}, "cached_tokens": 3, "prompt_tokens": 8, "weight_version": "9"},
         ("completed", 3, 8, ["5", "7", "9"], 0)),
        ({"finish_reason": {"type": "length"}, "spec_verify_ct": 2, "completion_tokens": 4},
         ("truncated", 0, 0, ["5", "7"], 4)),
        ({"finish_reason": {"type": "abort"}}, ("aborted", 0, 0, ["5", "7"], 0)),
    ],
    ids=["stop", "length_with_spec", "abort"],
)
def test_update_from_meta_info_follows_miles(meta, expected) -> None:
    sample = full_sample()
    sample.update_from_meta_info(SimpleNamespace(sglang_speculative_algorithm="eagle"), meta)
    assert (sample.status.value, sample.prefix_cache_info.cached_tokens, sample.prefix_cache_info.total_prompt_tokens,
            sample.weight_versions, sample.spec_info.completion_token_num) == expected
