"""The SGLang HTTP client: `/generate`, worker discovery and `abort_all`, with bounded I/O.

Every call has a finite timeout (connect/read/write/pool, configurable). Connection errors,
timeouts, 5xx and 429 are retried with bounded exponential backoff up to `max_attempts`; a
4xx is never retried. The final failure is a typed `EngineError` subclass that carries the
HTTP status when there was one. The router address is resolved at call time, because trainers
fill it in after building the rollout function.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import tenacity

from adapter.errors import (
    ConfigurationError,
    EngineError,
    EngineStatusError,
    EngineTimeoutError,
    EngineUnavailableError,
)
from adapter.wire import SGLangRequest

logger = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    connect: float = 10.0
    read: float = 600.0  # one /generate may decode thousands of tokens
    write: float = 30.0
    pool: float = 30.0

    def to_httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=self.read, write=self.write, pool=self.pool)


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    max_attempts: int = 3
    initial_backoff: float = 0.5
    max_backoff: float = 8.0


def _host(ip: str) -> str:
    return f"[{ip}]" if ":" in ip and not ip.startswith("[") else ip


def router_url(args: Any) -> str:
    """The router address from a Miles-style namespace, read now (not at construction):
    `sglang_model_routers["default"]` when present, else `sglang_router_ip`/`_port`."""
    routers = getattr(args, "sglang_model_routers", None)
    if isinstance(routers, Mapping) and routers.get("default"):
        ip, port = routers["default"][:2]
    else:
        ip, port = getattr(args, "sglang_router_ip", None), getattr(args, "sglang_router_port", None)
    if not ip or not port:
        raise ConfigurationError(
            "the SGLang router address is not set: the trainer fills --sglang-router-ip/"
            "--sglang-router-port when it starts the engines; pass them, or --sglang-url"
        )
    return f"http://{_host(str(ip))}:{int(port)}"


def _is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, EngineStatusError):
        return exc.status_code in RETRYABLE_STATUS
    return isinstance(exc, (EngineTimeoutError, EngineUnavailableError))


class SGLangClient:
    """Talks to one SGLang server or router. `base_url` may be a callable, read per call."""

    def __init__(
        self,
        base_url: str | Callable[[], str],
        *,
        timeouts: Timeouts = Timeouts(),
        retry: RetryPolicy = RetryPolicy(),
        use_miles_router: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
        wrap_transport: Callable[[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport] | None = None,
    ) -> None:
        from adapter.recording import active_wrap

        self._base_url = base_url
        self.timeouts = timeouts
        self.retry = retry
        self.use_miles_router = use_miles_router
        # `wrap_transport` (e.g. a cassette recorder) wraps the transport; `--record DIR` installs one.
        wrap_transport = wrap_transport or active_wrap()
        if wrap_transport is not None:
            transport = wrap_transport(transport or httpx.AsyncHTTPTransport())
        self._http = httpx.AsyncClient(timeout=timeouts.to_httpx(), transport=transport)

    @property
    def base_url(self) -> str:
        url = self._base_url() if callable(self._base_url) else self._base_url
        return url.rstrip("/")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send_once(self, method: str, url: str, **kwargs: Any) -> Any:
        try:
            response = await self._http.request(method, url, **kwargs)
        except httpx.TimeoutException as exc:
            raise EngineTimeoutError(f"{method} {url}: no answer in time ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise EngineUnavailableError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise EngineStatusError(
                f"{method} {url}: HTTP {response.status_code}: {response.text[:500]}",
                status_code=response.status_code,
            )
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise EngineError(f"{method} {url}: the body is not JSON", status_code=502) from exc

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        url = f"{self.base_url}{path}"
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.retry.max_attempts),
            wait=tenacity.wait_exponential(
                multiplier=self.retry.initial_backoff, max=self.retry.max_backoff
            ),
            retry=tenacity.retry_if_exception(_is_retryable),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await self._send_once(method, url, **kwargs)
        raise AssertionError("unreachable: tenacity reraises the last error")  # pragma: no cover

    async def generate(self, request: SGLangRequest) -> Any:
        """`POST /generate` with the translated payload and routing headers."""
        return await self._request("POST", "/generate", json=request.payload, headers=request.headers)

    async def get(self, path: str) -> Any:
        return await self._request("GET", path)

    async def worker_urls(self) -> list[str]:
        """Workers behind the router: SGLang's `/workers`, else Miles' `/list_workers`;
        the address itself when neither answers (a single server without a router)."""
        probes = ["/list_workers"] if self.use_miles_router else ["/workers", "/list_workers"]
        for path in probes:
            try:
                body = await self._send_once("GET", f"{self.base_url}{path}")
            except EngineError as exc:
                logger.debug("worker discovery via %s failed: %s", path, exc)
                continue
            if isinstance(body, Mapping) and isinstance(body.get("workers"), list):
                return [w["url"] for w in body["workers"] if isinstance(w, Mapping) and w.get("url")]
            if isinstance(body, Mapping) and isinstance(body.get("urls"), list):
                return [str(url) for url in body["urls"]]
        return [self.base_url]

    async def abort_all(self) -> list[str]:
        """POST `{"abort_all": true}` to every worker's `/abort_request`. Failures are logged,
        never raised (this runs while shutting down). Returns the workers that accepted."""
        try:
            workers = await self.worker_urls()
        except ConfigurationError as exc:
            logger.warning("abort_all skipped: %s", exc)
            return []
        accepted = []
        for worker in workers:
            try:
                await self._send_once("POST", f"{worker.rstrip('/')}/abort_request", json={"abort_all": True})
                accepted.append(worker)
            except EngineError as exc:
                logger.warning("abort_all: %s did not accept the abort: %s", worker, exc)
        return accepted
