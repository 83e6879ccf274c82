"""The reference engine (adapter/reference): SGLang's native wire on CPU, served over real HTTP.

The tiny model is built once (seconds) into the default cache (`$VF_SGLANG_CACHE`
or `~/.cache/vf-sglang`) and reused on later runs. Sampled ids are never compared with fixed
values (weights may differ across CPUs): tests assert properties within one run.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e  # the e2e lane installs torch (dependency group `demo`)

torch = pytest.importorskip("torch", reason="the reference engine needs torch (dependency group `demo`)")
transformers = pytest.importorskip("transformers", reason="the reference engine needs transformers (group `demo`)")

import httpx  # noqa: E402

from adapter.bridge.serve import served  # noqa: E402
from adapter.errors import EngineAbortedError  # noqa: E402
from adapter.reference import build_tiny_model, create_engine_app  # noqa: E402
from adapter.reference.params import SamplingParams  # noqa: E402
from adapter.reference.sampling import make_generator, sample_next  # noqa: E402
from adapter.reference.tiny_model import RECIPE, RECIPE_FILE, WEIGHTS_FILE, recipe_hash  # noqa: E402
from adapter.reference.tiny_train import render_prompt  # noqa: E402
from adapter.wire.translate import to_renderers_response, to_sglang_request  # noqa: E402

IM_END = 151645
QUESTION = "What is 3 + 4? Answer with just the number."
META_KEYS = {"id", "finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens",
             "num_retractions", "weight_version", "e2e_latency", "input_token_logprobs", "output_token_logprobs",
             "output_token_logprobs_length", "cached_tokens_details", "dp_rank",
             "response_sent_to_client_ts"}  # fmt: skip  (tests/conformance/test_mirrors.py: what real SGLang sends)


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    return build_tiny_model(progress=False)


@pytest.fixture(scope="module")
def engine_app(tiny_model_dir: Path) -> Any:
    return create_engine_app(tiny_model_dir)


@pytest.fixture
async def client(engine_app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with served(engine_app) as url, httpx.AsyncClient(base_url=url, timeout=60.0) as http:
        yield http


@pytest.fixture(scope="module")
def prompt_ids(engine_app: Any) -> list[int]:
    return list(engine_app.state.engine.tokenizer.encode(render_prompt(QUESTION), add_special_tokens=False))


async def generate(client: httpx.AsyncClient, ids: Any, **params: Any) -> Any:
    response = await client.post(
        "/generate", json={"input_ids": ids, "sampling_params": params, "return_logprob": True}
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_prompt_prefix_is_what_renderers_renders(tiny_model_dir: Path, prompt_ids: list[int]) -> None:
    from renderers.base import create_renderer, load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model_dir))
    tokenizer.name_or_path = "Qwen/Qwen3-0.6B"
    rendered = create_renderer(tokenizer).render_ids(
        [{"role": "user", "content": QUESTION}], add_generation_prompt=True
    )
    assert list(rendered) == prompt_ids


async def test_output_has_sglangs_shape(client: httpx.AsyncClient, prompt_ids: list[int]) -> None:
    out = await generate(client, prompt_ids, temperature=1.0, max_new_tokens=8)
    assert set(out) == {"text", "output_ids", "meta_info"}
    meta = out["meta_info"]
    assert set(meta) == META_KEYS
    assert meta["prompt_tokens"] == len(prompt_ids) and meta["cached_tokens"] == 0
    assert meta["completion_tokens"] == len(out["output_ids"]) == len(meta["output_token_logprobs"]) > 0
    assert [item[1] for item in meta["output_token_logprobs"]] == out["output_ids"]
    assert all(item[2] is None for item in meta["output_token_logprobs"])
    assert isinstance(meta["id"], str) and isinstance(meta["weight_version"], str) and meta["e2e_latency"] > 0
    assert meta["finish_reason"]["type"] in {"stop", "length"}
    no_logprobs = (await client.post("/generate", json={"input_ids": prompt_ids})).json()
    assert not {"input_token_logprobs", "output_token_logprobs"} & set(no_logprobs["meta_info"])


async def test_logprobs_are_finite_and_not_positive(client: httpx.AsyncClient, prompt_ids: list[int]) -> None:
    out = await generate(client, prompt_ids, temperature=1.3, top_p=0.9, max_new_tokens=24, ignore_eos=True)
    logprobs = [item[0] for item in out["meta_info"]["output_token_logprobs"]]
    assert len(logprobs) == 24 and all(math.isfinite(lp) and lp <= 0.0 for lp in logprobs)


async def test_same_seed_same_output(client: httpx.AsyncClient, prompt_ids: list[int]) -> None:
    params = {"temperature": 1.0, "max_new_tokens": 16, "ignore_eos": True, "sampling_seed": 1234}
    first, second = [await generate(client, prompt_ids, **params) for _ in range(2)]
    assert first["output_ids"] == second["output_ids"]
    assert first["meta_info"]["output_token_logprobs"] == second["meta_info"]["output_token_logprobs"]


async def test_logprobs_match_a_direct_forward(
    client: httpx.AsyncClient, tiny_model_dir: Path, prompt_ids: list[int]
) -> None:
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32).eval()
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([prompt_ids])).logits[0, -1].float()
    greedy = await generate(client, prompt_ids, temperature=0.0, max_new_tokens=1)
    lp, token, _ = greedy["meta_info"]["output_token_logprobs"][0]
    assert token == int(logits.argmax())
    assert lp == pytest.approx(float(torch.log_softmax(logits, -1)[token]), abs=1e-4)
    # sampled: log_softmax(logits / T), taken before top-k truncation
    hot = await generate(client, prompt_ids, temperature=0.7, top_k=5, max_new_tokens=1, sampling_seed=3)
    lp, token, _ = hot["meta_info"]["output_token_logprobs"][0]
    assert token in logits.topk(5).indices.tolist()
    assert lp == pytest.approx(float(torch.log_softmax(logits / 0.7, -1)[token]), abs=1e-4)


async def test_stops_by_itself_and_keeps_the_stop_token(client: httpx.AsyncClient, prompt_ids: list[int]) -> None:
    out = await generate(client, prompt_ids, temperature=0.0, max_new_tokens=16)
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": IM_END}
    assert out["output_ids"][-1] == IM_END and "<|im_end|>" not in out["text"]
    kept = await generate(client, prompt_ids, temperature=0.0, max_new_tokens=16, no_stop_trim=True,
                          skip_special_tokens=False)  # fmt: skip
    assert kept["text"].endswith("<|im_end|>") and kept["output_ids"] == out["output_ids"]
    late = await generate(client, prompt_ids, temperature=0.0, max_new_tokens=8, min_new_tokens=4)
    assert len(late["output_ids"]) >= 4 and IM_END not in late["output_ids"][:4]


async def test_stop_string_is_matched_and_trimmed(
    client: httpx.AsyncClient, engine_app: Any, prompt_ids: list[int]
) -> None:
    greedy = {"temperature": 0.0, "max_new_tokens": 6, "ignore_eos": True, "skip_special_tokens": False}
    free = await generate(client, prompt_ids, **greedy)
    stop = engine_app.state.engine.tokenizer.decode([free["output_ids"][2]])
    cut = await generate(client, prompt_ids, stop=[stop], **greedy)
    assert cut["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert len(cut["output_ids"]) <= 3 and stop not in cut["text"]
    assert free["text"].startswith(cut["text"])
    kept = await generate(client, prompt_ids, stop=[stop], no_stop_trim=True, **greedy)
    assert stop in kept["text"] and kept["output_ids"] == cut["output_ids"]


async def test_max_new_tokens_finishes_with_length(client: httpx.AsyncClient, prompt_ids: list[int]) -> None:
    out = await generate(client, prompt_ids, max_new_tokens=5, ignore_eos=True, stop_token_ids=[])
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 5}
    assert len(out["output_ids"]) == out["meta_info"]["completion_tokens"] == 5


async def test_batched_input_ids_return_a_list(client: httpx.AsyncClient, prompt_ids: list[int]) -> None:
    out = await generate(client, [prompt_ids, prompt_ids[:-1]], temperature=0.0, max_new_tokens=4)
    assert isinstance(out, list) and len(out) == 2
    assert [o["meta_info"]["prompt_tokens"] for o in out] == [len(prompt_ids), len(prompt_ids) - 1]
    assert out[0]["meta_info"]["id"] != out[1]["meta_info"]["id"]


@pytest.mark.parametrize("abort_body", [{"abort_all": True}, {"rid": "long-one"}], ids=["abort_all", "rid"])
async def test_abort_finishes_a_running_generation(
    client: httpx.AsyncClient, prompt_ids: list[int], abort_body: dict[str, Any]
) -> None:
    body = {"input_ids": prompt_ids, "rid": "long-one", "return_logprob": True,
            "sampling_params": {"max_new_tokens": 4000, "ignore_eos": True, "stop_token_ids": []}}  # fmt: skip
    running = asyncio.create_task(client.post("/generate", json=body))
    await asyncio.sleep(1.0)
    started = time.perf_counter()
    assert (await client.get("/health")).status_code == 200
    assert (await client.post("/abort_request", json=abort_body)).status_code == 200
    out = (await asyncio.wait_for(running, timeout=30)).json()
    assert time.perf_counter() - started < 10
    assert out["meta_info"]["finish_reason"]["type"] == "abort"
    assert out["meta_info"]["finish_reason"]["message"].startswith("Abort request")
    assert 0 < out["meta_info"]["completion_tokens"] < 4000
    with pytest.raises(EngineAbortedError):
        to_renderers_response(out)


async def test_health_model_info_and_flush(client: httpx.AsyncClient, tiny_model_dir: Path) -> None:
    assert (await client.get("/health")).status_code == 200
    info = (await client.get("/get_model_info")).json()
    assert info["model_path"] == "Qwen/Qwen3-0.6B" and info["is_generation"] is True
    assert Path(info["tokenizer_path"]) == tiny_model_dir
    assert (await client.post("/flush_cache")).json() == {}


async def test_it_answers_what_miles_checks_before_using_an_external_engine(client: httpx.AsyncClient) -> None:
    """Miles polls /health_generate (forever, without a timeout) and then requires these
    /get_server_info fields to equal what it computed for a one-GPU engine at that address."""
    assert (await client.get("/health_generate")).status_code == 200
    info = (await client.get("/get_server_info")).json()
    expected = {"host": client.base_url.host, "port": client.base_url.port, "enable_memory_saver": False,
                "nnodes": 1, "node_rank": 0, "gpu_id_step": 1, "base_gpu_id": 0, "tp_size": 1, "dp_size": 1,
                "pp_size": 1, "ep_size": 1}
    assert {key: info.get(key) for key in expected} == expected


async def test_adapter_round_trip(
    client: httpx.AsyncClient, prompt_ids: list[int], make_settings: Callable[..., Any]
) -> None:
    renderers_body = {
        "model": "Qwen/Qwen3-0.6B", "token_ids": prompt_ids,
        "sampling_params": {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "max_tokens": 16,
                            "seed": 5, "n": 1, "repetition_penalty": 1.0, "logprobs": 1,
                            "stop_token_ids": [151645, 151643], "skip_special_tokens": False},
    }  # fmt: skip
    request = to_sglang_request(renderers_body, settings=make_settings(), session_id=None, first_turn=True)
    response = await client.post("/generate", json=request.payload, headers=request.headers)
    assert response.status_code == 200, response.text
    translated = to_renderers_response(response.json())
    choice = translated["choices"][0]
    assert choice["token_ids"] == response.json()["output_ids"] and choice["finish_reason"] in {"stop", "length"}


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"sampling_params": {"max_new_tokens": 4}}, "input_ids"),
        ({"input_ids": [1, 2], "sampling_params": {"n": 2}}, "n must be 1"),
        ({"input_ids": [1] * 4096}, "maximum context length"),
        ({"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 4095}}, "maximum context length"),
        ({"input_ids": [1, 2], "sampling_params": {"best_of": 2}}, "unknown sampling_params key"),
        ({"input_ids": [1, 2], "sampling_params": {"repetition_penalty": 1.2}}, "not supported"),
        ({"input_ids": [1, 2], "sampling_params": {"top_p": 0}}, "top_p"),
        ({"input_ids": [1, 2], "stream": True}, "stream"),
    ],
    ids=["no-input", "n2", "overlong", "no-room", "unknown-key", "penalty", "top_p", "stream"],
)
async def test_bad_requests_answer_400(client: httpx.AsyncClient, body: dict[str, Any], needle: str) -> None:
    response = await client.post("/generate", json=body)
    assert response.status_code == 400
    assert needle in response.json()["error"]["message"]


def test_model_is_reused_from_the_cache(tiny_model_dir: Path) -> None:
    weights_mtime = (tiny_model_dir / WEIGHTS_FILE).stat().st_mtime_ns
    started = time.perf_counter()
    again = build_tiny_model(progress=False)
    assert again == tiny_model_dir and time.perf_counter() - started < 5
    assert (tiny_model_dir / WEIGHTS_FILE).stat().st_mtime_ns == weights_mtime
    manifest = json.loads((tiny_model_dir / RECIPE_FILE).read_text())
    assert manifest["recipe"] == RECIPE and tiny_model_dir.name.endswith(recipe_hash(RECIPE))


@pytest.mark.parametrize("params", [SamplingParams(temperature=0.0), SamplingParams(top_k=1)], ids=["t0", "k1"])
def test_greedy_sampling_is_argmax(params: SamplingParams) -> None:
    logits = torch.randn(50, generator=torch.Generator().manual_seed(0))
    token, logprob = sample_next(logits, params, make_generator(None))
    assert token == int(logits.argmax()) and logprob == pytest.approx(float(torch.log_softmax(logits, -1)[token]))


def test_truncation_never_changes_the_logprob() -> None:
    logits = torch.randn(50, generator=torch.Generator().manual_seed(1))
    params = SamplingParams(temperature=0.5, top_p=1e-6)
    token, logprob = sample_next(logits, params, make_generator(7))
    assert token == int(logits.argmax())  # top_p that small keeps only the best token
    assert logprob == pytest.approx(float(torch.log_softmax(logits / 0.5, -1)[token]))
