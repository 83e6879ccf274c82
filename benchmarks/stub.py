"""A stub SGLang engine for benchmarks, in its own process: a minimal keep-alive HTTP/1.1 server
on raw asyncio streams (uvloop when installed), so its own cost stays small and flat.

    python -m benchmarks.stub --delay 12 --tokens 16     # prints "stub ready at http://..."

`POST /generate` answers a well-formed SGLang output of `--tokens` tokens after `--delay`
seconds (0: at once), or, with `--status 503`, that error status (a failing worker);
`GET /stats` answers `{"generate": n, "in_flight": k, "peak_in_flight": p, "per_prompt": [c, ...]}`
(what the engine saw; `per_prompt`: how many calls each distinct request got, most first: the
prompt (`input_ids`, else `text`) with its `sampling_params`, so the n rollouts of a group, each
seeded apart, count apart: a failing worker's calls per model turn); `POST /reset` zeroes them.
`/health`, `/model_info` and `/server_info` (and their older names) answer SGLang-shaped, so
the SGLang router registers the stub as an SGLang worker; `/abort_request` answers an empty
200; any other path 404. `running(...)` starts one as a subprocess.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections import Counter
from collections.abc import Iterator

import orjson

from benchmarks.common import ready_process
from conformance.sglang_outputs import sglang_output

MODEL_INFO = orjson.dumps({"model_path": "stub", "is_generation": True, "model_type": "qwen3"})
SERVER_INFO = orjson.dumps({"model_path": "stub", "context_length": 32768, "version": "stub",
                            "engine": "vf-sglang benchmark stub"})
INFO = {b"/model_info": MODEL_INFO, b"/get_model_info": MODEL_INFO, b"/server_info": SERVER_INFO,
        b"/get_server_info": SERVER_INFO, b"/health": b"{}", b"/abort_request": b"{}"}
REASONS = {200: b"OK", 404: b"Not Found", 500: b"Internal Server Error", 502: b"Bad Gateway",
           503: b"Service Unavailable", 504: b"Gateway Timeout", 429: b"Too Many Requests"}


class Stub:
    def __init__(self, delay: float, tokens: int, status: int = 200) -> None:
        self.delay = delay
        self.status = status
        ids = [*range(1000, 1000 + tokens - 1), 151645]
        self.answer = orjson.dumps(sglang_output(ids, [-0.125] * tokens, request_id="stub"))
        self.failure = orjson.dumps({"error": {"message": f"stub: HTTP {status}", "code": status}})
        self.generate = self.in_flight = self.peak = 0
        self.prompts: Counter[bytes] = Counter()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                body = await reader.readexactly(length) if length else b""
                writer.write(await self.route(head.split(b" ", 2)[1], body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def route(self, path: bytes, request: bytes = b"") -> bytes:
        status = 200
        if path == b"/generate":
            self.prompts[_turn_key(request)] += 1
            status, body = await self._generate()
        elif path == b"/reset":
            self.generate = self.peak = 0
            self.prompts.clear()
            body = b"{}"
        elif path == b"/stats":
            body = orjson.dumps({"generate": self.generate, "in_flight": self.in_flight,
                                 "peak_in_flight": self.peak,
                                 "per_prompt": [count for _, count in self.prompts.most_common()]})
        else:
            status, body = (200, INFO[path]) if path in INFO else (404, b'{"detail":"Not Found"}')
        head = b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
            status, REASONS.get(status, b"Status"), len(body))
        return head + body

    async def _generate(self) -> tuple[int, bytes]:
        self.generate += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return (200, self.answer) if self.status == 200 else (self.status, self.failure)


def _turn_key(request: bytes) -> bytes:
    """What a /generate body asks (its `input_ids`, else its `text`, and its `sampling_params`:
    a seeded rollout's own seed among them), as bytes; retries of one turn share it."""
    try:
        parsed = orjson.loads(request)
    except orjson.JSONDecodeError:
        return request
    if not isinstance(parsed, dict):
        return orjson.dumps(parsed)
    return orjson.dumps([parsed.get("input_ids", parsed.get("text")), parsed.get("sampling_params")],
                        option=orjson.OPT_SORT_KEYS)


async def _main(args: argparse.Namespace) -> None:
    stub = Stub(args.delay, args.tokens, args.status)
    server = await asyncio.start_server(stub.serve, "127.0.0.1", 0, backlog=4096)
    print(f"stub ready at http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


@contextlib.contextmanager
def running(delay: float = 0.0, tokens: int = 16) -> Iterator[tuple[str, int]]:
    """A stub engine subprocess: yields (url, pid); terminated (by pid) on exit."""
    with ready_process([sys.executable, "-m", "benchmarks.stub", "--delay", str(delay), "--tokens", str(tokens)],
                       "stub ready at ") as found:
        yield found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--status", type=int, default=200, help="the status every /generate answers (200: an output)")
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        asyncio.run(_main(args))
    else:
        uvloop.run(_main(args))


if __name__ == "__main__":
    main()
