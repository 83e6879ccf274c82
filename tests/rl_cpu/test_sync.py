"""The weight sync's two requests and its refusals, against respx (fast lane): SGLang must say
success and then report the version just loaded, or the loop stops with what to check."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import respx

from e2e.rl_cpu.errors import WeightSyncError
from e2e.rl_cpu.sync import load_weights

URL = "http://127.0.0.1:30999"


@pytest.fixture
def sglang():
    with respx.mock(base_url=URL, assert_all_called=False) as mock:
        yield mock


def test_loads_the_directory_under_the_version_and_confirms_it(sglang) -> None:
    update = sglang.post("/update_weights_from_disk").respond(json={"success": True, "message": "ok"})
    sglang.get("/model_info").respond(json={"model_path": "/m", "weight_version": "3"})
    load_weights(URL, Path("/ckpt/weights-3"), "3")
    assert json.loads(update.calls.last.request.read()) == {"model_path": "/ckpt/weights-3", "weight_version": "3"}


@pytest.mark.parametrize(("answer", "needle"), [
    (httpx.Response(400, json={"success": False, "message": "bad shape"}), "refused to load"),
    (httpx.Response(200, json={"success": False, "message": "mismatch"}), "refused to load"),
])
def test_a_refused_checkpoint_is_an_error_naming_it(sglang, answer, needle) -> None:
    sglang.post("/update_weights_from_disk").mock(return_value=answer)
    with pytest.raises(WeightSyncError, match=f"{needle} /ckpt/weights-1 as version '1'"):
        load_weights(URL, Path("/ckpt/weights-1"), "1")


def test_a_server_that_keeps_its_old_version_is_an_error(sglang) -> None:
    sglang.post("/update_weights_from_disk").respond(json={"success": True})
    sglang.get("/model_info").respond(json={"weight_version": "default"})
    with pytest.raises(WeightSyncError, match="reports weight_version 'default', not '1'"):
        load_weights(URL, Path("/ckpt/weights-1"), "1")
