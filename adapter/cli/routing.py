"""The CLI jobs' look at the engine address before a run: one server, or the SGLang router.

Consumes the `Topology` at `--sglang-url` (read once by the run's engine session,
`adapter.engine.session`) and the job's `Settings`.
Emits `RouterNotes`: one status line describing the router (its workers, the retry setting the
adapter expects) and, when a router is there but `--router-policy` was not given, a warning.

The router's policy cannot be read over HTTP (smg serves no configuration route), so a router
with no `--router-policy` gets a warning, not a refusal: under round_robin that is what the user
wants, under consistent_hashing or manual each episode's turns would land on random workers
(`vf-sglang check` tells the two apart: its routing row sends the same key repeatedly). Nor can
the router's retry setting be read: smg retries a failed worker call 5 times by default, which
multiplies the adapter's per-turn attempt budget, so the status line names the flag the adapter
expects (docs/router.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from adapter.config.settings import Settings
from adapter.engine.topology import Topology

# The smg flag under which the adapter's per-turn attempt budget holds end to end.
ROUTER_RETRY_FLAG = "--disable-retries"
SMG_DEFAULT_RETRIES = 5  # smg 1.13.0's --retry-max-retries: attempts per call, the first included


@dataclass(frozen=True)
class RouterNotes:
    status: str | None  # one line about the router (None: not a router)
    warning: str | None  # a problem the user should fix (None: none)


def router_notes(topology: Topology, settings: Settings) -> RouterNotes:
    """What to tell the user about the engine address before a run (see the module docstring)."""
    if not topology.is_router:
        return RouterNotes(None, None)
    status = (f"engine: {topology.describe()}; the adapter expects the router to run with {ROUTER_RETRY_FLAG} "
              "(docs/router.md)")
    if settings.sglang_router_policy is not None:
        return RouterNotes(status, None)
    flag = settings.flag("sglang_router_policy")
    warning = (
        f"{topology.url} is an SGLang router and {flag} is not set: no request carries X-SMG-Routing-Key, so "
        "under the router's consistent_hashing or manual policy the turns of one episode land on random "
        f"workers (each turn misses the prefix cache of the last); pass {flag} consistent_hashing (the "
        f"router's --policy), or {flag} round_robin if scattering is intended"
    )
    return RouterNotes(status, warning)
