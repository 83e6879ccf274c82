"""Checks against a live SGLang server (`pytest -m live --sglang-url URL`).

Each check speaks the adapter's own code path (the `SGLangClient` and `wire`), so a server
whose output the adapter would reject fails here with the adapter's typed error: the checks
are the contract, pointed at a real engine instead of the scripted one.
"""

from __future__ import annotations

from typing import Any

from adapter.settings import Settings
from adapter.sglang import SGLangClient
from adapter.wire import to_renderers_response, to_sglang_request

# "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" in Qwen3's vocabulary; any model
# accepts the ids (they are only a prompt), Qwen3 models also answer sensibly.
PROBE_PROMPT = [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198]


def probe_body(max_tokens: int = 8, **sampling: Any) -> dict[str, Any]:
    params = {"max_tokens": max_tokens, "temperature": 0.0, "logprobs": 1,
              "stop_token_ids": [151645, 151643], "skip_special_tokens": False, **sampling}
    return {"model": "live", "token_ids": list(PROBE_PROMPT), "sampling_params": params}


async def check_generate(engine: SGLangClient, settings: Settings | None = None, **sampling: Any) -> dict[str, Any]:
    """One translated `/generate`; returns the Renderers response (raises on any violation)."""
    request = to_sglang_request(probe_body(**sampling), settings=settings or Settings(), session_id="live-check",
                                first_turn=True)
    response = to_renderers_response(await engine.generate(request))
    choice = response["choices"][0]
    budget = request.payload["sampling_params"]["max_new_tokens"]
    if len(choice["token_ids"]) > budget:
        raise AssertionError(f"engine sampled {len(choice['token_ids'])} tokens, over max_new_tokens={budget}")
    return response
