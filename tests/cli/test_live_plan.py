"""The live checks are planned on CPU: they run against the served scripted engine here."""

from __future__ import annotations

from adapter.bridge.serve import served
from adapter.cli.server_checks import PROBE_PROMPT, check_generate
from adapter.engine.client import SGLangClient
from conformance.engine import Completion, ScriptedEngine, asgi_app


async def test_live_checks_pass_against_a_conforming_engine_over_http() -> None:
    engine = ScriptedEngine().script(Completion([40, 151645], [-0.2, -0.01]))
    async with served(asgi_app(engine)) as url:
        engine.url = url  # the router's /workers lists the engine itself
        client = SGLangClient(url)
        response = await check_generate(client)
        assert await client.abort_all() == [url]
        await client.aclose()
    assert response["choices"][0]["token_ids"] == [40, 151645]
    assert engine.generate_requests()[0].body["input_ids"] == PROBE_PROMPT
