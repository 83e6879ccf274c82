"""respx at the engine seam (conformance.mocking): the adapter's engine transport and plain
httpx clients are both answered by one mocked engine; other hosts are refused."""

from __future__ import annotations

import httpx
import pytest
import respx

from adapter.engine.transport import EngineTransport
from conformance.mocking import mock_host


def engine(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"path": request.url.path})


@pytest.mark.parametrize("transport", [EngineTransport, None], ids=["engine-transport", "httpcore"])
async def test_one_mocked_engine_answers_either_seam(transport: type[EngineTransport] | None) -> None:
    with mock_host("http://engine.test:1", engine):
        async with httpx.AsyncClient(transport=transport(1) if transport else None) as client:
            response = await client.get("http://engine.test:1/get_model_info")
            assert response.json() == {"path": "/get_model_info"}
            with pytest.raises(respx.models.AllMockedAssertionError):
                await client.get("http://elsewhere.test:1/")


async def test_the_engine_transport_is_not_mocked_outside_the_block() -> None:
    with mock_host("http://127.0.0.1:9", engine):
        pass
    async with httpx.AsyncClient(transport=EngineTransport(1)) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("http://127.0.0.1:9/")


def test_loading_the_pytest_plugin_registers_the_engine_mocker_by_name() -> None:
    import subprocess
    import sys

    probe = "import conformance.plugin; from respx.mocks import Mocker; print('vf-sglang-engine' in Mocker.registry)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr
