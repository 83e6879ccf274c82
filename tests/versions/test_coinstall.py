"""Which verifiers fit beside SGLang in one environment (their openai pins), and what
`vf-sglang versions` says about the installed openai against the installed verifiers and sglang."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

import adapter.versions.coinstall as coinstall
import adapter.versions.gate as versions
from adapter.cli.compat import BESIDE_BEGIN, BESIDE_END, DOC_NAME, committed_table
from adapter.cli.entry import main
from adapter.versions.coinstall import (
    MILES_SGLANG,
    NO_SGLANG_NOTE,
    SGLANG_PINS,
    VERIFIERS_PINS,
    fits,
    openai_requirement,
    verifiers_beside,
)

REPO = Path(__file__).resolve().parents[2]

# What `uv pip compile` of `sglang==S verifiers==V` decides (Python 3.11, manylinux_2_34): only
# verifiers 0.2.0 resolves beside any of them; the rest fail on openai.
FITS_BESIDE = {(s.version, v.version): v.version == "0.2.0" for s in SGLANG_PINS for v in VERIFIERS_PINS}
# Renderers the gate serves with each verifiers release (so only openai can fail a fake environment).
RENDERERS = {"0.2.0": "0.1.10", "0.2.1": "0.1.10", "0.3.0": "0.1.12", "0.3.1": "0.1.12", "0.4.0": "0.1.12"}


class FakeMetadata:
    """Stands in for `importlib.metadata` in the modules: {name: (version, Requires-Dist lines)}."""

    PackageNotFoundError = metadata.PackageNotFoundError

    def __init__(self, dists: dict[str, tuple[str, list[str]]]) -> None:
        self.dists = dists

    def version(self, name: str) -> str:
        if name not in self.dists:
            raise metadata.PackageNotFoundError(name)
        return self.dists[name][0]

    def requires(self, name: str) -> list[str]:
        if name not in self.dists:
            raise metadata.PackageNotFoundError(name)
        return self.dists[name][1]


def _environment(monkeypatch, *, verifiers: str | None = "0.2.0", openai: str | None = "3.57.0",
                 sglang: str | None = None, verifiers_openai: str | None = None,
                 sglang_openai: str | None = None) -> None:
    dists: dict[str, tuple[str, list[str]]] = {}
    if verifiers is not None:
        row = {r.version: r for r in VERIFIERS_PINS}.get(verifiers)
        need = verifiers_openai if verifiers_openai is not None else (row.openai if row else "")
        dists["verifiers"] = (verifiers, [f"openai{need}", "openai-agents>=0.8.2", "datasets<6"])
        dists["renderers"] = (RENDERERS.get(verifiers, "0.1.12"), ["transformers"])
    if openai is not None:
        dists["openai"] = (openai, ["httpx<1,>=0.23.0"])
    if sglang is not None:
        row = {r.version: r for r in SGLANG_PINS}.get(sglang)
        need = sglang_openai if sglang_openai is not None else (row.openai if row else "")
        dists["sglang"] = (sglang, [f"openai{need}", "openai-harmony==0.0.4", "torch; extra == 'cuda'"])
    fake = FakeMetadata(dists)
    monkeypatch.setattr(coinstall, "metadata", fake)
    monkeypatch.setattr(versions, "metadata", fake)


def _pin(spec: str) -> str:
    return str(SpecifierSet(spec)).removeprefix("==")


# --- the table ------------------------------------------------------------------------------


@pytest.mark.parametrize("row", SGLANG_PINS + VERIFIERS_PINS, ids=lambda r: f"{r.package}-{r.version}")
def test_each_row_names_the_wheel_it_was_read_from_and_a_valid_specifier(row) -> None:
    assert row.source.startswith(f"{row.package}-{row.version}-") and row.source.endswith(".whl")
    assert str(row.specifier)  # every release pins openai somehow
    assert Requirement(f"openai{row.openai}").specifier == row.specifier


@pytest.mark.parametrize("row", [r for r in SGLANG_PINS if (REPO / "e2e/sglang_cpu/requirements"
                                                            / f"sglang-{r.version}.in").exists()],
                         ids=lambda r: r.version)
def test_sglang_rows_agree_with_the_e2e_lanes_filtered_requires_dist(row) -> None:
    lines = (REPO / "e2e/sglang_cpu/requirements" / f"sglang-{row.version}.in").read_text().splitlines()
    assert openai_requirement([line for line in lines if line and not line.startswith("#")]) == row.specifier


@pytest.mark.parametrize(("sglang", "verifiers"), sorted(FITS_BESIDE))
def test_only_verifiers_020_fits_beside_each_sglang(sglang, verifiers) -> None:
    s = next(r for r in SGLANG_PINS if r.version == sglang)
    v = next(r for r in VERIFIERS_PINS if r.version == verifiers)
    assert fits(s.specifier, v.specifier) is FITS_BESIDE[(sglang, verifiers)]


def test_the_miles_image_sglang_leaves_only_verifiers_020() -> None:
    miles = next(r for r in SGLANG_PINS if r.version == MILES_SGLANG)
    fit, unfit = verifiers_beside(miles.specifier)
    assert [r.version for r in fit] == ["0.2.0"]
    assert [r.version for r in unfit] == ["0.2.1", "0.3.0", "0.3.1", "0.4.0", "0.4.1.dev86"]


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("==2.6.1", ">=2.9.0", False),
    ("==2.8.0", ">=1.108.1", True),
    (">=2.9.0", "==2.6.1", False),
    ("==2.8.0", "<3.0.0,>=2.54.0", False),
    ("===2.6.1", ">=2", True),
    ("==2.6.1", "", True),
    ("==2.6.1", "==2.8.0", False),
    (">=1", "<3", None),  # neither pins one version: a resolver decides
    ("==2.*", ">=2.9", None),
])
def test_fits_is_decided_by_an_exact_pin_and_left_to_a_resolver_otherwise(a, b, expected) -> None:
    assert fits(SpecifierSet(a), SpecifierSet(b)) is expected


@pytest.mark.parametrize(("requires", "expected"), [
    (["openai==2.6.1", "openai-harmony==0.0.4"], "==2.6.1"),
    (["openai<3.0.0,>=2.54.0"], "<3.0.0,>=2.54.0"),
    (["OpenAI[realtime]>=2.9.0"], ">=2.9.0"),
    (["openai>=2; python_version >= '3'", "openai<3"], "<3,>=2"),
    (["openai>=2.9.0; extra == 'dev'"], None),
    (["openai-agents>=0.8.2"], None),
    (["not a requirement ((", "openai>=1.108.1"], ">=1.108.1"),
    ([], None),
    (None, None),
])
def test_openai_requirement_reads_requires_dist_without_extras(requires, expected) -> None:
    assert openai_requirement(requires) == (SpecifierSet(expected) if expected is not None else None)


# --- `vf-sglang versions` against fake installed distributions --------------------------------


def test_versions_reports_openai_conflicting_with_installed_sglang(monkeypatch, capsys) -> None:
    _environment(monkeypatch, openai="3.57.0", sglang="0.5.16")
    assert main(["versions"]) == 0  # information: the adapter never imports sglang
    out = capsys.readouterr().out
    assert "openai: 3.57.0" in out
    assert "verifiers 0.2.0 needs openai>=1.108.1: ok" in out
    assert "sglang 0.5.16 needs openai==2.6.1: CONFLICT with the installed openai" in out
    assert ("beside sglang 0.5.16 in one environment: verifiers 0.2.0; not 0.2.1/0.3.0/0.3.1 (needs openai>=2.9.0), "
            "0.4.0/0.4.1.dev86 (needs openai<3.0.0,>=2.54.0)") in out
    assert "broken:" not in out


def test_versions_reports_openai_at_sglangs_pin_as_ok(monkeypatch, capsys) -> None:
    _environment(monkeypatch, openai="2.8.0", sglang="0.5.23")
    assert main(["versions"]) == 0
    out = capsys.readouterr().out
    assert "sglang 0.5.23 needs openai==2.8.0: ok" in out and "CONFLICT" not in out and "conflict:" not in out


def test_versions_reads_the_installed_sglangs_pin_not_the_table(monkeypatch, capsys) -> None:
    _environment(monkeypatch, openai="2.10.0", sglang="0.5.99", sglang_openai="==2.10.0")
    assert main(["versions"]) == 0
    out = capsys.readouterr().out
    assert "sglang 0.5.99 needs openai==2.10.0: ok" in out
    assert "beside sglang 0.5.99 in one environment: verifiers 0.2.0, 0.2.1, 0.3.0, 0.3.1; not 0.4.0" in out


def test_versions_without_sglang_says_the_adapter_needs_none_and_prints_the_table(monkeypatch, capsys) -> None:
    _environment(monkeypatch, sglang=None)
    assert main(["versions"]) == 0
    out = capsys.readouterr().out
    assert NO_SGLANG_NOTE in out
    for row in SGLANG_PINS:
        assert f"  sglang {row.version} (openai{row.specifier}): verifiers 0.2.0; not " in out


def test_versions_fails_when_openai_is_outside_the_installed_verifiers_requirement(monkeypatch, capsys) -> None:
    _environment(monkeypatch, verifiers="0.3.1", openai="2.6.1", sglang="0.5.16")
    assert main(["versions"]) == 1
    out = capsys.readouterr().out
    assert "generation: B" in out  # the gate passes: openai alone breaks it
    assert "verifiers 0.3.1 needs openai>=2.9.0: CONFLICT with the installed openai" in out
    assert "conflict: the installed verifiers 0.3.1 (openai>=2.9.0) and sglang 0.5.16 (openai==2.6.1)" in out
    assert "broken: verifiers 0.3.1 needs openai>=2.9.0, openai 2.6.1: pip install 'openai>=2.9.0' in an " \
           "environment without sglang" in out


def test_versions_fails_when_verifiers_has_no_openai(monkeypatch, capsys) -> None:
    _environment(monkeypatch, openai=None)
    assert main(["versions"]) == 1
    out = capsys.readouterr().out
    assert "openai: not installed" in out
    assert "broken: verifiers 0.2.0 needs openai>=1.108.1, openai is not installed: pip install" in out


def test_versions_keeps_the_gates_refusal_and_its_exit_status(monkeypatch, capsys) -> None:
    _environment(monkeypatch, verifiers=None)
    assert main(["versions"]) == 1
    out = capsys.readouterr().out
    assert "refused: verifiers is not installed" in out and "openai: 3.57.0" in out and "broken:" not in out


@pytest.mark.parametrize(("sglang", "verifiers"), sorted(FITS_BESIDE))
def test_versions_over_the_pin_table_with_openai_at_sglangs_pin(monkeypatch, capsys, sglang, verifiers) -> None:
    """Each verifiers beside each SGLang, openai at SGLang's pin (a forced install where they do not fit)."""
    s = next(r for r in SGLANG_PINS if r.version == sglang)
    _environment(monkeypatch, verifiers=verifiers, openai=_pin(s.openai), sglang=sglang)
    fit = FITS_BESIDE[(sglang, verifiers)]
    assert main(["versions"]) == (0 if fit else 1)
    out = capsys.readouterr().out
    assert f"sglang {sglang} needs openai{s.specifier}: ok" in out
    assert ("conflict: the installed verifiers" in out) is not fit
    assert ("broken: verifiers" in out) is not fit


# --- the adapter's own environment, the docs, and the real command --------------------------


def test_the_adapter_pins_no_openai_of_its_own() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if Requirement(d).name.lower() == "openai"]
    assert openai_requirement(metadata.requires("vf-sglang")) is None


def test_compatibility_doc_says_which_verifiers_fit_beside_sglang() -> None:
    text = (REPO / DOC_NAME).read_text()
    assert committed_table(text, BESIDE_BEGIN, BESIDE_END) == coinstall.render_table(), \
        "run `uv run vf-sglang compat --write`"


def test_readme_version_table_says_which_verifiers_fit_beside_sglang() -> None:
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Supported versions", 1)[1].split("\n\n", 2)[2].split("\n\n", 1)[0].splitlines()
    header = [c.strip() for c in table[0].strip("|").split("|")]
    column = header.index("beside SGLang in one environment")
    seen: dict[str, bool] = {}
    for line in table[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        for part in cells[0].split(" / "):
            if match := re.match(r"\d+\.\d+\.\d+(?:\.dev\d+)?", part):
                seen[match.group(0)] = cells[column].startswith("yes")
    assert seen == {v.version: all(FITS_BESIDE[(s.version, v.version)] for s in SGLANG_PINS) for v in VERIFIERS_PINS}
    assert f"Miles' image (SGLang {MILES_SGLANG})" in readme and "only verifiers 0.2.0 installs" in readme


def test_real_versions_command_in_the_projects_environment() -> None:
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.version("sglang")  # the adapter's environment holds no sglang
    script = Path(sys.executable).with_name("vf-sglang")
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "adapter.cli"]
    done = subprocess.run([*argv, "versions"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"openai: {metadata.version('openai')}\n" in done.stdout
    assert f"verifiers {metadata.version('verifiers')} needs openai" in done.stdout and ": ok\n" in done.stdout
    assert NO_SGLANG_NOTE in done.stdout
    assert "  sglang 0.5.16 (openai==2.6.1): verifiers 0.2.0; not " in done.stdout
