"""Runs the canary's cells: a fresh uv venv per contract cell, the sglang wheel for the schema checks.

Each run writes a JUnit report (`junit.read` takes the first failing check from it) and a log
beside it under the run directory; every subprocess has a deadline.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from e2e.sglang_cpu.uvcmd import uv_env, uv_executable
from tools.canary.cells import ContractCell
from tools.canary.junit import Outcome, read

REPO = Path(__file__).resolve().parents[2]
CONTRACT_REQUIREMENTS = REPO / "e2e" / "requirements-contract.txt"
INSTALL_TIMEOUT_S = 900
TEST_TIMEOUT_S = 900
# the schema lane's own coverage check (every version the adapter names): not the canary's question
LANE_COVERAGE_TEST = "tests/conformance/test_sglang_schema.py::test_the_lane_checks_every_version_the_adapter_names"


@dataclass(frozen=True)
class CellResult:
    name: str
    outcome: Outcome | None  # None: not run here
    installed: Mapping[str, str] = field(default_factory=dict)
    judged_by: str | None = None  # the matrix cell beside this run that installs exactly `installed`


def _run(argv: Sequence[str], log: Path, *, env: Mapping[str, str], timeout: float, cwd: Path = REPO) -> int:
    """Run `argv` with its output appended to `log`; the exit status (124 on the deadline)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        try:
            return subprocess.run(list(argv), cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            out.write(f"killed at the {timeout:.0f} s deadline\n")
            return 124


def _freeze(python: Path) -> dict[str, str]:
    done = subprocess.run([uv_executable(), "pip", "freeze", "--python", str(python)], env=uv_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    pins = (line.split("==", 1) for line in done.stdout.splitlines() if "==" in line)
    return {canonicalize_name(name): version.strip() for name, version in pins}


def _links(find_links: Sequence[Path]) -> list[str]:
    return [arg for directory in find_links for arg in ("--find-links", str(directory))]


def run_contract_cell(cell: ContractCell, run_dir: Path, *, find_links: Sequence[Path] = (),
                      exitfirst: bool = False, beside: Mapping[str, Mapping[str, str]] | None = None) -> CellResult:
    """A venv with exactly the cell's pair (+ the contract requirements), then tests/contract
    (`exitfirst`: up to the first failing check only). `beside`: the pinned sets (matrix cell →
    name → version) of the matrix cells this CI run runs beside the canary; a cell that installed
    exactly one of them is judged by that cell, which runs the same suite on the same packages,
    instead of a second time here."""
    if not cell.runs:
        return CellResult(cell.name, None)
    here = run_dir / cell.name
    venv, log, report = here / "venv", here / "log.txt", here / "junit.xml"
    report.unlink(missing_ok=True)
    uv, env = uv_executable(), {**uv_env(), "UV_COMPILE_BYTECODE": "0"}
    python = venv / "bin" / "python"
    if _run([uv, "venv", "--clear", "--quiet", "--python", sys.executable, str(venv)], log, env=env,
            timeout=INSTALL_TIMEOUT_S) != 0:
        return CellResult(cell.name, Outcome(0, 1, f"install: could not create a venv (see {log})"))
    # No bytecode compiled at install: the suite imports a small part of a cell (the matrix cells'
    # measure, tox.ini); Python writes what it imports, once, and the cell's later processes read it.
    install = [uv, "pip", "install", "--python", str(python), "--quiet", *_links(find_links),
               "-r", str(CONTRACT_REQUIREMENTS), *cell.requirements]
    if _run(install, log, env=env, timeout=INSTALL_TIMEOUT_S) != 0:
        return CellResult(cell.name, Outcome(0, 1, f"install: `pip install {' '.join(cell.requirements)}` does not "
                                                   f"resolve or install (see {log})"))
    installed = _freeze(python)
    same = next((name for name, pins in (beside or {}).items() if pins == installed), None)
    if same is not None and not cell.env:  # a cell run past the gate (opt-in) is never a matrix cell's set
        return CellResult(cell.name, None, installed, judged_by=same)
    test_env = {**env, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "", **cell.env}
    _run([str(python), "-m", "adapter.cli", "versions"], log, env=test_env, timeout=120)
    _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
          f"--junitxml={report}", *(["--exitfirst"] if exitfirst else []), "tests/contract"], log, env=test_env,
         timeout=TEST_TIMEOUT_S)
    return CellResult(cell.name, read(report), installed)


def run_schema_cell(version: str, run_dir: Path, *, find_links: Sequence[Path] = ()) -> CellResult:
    """sglang==version's wheel (`--no-deps`, its own directory), then the schema checks against it,
    in this interpreter (the lane's env: torch for the reference engine, msgspec for SamplingParams)."""
    here = run_dir / f"sglang-{version}"
    tree, log, report = here / "tree", here / "log.txt", here / "junit.xml"
    report.unlink(missing_ok=True)
    env = uv_env()
    install = [uv_executable(), "pip", "install", "--quiet", "--no-deps", "--python", sys.executable,
               *_links(find_links), "--target", str(tree), f"sglang=={version}"]
    if _run(install, log, env=env, timeout=INSTALL_TIMEOUT_S) != 0:
        return CellResult(f"sglang-{version}", Outcome(0, 1, f"install: the sglang {version} wheel (see {log})"))
    test_env = {**os.environ, "VF_SGLANG_TREES": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "sglang_schema", f"--junitxml={report}",
          "--deselect", LANE_COVERAGE_TEST, "tests/conformance/test_sglang_schema.py"], log, env=test_env,
         timeout=TEST_TIMEOUT_S)
    return CellResult(f"sglang-{version}", read(report), {"sglang": version})
