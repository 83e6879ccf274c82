"""One engine session per rollout function: one client per address, each engine fact read once."""

from __future__ import annotations

import asyncio

import pytest

from adapter.engine.session import EngineSession
from adapter.errors import EngineSessionClosedError
from conformance.engine import Completion, ScriptedEngine


def gets(engine: ScriptedEngine) -> list[str]:
    return [r.path for r in engine.requests if r.method == "GET"]


async def test_the_facts_are_read_once_however_often_they_are_asked(sglang_mock: ScriptedEngine) -> None:
    sglang_mock.server_info = {"enable_deterministic_inference": True, "version": "0.5.23"}
    session = EngineSession(sglang_mock.url)
    assert session.known is None
    facts = await asyncio.gather(*(session.facts() for _ in range(3)))
    again = await session.facts()
    await session.aclose()
    assert all(f is again for f in facts) and session.known is again
    assert again.deterministic and not again.topology.is_router
    assert gets(sglang_mock) == ["/model_info", "/workers", "/list_workers", "/server_info"]


def test_a_session_is_refused_on_another_loop_and_reopened_there_explicitly_with_its_facts(
        sglang_mock: ScriptedEngine) -> None:
    session = EngineSession(sglang_mock.url)
    sglang_mock.script(Completion([40], [-0.5]), Completion([41], [-0.5]))

    async def call(on: EngineSession) -> object:
        from adapter.cli.server_checks import check_generate

        await on.facts()
        await check_generate(on.client)
        return on.client

    asyncio.run(call(session))
    with pytest.raises(EngineSessionClosedError, match="another event loop"):
        asyncio.run(call(session))  # the first loop's connections died with it
    reopened = session.reopened()
    asyncio.run(call(reopened))
    assert reopened.known is session.known and gets(sglang_mock).count("/model_info") == 1
    asyncio.run(reopened.aclose())


async def test_a_closed_session_stays_closed(sglang_mock: ScriptedEngine) -> None:
    session = EngineSession(sglang_mock.url)
    await session.facts()
    await session.aclose()
    with pytest.raises(EngineSessionClosedError, match="closed"):
        session.client  # noqa: B018  # the property is what refuses
    await session.aclose()  # a second close does nothing
    assert session.closed


async def test_a_sibling_session_for_another_address_is_sized_and_recorded_like_its_origin(tmp_path) -> None:
    from adapter.engine.client import Timeouts
    from adapter.engine.recording import CassetteRecorder

    recorder = CassetteRecorder(tmp_path / "cassettes")
    origin = EngineSession("http://127.0.0.1:1", use_miles_router=True, max_in_flight=7,
                           timeouts=Timeouts(read=3.0), recorder=recorder)
    other = origin.sibling("http://127.0.0.1:2")
    built = other.client
    assert (other.url, other.recorder) == ("http://127.0.0.1:2", recorder)
    assert (built.use_miles_router, built.max_in_flight, built.timeouts.read) == (True, 7, 3.0)
    assert built is not origin.client
    await origin.aclose()
    await other.aclose()
