"""Serving an ASGI app (the bridge) on a loopback port with uvicorn, inside the caller's loop.

`served(app)` is an async context manager: it starts uvicorn on `host:port` (port 0 = a free
port), waits until the socket listens (bounded), yields the base URL, and shuts the server
down on exit, also on error. From verifiers 0.3 on, the TrainClient is built inside Verifiers
from a `base_url`, so the bridge must be a real HTTP endpoint; the CLI uses the same helper.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import uvicorn

from adapter.errors import ServeError

LOOPBACK = "127.0.0.1"
T = TypeVar("T")


def run_event_loop(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on uvloop when it is installed (it is on CPython/POSIX)."""
    try:
        import uvloop
    except ImportError:  # PyPy or Windows: the standard loop
        return asyncio.run(main)
    return uvloop.run(main)


def _bound_port(server: uvicorn.Server) -> int:
    for listener in server.servers:
        for sock in listener.sockets:
            return int(sock.getsockname()[1])
    raise ServeError("uvicorn reported started but has no listening socket")


@contextlib.asynccontextmanager
async def served(
    app: Any, *, host: str = LOOPBACK, port: int = 0, startup_timeout: float = 30.0, log_level: str = "warning"
) -> AsyncIterator[str]:
    # httptools + uvloop (the caller's loop, `run_event_loop`); no per-request extras: no access
    # log, no X-Forwarded-* rewriting (a loopback service), no Server/Date headers.
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="off", access_log=False,
                            http="auto", proxy_headers=False, server_header=False, date_header=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(), name=f"vf-sglang serve {host}:{port}")
    try:
        deadline = asyncio.get_running_loop().time() + startup_timeout
        while not server.started:
            if task.done():
                raise ServeError(f"could not serve on {host}:{port}: the server exited at startup")
            if asyncio.get_running_loop().time() > deadline:
                raise ServeError(f"could not serve on {host}:{port} within {startup_timeout:.0f}s")
            await asyncio.sleep(0.02)
        shown = f"[{host}]" if ":" in host else host
        yield f"http://{shown}:{_bound_port(server)}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, SystemExit):
            await asyncio.wait_for(task, timeout=10.0)
