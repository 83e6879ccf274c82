"""Verifiers' default harness (the coding agent: bash + edit) against real SGLang on CPU: the model's
bash call runs, its output comes back as a tool message, and the trace turns into samples.

The tests' server (`real_sglang`: the lane's own) is given the tiny model's default-harness variant
(`e2e.tiny.variants.default_harness`: the same architecture, trained to call bash under that harness's
prompt) with `/update_weights_from_disk`, and the served model's own weights back afterwards: no
server is started for this test. Generation A (verifiers 0.2.0, `[harness] id = "default"`, subprocess
runtime). Opt-in: VF_SGLANG_CPU=1 (the sglang-cpu lanes); on the lane of SGLang 0.5.16 (Miles' image
pin) only: the harness and its engine calls are the same on 0.5.23, whose lane runs the null
harness's tool episodes, and CI runs the 0.5.16 lane beside it with less to do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapter.cli import main
from adapter.reference.tiny_model import RECIPE, build_tiny_model
from adapter.versions.coinstall import MILES_SGLANG
from e2e.judges.turns import load_exchanges, runs_of, turn_report
from e2e.rl_cpu.sync import load_weights
from e2e.tiny.variants import default_harness

pytestmark = pytest.mark.sglang_cpu

CONFIG = Path(__file__).resolve().parents[2] / "fixtures" / "envs" / "echo-tool-v1-default-harness.toml"
BASH_CALL = re.compile(r'<tool_call>\s*(\{.*\})\s*</tool_call>', re.DOTALL)


@pytest.fixture(scope="module")
def harness_run(real_sglang, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[list[dict[str, Any]], Path, Any]]:
    server = real_sglang
    if server.version != MILES_SGLANG:
        pytest.skip(f"run on SGLang {MILES_SGLANG}'s lane (tox -e sglang-cpu-0516), not {server.version}'s")
    variant = build_tiny_model(progress=False, recipe=default_harness(RECIPE))
    run = tmp_path_factory.mktemp("default-harness")
    out, record = run / "samples.jsonl", run / "cassette"
    load_weights(server.url, variant, "default-harness")
    try:
        code = main(["rollout", "--sglang-url", server.url, "--config", str(CONFIG), "--model", "Qwen/Qwen3-0.6B",
                     "--tokenizer", str(variant), "--groups", "2", "--n", "2", "--seed", "3",
                     "--max-response-len", "48", "--quiet", "--record", str(record), "--out", str(out)])
    finally:
        load_weights(server.url, Path(server.model_dir), "default")  # the other tests' model again
    assert code == 0
    from renderers.base import load_tokenizer

    yield [json.loads(line) for line in out.read_text().splitlines()], record, load_tokenizer(str(variant))


def _bash_turns(sample: dict[str, Any], tokenizer: Any) -> list[tuple[str, str]]:
    """(command, what the harness added after it) for each of the sample's bash calls."""
    tokens, mask = sample["tokens"], sample["loss_mask"]
    offset = len(tokens) - len(mask)
    runs = runs_of(mask)
    found = []
    for i, (value, start, end) in enumerate(runs):
        match = BASH_CALL.search(tokenizer.decode(tokens[offset + start: offset + end])) if value == 1 else None
        if match is None or i + 1 == len(runs):
            continue
        try:
            call = json.loads(match.group(1))
        except ValueError:  # a malformed call: Renderers parse no tool call, so no bash ran
            continue
        if call.get("name") == "bash":
            _, after_start, after_end = runs[i + 1]
            added = tokenizer.decode(tokens[offset + after_start: offset + after_end])
            found.append((call["arguments"]["command"], added))
    return found


def test_the_models_bash_call_runs_and_its_output_comes_back_as_a_tool_message(harness_run) -> None:
    samples, _, tokenizer = harness_run
    calls = [call for sample in samples for call in _bash_turns(sample, tokenizer)]
    print(f"default harness: {len(calls)} bash calls in {len(samples)} episodes: {calls[:2]}")
    assert calls, "no episode called bash"
    echoed = [(command, added) for command, added in calls if command.startswith("echo ")]
    assert echoed, calls
    for command, added in echoed:  # what `echo X` printed is the tool message the next turn reads
        assert f"<tool_response>\n{command.removeprefix('echo ').strip()}\n" in added, (command, added)


def test_every_turn_extends_the_last_and_only_sampled_tokens_are_trained(harness_run) -> None:
    samples, record, _ = harness_run
    report = turn_report(samples, load_exchanges(record))
    assert report.problems == (), report.problems
    assert report.multi_turn == len(samples) and report.later_turns_cached == report.turns - report.samples


def test_the_samples_are_miles_shaped_with_a_reward(harness_run) -> None:
    samples, _, _ = harness_run
    assert sorted({s["group_index"] for s in samples}) == [0, 1]
    for sample in samples:
        assert sample["status"] in {"completed", "truncated"} and isinstance(sample["reward"], float)
        assert len(sample["rollout_log_probs"]) == len(sample["loss_mask"]) == sample["response_length"]
