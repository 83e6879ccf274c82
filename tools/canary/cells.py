"""What the canary runs for a set of newest releases, and which results may fail the build (pure).

A contract cell installs one verifiers/renderers pair exactly, openai and transformers unpinned (the
newest that pair allows, below the gate's known breaks: `adapter.versions.breaks.bounds_for`), and
runs tests/contract. The gate (`adapter.versions.gate.decide`)
sorts each pair: accepted as installed → the cell gates the build; refused only because verifiers is
newer than the adapter knows → the cell runs under the opt-in and is reported; refused as a known
break → not run, reported with the gate's reason. The sglang schema cell always gates: the adapter
accepts any SGLang that answers its info paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from packaging.version import Version

from adapter.versions.breaks import bounds_for
from adapter.versions.gate import ALLOW_UNTESTED_ENV, NEWEST_KNOWN, VersionDecision, decide
from adapter.wire.translate import SGLANG_CHECKED_VERSIONS

# What is resolved from the index: the key, and the requirement given to the resolver.
RESOLVE: dict[str, str] = {
    "verifiers": "verifiers", "renderers": "renderers", "openai": "openai", "transformers": "transformers",
    "sglang": "sglang", "smg": "smg",
    # generation A's newest pair the gate accepts (its line, and renderers below the known break)
    "verifiers-a": "verifiers>=0.2,<0.3", "renderers-a": "renderers>=0.1.8,<0.1.11",
    # generation B's 0.3 line: openai unbounded (0.4.0 pins openai<3), so openai 3.x and its httpx2
    "verifiers-b03": "verifiers>=0.3,<0.4",
}
# Resolved with pre-releases allowed: the `next` cell (never gating: they are not out yet).
PRERELEASE = {"verifiers-next": "verifiers", "renderers-next": "renderers"}
# What the product and its test layer import beside verifiers/renderers: every runtime dependency of
# the wheel, then the conformance layer's own. Every contract cell installs each unpinned (the newest
# its pair allows) and the report lists each against its newest published release.
RUNTIME_DEPENDENCIES = ("httpx", "httpx-aiohttp", "aiohttp", "pydantic", "starlette", "uvicorn", "uvloop", "httptools",
                        "orjson", "mcp", "rich", "packaging")
CONFORMANCE_DEPENDENCIES = ("pytest", "pytest-asyncio", "respx", "syrupy")
DEPENDENCIES = RUNTIME_DEPENDENCIES + CONFORMANCE_DEPENDENCIES
# The project's own tests' tools: neither the wheel nor the conformance layer imports them, so a
# release of one reaches no user. Every contract cell installs them at the matrix cells' pins
# (`ContractCell.held`, from `tools.canary.pins.held_test_tools`): hypothesis publishes almost
# daily, and its newest made every cell's set differ from every matrix cell's pins, so the canary
# ran all its suites itself (130-200 s more on the CI run). They move with the pins
# (`python -m tools.canary pins`), and the matrix proves them then.
TEST_TOOLS = ("hypothesis",)
NEXT = "next"
UNPINNED = ("openai", "transformers")  # every contract cell takes the newest its pair allows
GENERATION_A_EXTRA = ("mcp>=1.14.1,<2",)  # verifiers 0.2.x's tool servers need mcp 1.x (tox.ini's cells)


@dataclass(frozen=True)
class ContractCell:
    name: str
    verifiers: str
    renderers: str
    decision: VersionDecision  # the gate, as a user gets it (no opt-in)
    opt_in: bool  # run with ALLOW_UNTESTED_ENV set
    runs: bool
    gating: bool  # a failure fails the lane
    held: tuple[str, ...] = ()  # TEST_TOOLS as `tools.canary.pins.held_test_tools` gives them; none: the newest

    @property
    def test_tools(self) -> tuple[str, ...]:
        return self.held or TEST_TOOLS

    @property
    def requirements(self) -> tuple[str, ...]:
        extra = GENERATION_A_EXTRA if self.decision.generation == "A" else ()
        return (f"verifiers=={self.verifiers}", f"renderers=={self.renderers}", *UNPINNED, *extra,
                *bounds_for(self.verifiers), *DEPENDENCIES, *self.test_tools)

    @property
    def env(self) -> dict[str, str]:
        return {ALLOW_UNTESTED_ENV: "1"} if self.opt_in else {}

    @property
    def verdict(self) -> str:
        if self.decision.supported:
            return "accepted" + (f" (warning: {self.decision.warning})" if self.decision.warning else "")
        if self.opt_in:
            return f"refused, run past the gate with {ALLOW_UNTESTED_ENV}=1: {self.decision.reason}"
        return f"refused: {self.decision.reason}"


def contract_cell(name: str, verifiers: str, renderers: str) -> ContractCell:
    decision = decide(verifiers, renderers)
    if name == NEXT:  # the newest pre-releases: judged and reported on every run, never failing the build
        if decision.prerelease_cell is not None:  # the matrix judges exactly this pair on every CI run
            return ContractCell(name, verifiers, renderers, decision, opt_in=False, runs=False, gating=False)
        opt_in = not decision.supported and decide(verifiers, renderers, allow_untested=True).supported
        return ContractCell(name, verifiers, renderers, decision, opt_in=opt_in,
                            runs=decision.supported or opt_in, gating=False)
    if decision.supported:
        return ContractCell(name, verifiers, renderers, decision, opt_in=False, runs=True, gating=True)
    if decide(verifiers, renderers, allow_untested=True).supported:
        return ContractCell(name, verifiers, renderers, decision, opt_in=True, runs=True, gating=False)
    return ContractCell(name, verifiers, renderers, decision, opt_in=False, runs=False, gating=False)


def contract_cells(newest: Mapping[str, str], held: tuple[str, ...] = ()) -> list[ContractCell]:
    """The newest pair; the newest renderers under the newest known verifiers (when verifiers moved
    past it); the newest 0.3.x with the newest renderers (openai unbounded: the newest openai 3.x and
    httpx2 it takes, below a known break: `bounds_for`); generation A's newest accepted pair; `next`,
    the newest pre-releases (reported, never gating). A pair already planned is not planned twice.
    `held`: TEST_TOOLS as every cell installs them (`name==version`)."""
    wanted = [("newest", newest["verifiers"], newest["renderers"]),
              (f"renderers-under-{NEWEST_KNOWN}", NEWEST_KNOWN, newest["renderers"]),
              ("generation-b-0.3", newest["verifiers-b03"], newest["renderers"]),
              ("generation-a", newest["verifiers-a"], newest["renderers-a"]),
              (NEXT, newest["verifiers-next"], newest["renderers-next"])]
    cells: list[ContractCell] = []
    for name, verifiers, renderers in wanted:
        if all((c.verifiers, c.renderers) != (verifiers, renderers) for c in cells):
            cells.append(replace(contract_cell(name, verifiers, renderers), held=held))
    return cells


@dataclass(frozen=True)
class SchemaCell:
    sglang: str
    gating: bool = True

    @property
    def served_note(self) -> str:
        """Whether the real-SGLang CPU lanes already serve this release."""
        newest_served = max(SGLANG_CHECKED_VERSIONS, key=Version)
        if self.sglang in SGLANG_CHECKED_VERSIONS:
            return "the lanes' own release"
        if Version(self.sglang) > Version(newest_served):
            return (f"newer than the lanes' {newest_served}: served on CPU only after "
                    f"`python -m e2e.sglang_cpu lock --version {self.sglang}` and `VF_SGLANG_CPU_VERSION={self.sglang} "
                    "tox -e sglang-cpu`")
        return "older than the lanes' newest"
