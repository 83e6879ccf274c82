"""Loopback traffic never goes through an HTTP proxy.

On a proxied machine (`http_proxy`, `HTTP_PROXY`, `ALL_PROXY`, ... set for package downloads)
every client that reads proxy variables — httpx with its default `trust_env=True`, the OpenAI
client inside Verifiers' TrainClient (generation B talks to the *served* bridge on
127.0.0.1), the harness subprocess talking to Verifiers' interception server — sends loopback
calls to the proxy, which cannot reach them (seen: `ConnectError`).

Two layers keep them direct:
  * the adapter's own engine clients read no proxy variables (`trust_env=False`: the SGLang
    client in adapter/engine/client.py, the preflight probe in adapter/engine/probe.py);
  * `bypass_proxies_for_loopback(environ)` adds 127.0.0.1, localhost and ::1 to `NO_PROXY`
    *and* `no_proxy` (urllib, hence httpx, lets the lowercase one win when both are set), keeping
    every entry already there. The orchestrator calls it once, when it is built, before the bridge
    client is built and before any episode starts, so Verifiers' clients and every subprocess
    inherit it; the E2E runner applies it to every step's environment. The proxy variables
    themselves stay: non-loopback traffic (uv's package downloads) still needs them.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
NO_PROXY_VARS = ("NO_PROXY", "no_proxy")


def no_proxy_value(environ: MutableMapping[str, str]) -> str:
    """The merged no-proxy list: what either variable holds, then the loopback hosts."""
    entries: list[str] = []
    for name in NO_PROXY_VARS:
        entries += [host.strip() for host in environ.get(name, "").split(",") if host.strip()]
    return ",".join(dict.fromkeys([*entries, *LOOPBACK_HOSTS]))


def bypass_proxies_for_loopback(environ: MutableMapping[str, str] | None = None) -> str:
    """Set `NO_PROXY` and `no_proxy` in `environ` (default: this process's) to the merged list;
    idempotent. Returns the value set."""
    target = os.environ if environ is None else environ
    value = no_proxy_value(target)
    for name in NO_PROXY_VARS:
        target[name] = value
    return value
