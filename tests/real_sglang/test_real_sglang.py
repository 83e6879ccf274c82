"""The adapter against REAL SGLang on CPU (`tox -e sglang-cpu`, `tox -e sglang-cpu-0516`).

One deterministic-mode server per session (`e2e.sglang_cpu.fixtures.real_sglang`, the
project's tiny Qwen3). What only a real engine can show: `vf-sglang check` passes every required
check; a run without `--seed` is seeded, never n identical rollouts; `abort_all` during a run
drops the aborted groups with a reason and the run ends; the radix cache's `cached_tokens`
reaches the samples and the metric; a weight update between two batches reaches
`weight_versions`. Skipped (naming the command) unless VF_SGLANG_CPU=1.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter.cli import main
from adapter.config.settings import Settings
from adapter.episodes.bundled import add_env_sources
from adapter.episodes.generations import installed
from adapter.rollout.job import prepare_orchestrator
from adapter.samples.conversion import flatten
from e2e.common.exclusive import machine_turn

pytestmark = pytest.mark.sglang_cpu

ENVS = Path(__file__).resolve().parents[2] / "fixtures" / "envs"


def _rollout_argv(server: Any, out: Path, *extra: str, taskset: str = "arith-v1") -> list[str]:
    return ["rollout", "--sglang-url", server.url, "--config", str(ENVS / f"{taskset}.toml"),
            "--model", "Qwen/Qwen3-0.6B", "--tokenizer", str(server.model_dir), "--groups", "2", "--n", "4",
            "--max-response-len", "24", "--temperature", "1.0", "--out", str(out), "--quiet", *extra]


def _groups(path: Path) -> dict[int, list[dict[str, Any]]]:
    groups: dict[int, list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        groups.setdefault(row["group_index"], []).append(row)
    return groups


def _settings(server: Any, **values: Any) -> Settings:
    add_env_sources([installed().bundled_tasksets()])
    base = {"verifiers_config": str(ENVS / "arith-v1.toml"), "hf_checkpoint": str(server.model_dir),
            "renderer_model_name": "Qwen/Qwen3-0.6B", "rollout_global_dataset": False, "rollout_batch_size": 2,
            "n_samples_per_prompt": 2, "over_sampling_batch_size": 2, "rollout_max_response_len": 24,
            "rollout_max_context_len": 1024, "rollout_temperature": 1.0}
    return Settings(**{**base, **values})


def test_check_passes_every_required_check_against_real_sglang(real_sglang, capsys) -> None:
    code = main(["check", "--sglang-url", real_sglang.url, "--tokenizer", str(real_sglang.model_dir)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"on SGLang {real_sglang.version}" in out
    determinism = next(line for line in out.splitlines() if line.startswith("same seed, same tokens"))
    assert " ok " in determinism, determinism
    limit = next(line for line in out.splitlines() if line.startswith("input limit vs model"))
    assert "pass --tokenizer" not in limit and "max_req_input_len" in limit, limit


def test_a_rollout_without_seed_on_a_deterministic_server_is_seeded_and_says_so(
    real_sglang, tmp_path: Path, caplog
) -> None:
    out = tmp_path / "samples.jsonl"
    assert main(_rollout_argv(real_sglang, out)) == 0
    assert "--enable-deterministic-inference" in caplog.text  # a warning: stderr outside pytest
    for index, rows in _groups(out).items():
        responses = {tuple(row["tokens"][-row["response_length"]:]) for row in rows}
        assert len(responses) > 1, f"group {index}: its 4 rollouts sampled the same tokens"


def test_the_same_seed_gives_the_same_samples_twice(real_sglang, tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (first, second):
        assert main(_rollout_argv(real_sglang, path, "--seed", "7")) == 0
    tokens = [[row["tokens"] for rows in _groups(p).values() for row in rows] for p in (first, second)]
    assert tokens[0] == tokens[1]


async def test_abort_all_during_a_run_drops_groups_with_a_reason_and_the_run_ends(real_sglang, lifetimes,
                                                                                   monkeypatch) -> None:
    # The lane beside this one runs this test on its own server: one at a time (e2e.common.exclusive).
    with machine_turn("real-sglang-long-decode", wait_s=600):
        await _abort_all_during_a_run(real_sglang, lifetimes, monkeypatch)


async def _abort_all_during_a_run(real_sglang: Any, lifetimes: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # min_new_tokens keeps each answer in flight for 160 decode steps (seconds on 2 cores, longer
    # under load), so an abort sent every 0.25 s lands on one; the aborting stops at the event (the
    # bridge saw the engine answer `abort`), not after a guessed delay. The replacement groups then
    # decode their 160 tokens each and the run must still finish.
    settings = _settings(real_sglang, rollout_max_response_len=180, rollout_min_new_tokens=160,
                         rollout_batch_size=2, n_samples_per_prompt=2)
    from adapter.rollout import orchestrator as orchestration

    apps: list[Any] = []  # the bridge the train call builds (its sessions, its engine stats)
    create_app = orchestration.create_app
    monkeypatch.setattr(orchestration, "create_app", lambda *a, **k: apps.append(create_app(*a, **k)) or apps[-1])
    orchestrator = prepare_orchestrator(settings, lifetime=lifetimes(settings, real_sglang.url))
    run = asyncio.ensure_future(orchestrator.train(rollout_id=0))
    async with asyncio.timeout(240):  # the episodes' harness starts first; then the bridge sees a session
        while not run.done() and not (apps and len(apps[0].state.bridge.sessions)):
            await asyncio.sleep(0.1)
    assert apps and not run.done(), "the run ended before any episode reached the bridge"
    bridge = apps[0].state.bridge
    async with httpx.AsyncClient(timeout=10, trust_env=False) as http, asyncio.timeout(120):
        while not bridge.stats.aborted and not run.done():
            response = await http.post(f"{real_sglang.url}/abort_request", json={"abort_all": True})
            assert response.status_code == 200
            await asyncio.sleep(0.25)
    assert bridge.stats.aborted, "the run ended before an abort landed on a request in flight"
    # The run ending is the event; this bound only stops a hung one: the call took 22 s alone on 2
    # cores and 100 s beside a CPU hog on both (SGLang 0.5.23); 300 s is 3x that.
    result = await asyncio.wait_for(run, timeout=300)
    drops = {key: value for key, value in result.metrics.items() if key.startswith("rollout/drop/")}
    assert drops and all(value > 0 for value in drops.values()), result.metrics
    kept = [s for group in result.groups for s in flatten(group)]
    assert len(result.groups) == 2 and all(s.status.value != "aborted" for s in kept)


async def test_the_second_turn_of_a_session_is_served_from_the_radix_cache(real_sglang) -> None:
    from adapter.bridge.handler import create_app, handle_generate
    from adapter.engine.client import SGLangClient
    from adapter.samples.metrics import prefix_cache_hit_rate

    engine = SGLangClient(real_sglang.url)
    state = create_app(Settings(), engine, model="tiny").state.bridge
    prompt = [151644, 872, 198, *range(1000, 1100), 151645, 198, 151644, 77091, 198]
    params = {"max_tokens": 8, "temperature": 0.0, "logprobs": 1}
    try:
        first = await handle_generate(state, {"model": "m", "token_ids": prompt, "sampling_params": params}, "s1")
        sampled = json.loads(first.body)["choices"][0]["token_ids"]
        second_prompt = [*prompt, *sampled, 151645, 198, 151644, 872, 198, 17, 151645]
        second = await handle_generate(state, {"model": "m", "token_ids": second_prompt,
                                               "sampling_params": params}, "s1")
    finally:
        await engine.aclose()
    assert first.ok and second.ok
    stats = state.stats.get("s1")
    assert stats is not None and stats.calls == 2 and stats.cached_tokens >= len(prompt) - 1, stats
    assert prefix_cache_hit_rate([stats]) > 0.4


def _changed_checkpoint(model_dir: Path, into: Path) -> Path:
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(model_dir, into)
    weights = into / "model.safetensors"
    tensors = load_file(str(weights))
    generator = torch.Generator().manual_seed(0)
    changed = {name: t + 0.05 * torch.randn(t.shape, generator=generator).to(t.dtype) if t.dim() == 2 else t
               for name, t in tensors.items()}
    save_file(changed, str(weights), metadata={"format": "pt"})
    return into


async def test_a_weight_update_between_batches_reaches_weight_versions(real_sglang, tmp_path: Path, lifetimes) -> None:
    settings = _settings(real_sglang, sglang_enable_deterministic_inference=True)
    orchestrator = prepare_orchestrator(settings, lifetime=lifetimes(settings, real_sglang.url))
    before = await orchestrator.train(rollout_id=0)
    changed = _changed_checkpoint(real_sglang.model_dir, tmp_path / "step-2")
    url = real_sglang.url
    async with httpx.AsyncClient(timeout=120, trust_env=False) as http:
        try:
            update = await http.post(f"{url}/update_weights_from_disk",
                                     json={"model_path": str(changed), "weight_version": "2"})
            assert update.status_code == 200 and update.json().get("success"), update.text
            assert (await http.get(f"{url}/model_info")).json()["weight_version"] == "2"
            after = await orchestrator.train(rollout_id=1)
        finally:  # the session's other tests expect the original weights
            restored = await http.post(f"{url}/update_weights_from_disk",
                                       json={"model_path": str(real_sglang.model_dir),
                                             "weight_version": "default"})
            assert restored.status_code == 200, restored.text
    old = {v for g in before.groups for s in flatten(g) for v in s.weight_versions}
    assert old == {"default"}
    assert all(s.weight_versions == ["2"] for g in after.groups for s in flatten(g))
