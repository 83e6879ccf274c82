"""The CLI writes groups in taskset order and numbers `group_index`/`index` by that order, so
two seeded runs write the same JSONL whatever order the groups finished in."""

from __future__ import annotations

from pathlib import Path

from adapter.cli.results import in_task_order, write_jsonl
from adapter.samples.conversion import flatten
from adapter.samples.sample_type import Sample


def _group(task: int, finished: int, size: int = 2, nested: bool = False) -> list:
    samples = [Sample(group_index=finished, index=finished * size + i,
                      metadata={"verifiers": {"task_index": task}}) for i in range(size)]
    return [samples] if nested else samples


def test_groups_are_renumbered_in_task_order() -> None:
    finished = [_group(2, 0), _group(0, 1), _group(1, 2, nested=True)]
    ordered = in_task_order(finished)
    flat = [s for g in ordered for s in flatten(g)]
    assert [s.metadata["verifiers"]["task_index"] for s in flat] == [0, 0, 1, 1, 2, 2]
    assert [s.group_index for s in flat] == [0, 0, 1, 1, 2, 2]
    assert [s.index for s in flat] == [0, 1, 2, 3, 4, 5]


def test_two_finish_orders_write_the_same_file(tmp_path: Path) -> None:
    first = in_task_order([_group(1, 0), _group(0, 1)])
    second = in_task_order([_group(0, 0), _group(1, 1)])
    write_jsonl(tmp_path / "a.jsonl", first)
    write_jsonl(tmp_path / "b.jsonl", second)
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()
