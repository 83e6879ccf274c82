"""One owner of a rollout function's lifetime (adapter.rollout.lifetime): what the calls open is
closed in one place, once, whoever reaches it (the CLI, Miles' class ABI), and its state diagram
holds: a closed lifetime stays closed, a second loop is refused while the first runs, a loop that
ended is followed by explicit reopening."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from adapter.bridge.serve import served
from adapter.engine.session import EngineSession
from adapter.episodes import prefork
from adapter.episodes.generations import harness_runtime, installed
from adapter.errors import EngineSessionClosedError, RolloutFunctionClosedError
from adapter.rollout.lifetime import RunLifetime, close_all
from conformance.engine import ScriptedEngine, asgi_app
from conformance.plugin import loaded_tokenizer
from conformance.policies import TextPolicy

ENVS = Path(__file__).resolve().parents[2] / "fixtures" / "envs"


@contextlib.asynccontextmanager
async def traced(name: str, log: list[str]) -> AsyncIterator[str]:
    log.append(f"enter {name}")
    try:
        yield name
    finally:
        log.append(f"exit {name}")


class SessionCount:
    """Every `EngineSession` built while it is installed, and how often each was closed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.closes: dict[int, int] = {}
        self.sessions: list[EngineSession] = []
        build, close = EngineSession.__init__, EngineSession.aclose

        def building(session: EngineSession, *args: Any, **kwargs: Any) -> None:
            build(session, *args, **kwargs)
            self.sessions.append(session)
            self.closes[id(session)] = 0

        async def closing(session: EngineSession) -> None:
            self.closes[id(session)] += 1
            await close(session)

        monkeypatch.setattr(EngineSession, "__init__", building)
        monkeypatch.setattr(EngineSession, "aclose", closing)

    def per_session(self) -> list[int]:
        return [self.closes[id(session)] for session in self.sessions]


@pytest.fixture
def session_count(monkeypatch: pytest.MonkeyPatch) -> SessionCount:
    return SessionCount(monkeypatch)


def mini_config() -> Path:
    return ENVS / ("b" if installed().name == "B" else "") / "arith-mini-v1.toml"


@pytest.mark.parametrize(("config", "extra", "code"), [
    ("arith-v1.toml", [], 0),
    ("group-v1.toml", ["--n", "1"], 2),  # refused once the taskset is loaded: before any episode
], ids=["a_batch", "refused"])
async def test_one_vf_sglang_rollout_closes_its_engine_session_exactly_once_and_ends_its_zygotes(
        config, extra, code, session_count: SessionCount, qwen3_tokenizer: Path, capsys, monkeypatch) -> None:
    from adapter.cli.entry import main

    monkeypatch.setattr(prefork, "_HOLDS", [0])  # no environment an earlier test loaded holds the pool

    engine = ScriptedEngine(default=TextPolicy(loaded_tokenizer(qwen3_tokenizer), lambda prompt: "7"))
    async with served(asgi_app(engine)) as url:
        argv = ["rollout", "--sglang-url", url, "--config", str(installed().bundled_envs() / config),
                "--model", "Qwen/Qwen3-0.6B",
                "--tokenizer", str(qwen3_tokenizer), "--groups", "1", "--n", "2", *extra, "--quiet"]
        assert await asyncio.to_thread(main, argv) == code, capsys.readouterr().err
    assert len(session_count.sessions) == 1 and session_count.per_session() == [1]
    assert prefork.process_pool().zygote_pids() == [], "the run's lifetime ended the zygotes it used"


async def test_one_miles_run_closes_each_engine_session_exactly_once_and_ends_its_zygotes(
        session_count: SessionCount, qwen3_tokenizer: Path, tmp_path: Path, monkeypatch) -> None:
    """Miles' call order (`BaseRolloutFn`, #1845): construct, `load(start_rollout_id - 1)`, train
    calls, an eval against a snapshot's own router (a second engine session), `save`, then the
    rollout function's `aclose()`."""
    from adapter.miles.abi import abi_types
    from adapter.miles.binding import VerifiersRolloutFn

    monkeypatch.setattr(prefork, "_HOLDS", [0])  # no environment an earlier test loaded holds the pool
    constructor, train_input, _, _, _ = abi_types()
    policy = TextPolicy(loaded_tokenizer(qwen3_tokenizer), lambda prompt: "7")
    engine, snapshot = ScriptedEngine(default=policy), ScriptedEngine(default=policy)
    async with served(asgi_app(engine)) as url, served(asgi_app(snapshot)) as snapshot_url:
        def router(at: str) -> SimpleNamespace:
            host, port = at.removeprefix("http://").split(":")
            return SimpleNamespace(sglang_router_ip=host, sglang_router_port=int(port))

        args = SimpleNamespace(
            verifiers_config=str(mini_config()), hf_checkpoint=str(qwen3_tokenizer),
            renderer_model_name="Qwen/Qwen3-0.6B", rollout_global_dataset=False, rollout_batch_size=1,
            n_samples_per_prompt=1, n_samples_per_eval_prompt=1, rollout_max_response_len=16,
            rollout_max_context_len=1024, save=str(tmp_path), load=None, **vars(router(url)))
        fn = VerifiersRolloutFn(constructor(args=args, data_source=None))
        fn.load(-1)
        for rollout_id in range(2):
            await asyncio.create_task(fn(train_input(rollout_id=rollout_id)))  # Miles: a task per call
        snapshot_state = SimpleNamespace(args=router(snapshot_url))
        await asyncio.create_task(fn(SimpleNamespace(evaluation=True, rollout_id=1, generate_state=snapshot_state)))
        fn.save(1)
        forked = harness_runtime(prefork.chosen())[0] == "prefork"  # a release the matrix proves
        assert bool(prefork.process_pool().zygote_pids()) is forked, "the episodes ran pre-forked"
        await fn.aclose()
        await fn.aclose()  # Miles' exit path may close again: nothing happens
    assert engine.generate_requests() and snapshot.generate_requests()
    assert len(session_count.sessions) == 2 and session_count.per_session() == [1, 1]
    assert prefork.process_pool().zygote_pids() == [], "the rollout function's close ended its zygotes"
    with pytest.raises(RolloutFunctionClosedError):
        await fn(train_input(rollout_id=2))


async def test_held_contexts_close_last_first_then_the_engine_then_the_undos_once(session_count) -> None:
    log: list[str] = []
    lifetime = RunLifetime(EngineSession("http://127.0.0.1:9"))
    lifetime.on_close(lambda: log.append("undo pins"))
    assert lifetime.state == "new"
    assert await lifetime.hold("serving", lambda: traced("serving", log)) == "serving"
    assert await lifetime.hold("serving", lambda: traced("again", log)) == "serving"  # once per key
    assert await lifetime.hold(("sized", 2), lambda: None) is None
    await asyncio.create_task(lifetime.hold("bridge", lambda: traced("bridge", log)))  # another call's task
    assert lifetime.state == "open"
    await lifetime.aclose()
    await lifetime.aclose()
    assert log == ["enter serving", "enter bridge", "exit bridge", "exit serving", "undo pins"]
    assert lifetime.state == "closed" and session_count.per_session() == [1]
    with pytest.raises(RolloutFunctionClosedError):
        await lifetime.hold("serving", lambda: traced("serving", log))
    with pytest.raises(RolloutFunctionClosedError):
        lifetime.engine  # noqa: B018  # the property is what refuses


def test_a_lifetime_closed_before_any_call_still_closes_its_engine_session(session_count) -> None:
    lifetime = RunLifetime(EngineSession("http://127.0.0.1:9"))
    asyncio.run(lifetime.aclose())
    assert session_count.per_session() == [1]


def test_a_call_on_a_new_loop_after_the_first_ended_reopens_explicitly(session_count, caplog) -> None:
    """`asyncio.run` per call: the first loop's end cancelled the holder, which exited what it held
    and closed the engine session; the next loop gets a session reopened from it, with its facts."""
    log: list[str] = []
    first = EngineSession("http://127.0.0.1:9")
    lifetime = RunLifetime(first)
    asyncio.run(lifetime.hold("serving", lambda: traced("serving", log)))
    assert log == ["enter serving", "exit serving"] and first.closed
    with caplog.at_level("WARNING", logger="adapter.rollout.lifetime"):
        asyncio.run(lifetime.hold("serving", lambda: traced("serving", log)))
    assert "new event loop" in caplog.text
    assert lifetime.engine is not first and lifetime.engine.url == first.url
    asyncio.run(lifetime.aclose())
    assert session_count.per_session() == [1, 1]


@contextlib.contextmanager
def background_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A loop running in another thread, as Miles runs a class' calls."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_a_second_loop_is_refused_while_the_first_still_holds_everything(session_count) -> None:
    log: list[str] = []
    lifetime = RunLifetime(EngineSession("http://127.0.0.1:9"))
    with background_loop() as loop:
        asyncio.run_coroutine_threadsafe(lifetime.hold("serving", lambda: traced("serving", log)), loop).result(10)
        with pytest.raises(RolloutFunctionClosedError, match="second event loop"):
            asyncio.run(lifetime.hold("serving", lambda: traced("serving", log)))
        assert lifetime.state == "open" and lifetime.loop is loop
        close_all()  # interpreter exit: closed on the loop that holds it
        assert lifetime.state == "closed" and log == ["enter serving", "exit serving"]
    assert session_count.per_session() == [1]


async def test_a_closed_engine_session_is_never_handed_out(session_count) -> None:
    session = EngineSession("http://127.0.0.1:9")
    lifetime = RunLifetime(session)
    await lifetime.aclose()
    with pytest.raises(EngineSessionClosedError):
        session.client  # noqa: B018


async def test_closing_cancels_a_call_in_flight_before_closing_what_it_uses(sglang_mock) -> None:
    """Interpreter exit mid-call (a Ctrl-C in Miles' driver): the call's episodes are cancelled and
    the engine told to drop their requests before the bridge and the env's serving close."""
    from adapter.config.settings import Settings
    from adapter.rollout.orchestrator import Orchestrator
    from tests.fakes import FakeBackend

    backend = FakeBackend(["hang"] * 4)
    orchestrator = Orchestrator(settings=Settings(rollout_batch_size=1, n_samples_per_prompt=2), backend=backend,
                                lifetime=RunLifetime(EngineSession(sglang_mock.url)), model="m", env_id="e")
    call = asyncio.create_task(orchestrator.train(rollout_id=0))
    async with asyncio.timeout(10):
        while not backend.calls:
            await asyncio.sleep(0.01)
    await asyncio.wait_for(orchestrator.lifetime.aclose(), timeout=10)
    assert call.cancelled()
    assert [r.body for r in sglang_mock.requests if r.path == "/abort_request"] == [{"abort_all": True}]
    assert backend.clients and all(client.closed for client in backend.clients)
