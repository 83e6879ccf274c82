"""`vf-sglang check` through the real router: every required check passes under consistent_hashing
(facts read from a worker, the routing row sees one key stick to one worker and keys spread over
both), and the routing row fails under round_robin, the policy under which it used to pass."""

from __future__ import annotations

import pytest

from adapter.cli.server_checks import ROUTING_CHECK
from tests.router.commands import vf_sglang

pytestmark = pytest.mark.router


def test_check_passes_through_a_consistent_hashing_router(router, workers, tiny_model) -> None:
    ran = vf_sglang("check", "--sglang-url", router.url, "--tokenizer", str(tiny_model),
                    "--router-policy", "consistent_hashing", "--timeout", "120")
    assert ran.code == 0, ran.output
    assert "all required checks passed" in ran.output
    assert f"read from {workers[0].url}" in ran.output or f"read from {workers[1].url}" in ran.output
    assert "ok" in ran.row(ROUTING_CHECK) and "different keys → 2 of 2 workers" in ran.row(ROUTING_CHECK), ran.output
    assert "--disable-retries" in ran.row("router retries")
    assert "warning" not in ran.output


def test_the_routing_check_fails_under_round_robin(round_robin_router, tiny_model) -> None:
    ran = vf_sglang("check", "--sglang-url", round_robin_router.url, "--tokenizer", str(tiny_model),
                    "--router-policy", "consistent_hashing", "--timeout", "120")
    assert ran.code == 1, ran.output
    assert f"FAILED: {ROUTING_CHECK}" in ran.output
    assert "went to 2 workers in 10 requests" in ran.row(ROUTING_CHECK)


def test_without_a_policy_check_warns_and_tells_the_router_routes_by_key(router, tiny_model) -> None:
    ran = vf_sglang("check", "--sglang-url", router.url, "--tokenizer", str(tiny_model), "--timeout", "120")
    assert ran.code == 0, ran.output
    assert "--router-policy is not set" in ran.output
    assert "the router routes by key" in ran.row(ROUTING_CHECK)
