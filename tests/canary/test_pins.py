"""Each matrix cell installs under its transitive pins (`tools.canary.pins`): what it proves does not
change with the day it runs, and no cell is pinned into a co-install the gate refuses."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from adapter.versions.breaks import PACKAGES
from adapter.versions.gate import decide
from tests.versions.test_refusals import _contract_cells
from tools.canary.cells import TEST_TOOLS
from tools.canary.pins import held_test_tools, known_break_bounds, pinned, pins_file
from tools.ci.lanes import MATRIX

REPO = Path(__file__).resolve().parents[2]
CONTRACT = REPO / "e2e" / "requirements-contract.txt"


def _direct(path: Path) -> list[str]:
    return [canonicalize_name(Requirement(line).name) for line in path.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("cell", MATRIX)
def test_a_cell_installs_under_pins_that_hold_its_own_pair_and_every_contract_requirement(cell: str) -> None:
    pins = pinned(pins_file(cell).read_text())
    exact = _contract_cells()[cell]
    assert {name: pins[name] for name in exact} == exact, f"{pins_file(cell).name} disagrees with tox.ini's {cell}"
    assert set(_direct(CONTRACT)) <= set(pins), "a contract requirement is left to the day the cell runs"


@pytest.mark.parametrize("cell", MATRIX)
def test_no_cell_is_pinned_into_a_co_install_the_gate_refuses(cell: str) -> None:
    pins = pinned(pins_file(cell).read_text())
    decision = decide(pins["verifiers"], pins["renderers"], beside={name: pins.get(name) for name in PACKAGES})
    assert decision.supported, decision.reason


def test_every_matrix_cell_reads_its_pins_file_in_tox() -> None:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    section = next(s for s in tox.sections() if s.startswith("testenv:contract-vf"))
    assert "-c{toxinidir}/e2e/pins/{envname}.txt" in tox[section]["deps"].split()
    assert "-c{toxinidir}/e2e/pins/contract-vf040.txt" in tox["testenv:e2e-vf040"]["deps"].split()


@pytest.mark.parametrize(("deps", "bounds"), [
    (["-r x.txt", "verifiers==0.3.1", "renderers==0.1.12"], ("httpx2<2.17",)),
    (["verifiers==0.4.0", "renderers==0.1.12"], ()),
    (["verifiers==0.2.0", "mcp>=1.14.1,<2"], ()),
])
def test_a_cells_pins_keep_its_verifiers_clear_of_known_breaks(deps: list[str], bounds: tuple[str, ...]) -> None:
    assert known_break_bounds(deps) == bounds


def test_the_canary_leaves_cells_to_the_matrix_only_in_a_run_that_runs_the_matrix() -> None:
    from tools.canary.pins import sets_beside

    assert sets_beside("") == {} and sets_beside("canary") == {} and sets_beside("canary,matrix-x") == {}
    beside = sets_beside("e2e,canary,matrix")
    assert list(beside) == list(MATRIX)
    assert beside["contract-vf040"]["verifiers"] == "0.4.0" and beside["contract-vf031"]["verifiers"] == "0.3.1"


def test_the_canary_holds_the_tests_own_tools_at_the_version_every_matrix_cell_pins() -> None:
    """A canary cell whose other packages are a matrix cell's pins installs exactly that cell's set,
    so the matrix cell judges it (`run_contract_cell(beside=...)`): true only where every pins file
    agrees with the held version."""
    held = dict(line.split("==", 1) for line in held_test_tools())
    assert sorted(held) == sorted(TEST_TOOLS)
    for cell in MATRIX:
        pins = pinned(pins_file(cell).read_text())
        assert {name: pins[name] for name in held} == held, f"{pins_file(cell).name}: python -m tools.canary pins"


def test_a_tool_the_pins_disagree_on_is_held_at_the_newest_of_them(tmp_path, monkeypatch) -> None:
    import tools.canary.pins as pins_module

    for cell, version in (("old", "6.100.0"), ("new", "6.170.29"), ("other", "6.99.1")):
        (tmp_path / f"{cell}.txt").write_text(f"# pins\nhypothesis=={version}\nhttpx==0.28.1\n")
    monkeypatch.setattr(pins_module, "PINS_DIR", tmp_path)
    assert held_test_tools(("old", "new", "other", "absent")) == ("hypothesis==6.170.29",)
    assert held_test_tools(("absent",)) == ("hypothesis",), "no pins file names it: the newest"
