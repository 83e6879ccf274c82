"""docs/compatibility.md must say what the version gate decides (regenerate: vf-sglang compat --write)."""

from __future__ import annotations

from adapter.compat import CELLS, DOC, committed_table, render_table
from adapter.versions import installed_decision


def test_committed_table_agrees_with_the_gate() -> None:
    assert committed_table(DOC.read_text()) == render_table(), "run `uv run vf-sglang compat --write`"


def test_the_installed_set_has_a_passing_row_with_a_matrix_cell() -> None:
    installed = installed_decision()
    rows = [c for c in CELLS if (c.verifiers, c.renderers) == (installed.verifiers, installed.renderers)]
    assert rows and all(c.tox_env for c in rows if not c.openai)
    assert f"| {installed.verifiers} | {installed.renderers} | — | pass |" in render_table()


def test_every_matrix_cell_of_tox_is_in_the_table() -> None:
    tox = (DOC.parent.parent / "tox.ini").read_text()
    cells = {c.tox_env for c in CELLS if c.tox_env}
    suffixes = tox.split("[testenv:contract-vf{", 1)[1].split("}", 1)[0].split(",")
    assert cells == {f"contract-vf{suffix}" for suffix in suffixes}
