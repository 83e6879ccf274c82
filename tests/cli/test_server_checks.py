"""The live checks' verdicts are explicit: they survive `python -O`, and a check that breaks is
that check's failure, not the end of the table; the input-limit row reads SGLang's own limit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from adapter.cli import server_checks
from adapter.cli.server_checks import CHECKS, ServerFacts, context_check, run_check


async def test_a_check_that_raises_keyerror_is_that_checks_failure(monkeypatch) -> None:
    async def broken(engine, facts):
        raise KeyError("meta_info")

    monkeypatch.setitem(CHECKS, "ids = logprob ids", broken)
    result = await run_check("ids = logprob ids", engine=None, facts=ServerFacts(None, None))
    assert (result.status, result.detail) == ("fail", "unexpected KeyError: 'meta_info'")


def test_a_failing_verdict_still_fails_under_python_O() -> None:
    probe = textwrap.dedent("""
        import asyncio
        from adapter.cli import server_checks
        from adapter.cli.server_checks import CHECKS, ServerFacts, run_check

        async def bad_logprobs(engine, settings=None, **sampling):
            from adapter.wire.types import parse_engine_output
            raw = parse_engine_output({"meta_info": {"output_token_logprobs": [[0.5, 3, None]],
                                                     "finish_reason": {"type": "length"}}})
            return raw, {}

        server_checks._generate = bad_logprobs
        result = asyncio.run(run_check("logprobs returned and finite", None, ServerFacts(None, None)))
        print(result.status)
    """)
    out = subprocess.run([sys.executable, "-O", "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "fail"


def test_the_checks_decide_without_assert() -> None:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(server_checks))
    assert [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)] == []


@pytest.mark.parametrize(
    ("server_info", "model_max", "tokenizer", "status", "detail"),
    [
        ({"max_req_input_len": 4090, "context_length": None}, 40960, "/ckpt", "pass",
         "server max_req_input_len 4090 tokens, model 40960"),
        ({"context_length": 8192, "max_req_input_len": 8186}, 4096, "/ckpt", "fail",
         "server context_length 8192 tokens, model 4096"),
        ({"max_req_input_len": 4090}, None, None, "skip",
         "server max_req_input_len 4090; pass --tokenizer DIR (the model's checkpoint directory) to compare"),
        ({"max_req_input_len": 4090}, None, "/tok", "skip",
         "server max_req_input_len 4090; /tok/config.json has no max_position_embeddings to compare"),
        ({}, 4096, "/ckpt", "skip", "skipped: /server_info reports neither context_length nor max_req_input_len"),
    ],
    ids=["sglang_input_limit", "context_over_model", "no_tokenizer", "tokenizer_without_config", "unknown"],
)
def test_the_input_limit_row_reads_sglangs_limit_and_blames_tokenizer_only_when_absent(
    server_info, model_max, tokenizer, status, detail
) -> None:
    result = context_check(ServerFacts({"model_path": "m"}, server_info), model_max, tokenizer=tokenizer)
    assert (result.status, result.detail, result.required) == (status, detail, False)
