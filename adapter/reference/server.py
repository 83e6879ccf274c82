"""The reference engine's HTTP app: SGLang's native wire on CPU, for tests and the demo.

This is a REFERENCE ENGINE (transformers + torch), never SGLang: it serves the subset of
SGLang 0.5's native HTTP API that the adapter uses, with SGLang's shapes.

    POST /generate        `input_ids` (or `text`), `sampling_params`, `return_logprob`, `rid`
                          → one output, or a list for batched prompts:
                          {"text", "output_ids", "meta_info": {"id", "finish_reason",
                           "prompt_tokens", "completion_tokens", "cached_tokens",
                           "reasoning_tokens", "num_retractions", "weight_version",
                           "e2e_latency", "input_token_logprobs": [],
                           "output_token_logprobs": [[logprob, id, None], ...],
                           "output_token_logprobs_length"}}
                          (the three logprob keys only with `return_logprob`)
    POST /abort_request   {"rid": id} or {"abort_all": true}: in-flight and queued requests
                          finish with {"type": "abort", "message": ...}; empty 200 like SGLang
    GET  /health          empty 200 (the model is loaded before the app exists)
    GET  /health_generate empty 200 after decoding one token (SGLang's "can it generate" probe,
                          which Miles polls before it uses an external engine); 503 if it fails
    GET  /model_info      (and SGLang's older name /get_model_info) {"model_path": <model_id>,
                           "tokenizer_path": <model dir>, "is_generation": true, ...}
    POST /flush_cache     {} (there is no prefix cache: `cached_tokens` is always 0)
    GET  /server_info     (and /get_server_info) {"model_path", "context_length",
                           "enable_deterministic_inference": true (one stream, a seeded
                           generator), "version": null (not an SGLang release),
                           "engine": "vf-sglang reference engine", and the server arguments
                           Miles compares for an external engine (SERVER_LAYOUT: one node, one
                           GPU's worth, no memory saver; `host`/`port` the socket it serves on)}

A refused request answers HTTP 400 with SGLang's `{"error": {"message": ...}}`. Decoding runs
in worker threads (`asyncio.to_thread`) behind one compute lock, so requests are served one
at a time while the event loop stays free: `/health` and `/abort_request` answer during a
generation. Serve it on loopback (`adapter.bridge.serve.served(app)` binds 127.0.0.1 by default).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from adapter.reference.errors import BadRequestError
from adapter.reference.generator import Completion, Generator
from adapter.reference.requests import GenerateJob, GenerateRequest, parse_generate

WEIGHT_VERSION = "default"
# What SGLang's /server_info reports for a single-engine, single-node server: the fields Miles'
# external-engine init (SGLangEngine._init_external) requires to equal its own expectation.
SERVER_LAYOUT: dict[str, Any] = {
    "enable_memory_saver": False, "nnodes": 1, "node_rank": 0, "gpu_id_step": 1, "base_gpu_id": 0,
    "tp_size": 1, "dp_size": 1, "pp_size": 1, "ep_size": 1,
}


class InFlight:
    """Abort flags of the requests admitted and not yet answered, by request id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flags: dict[str, threading.Event] = {}

    def admit(self, rids: list[str]) -> list[threading.Event]:
        with self._lock:
            taken = [rid for rid in rids if rid in self._flags]
            if taken:
                raise BadRequestError(f"rid {taken[0]!r} is already in flight: use a fresh request id")
            flags = [threading.Event() for _ in rids]
            self._flags.update(zip(rids, flags, strict=True))
            return flags

    def release(self, rids: list[str]) -> None:
        with self._lock:
            for rid in rids:
                self._flags.pop(rid, None)

    def abort(self, rid: str | None) -> int:
        """Flag one request (`rid`) or all (`None`); returns how many were flagged."""
        with self._lock:
            flags = list(self._flags.values()) if rid is None else [self._flags[rid]] if rid in self._flags else []
        for flag in flags:
            flag.set()
        return len(flags)


class ReferenceEngine:
    """One loaded model, its decode loop, the compute lock and the in-flight registry."""

    def __init__(self, model_dir: Path, model_id: str) -> None:
        import torch
        import transformers

        self.model_dir = model_dir
        self.model_id = model_id
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_dir))
        model = transformers.AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        self.generator = Generator(model.eval(), self.tokenizer)  # type: ignore[no-untyped-call]  # transformers lacks the annotation
        self.vocab_size = int(model.config.vocab_size)
        self.compute = threading.Lock()
        self.in_flight = InFlight()

    def parse(self, body: Any) -> GenerateRequest:
        return parse_generate(
            body, tokenizer=self.tokenizer, context_length=self.generator.context_length, vocab_size=self.vocab_size
        )

    def run(self, job: GenerateJob, abort: threading.Event) -> Completion:
        """Blocking: decode one job (called in a worker thread)."""
        with self.compute:
            return self.generator.generate(job.prompt_ids, job.params, abort)

    def output(self, job: GenerateJob, done: Completion, request: GenerateRequest, latency: float) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": job.rid,
            "finish_reason": done.finish_reason,
            "prompt_tokens": len(job.prompt_ids),
            "weight_version": WEIGHT_VERSION,
            "completion_tokens": len(done.output_ids),
            "cached_tokens": 0,
            "cached_tokens_details": {"device": 0, "host": 0},  # no prefix cache: nothing cached anywhere
            "dp_rank": None,  # one rank, as a plain SGLang server reports it
            "reasoning_tokens": 0,  # no reasoning parser runs here
            "num_retractions": 0,  # one stream at a time: nothing is ever retracted
            "e2e_latency": latency,
            "response_sent_to_client_ts": time.time(),  # as 0.5.16 on report it
        }
        if request.return_logprob:
            texts = (
                [self.tokenizer.decode([i]) for i in done.output_ids]
                if request.return_text_in_logprobs
                else [None] * len(done.output_ids)
            )
            meta["input_token_logprobs"] = []  # the default logprob_start_len (-1) asks for none
            meta["output_token_logprobs"] = [
                [lp, token, text] for lp, token, text in zip(done.logprobs, done.output_ids, texts, strict=True)
            ]
            meta["output_token_logprobs_length"] = len(done.output_ids)
        return {"text": done.text, "output_ids": list(done.output_ids), "meta_info": meta}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message}}, status_code=status)


async def _json_body(request: Request) -> Any:
    try:
        return await request.json()
    except ValueError as exc:
        raise BadRequestError(f"the body is not valid JSON: {exc}") from exc


async def _generate(engine: ReferenceEngine, request: Request) -> Response:
    started = time.perf_counter()
    try:
        parsed = engine.parse(await _json_body(request))
        rids = [job.rid for job in parsed.jobs]
        flags = engine.in_flight.admit(rids)
    except BadRequestError as exc:
        return _error(400, str(exc))
    try:
        done = await asyncio.gather(
            *(asyncio.to_thread(engine.run, job, flag) for job, flag in zip(parsed.jobs, flags, strict=True))
        )
    except BaseException:
        for flag in flags:  # cancelled or failed: let the worker threads stop early
            flag.set()
        raise
    finally:
        engine.in_flight.release(rids)
    latency = time.perf_counter() - started
    outputs = [engine.output(job, d, parsed, latency) for job, d in zip(parsed.jobs, done, strict=True)]
    return JSONResponse(outputs if parsed.batched else outputs[0])


async def _health_generate(engine: ReferenceEngine) -> Response:
    """Decode one greedy token, as SGLang's /health_generate does: 200 when generation works."""
    parsed = engine.parse({"input_ids": [0], "sampling_params": {"max_new_tokens": 1, "temperature": 0.0}})
    try:
        await asyncio.to_thread(engine.run, parsed.jobs[0], threading.Event())
    except RuntimeError as exc:
        return _error(503, f"generation failed: {exc}")
    return Response(status_code=200)


async def _abort(engine: ReferenceEngine, request: Request) -> Response:
    try:
        body = await _json_body(request)
    except BadRequestError as exc:
        return _error(400, str(exc))
    if not isinstance(body, dict):
        return _error(400, "the /abort_request body must be a JSON object")
    if body.get("abort_all") is True:
        engine.in_flight.abort(None)
    elif isinstance(body.get("rid"), str) and body["rid"]:
        engine.in_flight.abort(body["rid"])  # an unknown or finished rid is a no-op, as in SGLang
    else:
        return _error(400, 'send {"rid": <request id>} or {"abort_all": true}')
    return Response(status_code=200)


def _listening(request: Request) -> dict[str, Any]:
    """`host` and `port` of the socket this request arrived on, as SGLang reports its --host/--port."""
    server = request.scope.get("server")
    return {"host": server[0], "port": server[1]} if server else {}


def create_engine_app(model_dir: Path, *, model_id: str = "Qwen/Qwen3-0.6B") -> Starlette:
    """Load the model in `model_dir` (blocking, ~1 s for the tiny model) and return the app.
    `model_id` is reported as `model_path` by `/get_model_info`, as SGLang reports the
    `--model-path` it was launched with; Renderers' identity lookup keys on it."""
    engine = ReferenceEngine(Path(model_dir), model_id)

    async def generate(request: Request) -> Response:
        return await _generate(engine, request)

    async def abort_request(request: Request) -> Response:
        return await _abort(engine, request)

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    async def health_generate(request: Request) -> Response:
        return await _health_generate(engine)

    async def model_info(request: Request) -> Response:
        return JSONResponse(
            {
                "model_path": engine.model_id,
                "tokenizer_path": str(engine.model_dir),
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": WEIGHT_VERSION,
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": "qwen3",
                "architectures": ["Qwen3ForCausalLM"],
            }
        )

    async def flush_cache(request: Request) -> Response:
        return JSONResponse({})

    async def server_info(request: Request) -> Response:
        return JSONResponse(
            {
                "model_path": engine.model_id,
                "tokenizer_path": str(engine.model_dir),
                "context_length": engine.generator.context_length,
                "enable_deterministic_inference": True,
                "version": None,
                "engine": "vf-sglang reference engine (transformers on CPU)",
                **SERVER_LAYOUT,
                **_listening(request),
            }
        )

    app = Starlette(
        routes=[
            Route("/generate", generate, methods=["POST"]),
            Route("/abort_request", abort_request, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/health_generate", health_generate, methods=["GET"]),
            Route("/model_info", model_info, methods=["GET"]),
            Route("/get_model_info", model_info, methods=["GET"]),  # SGLang's older name, still served
            Route("/flush_cache", flush_cache, methods=["GET", "POST"]),
            Route("/server_info", server_info, methods=["GET"]),
            Route("/get_server_info", server_info, methods=["GET"]),
        ]
    )
    app.state.engine = engine
    return app
