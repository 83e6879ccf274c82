"""The installed real-SGLang venv itself: no sgl_kernel of its own, and the stand-in's murmur op equal
to SGLang's own triton kernel (the served wire: tests/real_sglang/test_served_wire.py). Opt-in:
`VF_SGLANG_CPU=1`, marker `sglang_cpu`."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from e2e.sglang_cpu.fixtures import ENABLE_ENV, lane_enabled, requested_version
from e2e.sglang_cpu.server import launch_env
from e2e.sglang_cpu.venv import ensure_venv

pytestmark = pytest.mark.sglang_cpu
needs_lane = pytest.mark.skipif(not lane_enabled(), reason=f"needs real SGLang on CPU: set {ENABLE_ENV}=1")


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
