"""The SGLang HTTP client: `/generate`, worker discovery and `abort_all`, with bounded I/O.

Behind the SGLang router: `discover()` classifies the address (`adapter.engine.topology`: a router
listing its workers, or one server), `topology()` remembers that verdict per address,
`generate_routed` also returns the worker the router named for the call
(`x-smg-routed-worker-id`), and `abort_all` posts to every worker (the router does not route it).

Concurrency (docs/contract.md §8.3): at most `max_in_flight` requests are on the wire at once (Miles'
`sglang_server_concurrency × rollout_num_gpus // rollout_num_gpus_per_engine`; callers pass
`Settings.max_in_flight`). A semaphore gates them, and the transport holds the same number of
connections (`adapter.engine.transport.EngineTransport`: httpx's API on aiohttp's pool, where
httpx's own pool scans every connection per queued request), so bridge CPU per request does
not grow with the number in flight or waiting, and a request that merely waits for a slot
never times out: waiting callers queue on the semaphore, in order.

Time: one deadline per attempt, `Timeouts.read` seconds from the moment the attempt holds its
slot, covering connect, send, the engine's wait and the whole body (a body that trickles is
cut at the deadline). Every timeout is checked finite and positive at construction.

Retries: connection errors, timeouts, 5xx and 429 are retried with bounded exponential
backoff, at most `RetryPolicy.max_attempts` attempts per call, and never more than the caller's
`AttemptBudget` allows (the bridge holds one budget per model turn, so retries from layers
above do not multiply engine calls). A 429's `Retry-After` (seconds, ≤ `max_retry_after`) is
honoured (the one retried 4xx); other 4xx and 3xx never are, and redirects are never followed.
The final failure is a typed `EngineError` with the HTTP status. Bodies: `adapter.wire.strict_json`
(strict, size-bounded). The router address is read per call (trainers fill it in late).

HTTP: each call is an `httpx.Request` handed straight to the transport (httpx's transport API;
the recorder and respx's engine mocker sit at that seam). `httpx.AsyncClient`'s own layer —
cookies, auth, redirect following, event hooks, default headers — is nothing the engine leg
uses, and cost about 70 µs per call on top of the transport (benchmarks/overhead.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import httpx

from adapter.config.limits import DEFAULT_MAX_IN_FLIGHT, ENGINE_ATTEMPTS_PER_TURN
from adapter.engine.probe import SERVER_INFO_PATHS, first_served
from adapter.engine.topology import (
    MILES_ROUTER_LISTINGS,
    ROUTED_WORKER_HEADER,
    WORKER_LISTINGS,
    Topology,
    listed_workers,
)
from adapter.engine.transport import EngineTransport
from adapter.errors import (
    ConfigurationError,
    EngineAbortedError,
    EngineBusyError,
    EngineError,
    EngineStatusError,
    EngineTimeoutError,
    EngineUnavailableError,
    JSONBodyError,
)
from adapter.wire.strict_json import dumps, loads
from adapter.wire.translate import SGLangRequest
from adapter.wire.types import EngineOutput, parse_engine_output

logger = logging.getLogger(__name__)
_NOT_SERVED = object()  # a 404: the server has no such route (asked by its older name next)

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
MAX_BODY_BYTES = 256 * 1024 * 1024  # an engine output: ids + logprobs of a very long reply


def _positive_finite(owner: object, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(owner, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ConfigurationError(
                f"{type(owner).__name__}.{name} must be a finite number of seconds above 0, got {value!r}"
            )


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    connect: float = 10.0
    read: float = 600.0  # the deadline of one attempt: connect + send + wait + whole body
    write: float = 30.0

    def __post_init__(self) -> None:
        _positive_finite(self, tuple(f.name for f in fields(self)))


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    max_attempts: int = ENGINE_ATTEMPTS_PER_TURN
    initial_backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 30.0  # a 429 asking for a longer pause is not retried

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ConfigurationError(f"RetryPolicy.max_attempts must be an int ≥ 1, got {self.max_attempts!r}")
        for name in ("initial_backoff", "max_backoff", "max_retry_after"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigurationError(f"RetryPolicy.{name} must be finite and ≥ 0, got {value!r}")

    def backoff(self, attempt: int) -> float:
        return float(min(self.max_backoff, self.initial_backoff * 2 ** (attempt - 1)))


class AttemptBudget:
    """Engine attempts left for one model turn, shared by every call made for that turn."""

    def __init__(self, attempts: int = ENGINE_ATTEMPTS_PER_TURN) -> None:
        self.remaining = attempts
        self.last_error: EngineError | None = None

    def take(self) -> bool:
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        return True


class Answer(NamedTuple):
    """One engine call's parsed body and the worker a router says served it (its
    `x-smg-routed-worker-id`; None when no router named one)."""

    body: Any
    worker: str | None


class Peeked(NamedTuple):
    """One GET's status, content type and raw body, unjudged (`SGLangClient.peek`)."""

    status: int
    content_type: str
    body: bytes


@dataclass(frozen=True)
class Routed:
    """A `/generate` output and the worker the router routed it to (None: no router said)."""

    output: EngineOutput
    worker: str | None


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


def _is_retryable(exc: EngineError) -> bool:
    if isinstance(exc, EngineStatusError):
        return exc.status_code in RETRYABLE_STATUS
    return isinstance(exc, (EngineTimeoutError, EngineUnavailableError))


class SGLangClient:
    """Talks to one SGLang server or router. `base_url` may be a callable, read per call."""

    def __init__(
        self,
        base_url: str | Callable[[], str],
        *,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        use_miles_router: bool = False,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        transport: httpx.AsyncBaseTransport | None = None,
        wrap_transport: Callable[[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport] | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ConfigurationError(f"max_in_flight must be an int ≥ 1, got {max_in_flight!r}")
        self._base_url = base_url
        self.timeouts = timeouts or Timeouts()
        self.retry = retry or RetryPolicy()
        self.use_miles_router = use_miles_router
        self.max_in_flight = max_in_flight
        self.max_body_bytes = max_body_bytes
        self.in_flight = 0
        self.peak_in_flight = 0
        self.calls = 0
        built = transport or EngineTransport(max_in_flight)
        t = self.timeouts
        # `wrap_transport` (a cassette recorder's `wrap`, passed by whoever records) wraps the transport.
        self._transport = wrap_transport(built) if wrap_transport else built
        self._timeout = {"connect": min(t.connect, t.read), "read": t.read, "write": min(t.write, t.read),
                         "pool": t.read}
        self._slots = asyncio.Semaphore(max_in_flight)
        self.topologies: dict[str, Topology] = {}  # base URL → what discovery found there (`topology()`)
        self._discovering = asyncio.Lock()
        self._exchanges: set[asyncio.Future[Answer]] = set()  # in flight (`cut_in_flight`)
        self._cut: set[asyncio.Future[Answer]] = set()

    @property
    def base_url(self) -> str:
        url = self._base_url() if callable(self._base_url) else self._base_url
        return url.rstrip("/")

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> SGLangClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def _fetch(self, method: str, url: str, content: bytes | None,
                     headers: Mapping[str, str]) -> tuple[httpx.Response, bytes]:
        """One exchange: the response (closed) and its whole body, bounded by `max_body_bytes`."""
        request = httpx.Request(method, _parsed(url), content=content, extensions={"timeout": self._timeout}, headers={
            **headers, **({"content-type": "application/json"} if content is not None else {})})
        response = await self._transport.handle_async_request(request)
        try:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > self.max_body_bytes:
                    raise EngineError(f"{method} {url}: the body exceeds {self.max_body_bytes:,} bytes",
                                      status_code=502)
        finally:
            await response.aclose()
        return response, bytes(body)

    async def _exchange(self, method: str, url: str, content: bytes | None, headers: Mapping[str, str]) -> Answer:
        response, body = await self._fetch(method, url, content, headers)
        parsed = _result(method, url, response, body, self.max_body_bytes)
        return Answer(parsed, response.headers.get(ROUTED_WORKER_HEADER))

    async def _cuttable(self, method: str, url: str, content: bytes | None, headers: Mapping[str, str]) -> Answer:
        """`_exchange` as a task of its own that `cut_in_flight` can end: the caller then gets
        `EngineAbortedError` (a cancelled caller still gets its cancellation)."""
        exchange = asyncio.ensure_future(self._exchange(method, url, content, headers))
        self._exchanges.add(exchange)
        try:
            return await exchange
        except asyncio.CancelledError:
            caller = asyncio.current_task()
            if exchange in self._cut and (caller is None or not caller.cancelling()):
                raise EngineAbortedError(f"{method} {url}: cut off: the episodes it served were cancelled") from None
            raise
        finally:
            self._exchanges.discard(exchange)
            self._cut.discard(exchange)

    def cut_in_flight(self) -> int:
        """End every exchange in flight now (after `abort_all`, as a run's cancelled episodes end:
        an engine that does not honour the abort keeps no model call, and no server waiting on
        one, open until it answers). How many were cut."""
        exchanges = [e for e in self._exchanges if not e.done()]
        for exchange in exchanges:
            self._cut.add(exchange)
            exchange.cancel()
        return len(exchanges)

    async def peek(self, path: str, *, deadline: float) -> Peeked:
        """`GET path` at the address once, within `deadline` seconds, whatever its status: what
        preflight needs to tell "cannot reach" from "not SGLang". A failed connection or no
        answer in time is `EngineUnavailableError`/`EngineTimeoutError`."""
        url = f"{self.base_url}{path}"
        try:
            async with asyncio.timeout(deadline):
                response, body = await self._fetch("GET", url, None, {})
        except TimeoutError as exc:
            raise EngineTimeoutError(f"GET {url}: no complete answer within {deadline:g}s") from exc
        except httpx.TimeoutException as exc:
            raise EngineTimeoutError(f"GET {url}: no answer in time ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise EngineUnavailableError(f"GET {url}: {type(exc).__name__}: {exc}") from exc
        return Peeked(response.status_code, response.headers.get("content-type", ""), body)

    async def _send_once(self, method: str, url: str, *, content: bytes | None = None,
                         headers: Mapping[str, str] | None = None) -> Answer:
        async with self._slots:
            self.calls += 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            try:
                async with asyncio.timeout(self.timeouts.read):
                    return await self._cuttable(method, url, content, headers or {})
            except TimeoutError as exc:
                raise EngineTimeoutError(
                    f"{method} {url}: no complete answer within {self.timeouts.read:g}s") from exc
            except httpx.TimeoutException as exc:
                raise EngineTimeoutError(f"{method} {url}: no answer in time ({type(exc).__name__})") from exc
            except httpx.TransportError as exc:
                raise EngineUnavailableError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
            except httpx.DecodingError as exc:
                raise EngineError(f"{method} {url}: the body cannot be decoded: {exc}", status_code=502) from exc
            finally:
                self.in_flight -= 1

    async def _request(self, method: str, path: str, *, content: bytes | None = None,
                       headers: Mapping[str, str] | None = None, budget: AttemptBudget | None = None,
                       origin: str | None = None) -> Answer:
        url = f"{(origin or self.base_url).rstrip('/')}{path}"
        budget = budget or AttemptBudget(self.retry.max_attempts)
        attempt = 0
        while True:
            if not budget.take():
                raise budget.last_error or EngineError(f"{method} {url}: no engine attempt left", status_code=502)
            attempt += 1
            try:
                return await self._send_once(method, url, content=content, headers=headers)
            except EngineError as exc:
                budget.last_error = exc
                retryable = _is_retryable(exc) and attempt < self.retry.max_attempts and budget.remaining > 0
                pause = exc.retry_after if isinstance(exc, EngineBusyError) else None
                if not retryable or (pause is not None and pause > self.retry.max_retry_after):
                    raise
                await asyncio.sleep(pause if pause is not None else self.retry.backoff(attempt))

    async def generate(self, request: SGLangRequest, *, budget: AttemptBudget | None = None) -> EngineOutput:
        """`POST /generate` with the translated payload and routing headers; the answer is parsed
        once, here, into the validated `EngineOutput` that translation and the stats both read."""
        return (await self.generate_routed(request, budget=budget)).output

    async def generate_routed(self, request: SGLangRequest, *, budget: AttemptBudget | None = None) -> Routed:
        """`generate`, with the worker the router named for the call (`x-smg-routed-worker-id`)."""
        answer = await self._request("POST", "/generate", content=dumps(request.payload),
                                     headers=request.headers, budget=budget)
        return Routed(parse_engine_output(answer.body), answer.worker)

    async def get(self, path: str, *, at: str | None = None) -> Any:
        """`GET path` at the address (or at `at`, e.g. one of a router's workers)."""
        return (await self._request("GET", path, origin=at)).body

    async def discover(self) -> Topology:
        """What is at the address now: a router (its worker listing, `WORKER_LISTINGS`; Miles'
        router only the older one) or one server (no listing answers). Asked anew each call; a
        verdict every listing gave an answer to (an error status counts) is remembered for
        `topology()`, one an unreachable address left open is not."""
        base, settled = self.base_url, True
        for path in MILES_ROUTER_LISTINGS if self.use_miles_router else WORKER_LISTINGS:
            try:
                body = (await self._send_once("GET", f"{base}{path}")).body
            except EngineError as exc:
                logger.debug("worker discovery via %s failed: %s", path, exc)
                settled = settled and isinstance(exc, EngineStatusError)
                continue
            workers = listed_workers(body)
            if workers is not None:
                self.topologies[base] = Topology(base, path, workers)
                return self.topologies[base]
        if settled:
            self.topologies[base] = Topology(base)
        return Topology(base)

    async def topology(self) -> Topology:
        """`discover()`, asked once per address (the address is read per call: a trainer may
        fill it in late) and remembered: whether a router is there does not change mid-run."""
        async with self._discovering:
            known = self.topologies.get(self.base_url)
            return known if known is not None else await self.discover()

    async def worker_urls(self) -> list[str]:
        """Where engine-level calls go now: the router's workers (listed anew), else the address."""
        return list((await self.discover()).engine_urls)

    async def engine_info(self, paths: tuple[str, ...], *, at: str | None = None) -> dict[str, Any] | None:
        """The first of `paths` the engine serves (the current name first, the older one on a
        404), read at `at` (default: the address's own fact source, a worker behind a router);
        None when the answer is not an object. Raises `EngineError` when the engine fails."""
        source = at or (await self.topology()).fact_source

        async def fetch(path: str) -> Any:
            try:
                return await self.get(path, at=source)
            except EngineStatusError as exc:
                if exc.status_code == 404:
                    return _NOT_SERVED
                raise

        _, info = await first_served(paths, fetch, lambda answer: answer is _NOT_SERVED)
        return info if isinstance(info, dict) else None

    async def server_info(self) -> dict[str, Any] | None:
        """The engine's `/server_info` (`engine_info`); None, logged, when it cannot be read."""
        try:
            return await self.engine_info(SERVER_INFO_PATHS)
        except EngineError as exc:
            logger.warning("could not read the server info of %s: %s", self.base_url, exc)
            return None

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
                await self._send_once("POST", f"{worker.rstrip('/')}/abort_request", content=b'{"abort_all":true}')
                accepted.append(worker)
            except EngineError as exc:
                logger.warning("abort_all: %s did not accept the abort: %s", worker, exc)
        return accepted


@functools.lru_cache(maxsize=1024)
def _parsed(url: str) -> httpx.URL:
    """Engine URLs are a handful (a router or a few workers × a few paths): parse each once."""
    return httpx.URL(url)


def _result(method: str, url: str, response: httpx.Response, body: bytes, limit: int) -> Any:
    status = response.status_code
    if status >= 300:
        text = body[:500].decode("utf-8", "replace")
        message = f"{method} {url}: HTTP {status}: {text}"
        if status == 429:
            raise EngineBusyError(message, retry_after=_parse_retry_after(response.headers.get("retry-after")))
        raise EngineStatusError(message, status_code=status)
    if not body:
        return None
    try:
        return loads(body, what="the body", limit=limit)
    except JSONBodyError as exc:
        raise EngineError(f"{method} {url}: {exc}", status_code=502) from exc


def _parse_retry_after(value: str | None) -> float | None:
    """`Retry-After` in seconds (the HTTP-date form is not used by SGLang or its router)."""
    try:
        seconds = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
