"""Cassettes: recording SGLang exchanges (adapter/engine/recording.py) and replaying them strictly
(conformance/replay.py, the `sglang_replay` fixture), with no engine running."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from adapter.cli.server_checks import probe_body
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from adapter.engine.recording import CassetteRecorder
from adapter.errors import EngineError
from adapter.wire.translate import to_sglang_request
from conformance.engine import Completion, Fault, ScriptedEngine, by_key
from conformance.replay import UnexpectedRequestError, load_cassette, replay_generate_calls

CASSETTES = Path(__file__).resolve().parents[2] / "fixtures" / "cassettes"


def probe(**sampling: Any) -> Any:
    return to_sglang_request(probe_body(**sampling), settings=Settings(), session_id="s-1", first_turn=True)


async def record(engine: ScriptedEngine, directory: Path, *requests: Any) -> Path:
    recorder = CassetteRecorder(directory, command="test")
    client = SGLangClient(engine.url, wrap_transport=recorder.wrap)
    try:
        for request in requests:
            with contextlib.suppress(EngineError):  # an engine error is recorded like any answer
                await client.generate(request)
    finally:
        await client.aclose()
    return recorder.path


async def test_a_recorded_run_has_a_header_and_one_line_per_exchange(sglang_mock: ScriptedEngine, tmp_path: Path):
    sglang_mock.script(Completion([40, 151645], [-0.5, -0.01]), Fault(status=400, body={"error": {"message": "no"}}))
    path = await record(sglang_mock, tmp_path, probe(), probe(max_tokens=2))
    header, *exchanges = [json.loads(line) for line in path.read_text().splitlines()]
    assert (header["kind"], header["model"], header["engine_url"]) == ("header", "Qwen/Qwen3-0.6B", sglang_mock.url)
    assert [e["response"]["status"] for e in exchanges] == [200, 400]
    assert exchanges[0]["request"]["body"] == probe().payload
    assert exchanges[0]["adapter"] == {"token_ids": [40, 151645], "logprobs": [-0.5, -0.01], "finish_reason": "stop"}
    assert exchanges[1]["adapter"] is None and exchanges[0]["elapsed_s"] >= 0


async def test_the_worker_a_router_named_is_recorded_with_the_routing_key(sglang_mock, tmp_path: Path) -> None:
    sglang_mock.route = by_key(["http://w1.test:1", "http://w2.test:2"])
    sglang_mock.script(Completion([40, 151645], [-0.5, -0.01]))
    keyed = to_sglang_request(probe_body(), settings=Settings(sglang_router_policy="manual"), session_id="trace-7",
                              first_turn=True)
    path = await record(sglang_mock, tmp_path, keyed)
    (exchange,) = load_cassette(path).exchanges
    assert exchange["request"]["headers"] == {"x-smg-routing-key": "trace-7"}
    assert exchange["response"]["headers"]["x-smg-routed-worker-id"] in {"http://w1.test:1", "http://w2.test:2"}


async def test_a_recorder_records_the_session_it_is_handed_to_and_no_other_client(
        sglang_mock: ScriptedEngine, tmp_path: Path) -> None:
    from adapter.engine.session import EngineSession

    sglang_mock.script(Completion([40], [-0.5]), Completion([41], [-0.5]))
    recorder = CassetteRecorder(tmp_path, command="test")
    session = EngineSession(sglang_mock.url, recorder=recorder)
    await session.client.generate(probe())
    await session.aclose()
    async with SGLangClient(sglang_mock.url) as other:  # built after, without the recorder
        await other.generate(probe())
    assert len(load_cassette(recorder.path).exchanges) == 1


async def test_a_recorded_cassette_replays_without_the_engine(tmp_path: Path, sglang_replay) -> None:
    import respx

    from conformance.mocking import ENGINE_MOCKER

    engine = ScriptedEngine().script(Completion([40, 151645], [-0.5, -0.01]), Completion([7], [-1.0], "length"))
    with respx.mock(using=ENGINE_MOCKER, base_url=engine.url) as router:
        router.route().mock(side_effect=engine.handle)
        path = await record(engine, tmp_path, probe(), probe(max_tokens=1))
    replay = sglang_replay(path)
    assert await replay_generate_calls(replay) == []
    assert replay.served == 2


async def test_an_unexpected_request_fails_naming_the_nearest_recorded_one(
    tmp_path: Path, sglang_replay
) -> None:
    import respx

    from conformance.mocking import ENGINE_MOCKER

    engine = ScriptedEngine().script(Completion([40], [-0.5]))
    with respx.mock(using=ENGINE_MOCKER, base_url=engine.url) as router:
        router.route().mock(side_effect=engine.handle)
        path = await record(engine, tmp_path, probe(max_tokens=8))
    sglang_replay(path)
    client = SGLangClient(engine.url)
    with pytest.raises(UnexpectedRequestError, match=r"unexpected POST /generate; nearest recorded .*max_new_tokens"):
        await client.generate(probe(max_tokens=9))
    await client.aclose()


def committed() -> list[Path]:
    return sorted(CASSETTES.glob("*.jsonl"))


def test_a_cassette_from_the_reference_engine_is_committed() -> None:
    headers = [load_cassette(path).header for path in committed()]
    assert any(h["model"] == "Qwen/Qwen3-0.6B" and "demo" in h["command"] for h in headers), headers


async def test_editing_one_recorded_logprob_makes_the_replay_fail(tmp_path: Path, sglang_replay) -> None:
    source = committed()[0]
    lines = source.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if '"output_token_logprobs":[[' in line)
    recorded = json.loads(lines[index])["response"]["body"]["meta_info"]["output_token_logprobs"][0][0]
    lines[index] = lines[index].replace(f'"output_token_logprobs":[[{json.dumps(recorded)},',
                                        f'"output_token_logprobs":[[{json.dumps(recorded - 0.25)},', 1)
    edited = tmp_path / source.name
    edited.write_text("\n".join(lines) + "\n")
    assert edited.read_bytes() != source.read_bytes()
    problems = await replay_generate_calls(sglang_replay(edited))
    assert len(problems) == 1 and "now reads" in problems[0]


@pytest.mark.parametrize(
    "argv",
    [["serve-bridge", "--sglang-url", "http://e"], ["rollout", "--sglang-url", "http://e", "--config", "c.toml",
     "--model", "m"], ["demo"], ["check", "--sglang-url", "http://e"]],
    ids=["serve-bridge", "rollout", "demo", "check"],
)  # fmt: skip
def test_every_engine_command_takes_record(argv: list[str]) -> None:
    from adapter.cli.entry import build_parser

    assert build_parser().parse_args([*argv, "--record", "cassettes"]).record == "cassettes"


async def test_record_lasts_one_command_when_main_runs_in_process(sglang_mock: ScriptedEngine, tmp_path) -> None:
    """A `--record` command leaves nothing recording behind: clients built afterwards do not record."""
    from adapter.cli.entry import main

    await asyncio.to_thread(main, ["check", "--sglang-url", sglang_mock.url, "--timeout", "1", "--record",
                                   str(tmp_path)])
    before = {path: path.read_bytes() for path in tmp_path.iterdir()}
    sglang_mock.script(Completion([40], [-0.5]))
    async with SGLangClient(sglang_mock.url) as client:
        await client.generate(probe())
    assert {path: path.read_bytes() for path in tmp_path.iterdir()} == before


def test_a_body_nested_past_the_stack_is_recorded_as_text() -> None:
    from adapter.engine.recording import decode_body

    deep = b"[" * 100_000 + b"]" * 100_000
    assert decode_body(deep) == deep.decode()
