"""Refusals that point the right way: every refusal the version gate can give
names, as its fix, a pair the version matrix proves (a tox.ini `contract-vf*` cell installs exactly
that pair, and the gate passes it), of the refused release's own generation; a too-new release's
fix is the newest proven pair, never an older generation's.

tox.ini's cells are read with configparser and expanded as tox names them (a generative section
`contract-vf{020,020-r018}` is one env per alternative; a deps line `vf020-!r018: x` applies to an
env whose dash-separated factors hold vf020 and not r018; `a,b: x` to one holding either)."""

from __future__ import annotations

import configparser
import itertools
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from adapter.cli.compat import CELLS, render_table
from adapter.cli.entry import main
from adapter.versions.gate import (
    ALLOW_UNTESTED_ENV,
    NEWEST_KNOWN,
    PROVEN,
    PROVEN_PRERELEASES,
    VersionDecision,
    _generation_of,
    _release,
    decide,
)

REPO = Path(__file__).resolve().parents[2]
FIX = re.compile(r"pip install verifiers==(\S+) renderers==(\S+)")

# What the gate is asked, as the compat table asks it: every known release, the ones around them,
# and every renderers around each floor and break; with and without transformers and the opt-in.
VERIFIERS = (None, "0.1.9", "0.2.0", "0.2.1", "0.2.5", "0.3.0", "0.3.1", "0.3.2", "0.4.0", "0.4.0.post1",
             "0.4.1", "0.4.1.dev2", "0.5.0", "0.10.0", "1.0.0")
RENDERERS = (None, "0.1.7", "0.1.8", "0.1.9", "0.1.10", "0.1.11", "0.1.12", "0.1.13", "0.2.0")


def _expand(name: str) -> list[str]:
    """`contract-vf{020,021}` → ["contract-vf020", "contract-vf021"] (tox's generative names)."""
    parts = re.split(r"\{([^}]*)\}", name)
    choices = [[part] if i % 2 == 0 else part.split(",") for i, part in enumerate(parts)]
    return ["".join(combo) for combo in itertools.product(*choices)]


def _applies(condition: str, factors: set[str]) -> bool:
    return any(all((f[1:] not in factors) if f.startswith("!") else (f in factors) for f in alt.split("-"))
               for alt in condition.split(","))


def _contract_cells() -> dict[str, dict[str, str]]:
    """Each `contract-vf*` env of tox.ini → the exact (==) pins its deps give it, by package."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    cells: dict[str, dict[str, str]] = {}
    for section in tox.sections():
        if not section.startswith("testenv:contract-vf"):
            continue
        for env in _expand(section.removeprefix("testenv:")):
            factors, pins = set(env.split("-")), {}
            for line in tox[section]["deps"].splitlines():
                condition, _, requirement = line.rpartition(": ")
                if not requirement.strip() or requirement.startswith(("{", "-")):
                    continue
                if condition and not _applies(condition.strip(), factors):
                    continue
                req = Requirement(requirement.strip())
                exact = [spec.version for spec in req.specifier if spec.operator == "=="]
                if exact:
                    assert req.name.lower() not in pins, f"{env} pins {req.name} twice"
                    pins[req.name.lower()] = exact[0]
            cells[env] = pins
    return cells


def _proven_by_tox() -> dict[tuple[str, str], list[str]]:
    proven: dict[tuple[str, str], list[str]] = {}
    for env, pins in _contract_cells().items():
        proven.setdefault((pins["verifiers"], pins["renderers"]), []).append(env)
    return proven


def _every_refusal() -> list[tuple[tuple[object, ...], VersionDecision]]:
    asked = {(v, r, t, a) for v, r, t, a in itertools.product(VERIFIERS, RENDERERS, (True, False), (False, True))}
    asked |= {(c.verifiers, c.renderers, True, c.untested) for c in CELLS}
    decisions = [((v, r, t, a), decide(v, r, has_transformers=t, allow_untested=a))
                 for v, r, t, a in sorted(asked, key=str)]
    return [(args, d) for args, d in decisions if not d.supported]


REFUSALS = _every_refusal()


def test_the_tox_parse_sees_every_matrix_cell_with_an_exact_pair() -> None:
    cells = _contract_cells()
    assert "contract-vf040" in cells and "contract-vf020-r018" in cells and len(cells) >= 7
    for env, pins in cells.items():
        assert {"verifiers", "renderers"} <= set(pins), f"{env} must pin its verifiers and renderers exactly"
    assert cells["contract-vf020-r018"]["renderers"] == "0.1.8"
    assert cells["contract-vf020"]["renderers"] == "0.1.10"


def test_every_pair_the_gate_calls_proven_has_a_contract_cell_and_a_passing_table_row() -> None:
    assert set(PROVEN) | set(PROVEN_PRERELEASES) == set(_proven_by_tox())
    for (verifiers, renderers), cell in PROVEN_PRERELEASES.items():
        assert _proven_by_tox()[(verifiers, renderers)] == [cell]
    table = render_table()
    for verifiers, renderers in [*PROVEN, *PROVEN_PRERELEASES]:
        assert decide(verifiers, renderers).supported and decide(verifiers, renderers).warning is None
        assert any(f"| {verifiers} | {renderers} | — | — | pass | " in row and f"`{env}`" in row
                   for row in table.splitlines() for env in _proven_by_tox()[(verifiers, renderers)])


def test_every_refusal_names_a_proven_pair_as_its_fix() -> None:
    proven = _proven_by_tox()
    assert len(REFUSALS) > 100
    for args, decision in REFUSALS:
        assert decision.reason is not None
        if "pip install transformers" in decision.reason:  # the pair is fine: the fix is the missing package
            continue
        fixes = FIX.findall(decision.reason)
        assert len(fixes) == 1, f"{args}: one pair to install, got {decision.reason!r}"
        pair = fixes[0]
        assert pair in proven, f"{args}: the fix {pair} is no contract cell of tox.ini ({sorted(proven)})"
        assert decide(*pair).supported


def test_a_refusal_never_points_to_an_older_generation() -> None:
    for (verifiers, *_), decision in REFUSALS:
        fixes = FIX.findall(decision.reason or "")
        if not fixes or verifiers is None or _release(str(verifiers)) < (0, 2, 0):
            continue
        release = _release(str(verifiers))
        own = _generation_of(release) or ("B" if release > _release(NEWEST_KNOWN) else None)
        assert _generation_of(_release(fixes[0][0])) == own, (verifiers, decision.reason)


@pytest.mark.parametrize("verifiers", ["0.4.1", "0.4.1.dev2", "0.5.0", "1.0.0"])
def test_a_too_new_release_is_told_the_newest_proven_pair(verifiers: str) -> None:
    decision = decide(verifiers, "0.1.12")
    newest = max(PROVEN, key=lambda pair: (_release(pair[0]), _release(pair[1])))
    assert newest == ("0.4.0", "0.1.12")
    assert FIX.findall(decision.reason or "") == [newest]


def test_a_too_new_release_names_the_opt_in() -> None:
    assert ALLOW_UNTESTED_ENV in (decide("0.4.1", "0.1.12").reason or "")
    assert ALLOW_UNTESTED_ENV in (decide("0.5.0", "0.1.12").reason or "")


def test_a_renderers_mismatch_keeps_the_installed_verifiers_when_the_matrix_proves_it() -> None:
    assert FIX.findall(decide("0.2.1", "0.1.12").reason or "") == [("0.2.1", "0.1.10")]
    assert FIX.findall(decide("0.3.1", "0.1.9").reason or "") == [("0.3.1", "0.1.12")]
    assert FIX.findall(decide("0.4.0", None).reason or "") == [("0.4.0", "0.1.12")]


def test_cli_versions_for_a_too_new_verifiers_points_to_0_4_0(monkeypatch, capsys) -> None:
    import adapter.versions.gate as versions

    monkeypatch.delenv(ALLOW_UNTESTED_ENV, raising=False)
    monkeypatch.setattr(versions, "_installed", lambda name: {"verifiers": "0.4.1", "renderers": "0.1.12"}.get(name))
    assert main(["versions"]) == 1
    out = capsys.readouterr().out
    assert "pip install verifiers==0.4.0 renderers==0.1.12" in out and ALLOW_UNTESTED_ENV in out
    assert "verifiers==0.2.0" not in out
