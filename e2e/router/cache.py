"""Why the adapter routes by trace: the prefix-cache hit rate of multi-turn tool episodes behind smg,
under `consistent_hashing` (every turn of a trace on one worker) and `round_robin`, on the same seeds.

    figures(policy, exchanges)      CacheFigures of one recorded run (pure; `e2e.judges.turns` reads the
                                    cassette: each call's routing key is its trace, the router's
                                    answer header names its worker)
    measure(workers, policy, ...)   one run: both workers' caches flushed, smg started with `policy`
                                    in front of them, a seeded `vf-sglang rollout --record`, smg ended
    markdown(rows)                  the table docs/router.md shows; `write_section` puts it there
    python -m e2e.router.cache      two real SGLang CPU servers, both policies, the table printed
                                    (`--write docs/router.md` replaces the measured section)

The adapter sends `X-SMG-Routing-Key` (the trace id) in both runs (`--router-policy consistent_hashing`):
the requests are the same, only the router's policy differs (round_robin ignores the key), and the
key groups each trace's turns. The run is made so that nothing but the policy decides where a turn
lands or what it finds cached:
  * one trace per task: the taskset's 4 tasks, one group of one each (`--groups 4 --n 1`). Two
    traces of one task mostly sample the same tool call, so a twin's turns would warm the other
    worker's cache for it (measured: with 8 traces, round_robin found 5 to 7 of 7 previous prompts);
  * one rollout at a time (`--max-in-flight 1`): a trace's next turn is the router's next call, so
    round_robin sends it to the other worker every time, whatever the machine's scheduling. With
    rollouts side by side the alternation was arrival order's (4 of 7 later turns stayed put in
    two runs), and the two policies' hit rates once came within 0.2 points of each other.
A turn k ≥ 2 of a trace is "served from its prefix" when its `cached_tokens` covers turn k-1's whole
prompt: the worker still held the trace's earlier turns. The other worker holds only what every
prompt shares (the system prompt, the tool schema, the start of the user turn).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from e2e.common.process import run_with_deadline
from e2e.judges.turns import Exchange, load_exchanges
from e2e.router.smg import smg_router

REPO = Path(__file__).resolve().parents[2]
ECHO_TOOL = REPO / "fixtures" / "envs" / "echo-tool-v1.toml"
POLICIES = ("consistent_hashing", "round_robin")
TASKS = 4  # echo-tool-v1's tasks: one trace each
SECTION_BEGIN, SECTION_END = "<!-- router-cache:begin -->", "<!-- router-cache:end -->"


@dataclass(frozen=True)
class CacheFigures:
    policy: str
    calls: int  # answered /generate calls
    prompt_tokens: int
    cached_tokens: int
    later_turns: int  # turns k ≥ 2 (a previous turn of the same trace was recorded)
    later_same_worker: int  # … on the worker that answered turn k-1
    later_prefix_served: int  # … whose cached_tokens covered turn k-1's prompt
    later_prompt_tokens: int
    later_cached_tokens: int
    seconds: float = 0.0

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def later_hit_rate(self) -> float:
        return self.later_cached_tokens / self.later_prompt_tokens if self.later_prompt_tokens else 0.0


def trace_turns(exchanges: Sequence[Exchange]) -> list[tuple[Exchange, Exchange]]:
    """(turn k-1, turn k) pairs within each trace (its routing key): turn k's prompt extends turn k-1's
    prompt + completion (of a trace's branches, the longest earlier turn it extends)."""
    if any(e.key is None for e in exchanges):
        raise ValueError("a /generate call without X-SMG-Routing-Key: run with --router-policy consistent_hashing")
    by_key: dict[str, list[Exchange]] = {}
    for exchange in exchanges:
        by_key.setdefault(str(exchange.key), []).append(exchange)
    pairs = []
    for calls in by_key.values():
        ordered = sorted(calls, key=lambda e: len(e.input_ids))
        for i, exchange in enumerate(ordered):
            earlier = [e for e in ordered[:i] if len(e.input_ids) + len(e.output_ids) < len(exchange.input_ids)
                       and exchange.input_ids[: len(e.input_ids) + len(e.output_ids)] == e.input_ids + e.output_ids]
            if earlier:
                pairs.append((max(earlier, key=lambda e: len(e.input_ids)), exchange))
    return pairs


def figures(policy: str, exchanges: Sequence[Exchange], seconds: float = 0.0) -> CacheFigures:
    pairs = trace_turns(exchanges)
    return CacheFigures(
        policy=policy, calls=len(exchanges), prompt_tokens=sum(len(e.input_ids) for e in exchanges),
        cached_tokens=sum(e.cached_tokens or 0 for e in exchanges), later_turns=len(pairs),
        later_same_worker=sum(1 for before, after in pairs if after.worker is not None
                              and after.worker == before.worker),
        later_prefix_served=sum(1 for before, after in pairs if (after.cached_tokens or 0) >= len(before.input_ids)),
        later_prompt_tokens=sum(len(after.input_ids) for _, after in pairs),
        later_cached_tokens=sum(after.cached_tokens or 0 for _, after in pairs), seconds=seconds)


def flush_caches(workers: Sequence[str]) -> None:
    """Empty every worker's radix cache, so each run starts cold (SGLang's `POST /flush_cache`)."""
    with httpx.Client(timeout=30.0, trust_env=False) as http:
        for worker in workers:
            http.post(f"{worker}/flush_cache").raise_for_status()


def rollout_argv(url: str, tokenizer: Path, record: Path, out: Path, *, groups: int, n: int, seed: int,
                 config: Path = ECHO_TOOL) -> list[str]:
    """The same command under either router policy: every call carries its trace's routing key, and
    one rollout runs at a time (so the router sees each trace's turns back to back)."""
    return [sys.executable, "-m", "adapter.cli", "rollout", "--sglang-url", url, "--config", str(config),
            "--model", "Qwen/Qwen3-0.6B", "--tokenizer", str(tokenizer), "--groups", str(groups), "--n", str(n),
            "--max-response-len", "32", "--seed", str(seed), "--max-in-flight", "1",
            "--router-policy", "consistent_hashing", "--quiet",
            "--record", str(record), "--out", str(out)]


def measure(workers: Sequence[str], policy: str, *, tokenizer: Path, run_dir: Path, groups: int = TASKS, n: int = 1,
            seed: int = 7, timeout_s: float = 600.0) -> tuple[CacheFigures, Path]:
    """One seeded echo-tool run behind smg `policy`: its figures and its samples file."""
    run = run_dir / policy
    run.mkdir(parents=True, exist_ok=True)
    record, out = run / "cassette", run / "samples.jsonl"
    flush_caches(workers)
    lines: list[str] = []
    router = smg_router(workers, run / "smg.log", policy=policy)
    try:
        started = time.monotonic()
        argv = rollout_argv(router.url, tokenizer, record, out, groups=groups, n=n, seed=seed)
        code = run_with_deadline(argv, env=dict(os.environ), cwd=None, timeout_s=timeout_s, on_line=lines.append)
        seconds = time.monotonic() - started
    finally:
        router.end()
    if code != 0:
        tail = "\n".join(lines[-40:])
        raise RuntimeError(f"the {policy} rollout exited {code}:\n{tail}")
    return figures(policy, load_exchanges(record), seconds), out


def markdown(rows: Sequence[CacheFigures]) -> str:
    head = ("| smg policy | later turns on the previous turn's worker | later turns whose previous prompt was "
            "cached | hit rate, later turns | prompt tokens recomputed, later turns | hit rate, all calls | "
            "/generate calls | rollout |\n|---|---|---|---|---|---|---|---|")
    body = [f"| `{r.policy}` | {r.later_same_worker}/{r.later_turns} | {r.later_prefix_served}/{r.later_turns} | "
            f"**{r.later_hit_rate:.1%}** | {r.later_prompt_tokens - r.later_cached_tokens} | {r.hit_rate:.1%} | "
            f"{r.calls} | {r.seconds:.0f} s |" for r in rows]
    return "\n".join([head, *body])


def write_section(doc: Path, table: str, note: str) -> None:
    """Replace the text between the section markers of `doc` (which must hold both)."""
    text = doc.read_text()
    begin, end = text.index(SECTION_BEGIN) + len(SECTION_BEGIN), text.index(SECTION_END)
    doc.write_text(f"{text[:begin]}\n{note}\n\n{table}\n{text[end:]}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m e2e.router.cache", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sglang-version", default="0.5.23")
    parser.add_argument("--groups", type=int, default=TASKS, help=f"default {TASKS}: one trace per task (a "
                        "second trace of a task shares its turns, which a worker that served the first has cached)")
    parser.add_argument("--n", type=int, default=1, help="1: every trace its own group (for the same reason)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--run-dir", type=Path, default=REPO / "runs" / "router-cache")
    parser.add_argument("--write", type=Path, default=None, help="the doc whose measured section to replace")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from e2e.sglang_cpu.server import serving

    args = _parser().parse_args(argv)
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(serving(args.sglang_version, deterministic=True)) for _ in range(2)]
        workers = [s.url for s in servers]
        rows = [measure(workers, policy, tokenizer=servers[0].model_dir, run_dir=args.run_dir, groups=args.groups,
                        n=args.n, seed=args.seed)[0] for policy in POLICIES]
    table = markdown(rows)
    print(table)
    if args.write is not None:
        note = (f"Measured by `python -m e2e.router.cache` (real SGLang {args.sglang_version} on CPU, two "
                f"deterministic workers, echo-tool-v1, {args.groups} groups × {args.n}, seed {args.seed}):")
        write_section(args.write, table, note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
