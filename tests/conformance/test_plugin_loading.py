"""The conformance layer is loaded by name only: the package registers no pytest11 entry point, so
installing vf-sglang changes no other project's test run (no fixtures, options or respx mockers
appear in it uninvited), and `-p conformance.plugin` gives a project the fixtures. The wheel lane
checks the built wheel's own metadata too (`.ci/wheel-check`)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBE = "def test_probe(sglang_mock):\n    assert sglang_mock.url.startswith('http')\n"


def test_the_package_registers_no_pytest_entry_point() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "pytest11" not in project.get("entry-points", {})


def _pytest_in_another_project(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in `project` (no conftest, no ini: rootdir is that folder), with the checkout importable
    as an installed package would be."""
    (project / "test_probe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "test_probe.py"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=120)


def test_another_project_gets_the_fixtures_only_when_it_names_the_plugin(tmp_path: Path) -> None:
    uninvited = _pytest_in_another_project(tmp_path)
    assert uninvited.returncode == 1, uninvited.stdout[-2000:] + uninvited.stderr[-2000:]
    assert "fixture 'sglang_mock' not found" in uninvited.stdout

    named = _pytest_in_another_project(tmp_path, "-p", "conformance.plugin")
    assert named.returncode == 0, named.stdout[-2000:] + named.stderr[-2000:]
    assert "1 passed" in named.stdout
