"""The router lane: the real SGLang router (`smg`, pinned in tox.ini) in front of two reference
engines, everything on 127.0.0.1, every process ended by its process group (`e2e.router.smg`).

    uvx --with tox-uv tox -e router          # installs smg==1.13.0, sets VF_SGLANG_ROUTER_LANE=1
    VF_SGLANG_ROUTER_LANE=1 VF_SGLANG_SMG=/path/to/smg pytest -m router tests/router   # by hand

Outside the lane every test here is skipped with that reason; inside it a missing smg fails.
The two engines and the two routers in front of them (consistent_hashing and round_robin, both
with `--disable-retries`, as the adapter expects) are started once per session; the tests that
kill a worker or need a failing one start their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.common.ports import free_port
from e2e.router.smg import SMG_VERSION, Started, reference_engine, smg_binary, smg_router

LANE = "VF_SGLANG_ROUTER_LANE"
REPO = Path(__file__).resolve().parents[2]
ROUTER_ENVS = REPO / "fixtures" / "router"
CHAT = ROUTER_ENVS / "arith-chat-v1.toml"  # multi-turn: 3 engine calls per trace, whatever the model says


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(LANE):
        return
    skip = pytest.mark.skip(reason=f"router lane: run `uvx --with tox-uv tox -e router` (sets {LANE}=1, "
                            f"installs smg=={SMG_VERSION})")
    for item in items:
        if item.get_closest_marker("router"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def smg() -> str:
    binary = smg_binary()
    if binary is None:
        pytest.fail(f"the router lane needs smg=={SMG_VERSION}: tox -e router installs it (or set VF_SGLANG_SMG)")
    return binary


@pytest.fixture(scope="session")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("router-logs")


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """The tiny model's arithmetic-only variant (`e2e.tiny.variants.arith_only`): the lane's chat fixture asks
    sums, which it answers and ends; the tool-calling model rambles there to the 16-token limit, and a
    truncated turn splits its trace into branches, which these tests do not count on."""
    from adapter.reference.tiny_model import RECIPE, build_tiny_model
    from e2e.tiny.variants import arith_only

    return build_tiny_model(progress=False, recipe=arith_only(RECIPE))


@pytest.fixture(scope="session")
def workers(smg: str, logs: Path, tiny_model: Path) -> Iterator[list[Started]]:
    """Two reference engines (the tiny model), started together."""
    engines: list[Started] = []
    try:
        for name in ("a", "b"):
            engines.append(reference_engine(free_port(), logs / f"engine-{name}.log"))
        yield engines
    finally:
        for engine in engines:
            engine.end()


@pytest.fixture(scope="session")
def router(workers: list[Started], logs: Path) -> Iterator[Started]:
    """smg, consistent_hashing, `--disable-retries`, in front of both engines."""
    started = smg_router([w.url for w in workers], logs / "smg-consistent.log", policy="consistent_hashing")
    yield started
    started.end()


@pytest.fixture(scope="session")
def round_robin_router(workers: list[Started], logs: Path) -> Iterator[Started]:
    started = smg_router([w.url for w in workers], logs / "smg-round-robin.log", policy="round_robin")
    yield started
    started.end()
