"""What the canary runs for a set of newest releases, and which results fail the build."""

from __future__ import annotations

import pytest

from adapter.versions.gate import ALLOW_UNTESTED_ENV
from tools.canary.cells import DEPENDENCIES, TEST_TOOLS, SchemaCell, contract_cells
from tools.canary.junit import Outcome
from tools.canary.report import Canary, render_section
from tools.canary.runner import CellResult

TODAY = {"verifiers": "0.4.0", "renderers": "0.1.12", "openai": "3.57.0", "transformers": "5.24.0",
         "sglang": "0.5.23", "smg": "1.13.0", "verifiers-a": "0.2.1", "renderers-a": "0.1.10", "verifiers-b03": "0.3.1",
         "verifiers-next": "0.4.1.dev86", "renderers-next": "0.1.13.dev17"}
NEXT = {"next": ("0.4.1.dev86", "0.1.13.dev17", False, False, False)}  # proven: the matrix cell judges it


def _plan(**newer: str) -> dict[str, tuple[str, str, bool, bool, bool]]:
    return {c.name: (c.verifiers, c.renderers, c.runs, c.gating, c.opt_in) for c in contract_cells({**TODAY, **newer})}


@pytest.mark.parametrize(("newer", "expected"), [
    pytest.param({}, {"newest": ("0.4.0", "0.1.12", True, True, False),
                      "generation-b-0.3": ("0.3.1", "0.1.12", True, True, False),
                      "generation-a": ("0.2.1", "0.1.10", True, True, False), **NEXT}, id="today"),
    pytest.param({"renderers": "0.1.13"}, {"newest": ("0.4.0", "0.1.13", True, True, False),
                                          "generation-b-0.3": ("0.3.1", "0.1.13", True, True, False),
                                          "generation-a": ("0.2.1", "0.1.10", True, True, False), **NEXT},
                 id="a newer renderers inside the accepted range gates the build"),
    pytest.param({"verifiers": "0.4.1"}, {"newest": ("0.4.1", "0.1.12", True, False, True),
                                         "renderers-under-0.4.0": ("0.4.0", "0.1.12", True, True, False),
                                         "generation-b-0.3": ("0.3.1", "0.1.12", True, True, False),
                                         "generation-a": ("0.2.1", "0.1.10", True, True, False), **NEXT},
                 id="a verifiers the gate refuses runs past it, reported"),
    pytest.param({"verifiers": "1.0.0"}, {"newest": ("1.0.0", "0.1.12", False, False, False),
                                         "renderers-under-0.4.0": ("0.4.0", "0.1.12", True, True, False),
                                         "generation-b-0.3": ("0.3.1", "0.1.12", True, True, False),
                                         "generation-a": ("0.2.1", "0.1.10", True, True, False), **NEXT},
                 id="a new major is refused outright: not run"),
])
def test_each_newest_pair_is_run_as_the_gate_sorts_it(newer: dict[str, str], expected: dict[str, tuple]) -> None:
    assert _plan(**newer) == expected


def test_a_cell_past_the_gate_runs_with_the_opt_in_and_names_the_refusal() -> None:
    (cell, *_) = contract_cells({**TODAY, "verifiers": "0.4.1"})
    assert cell.env == {ALLOW_UNTESTED_ENV: "1"}
    assert cell.verdict.startswith(f"refused, run past the gate with {ALLOW_UNTESTED_ENV}=1: verifiers 0.4.1 is newer")


def test_generation_a_cells_install_mcp_1_and_every_cell_takes_openai_and_transformers_unpinned() -> None:
    newest, _, generation_a, _ = contract_cells(TODAY)
    assert newest.requirements == ("verifiers==0.4.0", "renderers==0.1.12", "openai", "transformers", *DEPENDENCIES,
                                   *TEST_TOOLS)
    assert "mcp>=1.14.1,<2" in generation_a.requirements
    assert "httpx2" not in " ".join(newest.requirements + generation_a.requirements)


def test_the_0_3_cell_takes_openai_unbounded_and_the_newest_httpx2_below_the_known_break() -> None:
    cell = next(c for c in contract_cells(TODAY) if c.name == "generation-b-0.3")
    assert cell.requirements == ("verifiers==0.3.1", "renderers==0.1.12", "openai", "transformers", "httpx2<2.17",
                                 *DEPENDENCIES, *TEST_TOOLS)
    assert cell.gating and cell.decision.supported


def test_every_cell_installs_the_tests_own_tools_at_the_held_versions_and_the_report_says_so() -> None:
    cells = contract_cells(TODAY, held=("hypothesis==6.170.29",))
    assert all(c.requirements[-1] == "hypothesis==6.170.29" and "hypothesis" not in c.requirements for c in cells)
    canary = Canary("2026-12-07", TODAY, [(c, CellResult(c.name, Outcome(25, 0, None), {})) for c in cells],
                    (SchemaCell("0.5.23"), CellResult("sglang-0.5.23", Outcome(40, 0, None))))
    assert "not the newest: `hypothesis==6.170.29`" in render_section(canary)


def _canary(newest_outcome: Outcome, *, verifiers: str = "0.4.0", schema: Outcome | None = None) -> Canary:
    cells = contract_cells({**TODAY, "verifiers": verifiers})
    results = [(cells[0], CellResult(cells[0].name, newest_outcome, {"openai": "2.54.0", "transformers": "5.24.0"})),
               *((c, CellResult(c.name, Outcome(25, 0, None), {})) for c in cells[1:])]
    return Canary("2026-12-02", {**TODAY, "verifiers": verifiers}, results,
                  (SchemaCell("0.5.23"), CellResult("sglang-0.5.23", schema or Outcome(40, 0, None))))


BROKEN = Outcome(30, 1, "tests/contract/test_contract.py::test_installed_renderers_accept_our_responses: Attr…")


def test_a_break_inside_the_accepted_range_fails_the_lane_naming_the_first_failing_check() -> None:
    canary = _canary(BROKEN)
    assert canary.gating_failures() == [f"newest: {BROKEN.first_failure}"]
    assert f"`{BROKEN.first_failure}`" in render_section(canary)


def test_a_break_in_a_release_the_gate_refuses_is_reported_not_failed() -> None:
    canary = _canary(BROKEN, verifiers="0.4.1")
    assert canary.gating_failures() == []
    assert "**fail** (1 of 30 checks)" in render_section(canary)


def test_a_schema_break_in_the_newest_sglang_fails_the_lane() -> None:
    broken = Outcome(40, 2, "tests/conformance/test_sglang_schema.py::x: KeyError")
    canary = _canary(Outcome(30, 0, None), schema=broken)
    assert canary.gating_failures() == ["sglang-0.5.23: tests/conformance/test_sglang_schema.py::x: KeyError"]


@pytest.mark.parametrize(("version", "note"), [("0.5.23", "the lanes' own release"),
                                               ("0.5.24", "newer than the lanes' 0.5.23")])
def test_the_sglang_row_says_whether_the_cpu_lanes_serve_the_release(version: str, note: str) -> None:
    assert SchemaCell(version).served_note.startswith(note)


def test_the_proven_pre_release_pair_is_judged_by_its_matrix_cell_not_run_twice() -> None:
    (cell,) = [c for c in contract_cells(TODAY) if c.name == "next"]
    assert not cell.runs and not cell.gating
    canary = Canary("2026-12-05", TODAY, [(cell, CellResult(cell.name, None))],
                    (SchemaCell("0.5.23"), CellResult("sglang-0.5.23", Outcome(40, 0, None))))
    assert "judged on every CI run by the matrix cell `contract-vf041dev`" in render_section(canary)


@pytest.mark.parametrize(("verifiers", "renderers", "opt_in"), [
    ("0.4.1.dev90", "0.1.13.dev20", True),  # newer pre-releases: past the gate with the opt-in
])
def test_the_next_cell_runs_the_newest_pre_releases_and_never_fails_the_build(verifiers, renderers, opt_in) -> None:
    cells = contract_cells({**TODAY, "verifiers-next": verifiers, "renderers-next": renderers})
    (cell,) = [c for c in cells if c.name == "next"]
    assert (cell.runs, cell.gating, cell.opt_in) == (True, False, opt_in)
    results = [(c, CellResult(c.name, BROKEN if c is cell else Outcome(25, 0, None), {})) for c in cells]
    canary = Canary("2026-12-05", {**TODAY, "verifiers-next": verifiers, "renderers-next": renderers}, results,
                    (SchemaCell("0.5.23"), CellResult("sglang-0.5.23", Outcome(40, 0, None))))
    assert canary.gating_failures() == []
    assert f"Next: `next` (verifiers {verifiers}, renderers {renderers}: the newest pre-releases): **FAIL**" in \
        render_section(canary)


def test_every_dependency_is_listed_with_its_newest_release_and_whether_a_cell_ran_it() -> None:
    newest = {**TODAY, **{f"dep:{name}": "9.9.9" for name in DEPENDENCIES}, "dep:httpx": "0.29.0"}
    cells = contract_cells(newest)
    results = [(c, CellResult(c.name, Outcome(25, 0, None), {"httpx": "0.29.0", "mcp": "1.30.0"})) for c in cells]
    text = render_section(Canary("2026-12-05", newest, results,
                                 (SchemaCell("0.5.23"), CellResult("sglang-0.5.23", Outcome(40, 0, None)))))
    for name in DEPENDENCIES:
        assert f"| {name} | " in text
    assert "| httpx | the wheel | 0.29.0 | 0.29.0 | " in text and text.count("| yes |") >= 1
    assert "| mcp | the wheel | 9.9.9 | 1.30.0 | " in text and "**no**: the cells' pairs allow 1.30.0" in text


def test_a_cell_that_installed_exactly_a_matrix_cells_pins_is_judged_by_that_cell_not_run_twice() -> None:
    cells = contract_cells(TODAY)
    same = {"verifiers": "0.4.0", "renderers": "0.1.12", "openai": "2.54.0"}
    results = [(cells[0], CellResult(cells[0].name, None, same, judged_by="contract-vf040")),
               *((c, CellResult(c.name, Outcome(25, 0, None), {"openai": "3.63.0"})) for c in cells[1:])]
    schema = (SchemaCell("0.5.23"), CellResult("sglang-0.5.23", Outcome(40, 0, None)))
    canary = Canary("2026-12-06", TODAY, results, schema)
    text = render_section(canary)
    assert canary.gating_failures() == [], "the matrix lane fails the run if its cell fails"
    assert "judged by the matrix cell `contract-vf040` beside it (the same 3 packages: its pins)" in text
    assert "| yes (through `contract-vf040`) |" in text
    assert "pass in every cell run here; judged in `contract-vf040` for the others" in text


@pytest.mark.parametrize(("installed", "opt_in", "runs_here"), [
    pytest.param({"verifiers": "0.4.0", "hypothesis": "6.170.27"}, False, False, id="exactly-the-pins"),
    pytest.param({"verifiers": "0.4.0", "hypothesis": "6.170.28"}, False, True, id="a-newer-release-than-the-pins"),
    pytest.param({"verifiers": "0.4.0"}, False, True, id="a-package-fewer"),
    pytest.param({"verifiers": "0.4.0", "hypothesis": "6.170.27"}, True, True, id="past-the-gate"),
])
def test_only_a_cell_whose_install_is_exactly_a_matrix_cells_pins_is_left_to_it(
        tmp_path, monkeypatch: pytest.MonkeyPatch, installed: dict[str, str], opt_in: bool, runs_here: bool) -> None:
    """The install and its freeze are faked; what is decided from them is the runner's own."""
    from dataclasses import replace

    from tools.canary import runner

    ran: list[list[str]] = []
    monkeypatch.setattr(runner, "_run", lambda argv, log, **kw: ran.append(list(argv)) or 0)
    monkeypatch.setattr(runner, "_freeze", lambda python: dict(installed))
    monkeypatch.setattr(runner, "read", lambda report: Outcome(38, 0, None))
    cell = replace(contract_cells(TODAY)[0], opt_in=opt_in)
    beside = {"contract-vf031": {"verifiers": "0.3.1"},
              "contract-vf040": {"verifiers": "0.4.0", "hypothesis": "6.170.27"}}
    result = runner.run_contract_cell(cell, tmp_path, beside=beside)
    assert any(argv[1:3] == ["-m", "pytest"] for argv in ran) == runs_here
    assert result.judged_by == (None if runs_here else "contract-vf040")
    assert result.installed == installed and (result.outcome is None) != runs_here
