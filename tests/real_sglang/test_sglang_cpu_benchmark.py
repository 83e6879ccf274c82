"""`benchmarks/sglang_cpu.py` at a tiny size against the session's real SGLang (`real_sglang`: the
sglang-cpu lane's server, else `sglang_cpu_server`), so the benchmark cannot rot and starts no
server of its own. Skipped (naming the command) unless VF_SGLANG_CPU=1 or SGLANG_URL is set."""

from __future__ import annotations

import math
import re

import pytest

from benchmarks import sglang_cpu

pytestmark = pytest.mark.sglang_cpu
ROW = re.compile(r"^\| (raw|in-process|served) \| [\d,.]+ \| -?[\d,.]+ \| ([\d.]+|nan|inf) \|", re.M)


def test_the_real_sglang_scenario_runs_at_tiny_size(real_sglang) -> None:
    text = "\n".join(sglang_cpu.main(["--tiny", "--engine-url", real_sglang.url]))
    rows = dict(ROW.findall(text))
    assert list(rows) == ["raw", "in-process", "served"], text
    assert all(math.isfinite(float(ratio)) for ratio in rows.values()), rows
    assert "4 decoded tokens" in text and f"(4-token decoding, real SGLang {real_sglang.version} on CPU)" in text
    assert "Load average when the measurement ended" in text
