"""Real SGLang on CPU, started and stopped by `serving`: it answers, and leaves no process behind.

Opt-in (`VF_SGLANG_CPU=1`, marker `sglang_cpu`). On its lane it runs beside that lane's server alone:
the tests there share the lane's one server (tests/real_sglang/conftest.py), so no session server is
started beside them."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from adapter.versions.coinstall import MILES_SGLANG
from e2e.sglang_cpu.fixtures import ENABLE_ENV, lane_enabled, requested_version
from e2e.sglang_cpu.server import serving

# The process group's lifecycle is our `serving`'s, the same for every SGLang version: it runs in one
# lane only (a server start costs a lane about half a minute), the 0.5.16 one: CI runs it beside the
# 0.5.23 lane, which has more to do.
pytestmark = [pytest.mark.sglang_cpu,
              pytest.mark.skipif(not lane_enabled(), reason=f"needs real SGLang on CPU: set {ENABLE_ENV}=1"),
              pytest.mark.skipif(requested_version() != MILES_SGLANG,
                                 reason=f"serving's process lifecycle is checked on SGLang {MILES_SGLANG}'s lane "
                                        "(tox -e sglang-cpu-0516)")]


def _group_members(pgid: int) -> set[int]:
    members = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[2]) == pgid:  # fields after "(comm)": state, ppid, pgrp
            members.add(int(stat.parent.name))
    return members


def test_a_real_server_answers_then_its_whole_group_is_gone() -> None:
    with serving(requested_version()) as server:
        members = _group_members(server.pid)
        body = {"input_ids": [151644, 872, 198], "return_logprob": True, "sampling_params": {"max_new_tokens": 4}}
        answer = httpx.post(f"{server.url}/generate", json=body, trust_env=False, timeout=120).json()
        assert 1 <= len(answer["output_ids"]) <= 4
    assert len(members) >= 3, f"expected main, scheduler and detokenizer processes, saw {members}"
    assert not _group_members(server.pid)
    assert not [pid for pid in members if Path(f"/proc/{pid}").exists()]
