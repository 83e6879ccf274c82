"""What a newcomer sees from the job commands: help with a description and an example, a seeded
demo, job flags that map to the settings they fill (and name themselves in errors), a table in
a stable order, and progress per finished group."""

from __future__ import annotations

import argparse
import io
import re
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any

import pytest
from rich.console import Console

from adapter.cli.commands import DEMO_FLAGS, DEMO_SEED, JOB_FLAGS, ROLLOUT_FLAGS, _settings, flag_names
from adapter.cli.entry import build_parser
from adapter.cli.progress import GroupProgress
from adapter.cli.results import format_table
from adapter.config.rules import RULES, EnvFacts, validate
from adapter.config.settings import Settings, miles_flag


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@pytest.mark.parametrize("name", sorted(_subparsers(build_parser())))
def test_subcommand_help_has_a_description_and_an_example(name: str) -> None:
    sub = _subparsers(build_parser())[name]
    text = sub.format_help()
    assert sub.description and len(sub.description.split()) >= 12, f"{name}: no one-paragraph description"
    assert re.search(r"example:\n  vf-sglang " + re.escape(name) + r"\b", text), f"{name}: no example"


def test_demo_is_seeded_by_default_and_rollout_is_not() -> None:
    parser = build_parser()
    assert parser.parse_args(["demo"]).seed == DEMO_SEED is not None
    rollout = parser.parse_args(["rollout", "--sglang-url", "u", "--config", "c.toml", "--model", "m"])
    assert rollout.seed is None


@pytest.mark.parametrize(("extra", "bound"), [([], 512), (["--max-in-flight", "1"], 1)], ids=["miles_default", "one"])
def test_max_in_flight_bounds_the_rollouts_a_job_runs_at_once(extra: list[str], bound: int) -> None:
    args = build_parser().parse_args(["rollout", "--sglang-url", "u", "--config", "c.toml", "--model", "m", *extra])
    settings = _settings(args, ROLLOUT_FLAGS)
    assert settings.max_in_flight == bound  # the orchestrator's episode semaphore and the client's bound
    assert settings.flag("sglang_server_concurrency") == "--max-in-flight"


@pytest.mark.parametrize(("command", "tables"), [
    (["demo"], (JOB_FLAGS, DEMO_FLAGS)),
    (["rollout", "--sglang-url", "u", "--config", "c.toml", "--model", "m"], (JOB_FLAGS, ROLLOUT_FLAGS)),
])
def test_every_mapped_flag_exists_and_fills_real_settings(command: list[str], tables: tuple[Any, ...]) -> None:
    sub = _subparsers(build_parser())[command[0]]
    options = {option for action in sub._actions for option in action.option_strings}
    known = {f.name for f in fields(Settings)}
    for table in tables:
        assert set(table) <= options, f"{command[0]} lacks {set(table) - options}"
        assert {name for names in table.values() for name in names} <= known


def test_rule_templates_name_only_settings_fields() -> None:
    known = {f.name for f in fields(Settings)}
    used = {name for rule in RULES for name in re.findall(r"\{(\w+)\}", rule.message)}
    assert used <= known, f"unknown fields in rule messages: {used - known}"


@pytest.mark.parametrize("tables", [(JOB_FLAGS, ROLLOUT_FLAGS), (JOB_FLAGS, DEMO_FLAGS)], ids=["rollout", "demo"])
def test_every_rule_names_the_cli_flag_for_options_the_cli_fills(tables: tuple[Any, ...]) -> None:
    flags = flag_names(*tables)
    for rule in RULES:
        rendered = rule.render(Settings(flag_names=flags))
        named_by_miles = [field for field in flags if miles_flag(field) in rendered]
        assert named_by_miles == [], f"[{rule.name}] names Miles' flag for {named_by_miles}: {rendered}"
        for name in re.findall(r"\{(\w+)\}", rule.message):
            assert flags.get(name, miles_flag(name)) in rendered, (rule.name, rendered)


def test_validation_names_the_flag_of_the_command_that_runs(make_settings) -> None:
    settings = make_settings(n_samples_per_prompt=1)
    group_env = EnvFacts(task_count=3, has_group_reward=True)
    with pytest.raises(Exception, match="set --n-samples-per-prompt 2 or more"):
        validate(settings, group_env)  # inside Miles: Miles' flag
    with pytest.raises(Exception, match="set --n 2 or more") as caught:
        validate(replace(settings, flag_names=flag_names(JOB_FLAGS, ROLLOUT_FLAGS)), group_env)
    assert "--n-samples-per-prompt" not in str(caught.value)


class _Status(Enum):
    COMPLETED = "completed"


@dataclass
class _Sample:
    group_index: int
    task: int
    reward: float
    response_length: int = 2
    status: _Status = _Status.COMPLETED
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.metadata = {"verifiers": {"task_index": self.task}}


def _groups(finish_order: list[int]) -> list[list[_Sample]]:
    return [[_Sample(position, task, reward) for reward in (1.0, 0.5, 0.0)]
            for position, task in enumerate(finish_order)]


def test_table_lists_groups_by_task_whatever_order_they_finished_in() -> None:
    first, second = format_table(_groups([2, 0, 1])), format_table(_groups([0, 1, 2]))
    assert first == second
    assert [line.split()[1] for line in first.splitlines() if "group: reward mean" in line] == ["0", "1", "2"]


def test_progress_advances_once_per_finished_group() -> None:
    sink = io.StringIO()
    console = Console(file=sink, force_terminal=True, width=120)
    with GroupProgress(2, enabled=True, console=console) as progress:
        for group in _groups([1, 0]):
            progress(group)
        assert progress.done == 2
        progress._progress.refresh()  # type: ignore[union-attr]
    assert "2/2" in sink.getvalue() and "reward mean 0.500" in sink.getvalue()


def test_progress_is_silent_when_disabled(capsys) -> None:
    with GroupProgress(3, enabled=False) as progress:
        progress(_groups([0])[0])
    assert progress.done == 1 and capsys.readouterr() == ("", "")
