"""The session's real SGLang on CPU (fixture `sglang_cpu_server`, deterministic mode) on the wire the
adapter uses, and the installed venv itself. Opt-in: `VF_SGLANG_CPU=1`, marker `sglang_cpu`."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import httpx
import pytest

from e2e.sglang_cpu.fixtures import ENABLE_ENV, lane_enabled, requested_version
from e2e.sglang_cpu.server import Server, launch_env
from e2e.sglang_cpu.venv import ensure_venv

pytestmark = pytest.mark.sglang_cpu
needs_lane = pytest.mark.skipif(not lane_enabled(), reason=f"needs real SGLang on CPU: set {ENABLE_ENV}=1")
PROMPT = [151644, 872, 198, 3838, 374, 220, 18, 488, 220, 19, 30, 151645, 198, 151644, 77091, 198]


def _generate(server: Server, sampling_params: dict[str, Any]) -> dict[str, Any]:
    body = {"input_ids": PROMPT, "return_logprob": True, "sampling_params": sampling_params}
    response = httpx.post(f"{server.url}/generate", json=body, trust_env=False, timeout=120)
    response.raise_for_status()
    return dict(response.json())


def test_generate_answers_ids_and_logprobs(sglang_cpu_server: Server) -> None:
    answer = _generate(sglang_cpu_server, {"max_new_tokens": 16, "temperature": 0})
    meta = answer["meta_info"]
    assert 1 <= len(answer["output_ids"]) <= 16
    assert [entry[1] for entry in meta["output_token_logprobs"]] == answer["output_ids"]
    assert all(entry[0] <= 0 and entry[2] is None for entry in meta["output_token_logprobs"])
    assert meta["finish_reason"]["type"] in {"stop", "length"}


def test_same_sampling_seed_gives_the_same_ids(sglang_cpu_server: Server) -> None:
    params = {"max_new_tokens": 16, "temperature": 1.0, "ignore_eos": True, "sampling_seed": 1234}
    first, again = _generate(sglang_cpu_server, params), _generate(sglang_cpu_server, params)
    assert first["output_ids"] == again["output_ids"]
    others = [_generate(sglang_cpu_server, {**params, "sampling_seed": seed})["output_ids"] for seed in (1, 2, 3)]
    assert any(ids != first["output_ids"] for ids in others), "three other seeds all sampled the same ids"


def test_the_plugin_kept_deterministic_mode_and_the_radix_cache(sglang_cpu_server: Server) -> None:
    info = httpx.get(f"{sglang_cpu_server.url}/server_info", trust_env=False, timeout=30).json()
    assert info["version"] == sglang_cpu_server.version
    assert info["enable_deterministic_inference"] is True
    assert info["attention_backend"] == "torch_native" and info["disable_radix_cache"] is False
    assert "vf_sglang_cpu plugin:" in sglang_cpu_server.log_path.read_text(errors="replace")


def _venv_python(*args: str, env: dict[str, str]) -> str:
    venv = ensure_venv(requested_version())
    done = subprocess.run([str(venv.python), *args], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@needs_lane
def test_the_venv_has_no_sgl_kernel_of_its_own() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = _venv_python("-c", "import importlib.util; print(importlib.util.find_spec('sgl_kernel'))", env=env)
    assert found == "None\n"


MURMUR_AGAINST_TRITON = """
import json, torch, triton
import sgl_kernel
from sglang.kernels.ops.sampling import murmur_hash
seed = torch.tensor([0, 1, 42, 2**64 - 1, 0x0123456789ABCDEF, 2**63, 12345678901234], dtype=torch.uint64)
positions = torch.tensor([0, 0, 7, 2**32 - 1, 123456, 1, 99])
columns = torch.arange(0, 3000, 7)
ours = torch.ops.sgl_kernel.murmur_hash32_cpu.default(seed, positions, columns)
n, m = seed.shape[0], columns.shape[0]
reference = torch.empty((n, m), dtype=torch.uint32)
murmur_hash.murmur_hash32_kernel[(n, triton.cdiv(m, 1024))](seed, positions, columns, reference, n, m, BLOCK_SIZE=1024)
print(json.dumps({"equal": torch.equal(ours.to(torch.int64), reference.to(torch.int64)), "cells": n * m}))
"""


@needs_lane
def test_murmur_op_equals_sglangs_own_triton_kernel() -> None:
    """SGLang's reference kernel is triton: run in triton's interpreter (TRITON_INTERPRET=1) on CPU."""
    out = json.loads(_venv_python("-c", MURMUR_AGAINST_TRITON, env={**launch_env(), "TRITON_INTERPRET": "1"}))
    assert out == {"equal": True, "cells": 7 * 429}
