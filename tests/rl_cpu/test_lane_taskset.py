"""The RL lane's taskset, echo-tool-shared-v1, is echo-tool-v1 as the model sees it (prompts, tool
name, description, stamp form), with one taskset-scoped tool server instead of one per rollout,
and it scores like echo-tool-v1: only a stamp the tool returned, repeated in the reply, earns 1."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
from types import SimpleNamespace

import pytest

from e2e.rl_cpu.config import LANE_TASKSETS, RLConfig, env_config

vf = pytest.importorskip("verifiers.v1")


@pytest.fixture
def modules(monkeypatch):
    from adapter.episodes.generations import installed

    generation = installed()
    if generation.bundle != "a":
        pytest.skip("the lane's taskset is written for generation A (verifiers 0.2.x)")
    monkeypatch.syspath_prepend(str(generation.bundled_tasksets()))
    monkeypatch.syspath_prepend(str(LANE_TASKSETS))
    return importlib.import_module("echo_tool_v1"), importlib.import_module("echo_tool_shared_v1")


def _tasks(module, name: str) -> list:
    taskset = getattr(module, name)
    return taskset(vf.TasksetConfig()).load()


def test_the_model_sees_what_echo_tool_v1_shows_it(modules) -> None:
    echo, shared = modules
    assert [t.data.prompt for t in _tasks(shared, "EchoToolSharedTaskset")] == \
        [t.data.prompt for t in _tasks(echo, "EchoToolTaskset")]
    # Verifiers names a tool <snake_case toolset class>_<tool>: both are echo_tools_stamp
    assert shared.EchoTools.__name__ == echo.EchoTools.__name__ == "EchoTools"
    assert inspect.signature(shared.EchoTools.stamp) == inspect.signature(echo.EchoTools.stamp)
    assert shared.EchoTools.stamp.__doc__ == echo.EchoTools.stamp.__doc__


def test_one_tool_server_serves_the_whole_run(modules) -> None:
    _, shared = modules
    assert shared.EchoToolSharedTaskset.tools == (shared.EchoTools,)
    assert not getattr(shared.EchoToolSharedTask, "tools", ())  # none per rollout


def test_each_word_has_its_own_decimal_stamp(modules) -> None:
    echo, shared = modules
    stamps = {word: shared.stamp_for_word(word) for word in echo.WORDS}
    assert len(set(stamps.values())) == len(echo.WORDS)
    assert all(re.fullmatch(rf"STAMP-\d{{{echo.STAMP_DIGITS}}}", s) for s in stamps.values())
    assert asyncio.run(shared.EchoTools.stamp(SimpleNamespace(), " Apple ")) == stamps["apple"]


@pytest.mark.parametrize(("tool_said", "reply", "reward"), [
    ("own", "own", 1.0),           # the tool ran with the task's word and the reply repeats it
    ("own", "nothing", 0.0),       # the tool ran, the reply did not repeat it
    (None, "own", 0.0),            # a guessed stamp without a tool call earns nothing
    ("other", "other", 0.0),       # the tool ran with another word
])
def test_only_a_stamp_the_tool_returned_and_the_reply_repeats_earns_the_reward(modules, tool_said, reply,
                                                                               reward) -> None:
    _, shared = modules
    task = _tasks(shared, "EchoToolSharedTaskset")[0]
    stamps = {"own": shared.stamp_for_word(task.data.word), "other": shared.stamp_for_word("river"),
              "nothing": "I cannot call tools."}
    messages = [] if tool_said is None else [SimpleNamespace(content=stamps[tool_said])]
    trace = SimpleNamespace(tool_messages=messages, last_reply=stamps[reply])
    assert asyncio.run(task.used_tool(trace)) == reward
    assert asyncio.run(task.tool_ran(trace)) == float(tool_said == "own")


def test_the_loop_takes_the_lanes_own_config_else_a_bundled_one() -> None:
    from adapter.episodes.generations import installed

    generation = installed()
    assert env_config(RLConfig().taskset, generation).parent.name == "envs"
    assert env_config(RLConfig().taskset, generation).is_relative_to(LANE_TASKSETS.parent)
    assert env_config("arith-v1", generation) == generation.bundled_config("arith-v1")
