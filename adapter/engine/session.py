"""One engine address for one rollout function: one HTTP client, its facts read once.

    EngineSession(url, ...)   the `SGLangClient` every engine call of the run goes through (one
                              connection pool), built once; `url` may be a callable read per call
                              (Miles fills the router address in after building the rollout function)
    await session.facts()     what a run needs to know of the engine, read on first use and kept:
                              its model info (preflight: reachable, SGLang; `probe.check_engine`), the
                              topology (one server, or a router and its workers: router discovery), and
                              its server info (read from a worker behind a router)
    session.known             those facts when they were read, else None (Miles' path never reads
                              them: its flags say what the CLI learns from `/server_info`)
    await session.aclose()    the client's connections closed; the session stays closed (its client
                              raises `EngineSessionClosedError`)
    session.reopened()        a new session for the same address and options, its facts carried
                              (reopening is explicit: `adapter.rollout.lifetime` does it for a new loop)
    session.sibling(url)      a session of its own for another address, sized and recorded alike

A session lives on one event loop: its pool and locks belong to the loop that first used them,
and a call from another loop is refused (`EngineSessionClosedError`) rather than handed a pool
whose connections died with their loop. Whoever builds a session closes it, once.

Facts are read once per session: the model info asks `/model_info` (then the older name on a
404), discovery asks each worker listing once, the server info `/server_info` once. A cassette
recorder (`adapter.engine.recording.CassetteRecorder`) is passed here, explicitly, never found
in process-wide state.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from adapter.config.limits import DEFAULT_MAX_IN_FLIGHT
from adapter.engine.client import SGLangClient, Timeouts
from adapter.engine.probe import check_engine
from adapter.engine.recording import CassetteRecorder, wrap_of
from adapter.engine.topology import Topology
from adapter.errors import EngineSessionClosedError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineFacts:
    model_info: dict[str, Any]
    topology: Topology
    server_info: dict[str, Any] | None  # None: the engine did not say (logged when read)

    @property
    def deterministic(self) -> bool:
        """The server runs with --enable-deterministic-inference: unseeded, every rollout of a group
        samples the same tokens."""
        return bool((self.server_info or {}).get("enable_deterministic_inference"))


class EngineSession:
    """See the module docstring."""

    def __init__(
        self,
        url: str | Callable[[], str],
        *,
        use_miles_router: bool = False,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        timeouts: Timeouts | None = None,
        recorder: CassetteRecorder | None = None,
    ) -> None:
        self.recorder = recorder
        self._options = functools.partial(EngineSession, url, use_miles_router=use_miles_router,
                                          max_in_flight=max_in_flight, timeouts=timeouts, recorder=recorder)
        self._sibling = functools.partial(EngineSession, use_miles_router=use_miles_router,
                                          max_in_flight=max_in_flight, timeouts=timeouts, recorder=recorder)
        self._client = SGLangClient(url, timeouts=timeouts, use_miles_router=use_miles_router,
                                    max_in_flight=max_in_flight, wrap_transport=wrap_of(recorder))
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the client's connections live on
        self._facts: EngineFacts | None = None
        self._reading: asyncio.Lock | None = None
        self.closed = False

    def sibling(self, url: str) -> EngineSession:
        """A session of its own for another address, sized and recorded like this one (a snapshot
        eval's other router)."""
        return self._sibling(url)

    def reopened(self) -> EngineSession:
        """A new session for this address and options, what this one learned carried over (its
        facts, the router topologies its client discovered)."""
        session: EngineSession = self._options()
        session._facts = self._facts
        session._client.topologies.update(self._client.topologies)
        return session

    @property
    def client(self) -> SGLangClient:
        """The session's client, on the loop that first used it."""
        if self.closed:
            raise EngineSessionClosedError(f"the engine session for {self.url} is closed")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return self._client
        if self._loop is None:
            self._loop = running
        elif self._loop is not running:
            raise EngineSessionClosedError(
                f"the engine session for {self.url} belongs to another event loop (its connections live there): "
                "use it on that loop, or a session reopened on this one (EngineSession.reopened)")
        return self._client

    @property
    def url(self) -> str:
        return self._client.base_url

    @property
    def known(self) -> EngineFacts | None:
        return self._facts

    async def facts(self) -> EngineFacts:
        if self._facts is not None:
            return self._facts
        self._reading = self._reading or asyncio.Lock()
        async with self._reading:
            if self._facts is None:
                client = self.client
                model_info = await check_engine(client)
                topology = await client.topology()
                self._facts = EngineFacts(model_info, topology, await client.server_info())
        return self._facts

    async def aclose(self) -> None:
        """Close the client's connections. The session stays closed; a second call does nothing."""
        if self.closed:
            return
        self.closed = True
        await self._client.aclose()
