"""`vf-sglang rollout` end to end as a user runs it: a real process against an engine URL."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from adapter.bridge.serve import served
from adapter.cli.entry import main
from conformance.engine import ScriptedEngine, asgi_app
from conformance.plugin import loaded_tokenizer
from conformance.policies import TextPolicy
from e2e.judges.verify import expectation_for, load_samples, verify

VF_SGLANG = str(Path(sys.executable).with_name("vf-sglang"))
ENVS = Path(__file__).resolve().parents[2] / "fixtures" / "envs"


@pytest.mark.usefixtures("proxy_nowhere")
async def test_rollout_command_writes_verifiable_samples(tmp_path, qwen3_tokenizer) -> None:
    """On a proxied machine (http proxies point nowhere, no NO_PROXY): the engine (loopback), the
    bridge and the harness' calls to Verifiers' interception server never go through the proxy."""
    from adapter.episodes.generations import installed

    config = installed().bundled_envs() / "group-v1.toml"
    tokenizer = loaded_tokenizer(qwen3_tokenizer)
    engine = ScriptedEngine(default=TextPolicy(tokenizer, lambda prompt: "banana"))
    out = tmp_path / "samples.jsonl"
    async with served(asgi_app(engine)) as url:
        process = await asyncio.create_subprocess_exec(
            VF_SGLANG, "rollout", "--sglang-url", url, "--config", str(config),
            "--model", "Qwen/Qwen3-0.6B", "--tokenizer", str(qwen3_tokenizer), "--groups", "1", "--n", "2",
            "--out", str(out), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=300)
    assert process.returncode == 0, stderr.decode()[-3000:]
    assert "task 0 group: reward mean" in stdout.decode()
    assert "groups" not in stderr.decode() and "━" not in stderr.decode(), "no progress bar off a terminal"
    samples = load_samples(out)
    verify(samples, expectation_for("group-v1", groups=1, n=2))
    assert json.loads(out.read_text().splitlines()[0])["status"] == "completed"
    # one engine session: each engine fact read once, whatever the CLI's router look, preflight and
    # seeding need of them: the model info, router discovery's two listings, the server info (this
    # engine serves it under its older name only: asked on the 404)
    facts = [r.path for r in engine.requests if r.method == "GET"]
    assert facts == ["/model_info", "/workers", "/list_workers", "/server_info", "/get_server_info"]


def test_unreachable_engine_is_one_clear_line(capsys) -> None:
    code = main(["rollout", "--sglang-url", "http://127.0.0.1:9", "--config", str(ENVS / "arith-v1.toml"),
                 "--model", "Qwen/Qwen3-0.6B"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("vf-sglang: error: cannot reach the engine at http://127.0.0.1:9")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(("config", "message"), [("missing.toml", "does not exist"), ("env.json", ".toml")])
def test_bad_config_is_one_clear_line(config, message, capsys, tmp_path) -> None:
    (tmp_path / "env.json").write_text("{}")
    code = main(["rollout", "--sglang-url", "http://127.0.0.1:9", "--config", str(tmp_path / config),
                 "--model", "Qwen/Qwen3-0.6B"])
    assert code == 2
    assert message in capsys.readouterr().err


async def test_rollout_reports_each_kept_group_as_it_finishes(monkeypatch, qwen3_tokenizer) -> None:
    from adapter.cli.commands import JOB_FLAGS, ROLLOUT_FLAGS, flag_names
    from adapter.config.settings import Settings
    from adapter.episodes.bundled import add_env_sources
    from adapter.episodes.generations import installed
    from adapter.rollout.hooks import RolloutHooks
    from adapter.rollout.job import run_lifetime, run_rollouts

    monkeypatch.setattr(sys, "path", list(sys.path))  # add_env_sources edits both; restored afterwards
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    add_env_sources([installed().bundled_tasksets()])
    tokenizer = loaded_tokenizer(qwen3_tokenizer)
    engine = ScriptedEngine(default=TextPolicy(tokenizer, lambda prompt: "7"))
    seen: list[int] = []
    settings = Settings(verifiers_config=str(ENVS / "arith-v1.toml"), rollout_batch_size=2, n_samples_per_prompt=1,
                        over_sampling_batch_size=2, renderer_model_name="Qwen/Qwen3-0.6B", rollout_global_dataset=False,
                        hf_checkpoint=str(qwen3_tokenizer), flag_names=flag_names(JOB_FLAGS, ROLLOUT_FLAGS))
    async with served(asgi_app(engine)) as url, run_lifetime(settings, url) as lifetime:
        result = await run_rollouts(settings, lifetime=lifetime, tokenizer_path=str(qwen3_tokenizer),
                                    hooks=RolloutHooks(on_group=lambda group: seen.append(len(group))))
    assert seen == [1, 1] and len(result.groups) == 2
