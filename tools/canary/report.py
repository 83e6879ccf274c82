"""The canary's verdict and docs/compatibility.md's "newest published" section (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from adapter.versions.breaks import bounds_for
from adapter.wire.translate import SGLANG_CHECKED_VERSIONS
from tools.canary.cells import DEPENDENCIES, NEXT, RUNTIME_DEPENDENCIES, TEST_TOOLS, ContractCell, SchemaCell
from tools.canary.rules import current_pin
from tools.canary.runner import CellResult
from tools.ci.report import CANARY_NEXT

NEXT_FILE = CANARY_NEXT.name  # under the canary's run dir: the `next` cell's verdict, for docs/ci.md


@dataclass(frozen=True)
class Canary:
    date: str
    newest: Mapping[str, str]
    cells: Sequence[tuple[ContractCell, CellResult]]
    schema: tuple[SchemaCell, CellResult]

    def gating_failures(self) -> list[str]:
        """The failures that fail the lane: a gating cell that did not pass, each as one line."""
        found = []
        for cell, result in [*self.cells, self.schema]:
            if cell.gating and result.outcome is not None and not result.outcome.passed:
                found.append(f"{result.name}: {result.outcome.first_failure}")
        return found


def _result(result: CellResult) -> str:
    outcome = result.outcome
    if result.judged_by is not None:
        return (f"judged by the matrix cell `{result.judged_by}` beside it (the same {len(result.installed)} "
                "packages: its pins)")
    if outcome is None:
        return "not run"
    if outcome.passed:
        return f"pass ({outcome.tests} checks)"
    return f"**fail** ({outcome.failed} of {outcome.tests} checks)"


def _first(result: CellResult) -> str:
    outcome = result.outcome
    return f"`{outcome.first_failure}`" if outcome is not None and outcome.first_failure else "—"


def _installed(canary: Canary, package: str) -> str:
    seen = sorted({r.installed.get(package, "") for _, r in canary.cells if r.installed.get(package)})
    return ", ".join(seen) or "—"


def _row(*cells: str) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def package_rows(canary: Canary) -> list[str]:
    newest = canary.newest
    first_cell, first_result = canary.cells[0]
    rows = [_row("package", "newest published", "the lanes pin", "the gate on the newest", "canary result",
                 "first failing check")]
    rows.append("|---|---|---|---|---|---|")
    for package in ("verifiers", "renderers"):
        cell, result = next(((c, r) for c, r in canary.cells if getattr(c, package) == newest[package]),
                            (first_cell, first_result))
        rows.append(_row(package, newest[package], current_pin(package) + " (locked); matrix cells in tox.ini",
                         f"{cell.verdict} (cell `{cell.name}`)", _result(result), _first(result)))
    for package in ("openai", "transformers"):
        installed = _installed(canary, package)
        held = "" if installed == newest[package] else f"; the cells' pairs allow {installed}"
        failing = [r for _, r in canary.cells if r.outcome is not None and not r.outcome.passed]
        verdict = "not gated: each cell installs the newest its verifiers allows" + held
        elsewhere = [r.judged_by for _, r in canary.cells if r.judged_by]
        result = (f"**fail** in {', '.join(r.name for r in failing)}" if failing else "pass in every cell run"
                  + (f" here; judged in {', '.join(f'`{c}`' for c in elsewhere)} for the others" if elsewhere else ""))
        rows.append(_row(package, newest[package], current_pin(package) + " (locked)", verdict, result,
                         _first(failing[0]) if failing else "—"))
    schema_cell, schema_result = canary.schema
    checked = ", ".join(v for v in SGLANG_CHECKED_VERSIONS if v != current_pin("sglang"))
    rows.append(_row("sglang", newest["sglang"], f"{current_pin('sglang')} (served on CPU); also checked {checked}",
                     f"not gated: accepted; {schema_cell.served_note}", "schema checks: " + _result(schema_result),
                     _first(schema_result)))
    smg_pin = current_pin("smg")
    smg_note = ("the router lane's own release" if newest["smg"] == smg_pin
                else f"**untested**: newer than the router lane's {smg_pin}; bump it "
                     "(`python -m tools.canary bump smg`)")
    rows.append(_row("smg", newest["smg"], smg_pin + " (router lane)", "not gated", smg_note, "—"))
    return rows


def dependency_rows(canary: Canary) -> list[str]:
    """Every dependency of the wheel and of the conformance layer: its newest final, what the cells
    installed (each takes the newest its pair allows), the lock's."""
    rows = [_row("dependency", "of", "newest published", "installed in the cells", "locked", "newest judged"),
            "|---|---|---|---|---|---|"]
    for name in DEPENDENCIES:
        newest = canary.newest.get(f"dep:{name}", "—")
        installed = _installed(canary, name)
        judged = "yes" if newest in installed.split(", ") else f"**no**: the cells' pairs allow {installed}"
        rows.append(_row(name, "the wheel" if name in RUNTIME_DEPENDENCIES else "conformance", newest, installed,
                         current_pin(name), judged))
    return rows


def held_line(canary: Canary) -> str:
    """The tests' own tools, held at the matrix cells' pins in every cell (`cells.TEST_TOOLS`)."""
    held = next((cell.test_tools for cell, _ in canary.cells), TEST_TOOLS)
    return (f"Held in every cell at the matrix cells' pins, not the newest: {', '.join(f'`{t}`' for t in held)} "
            "(the project's own tests' tools: neither the wheel nor the conformance layer imports them; they move "
            "with `python -m tools.canary pins`).")


def next_verdict(canary: Canary) -> str:
    """One line on the `next` cell (the newest pre-releases): shown loudly, never failing the build."""
    found = [(cell, result) for cell, result in canary.cells if cell.name == NEXT]
    if not found:
        return "`next`: the newest pre-releases are a pair another cell already ran"
    cell, result = found[0]
    head = f"`next` (verifiers {cell.verifiers}, renderers {cell.renderers}: the newest pre-releases)"
    if result.outcome is None and cell.decision.prerelease_cell is not None:
        return (f"{head}: a proven pre-release pair, judged on every CI run by the matrix cell "
                f"`{cell.decision.prerelease_cell}` (docs/ci.md's matrix row)")
    if result.outcome is None:
        return f"{head}: **not run**: {cell.verdict}"
    if result.outcome.passed:
        return f"{head}: pass ({result.outcome.tests} checks); {cell.verdict}"
    return (f"{head}: **FAIL** ({result.outcome.failed} of {result.outcome.tests} checks; first: "
            f"`{result.outcome.first_failure}`): not gating, these releases are not out yet")


def _fails_the_build(cell: ContractCell, result: CellResult) -> str:
    if not cell.gating:
        return "no (reported)"
    return f"yes (through `{result.judged_by}`)" if result.judged_by else "yes"


def cell_rows(canary: Canary) -> list[str]:
    rows = [_row("cell", "verifiers", "renderers", "openai", "httpx2", "transformers", "gate", "result",
                 "fails the build"), "|---|---|---|---|---|---|---|---|---|"]
    for cell, result in canary.cells:
        bounded = bounds_for(cell.verifiers)
        bounds = "; bounded " + ", ".join(f"`{b}`" for b in bounded) if bounded else ""
        rows.append(_row(f"`{cell.name}`", cell.verifiers, cell.renderers, result.installed.get("openai", "—"),
                         result.installed.get("httpx2", "—") + bounds,
                         result.installed.get("transformers", "—"), cell.verdict, _result(result),
                         _fails_the_build(cell, result)))
    return rows


def render_section(canary: Canary) -> str:
    lines = [
        f"Written by `python -m tools.canary run --write` (`uvx --with tox-uv tox -e canary`) on {canary.date}: the "
        "newest release of each package on the package index, and what the gate and the canary say of it. A "
        "contract cell installs its verifiers/renderers pair exactly and openai/transformers unpinned, then runs "
        "tests/contract (the wire contract against the installed renderers, real episode groups, group rewards), "
        "unless the CI run it is part of runs a matrix cell pinned to exactly the packages it installed: that "
        "cell runs the same suite on them; "
        "the sglang row runs the schema checks (tests/conformance/test_sglang_schema.py) on the newest wheel. A "
        "newest release inside a range the gate accepts that fails fails the lane; a release the gate refuses is "
        "reported, run past the gate under the opt-in where one exists.", "",
        *package_rows(canary), "", *cell_rows(canary), "",
        "What the product and its test layer import, each at the newest its cell's pair allows:", "",
        *dependency_rows(canary), "", held_line(canary)]
    failures = canary.gating_failures()
    lines += ["", "Verdict: " + ("**the lane fails**: " + "; ".join(failures) if failures
                                 else "the newest releases pass every check that gates the build."),
              "", "Next: " + next_verdict(canary)]
    return "\n".join(lines)
