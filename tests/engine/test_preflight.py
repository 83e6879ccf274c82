"""Preflight before the first episode: the tokenizer, the engine's identity, their vocabulary.

The CLI cases run `vf-sglang rollout` as a user does (a subprocess, a fresh HF cache, no hub)
and time it: the issue's run retried the hub for 10+ minutes, or dropped 32 groups in 5.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from adapter.bridge.serve import served
from adapter.cli.server_checks import read_facts
from adapter.engine.client import SGLangClient
from adapter.engine.probe import check_engine, check_vocab, resolve_tokenizer
from adapter.engine.topology import WORKER_LISTINGS
from adapter.errors import ConfigurationError
from conformance.engine import ScriptedEngine, asgi_app

VF_SGLANG = str(Path(sys.executable).with_name("vf-sglang"))
ARITH = str(Path(__file__).resolve().parents[2] / "fixtures" / "envs" / "arith-v1.toml")


async def probe(url: str) -> dict:
    """Preflight at `url`, through a client of its own (a run's goes through its engine session)."""
    async with SGLangClient(url) as engine:
        return await check_engine(engine)


def no_hub_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    return {**env, "HF_HOME": str(tmp_path / "hf-home"), "HF_ENDPOINT": "http://127.0.0.1:9", **extra}


async def run_cli(args: list[str], env: dict[str, str]) -> tuple[int, str, float]:
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(VF_SGLANG, *args, env=env, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=120)
    return process.returncode or 0, stderr.decode().strip(), time.monotonic() - started


@pytest.mark.parametrize("offline", ["1", ""], ids=["hf_hub_offline", "hub_unreachable"])
async def test_rollout_without_a_tokenizer_fails_in_seconds_naming_the_flag(offline, tmp_path) -> None:
    async with served(asgi_app(ScriptedEngine())) as url:
        code, err, seconds = await run_cli(
            ["rollout", "--sglang-url", url, "--config", ARITH, "--model", "Qwen/Qwen3-0.6B"],
            no_hub_env(tmp_path, HF_HUB_OFFLINE=offline))
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert "--tokenizer" in err and "HF_HUB_OFFLINE" in err and "Qwen/Qwen3-0.6B" in err
    # a hub wait is minutes (retries over the network); a fresh interpreter's imports are 3-5 s on 2 idle
    # cores and took 10.7 s with other lanes beside it
    assert seconds < 20, f"{seconds:.1f}s to the --tokenizer error"


async def test_a_server_that_is_not_sglang_is_named_in_one_line(tmp_path) -> None:
    with subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"], cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as server:
        try:
            assert server.stdout is not None
            port = server.stdout.readline().split(" port ")[1].split()[0]
            code, err, _ = await run_cli(["rollout", "--sglang-url", f"http://127.0.0.1:{port}", "--config", ARITH,
                                          "--model", "Qwen/Qwen3-0.6B"], no_hub_env(tmp_path))
        finally:
            server.terminate()
    assert code == 2
    assert err == (f"vf-sglang: error: the server at http://127.0.0.1:{port} is not SGLang: GET /model_info "
                   "then /get_model_info answered 404 text/html without model_path and is_generation: pass the "
                   "SGLang server's (or its router's) URL")


@pytest.mark.parametrize(("status", "body"), [
    (200, {"models": []}),
    (500, {"detail": "boom"}),
    (200, {"model_path": "m"}),  # an OpenAI-style server with a model_path but not SGLang's is_generation
    (200, {"model_path": 7, "is_generation": True}),
    (500, {"model_path": "m", "is_generation": True}),
])
async def test_json_that_is_not_sglangs_model_info_is_not_sglang_either(status, body) -> None:
    async def info(request):
        return JSONResponse(body, status_code=status)

    async with served(Starlette(routes=[Route("/get_model_info", info)])) as url:
        with pytest.raises(ConfigurationError, match="is not SGLang"):
            await probe(url)


async def test_an_sglang_engine_passes_and_reports_its_model() -> None:
    async with served(asgi_app(ScriptedEngine())) as url:
        info = await probe(url)
    assert info["model_path"]


def info_server(*paths: str, asked: list[str]) -> Starlette:
    """A server answering SGLang's model and server info on `paths` only (404 elsewhere)."""
    async def info(request):
        asked.append(request.url.path)
        return JSONResponse({"model_path": "m", "is_generation": True, "context_length": 4096})

    return Starlette(routes=[Route(path, info) for path in paths])


@pytest.mark.parametrize(("paths", "answered"), [
    (("/model_info", "/server_info", "/get_model_info", "/get_server_info"), ("/model_info", "/server_info")),
    (("/model_info", "/server_info"), ("/model_info", "/server_info")),  # after the old names are removed
    (("/get_model_info", "/get_server_info"), ("/get_model_info", "/get_server_info")),  # before the new names
], ids=["both-names", "new-names-only", "old-names-only"])
async def test_model_and_server_info_are_read_under_either_name(paths, answered) -> None:
    asked: list[str] = []
    async with served(info_server(*paths, asked=asked)) as url:
        assert (await probe(url))["model_path"] == "m"
        engine = SGLangClient(url)
        facts = await read_facts(engine)
        await engine.aclose()
    assert facts.speaks_sglang and facts.context_length == 4096
    assert asked == [answered[0], *answered]  # preflight, then the live checks' two reads


def test_a_local_tokenizer_dir_is_used_as_is(qwen3_tokenizer) -> None:
    assert resolve_tokenizer(str(qwen3_tokenizer), environ={}) == str(qwen3_tokenizer)


def test_a_dir_without_tokenizer_files_is_refused(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match=r"has no tokenizer.*--tokenizer"):
        resolve_tokenizer(str(tmp_path), environ={})


def test_a_missing_dir_is_refused_without_asking_the_hub(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist: pass --tokenizer"):
        resolve_tokenizer(str(tmp_path / "ckpt" / "iter_1" / "hf"), environ={})


def test_a_hub_id_in_the_hf_cache_resolves_to_its_snapshot_offline(tmp_path, monkeypatch, qwen3_tokenizer) -> None:
    from huggingface_hub import constants

    repo = tmp_path / "models--Qwen--Qwen3-0.6B"
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (snapshot / name).write_bytes((qwen3_tokenizer / name).read_bytes())
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert resolve_tokenizer("Qwen/Qwen3-0.6B", environ={"HF_HUB_OFFLINE": "1"}) == str(snapshot)


def test_vocabulary_agreement_when_the_engine_reports_it() -> None:
    check_vocab({"model_path": "m"}, 151_669, tokenizer="t")  # not reported: nothing to compare
    check_vocab({"model_path": "m", "vocab_size": 151_936}, 151_669, tokenizer="t")  # padded model: fine
    with pytest.raises(ConfigurationError, match="151669 tokens but the engine's model 'm' has a vocabulary of 1000"):
        check_vocab({"model_path": "m", "vocab_size": 1000}, 151_669, tokenizer="t")


async def test_a_rollout_against_a_smaller_vocabulary_stops_before_any_episode(qwen3_tokenizer, capsys,
                                                                                 monkeypatch) -> None:
    from adapter.cli.entry import main

    monkeypatch.setattr(sys, "path", list(sys.path))  # the CLI adds its env sources; restored afterwards
    calls: list[str] = []

    async def info(request):
        return JSONResponse({"model_path": "tiny", "is_generation": True, "vocab_size": 1000})

    async def anything_else(request):
        calls.append(request.url.path)
        return JSONResponse({"error": {"message": "not expected"}}, status_code=400)

    app = Starlette(routes=[Route("/model_info", info),
                            Route("/{path:path}", anything_else, methods=["GET", "POST"])])
    async with served(app) as url:
        code = await asyncio.to_thread(main, ["rollout", "--sglang-url", url, "--config", ARITH, "--model",
                                              "Qwen/Qwen3-0.6B", "--tokenizer", str(qwen3_tokenizer)])
    err = capsys.readouterr().err
    assert code == 2 and "vocabulary of 1000" in err and "--tokenizer" in err
    # refused before the first episode: nothing asked but the engine's facts, each once (the
    # worker listings, then the server info; the model info was answered above)
    assert calls == [*WORKER_LISTINGS, "/server_info"]
