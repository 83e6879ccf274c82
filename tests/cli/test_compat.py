"""docs/compatibility.md must say what the version gate decides (regenerate: vf-sglang compat --write)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from adapter.cli.compat import CELLS, DOC_NAME, committed_table, render_table
from adapter.cli.entry import main
from adapter.versions.gate import installed_decision

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / DOC_NAME


def test_committed_table_agrees_with_the_gate() -> None:
    assert committed_table(DOC.read_text()) == render_table(), "run `uv run vf-sglang compat --write`"


def test_the_installed_set_has_a_passing_row_with_a_matrix_cell() -> None:
    installed = installed_decision()
    rows = [c for c in CELLS if (c.verifiers, c.renderers) == (installed.verifiers, installed.renderers)]
    assert rows and all(c.tox_env for c in rows if not (c.openai or c.httpx2))
    assert f"| {installed.verifiers} | {installed.renderers} | — | — | pass |" in render_table()


def test_every_matrix_cell_of_tox_is_in_the_table() -> None:
    tox = (REPO / "tox.ini").read_text()
    cells = {c.tox_env for c in CELLS if c.tox_env}
    suffixes = tox.split("[testenv:contract-vf{", 1)[1].split("}", 1)[0].split(",")
    assert cells == {f"contract-vf{suffix}" for suffix in suffixes}


def test_write_goes_to_the_working_directory_never_into_the_package(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["compat", "--write"]) == 0
    written = tmp_path / "docs" / "compatibility.md"
    assert committed_table(written.read_text()) == render_table()
    assert str(written) in capsys.readouterr().out


def test_write_out_names_the_file(tmp_path) -> None:
    out = tmp_path / "nested" / "compat.md"
    result = subprocess.run([sys.executable, "-m", "adapter.cli", "compat", "--write", "--out", str(out)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert committed_table(out.read_text()) == render_table()
