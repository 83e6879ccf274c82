"""respx at the adapter's engine seam.

respx's default mocker patches httpcore, the pool under httpx's default transport. The adapter's
engine calls go through `adapter.engine.transport.EngineTransport` (httpx's transport API on
aiohttp), so respx is taught that seam too: `ENGINE_MOCKER` is a respx mocker that patches
`EngineTransport.handle_async_request`, the lowest layer the adapter owns. Everything above it
— the cassette recorder, the per-attempt deadline, retries, body limits, the typed errors —
runs for real against the mocked answer; only aiohttp's socket work is replaced, the way
respx's httpcore mocker replaces h11's.

    with respx.mock(using=ENGINE_MOCKER, base_url=url) as router: ...   # one seam
    with mock_host(url, side_effect): ...                               # both seams, one engine
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import httpx
import respx
from respx.mocks import AbstractRequestMocker

ENGINE_MOCKER = "vf-sglang-engine"


class EngineTransportMocker(AbstractRequestMocker):
    """Patches the engine transport's `handle_async_request`. Requests are httpx's own objects
    there; the route's response is handed on unread (status, raw headers, body stream), as a
    transport's response is, so layers above it (the recorder) read it as from the wire."""

    name = ENGINE_MOCKER
    targets: ClassVar[list[str]] = ["adapter.engine.transport.EngineTransport"]
    target_methods: ClassVar[list[str]] = ["handle_async_request"]

    @classmethod
    def to_httpx_request(cls, **kwargs: Any) -> httpx.Request:
        request: httpx.Request = kwargs["request"]
        return request

    @classmethod
    async def from_async_httpx_response(cls, httpx_response: httpx.Response, target: Any,
                                        **kwargs: Any) -> httpx.Response:
        return httpx.Response(httpx_response.status_code, headers=httpx_response.headers.raw,
                              stream=httpx_response.stream, extensions=httpx_response.extensions,
                              request=kwargs["request"])


@contextlib.contextmanager
def mock_host(base_url: str, side_effect: Callable[[httpx.Request], Any]) -> Iterator[None]:
    """Every HTTP call to `base_url` answered by `side_effect`, whether it goes through the
    adapter's engine transport or any httpx client on the default (httpcore) transport; a call
    to another host through either fails the test (respx's `assert_all_mocked`)."""
    with contextlib.ExitStack() as stack:
        for using in (ENGINE_MOCKER, "httpcore"):
            router = stack.enter_context(respx.mock(using=using, base_url=base_url, assert_all_mocked=True,
                                                    assert_all_called=False))
            router.route().mock(side_effect=side_effect)
        yield
