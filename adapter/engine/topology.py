"""What sits at an engine address: one SGLang server, or the SGLang router in front of workers.

Consumes the answers of the router's worker listings: smg's `GET /workers`
(`{"workers": [{"url", ...}]}`) and the older `GET /list_workers` (`{"urls": [...]}`, served by
sglang-router 0.3.2 and Miles' own router). A plain SGLang server answers neither (404).
Emits a `Topology`: the address, whether a router is there, and its workers. The router also
names the worker that served each request in the response header `ROUTED_WORKER_HEADER`
(`adapter.engine.client.SGLangClient.generate_routed` reads it).

Why the difference matters (docs/router.md): the router's own `/get_server_info` (sglang-router
0.3.2) is its summary, not an engine's, so engine facts are read from a worker
(`Topology.fact_source`); `/abort_request` is not routed (smg answers 404), so aborts go to every
worker; and the router re-serializes `/generate` bodies, dropping some sampling keys
(`adapter.wire.translate.ROUTER_DROPPED_KEYS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The worker listings, in the order they are asked: smg's, then the older one. Miles' own router
# (`--use-miles-router`) serves only the older one.
WORKER_LISTINGS = ("/workers", "/list_workers")
MILES_ROUTER_LISTINGS = ("/list_workers",)
# smg names the worker it routed a request to (its URL) in this response header.
ROUTED_WORKER_HEADER = "x-smg-routed-worker-id"


@dataclass(frozen=True)
class Topology:
    """One engine address, classified. `listed_by` is the listing route that answered (None: not a
    router, or a router that lists no workers to us); `workers` are the URLs it listed."""

    url: str
    listed_by: str | None = None
    workers: tuple[str, ...] = ()

    @property
    def is_router(self) -> bool:
        return self.listed_by is not None

    @property
    def engine_urls(self) -> tuple[str, ...]:
        """Where engine-level calls go (abort, facts): the workers behind a router, else the address."""
        return self.workers if self.is_router else (self.url,)

    @property
    def fact_source(self) -> str:
        """The address to read `/model_info`/`/server_info` from: the first worker behind a
        router (never the router's own summary), else the address itself."""
        return self.workers[0] if self.workers else self.url

    def describe(self) -> str:
        if not self.is_router:
            return f"{self.url} (one server)"
        return f"router at {self.url} ({len(self.workers)} workers: {', '.join(self.workers) or 'none'})"


def listed_workers(body: Any) -> tuple[str, ...] | None:
    """The worker URLs a listing answered (smg's `workers[].url` or the older `urls`); None when
    the body is not a worker listing."""
    if not isinstance(body, Mapping):
        return None
    if isinstance(body.get("workers"), list):
        return tuple(str(w["url"]).rstrip("/") for w in body["workers"] if isinstance(w, Mapping) and w.get("url"))
    if isinstance(body.get("urls"), list):
        return tuple(str(url).rstrip("/") for url in body["urls"])
    return None
