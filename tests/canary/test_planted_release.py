"""The canary catches a break: a planted renderers 0.1.13 (0.1.12 with `parse_generate_response`
renamed), which the gate accepts under verifiers 0.4.0, fails the lane naming the check.

Runs in the canary lane (`tox -e canary` sets VF_SGLANG_CANARY_LANE): it needs the package index."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.canary.planted import PLANTED, RENAMED, plant_renderers

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.environ.get("VF_SGLANG_CANARY_LANE") != "1",
                                reason="needs the package index: run `tox -e canary` (it sets VF_SGLANG_CANARY_LANE)")


def test_a_planted_renderers_inside_the_accepted_range_fails_the_canary_naming_the_check(tmp_path: Path) -> None:
    links = plant_renderers(tmp_path / "links").parent
    argv = [sys.executable, "-m", "tools.canary", "run", "--find-links", str(links), "--cell", "newest", "--no-schema",
            "--exitfirst", "--run-dir", str(tmp_path / "run")]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    report = (tmp_path / "run" / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| renderers |"))
    assert f"| {PLANTED} |" in row and "accepted" in row and "**fail** (1 of" in row
    assert "tests/contract/" in row and RENAMED[0] in row
    assert "canary: FAIL newest: tests/contract/" in done.stderr
