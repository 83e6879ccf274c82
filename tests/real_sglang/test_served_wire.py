"""Real SGLang on CPU (`real_sglang`: the lane's deterministic server, or the session's own) on the
wire the adapter uses: ids with their logprobs, a sampling seed that fixes the ids, and the stand-in
plugin's deterministic mode that keeps the radix cache. Opt-in: `VF_SGLANG_CPU=1` or `SGLANG_URL`."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.sglang_cpu
PROMPT = [151644, 872, 198, 3838, 374, 220, 18, 488, 220, 19, 30, 151645, 198, 151644, 77091, 198]


def _generate(url: str, sampling_params: dict[str, Any]) -> dict[str, Any]:
    body = {"input_ids": PROMPT, "return_logprob": True, "sampling_params": sampling_params}
    response = httpx.post(f"{url}/generate", json=body, trust_env=False, timeout=120)
    response.raise_for_status()
    return dict(response.json())


def test_generate_answers_ids_and_logprobs(real_sglang) -> None:
    answer = _generate(real_sglang.url, {"max_new_tokens": 16, "temperature": 0})
    meta = answer["meta_info"]
    assert 1 <= len(answer["output_ids"]) <= 16
    assert [entry[1] for entry in meta["output_token_logprobs"]] == answer["output_ids"]
    assert all(entry[0] <= 0 and entry[2] is None for entry in meta["output_token_logprobs"])
    assert meta["finish_reason"]["type"] in {"stop", "length"}


def test_same_sampling_seed_gives_the_same_ids(real_sglang) -> None:
    params = {"max_new_tokens": 16, "temperature": 1.0, "ignore_eos": True, "sampling_seed": 1234}
    first, again = _generate(real_sglang.url, params), _generate(real_sglang.url, params)
    assert first["output_ids"] == again["output_ids"]
    others = [_generate(real_sglang.url, {**params, "sampling_seed": seed})["output_ids"] for seed in (1, 2, 3)]
    assert any(ids != first["output_ids"] for ids in others), "three other seeds all sampled the same ids"


def test_the_plugin_kept_deterministic_mode_and_the_radix_cache(real_sglang) -> None:
    info = httpx.get(f"{real_sglang.url}/server_info", trust_env=False, timeout=30).json()
    assert info["version"] == real_sglang.version
    assert info["enable_deterministic_inference"] is True
    assert info["attention_backend"] == "torch_native" and info["disable_radix_cache"] is False
    if real_sglang.log_path is None:
        pytest.skip("the server's log is unknown: set SGLANG_LOG beside SGLANG_URL (the sglang-cpu lanes do)")
    assert "vf_sglang_cpu plugin:" in real_sglang.log_path.read_text(errors="replace")
