"""A stub SGLang engine for benchmarks, in its own process: a minimal keep-alive HTTP/1.1 server
on raw asyncio streams (uvloop when installed), so its own cost stays small and flat.

    python -m benchmarks.stub --delay 12 --tokens 16     # prints "stub ready at http://..."

`POST /generate` answers a well-formed SGLang output of `--tokens` tokens after `--delay`
seconds (0: at once); `GET /stats` answers `{"generate": n, "in_flight": k, "peak_in_flight": p}`
(what the engine saw); `POST /reset` zeroes them. `running(...)` starts one as a subprocess.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Iterator

import orjson

from benchmarks.common import ready_process
from conformance.sglang_outputs import sglang_output


class Stub:
    def __init__(self, delay: float, tokens: int) -> None:
        self.delay = delay
        ids = [*range(1000, 1000 + tokens - 1), 151645]
        self.answer = orjson.dumps(sglang_output(ids, [-0.125] * tokens, request_id="stub"))
        self.generate = self.in_flight = self.peak = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                if length:
                    await reader.readexactly(length)
                writer.write(await self.route(head.split(b" ", 2)[1]))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def route(self, path: bytes) -> bytes:
        if path == b"/generate":
            self.generate += 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                if self.delay:
                    await asyncio.sleep(self.delay)
            finally:
                self.in_flight -= 1
            body = self.answer
        elif path == b"/reset":
            self.generate = self.peak = 0
            body = b"{}"
        else:
            body = orjson.dumps({"generate": self.generate, "in_flight": self.in_flight,
                                 "peak_in_flight": self.peak})
        return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
            len(body), body)


async def _main(args: argparse.Namespace) -> None:
    stub = Stub(args.delay, args.tokens)
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
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        asyncio.run(_main(args))
    else:
        uvloop.run(_main(args))


if __name__ == "__main__":
    main()
