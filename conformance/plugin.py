"""The conformance pytest plugin. Loaded by name, never by itself: the package registers no pytest11
entry point, so installing vf-sglang changes no other project's test run. Load it with
`pytest -p conformance.plugin`, or `pytest_plugins = ["conformance.plugin"]` in the top-level
conftest.py (this repository's tests/conftest.py does).

Fixtures:
  * `sglang_mock` — a `ScriptedEngine` mounted with respx at its URL, at the adapter's engine
    transport and at httpcore (`conformance.mocking`; strict: every HTTP call to that host goes
    to the engine; other hosts are not intercepted). Script it with
    `sglang_mock.script(Completion(...), Fault(status=503), ...)`, then assert on
    `sglang_mock.requests`.
  * `sglang_replay` — `sglang_replay(cassette_path)` serves a recorded cassette
    (`adapter.engine.recording`) through respx at the cassette's engine URL and returns the
    `CassetteReplay`; strict: a request the cassette did not record fails the test, naming the
    nearest recorded request (`conformance.replay`).
  * `qwen3_tokenizer` — a directory with the real Qwen3 tokenizer files, installed once per
    session from the pinned test dependency, offline.
Helper: `loaded_tokenizer(path)` — Renderers' `load_tokenizer(path)`, loaded once per process and
path and shared (a load parses the 11 MB tokenizer.json: ~0.55 CPU-s on 2 cores, and one test
session loaded it 26 times): read it, never change it.
Options: `--sglang-url URL` (or `SGLANG_URL`) points `live`-marked checks at a real server.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapter.reference.assets import install_qwen3_tokenizer
from conformance.engine import ScriptedEngine
from conformance.replay import CassetteReplay, load_cassette

with contextlib.suppress(ImportError):  # respx is a test extra; with it, `using="vf-sglang-engine"` works by name
    import conformance.mocking  # noqa: F401  (registers the engine-transport mocker with respx)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--sglang-url", default=os.environ.get("SGLANG_URL"),
                     help="a live SGLang server for `live` conformance checks (or SGLANG_URL)")


@pytest.fixture
def sglang_mock() -> Iterator[ScriptedEngine]:
    from conformance.mocking import mock_host  # respx is a test extra: imported only when used

    engine = ScriptedEngine()
    with mock_host(engine.url, engine.handle):
        yield engine


@pytest.fixture
def sglang_replay() -> Iterator[Callable[[str | Path], CassetteReplay]]:
    from conformance.mocking import mock_host

    with contextlib.ExitStack() as stack:

        def replay(cassette: str | Path) -> CassetteReplay:
            served = CassetteReplay(load_cassette(cassette))
            stack.enter_context(mock_host(served.cassette.engine_url, served.handle))
            return served

        yield replay


def loaded_tokenizer(path: str | Path) -> Any:
    """Renderers' `load_tokenizer(path)`, once per process and path: shared, so read-only."""
    return _loaded(str(path))


@functools.cache
def _loaded(path: str) -> Any:
    from renderers.base import load_tokenizer

    return load_tokenizer(path)


@pytest.fixture(scope="session")
def qwen3_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_qwen3_tokenizer(tmp_path_factory.mktemp("qwen3-tokenizer"))


@pytest.fixture
def sglang_url(request: pytest.FixtureRequest) -> str:
    url = request.config.getoption("--sglang-url")
    if not url:
        pytest.skip("needs a live SGLang server: pass --sglang-url URL or set SGLANG_URL")
    return str(url)
