"""The benchmark's generation-B client (`benchmarks.paths.generation_b_client`) is the client the
installed Verifiers builds for its TrainClient, so the gen-B rows of docs/performance.md time the
call generation B really makes. Run in the B matrix cells (`tox -e contract-vf040`)."""

from __future__ import annotations

import pytest
import verifiers
import verifiers.v1 as vf

from benchmarks.paths import generation_b_client

base = pytest.importorskip("verifiers.v1.clients.base", reason="needs verifiers 0.3.x/0.4.0 (generation B)")

pytestmark = pytest.mark.contract
URL = "http://127.0.0.1:9"


def test_the_benchmark_client_is_the_one_verifiers_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VF_SGLANG_BENCH_KEY", "EMPTY")
    ours = generation_b_client(URL)
    theirs = base.build_async_openai(vf.TrainClientConfig(base_url=f"{URL}/v1", api_key_var="VF_SGLANG_BENCH_KEY"))
    assert ours.base_url == theirs.base_url and ours.max_retries == theirs.max_retries == 0
    ours_http, theirs_http = ours._client, theirs._client  # the httpx clients the SDK sends with
    assert type(ours_http) is type(theirs_http)
    assert type(ours_http._transport) is type(theirs_http._transport)  # httpx's default transport
    if verifiers.__version__ == "0.4.0":  # 0.3.x set a read timeout of their own (600 s, none)
        assert ours_http.timeout == theirs_http.timeout
