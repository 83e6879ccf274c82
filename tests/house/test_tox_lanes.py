"""The matrix cells install the adapter from the source tree (`package = skip`), so tox.ini's
`[contract]` deps must carry every runtime dependency of the package except the pairs each
cell pins itself. A dependency added to pyproject.toml and not there breaks every cell at
import time (seen: orjson)."""

from __future__ import annotations

import configparser
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
# Pinned per cell in tox.ini (each cell names its own releases of these).
PINNED_PER_CELL = frozenset({"verifiers", "renderers", "mcp"})


def _names(lines: list[str]) -> set[str]:
    return {Requirement(line).name.lower() for line in lines if line.strip() and not line.startswith("{")}


def test_contract_cells_install_every_runtime_dependency_of_the_package() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = _names(project["dependencies"]) - PINNED_PER_CELL
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    assert tox["contract"]["deps"].split() == ["-r{toxinidir}/e2e/requirements-contract.txt"]
    lines = (REPO / "e2e" / "requirements-contract.txt").read_text().splitlines()
    cells = _names([line for line in lines if not line.startswith("#")])
    missing = sorted(runtime - cells)
    assert not missing, (f"add {missing} to e2e/requirements-contract.txt (the matrix cells, e2e-vf040 and the "
                         "SGLang rehearsal's generation-B venv install it)")
