"""A newcomer's mistakes are one line naming what they typed, with exit status 2, found before
any slow work (abbreviations, `--groups 0`, `--n 1` with group rewards, a
missing model dir, an unreadable tokenizer, a port in use)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter.bridge.serve import served
from adapter.cli.entry import build_parser, main
from adapter.errors import ServeError
from conformance.engine import ScriptedEngine, asgi_app
from conformance.plugin import loaded_tokenizer
from conformance.policies import TextPolicy

ENVS = Path(__file__).resolve().parents[2] / "fixtures" / "envs"
ROLLOUT = ["rollout", "--sglang-url", "http://127.0.0.1:9", "--config", str(ENVS / "arith-v1.toml"),
           "--model", "Qwen/Qwen3-0.6B"]
# Runs the CLI in a fresh interpreter, then reports whether torch was ever imported: a check
# that runs "before the engine loads weights" never needs it.
PROBE = "import sys; from adapter.cli import main; rc = main(sys.argv[1:]); print('torch' in sys.modules); sys.exit(rc)"


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def _one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    err = done.stderr.strip()
    assert done.returncode == 2, done.stderr
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("vf-sglang: error: ") and all(n in err for n in needles), err
    assert done.stdout.strip() == "False", "torch was imported: the check ran after slow work started"
    return err


@pytest.fixture
def model_dir(tmp_path: Path, qwen3_tokenizer: Path) -> Path:
    """Looks like a model directory to every cheap check (weights are never read)."""
    folder = tmp_path / "model"
    folder.mkdir()
    for item in qwen3_tokenizer.iterdir():
        (folder / item.name).write_bytes(item.read_bytes())
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def test_every_parser_refuses_abbreviated_flags() -> None:
    lenient = [p.prog for p in _parsers(build_parser()) if p.allow_abbrev]
    assert lenient == [], f"parsers that expand abbreviated flags: {lenient}"


def test_demo_model_is_not_read_as_model_dir(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--model", "Qwen/Qwen3-0.6B"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --model Qwen/Qwen3-0.6B" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "value"), [("--groups", "0"), ("--n", "0"), ("--max-response-len", "-1")])
def test_counts_below_one_name_the_flag_typed(flag: str, value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*ROLLOUT, flag, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be at least 1, got {value}" in err and "--rollout-batch-size" not in err


async def test_group_rewards_with_n_1_name_n_not_the_miles_flag(capsys, qwen3_tokenizer: Path) -> None:
    engine = ScriptedEngine(default=TextPolicy(loaded_tokenizer(qwen3_tokenizer), lambda prompt: "banana"))
    async with served(asgi_app(engine)) as url:
        argv = ["rollout", "--sglang-url", url, "--config", str(ENVS / "group-v1.toml"), "--model",
                "Qwen/Qwen3-0.6B", "--tokenizer", str(qwen3_tokenizer), "--n", "1", "--groups", "1"]
        code = await asyncio.to_thread(main, argv)
    err = capsys.readouterr().err
    assert code == 2
    assert "set --n 2 or more" in err and "--n-samples-per-prompt" not in err
    assert engine.generate_requests() == [], "refused before the first episode"


def test_demo_refuses_group_rewards_with_n_1_before_the_engine_starts(model_dir: Path) -> None:
    done = _cli("demo", "--model-dir", str(model_dir), "--taskset", "group-v1", "--n", "1", "--quiet")
    assert done.returncode == 2 and "[group_reward_train_n]" in done.stderr and "set --n 2 or more" in done.stderr
    assert done.stdout.strip() == "False", "torch was imported: the engine was started before the refusal"


def test_missing_model_dir_is_one_line_before_torch() -> None:
    _one_line_error(_cli("demo", "--model-dir", "/nonexistent/model"), "--model-dir /nonexistent/model",
                    "no such directory")


def test_unreadable_tokenizer_is_one_line_before_torch(model_dir: Path) -> None:
    (model_dir / "tokenizer.json").write_text("{}")
    _one_line_error(_cli("demo", "--model-dir", str(model_dir)), "--model-dir", "tokenizer files do not parse")
    _one_line_error(_cli(*ROLLOUT, "--tokenizer", str(model_dir)), "--tokenizer", "tokenizer files do not parse")


def test_an_unwritable_model_cache_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    done = _cli("demo", "--quiet", env={"VF_SGLANG_CACHE": str(blocker / "cache")})
    _one_line_error(done, "cannot write the model cache", "VF_SGLANG_CACHE")


def test_port_in_use_is_one_line_before_the_engine_loads_weights(model_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _cli("engine", "--port", str(port), "--model-dir", str(model_dir))
    _one_line_error(done, f"--port {port}", "in use")


def test_serve_bridge_port_in_use_is_one_line_naming_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _cli("serve-bridge", "--sglang-url", "http://127.0.0.1:9", "--port", str(port))
    _one_line_error(done, f"--port {port}", "in use")


def test_a_server_that_cannot_listen_is_one_line(monkeypatch, capsys) -> None:
    def fails(_: argparse.Namespace) -> int:
        raise ServeError("could not serve on 127.0.0.1:30000: the server exited at startup")

    parser = build_parser()
    for sub in _parsers(parser):
        sub.set_defaults(run=fails)
    monkeypatch.setattr("adapter.cli.entry.build_parser", lambda: parser)
    assert main(["versions"]) == 2
    assert capsys.readouterr().err.strip() == (
        "vf-sglang: error: could not serve on 127.0.0.1:30000: the server exited at startup")
