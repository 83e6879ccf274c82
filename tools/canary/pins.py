"""`python -m tools.canary pins [--cell ENV]... [--check]`: the matrix cells' transitive pins.

Each tox.ini matrix cell names its verifiers/renderers pair (and the contract requirements); what
those pull in (openai, httpx2, mcp, ...) was left to the day the cell ran, so a cell's result
changed with the calendar: httpx2 2.17.0 failed every fresh run of contract-vf030/vf031 while warm
machines passed. Each cell now installs under `e2e/pins/<cell>.txt` (`-c` in its deps): every
package it resolves, pinned. This command writes those files: the cell's own deps as tox reads
them (`tox config -k deps`, the pins line left out) plus the bounds that keep its verifiers clear of
a known break (`adapter.versions.breaks`: httpx2<2.17 beside 0.3.x), compiled by `uv pip compile`
for CPython 3.11.
`--check` writes nothing and exits 1 when a file is missing or does not pin its cell's direct deps.

A cell's harness program is held to the cell's versions (`adapter.episodes.harness_pins`), so
these pins decide the harness environment too. A pin moves only here, on purpose: rerun this
command after a change of a cell's deps, and the cell's lane proves the new set.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from adapter.versions.breaks import bounds_for
from e2e.sglang_cpu.uvcmd import uv_env, uv_executable
from tools.canary.cells import TEST_TOOLS
from tools.ci.lanes import MATRIX

REPO = Path(__file__).resolve().parents[2]
PINS_DIR = REPO / "e2e" / "pins"
PYTHON = "3.11"
TIMEOUT_S = 600


def pins_file(cell: str) -> Path:
    return PINS_DIR / f"{cell}.txt"


def cell_deps(cell: str) -> list[str]:
    """The deps tox gives `cell`, as tox reads tox.ini (the `-c` pins line left out)."""
    argv = [uv_executable(), "tool", "run", "--with", "tox-uv", "tox", "config", "-e", cell, "-k", "deps"]
    done = subprocess.run(argv, cwd=REPO, env=uv_env(), capture_output=True, text=True, timeout=TIMEOUT_S, check=True)
    lines = [line.strip() for line in done.stdout.splitlines()[1:] if line.startswith("  ")]
    return [line for line in lines if not line.startswith("-c")]


def known_break_bounds(deps: Sequence[str]) -> tuple[str, ...]:
    """What keeps the cell's verifiers clear of its known breaks (`adapter.versions.breaks`): the
    gate refuses those co-installs, so a cell pinned into one would prove nothing."""
    for line in deps:
        if not line.startswith("-") and canonicalize_name(Requirement(line).name) == "verifiers":
            version = str(Requirement(line).specifier).removeprefix("==")
            return bounds_for(version)
    return ()


def compile_pins(cell: str) -> str:
    """`uv pip compile` of the cell's deps: one `name==version` line per package it installs."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / f"{cell}.in"
        deps = cell_deps(cell)
        source.write_text("\n".join([*deps, *known_break_bounds(deps)]) + "\n")
        done = subprocess.run([uv_executable(), "pip", "compile", "--quiet", "--no-header", "--no-annotate",
                               "--python-version", PYTHON, str(source)], cwd=REPO, env=uv_env(),
                              capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise SystemExit(f"pins: {cell}'s deps do not resolve: {done.stderr.strip()}")
    head = (f"# {cell}'s transitive pins (tox.ini installs the cell with -c this file).\n"
            f"# Written by `python -m tools.canary pins --cell {cell}`; do not edit by hand.\n")
    return head + done.stdout


def pinned(text: str) -> dict[str, str]:
    """name → version of a pins file."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            name, version = line.split(";", 1)[0].strip().split("==", 1)
            out[canonicalize_name(name)] = version.strip()
    return out


def sets_beside(lanes_in_run: str) -> dict[str, dict[str, str]]:
    """The pinned set of each matrix cell when the CI run the canary is part of runs the matrix too
    (`lanes_in_run`: tools.ci's comma-separated lanes, `CI_LANES_ENV`); else none. The canary
    leaves a cell whose newest set is one of these to that cell (`run_contract_cell(beside=...)`)."""
    if "matrix" not in lanes_in_run.split(","):
        return {}
    return {cell: pinned(pins_file(cell).read_text()) for cell in MATRIX if pins_file(cell).is_file()}


def held_test_tools(cells: Sequence[str] = MATRIX) -> tuple[str, ...]:
    """Each of the canary's TEST_TOOLS as every canary cell installs it: `name==version` at the version
    the matrix cells' pins give it (the newest of them, should they differ); its bare name (the
    newest) where no pins file names it."""
    sets = [pinned(pins_file(cell).read_text()) for cell in cells if pins_file(cell).is_file()]
    held = []
    for name in TEST_TOOLS:
        versions = [pins[name] for pins in sets if name in pins]
        held.append(f"{name}=={max(versions, key=Version)}" if versions else name)
    return tuple(held)


def unpinned_direct(cell: str, text: str) -> list[str]:
    """The cell's direct requirements (its tox deps, `-r` files read) its pins file leaves out."""
    names: list[str] = []
    for line in cell_deps(cell):
        if line.startswith("-r"):
            path = Path(line[2:].strip())
            names += [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        else:
            names.append(line)
    have = pinned(text)
    return [req for req in names if canonicalize_name(Requirement(req).name) not in have]


def main(args: argparse.Namespace) -> int:
    cells: Sequence[str] = args.cell or MATRIX
    failed = 0
    for cell in cells:
        path = pins_file(cell)
        if args.check:
            missing = unpinned_direct(cell, path.read_text()) if path.is_file() else ["(no file)"]
            if missing:
                print(f"pins: {path.relative_to(REPO)} does not pin {', '.join(missing)}: "
                      f"python -m tools.canary pins --cell {cell}", file=sys.stderr)
                failed += 1
            continue
        PINS_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(compile_pins(cell))
        print(f"pins: wrote {path.relative_to(REPO)} ({len(pinned(path.read_text()))} packages)")
    return 1 if failed else 0
