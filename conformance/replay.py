"""Replay a cassette (`adapter.engine.recording`) as the engine: strict, no engine running.

Consumes: a cassette JSONL file (a header line, then one exchange a line). Emits:
  * `Cassette` — the header and the exchanges, in recorded order;
  * `CassetteReplay.handle(request)` — a respx side effect answering each request with the
    recorded response of the same method, path, JSON body and `x-*` headers (identical requests
    are answered in recorded order). Any other request fails the test with
    `UnexpectedRequestError`, naming the nearest recorded request and how it differs;
  * `replay_generate_calls(replay)` — sends every recorded `/generate` request through the
    adapter's `SGLangClient` against the replay and lists each answer the adapter now reads
    differently from the `adapter` reading stored at record time (an edited logprob, or a
    change in how the adapter reads SGLang's output).
"""

from __future__ import annotations

import difflib
import json
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from adapter.engine.recording import adapter_reading


class UnexpectedRequestError(AssertionError):
    """A request the cassette has no (remaining) recorded answer for."""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _key(method: str, path: str, body: Any, headers: dict[str, str]) -> str:
    return _canonical([method.upper(), path, body, {k.lower(): v for k, v in headers.items()}])


@dataclass
class Cassette:
    path: Path
    header: dict[str, Any]
    exchanges: list[dict[str, Any]] = field(default_factory=list)

    @property
    def engine_url(self) -> str:
        return str(self.header["engine_url"])


def load_cassette(path: str | Path) -> Cassette:
    lines = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    headers = [line for line in lines if line.get("kind") == "header"]
    if not headers:
        raise ValueError(f"{path}: no header line: not a vf-sglang cassette")
    return Cassette(Path(path), headers[0], [line for line in lines if line.get("kind") == "exchange"])


def _request_key(request: httpx.Request) -> tuple[str, str]:
    body = json.loads(request.content) if request.content else None
    headers = {k.lower(): v for k, v in request.headers.items() if k.lower().startswith("x-")}
    return _key(request.method, request.url.path, body, headers), _canonical([request.method, request.url.path, body])


class CassetteReplay:
    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette
        self.answers: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        for exchange in cassette.exchanges:
            req = exchange["request"]
            self.answers[_key(req["method"], req["path"], req["body"], req.get("headers") or {})].append(exchange)
        self.served = 0

    def _nearest(self, shown: str) -> str:
        recorded = [_canonical([e["request"]["method"], e["request"]["path"], e["request"]["body"]])
                    for e in self.cassette.exchanges]
        if not recorded:
            return "the cassette records no exchange"
        best = max(recorded, key=lambda text: difflib.SequenceMatcher(None, text, shown).ratio())
        if best == shown:
            return "an identical request was recorded, but fewer times than it was sent"
        pairs = enumerate(zip(best, shown, strict=False))
        first = next((i for i, (a, b) in pairs if a != b), min(len(best), len(shown)))
        window = slice(max(0, first - 60), first + 60)
        return (f"nearest recorded request differs at character {first}: "
                f"recorded …{best[window]}… requested …{shown[window]}…")

    def handle(self, request: httpx.Request) -> httpx.Response:
        key, shown = _request_key(request)
        queue = self.answers.get(key)
        if not queue:
            raise UnexpectedRequestError(
                f"{self.cassette.path.name}: unexpected {request.method} {request.url.path}; {self._nearest(shown)}"
            )
        response = queue.popleft()["response"]
        self.served += 1
        body = response["body"]
        if body is None:
            return httpx.Response(response["status"])
        if isinstance(body, str):
            return httpx.Response(response["status"], text=body)
        return httpx.Response(response["status"], json=body)


async def replay_generate_calls(replay: CassetteReplay) -> list[str]:
    """Send every recorded `/generate` request through the adapter's `SGLangClient` (answered
    by `replay`, which must be mounted) and compare the adapter's reading of each answer with
    the reading recorded beside it. Returns the differences (empty: the cassette replays)."""
    from adapter.engine.client import RetryPolicy, SGLangClient
    from adapter.errors import EngineError
    from adapter.wire.translate import SGLangRequest

    client = SGLangClient(replay.cassette.engine_url, retry=RetryPolicy(max_attempts=1))
    problems = []
    try:
        for index, exchange in enumerate(replay.cassette.exchanges, start=1):
            req = exchange["request"]
            if (req["method"], req["path"]) != ("POST", "/generate"):
                continue
            try:
                output = await client.generate(SGLangRequest(req["body"], dict(req.get("headers") or {})))
            except EngineError:
                reading = None  # an error status: the adapter reads nothing, as when it was recorded
            else:
                reading = adapter_reading("/generate", 200, output)
            if reading != exchange.get("adapter"):
                problems.append(f"{replay.cassette.path.name} exchange {index}: the adapter now reads "
                                f"{reading!r:.300}, recorded {exchange.get('adapter')!r:.300}")
    finally:
        await client.aclose()
    return problems
