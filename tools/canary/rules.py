"""Each package the adapter depends on: where its pin lives, the gate's rule for it, and the lanes a
bump must pass. docs/versions.md's bump table is this data (tests/canary/test_rules.py keeps them equal)
and `python -m tools.canary bump` reads it."""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Rule:
    package: str
    pinned: str  # "pyproject" (an exact pin there, then the lock), "lock", "tox" (a lane's pin), "sglang-cpu"
    gate: str  # what the adapter accepts untested, and why
    lanes: tuple[str, ...]
    # Every other file that restates the pin as `package==X` (docs, commands, a lane's own
    # requirements): `bump` rewrites each one; tests/canary/test_rules.py fails on a copy not listed.
    copies: tuple[str, ...] = ()
    # Copies that are compiled requirement files: rewritten from their `.in`, by this command.
    relock: tuple[str, ...] = ()


CONTRACT_CELLS = ",".join(f"contract-vf{cell}" for cell in ("020", "020-r018", "020-sglang-openai", "021", "030", "031",
                                                              "040", "041dev"))

RULES: tuple[Rule, ...] = (
    Rule("verifiers", "pyproject",
         "gated: 0.2.x runs as generation A, 0.3.x and 0.4.0 as B; a newer 0.x is refused unless "
         "VF_SGLANG_ALLOW_UNTESTED_VERIFIERS=1 (then it runs as B with a warning); a new major is refused",
         ("fast", CONTRACT_CELLS, "e2e-vf040", "sglang-cpu", "sglang-cpu-0516", "canary"),
         copies=("e2e/miles_cpu/requirements/miles-rl-0.0.2.in",), relock=("python -m e2e.miles_cpu lock",)),
    Rule("renderers", "pyproject",
         "gated: generation A needs >=0.1.8,<0.1.11 (0.1.11 removed create_renderer_pool); B needs its "
         "verifiers release's own floor and has no ceiling, so a newer renderers is accepted untested: "
         "the canary runs the newest under the newest verifiers and fails when it breaks",
         ("fast", CONTRACT_CELLS, "e2e-vf040", "canary"),
         copies=("e2e/miles_cpu/requirements/miles-rl-0.0.2.in",), relock=("python -m e2e.miles_cpu lock",)),
    Rule("openai", "lock",
         "not gated: verifiers' own requirement decides it; beside SGLang in one environment SGLang's exact "
         "pin must hold (`vf-sglang versions` checks it)", ("fast", CONTRACT_CELLS, "canary")),
    Rule("transformers", "lock",
         "not gated: the lock holds the default lane's; the matrix cells and the canary take the newest "
         "their verifiers allows", ("fast", "e2e", CONTRACT_CELLS, "rl-cpu", "canary")),
    Rule("sglang", "sglang-cpu",
         "not gated: any server answering SGLang's info paths is accepted (`vf-sglang check`), so a newer "
         "sglang is accepted untested: the canary runs the wire schema checks on its wheel and fails when "
         "they break", ("sglang-schema", "sglang-cpu", "sglang-cpu-0516", "rl-cpu", "miles", "canary")),
    Rule("smg", "tox",
         "not gated: a router is recognised by its worker listing; the router lane pins it",
         ("router", "sglang-cpu"),
         copies=("docs/router.md", "benchmarks/router_load.py", "tests/router/conftest.py")),
    Rule("torch", "pyproject",
         "not gated: the demo group pins it for the reference engine, the RL trainer and SGLang on CPU",
         ("e2e", "sglang-cpu", "rl-cpu", "miles"),
         copies=("e2e/sglang_cpu/lock.py", "e2e/sglang_cpu/requirements/sglang-0.5.16.in",
                 "e2e/sglang_cpu/requirements/sglang-0.5.23.in", "e2e/miles_cpu/requirements/miles-rl-0.0.2.in"),
         relock=("python -m e2e.sglang_cpu lock --version 0.5.16", "python -m e2e.sglang_cpu lock --version 0.5.23",
                 "python -m e2e.miles_cpu lock")),
)

BY_NAME = {rule.package: rule for rule in RULES}


def markdown_table() -> str:
    rows = ["| package | pinned in | gate rule | lanes a bump runs |", "|---|---|---|---|"]
    where = {"pyproject": "pyproject.toml + uv.lock", "lock": "uv.lock", "tox": "tox.ini",
             "sglang-cpu": "e2e/sglang_cpu/requirements, tox.ini"}
    for rule in RULES:
        lanes = ", ".join(f"`{lane}`" for lane in rule.lanes)
        rows.append(f"| {rule.package} | {where[rule.pinned]} | {rule.gate} | {lanes} |")
    return "\n".join(rows)


@functools.lru_cache(maxsize=8)
def _lock_versions(lock: Path, stamp: tuple[int, int]) -> dict[str, str]:
    """Each package's (first) version in a uv.lock, parsed once per file content (`stamp`: its
    mtime and size): a report asks for dozens, and the lock is 10,000 lines of TOML."""
    versions: dict[str, str] = {}
    for entry in tomllib.loads(lock.read_text())["package"]:
        versions.setdefault(entry["name"], entry["version"])
    return versions


def lock_version(package: str, repo: Path = REPO) -> str:
    """The package's version in the repo's uv.lock, or "—"."""
    lock = repo / "uv.lock"
    stat = lock.stat()
    return _lock_versions(lock, (stat.st_mtime_ns, stat.st_size)).get(package, "—")


def current_pin(package: str, repo: Path = REPO) -> str:
    """The version the lanes run today, read where the pin lives (never restated here); a package
    with no rule, its version in uv.lock."""
    rule = BY_NAME.get(package)
    if rule is None:
        return lock_version(package, repo)
    if rule.pinned == "tox":
        found = re.search(rf"\b{re.escape(package)}==([0-9][^\s\"']*)", (repo / "tox.ini").read_text())
    elif rule.pinned == "sglang-cpu":
        found = re.search(r"VF_SGLANG_CPU_VERSION\s*=\s*([0-9.]+)", (repo / "tox.ini").read_text())
    else:
        return lock_version(package, repo)
    return found.group(1) if found else "—"
