"""The version gate: every verifiers/renderers pair maps to a generation or a refusal that
names the reason and the fix."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.cli.entry import main
from adapter.errors import UnsupportedVersionError
from adapter.versions.gate import decide, installed_decision, require_supported

# (verifiers, renderers, transformers installed) → generation, or a text the refusal contains
CASES = [
    ("0.2.0", "0.1.10", True, "A"),
    ("0.2.0", "0.1.8", True, "A"),
    ("0.2.1", "0.1.9", True, "A"),
    ("0.2.0", "0.1.11", True, "0.1.11+"),
    ("0.2.1", "0.1.12", True, "renderers>=0.1.8,<0.1.11"),
    ("0.2.0", "0.1.7", True, "older than 0.1.8"),
    ("0.2.0", "0.1.10", False, "pip install transformers"),
    ("0.3.0", "0.1.9", True, "B"),
    ("0.3.0", "0.1.8", True, "renderers >= 0.1.9"),
    ("0.3.1", "0.1.12", True, "B"),
    ("0.3.1", "0.1.9", True, "renderers >= 0.1.10"),
    ("0.4.0", "0.1.12", True, "B"),
    ("0.4.0", "0.1.10", True, "renderers >= 0.1.12"),
    ("0.4.0", "0.1.12", False, "pip install transformers"),
    ("0.4.1", "0.1.12", True, "newer than the newest release"),
    ("0.1.9", "0.1.10", True, "predates the V1 API"),
    (None, "0.1.10", True, "verifiers is not installed"),
    ("0.2.0", None, True, "renderers is not installed"),
    ("0.2.0.post1", "0.1.10.post1", True, "A"),
    ("0.2.0.dev5", "0.1.10", True, "verifiers 0.2.0.dev5 is an unproven pre-release"),
    ("0.4.0", "0.1.13.dev17", True, "renderers 0.1.13.dev17 is an unproven pre-release"),
    ("0.4.1.dev85", "0.1.13.dev17", True, "are each an unproven pre-release"),
    ("0.4.1.dev86", "0.1.13.dev17", True, "B"),
    ("0.4.1.dev86", "0.1.13.dev17", False, "pip install transformers"),
]


@pytest.mark.parametrize(("verifiers", "renderers", "transformers", "expected"), CASES)
def test_gate(verifiers, renderers, transformers, expected) -> None:
    decision = decide(verifiers, renderers, has_transformers=transformers)
    if expected in ("A", "B"):
        assert decision.supported and decision.generation == expected
    else:
        assert not decision.supported
        assert expected in decision.reason
        assert "pip install" in decision.reason  # every refusal says what to do


VERSIONS = st.builds(lambda parts, suffix: ".".join(map(str, parts)) + suffix,
                     st.lists(st.integers(0, 5), min_size=1, max_size=4),
                     st.sampled_from(["", ".dev3", ".post1", "rc1", ".dev86", ".dev17"]))


@given(VERSIONS, VERSIONS, st.booleans(), st.booleans())
def test_the_gate_serves_a_generation_it_has_or_refuses_with_a_fix(verifiers: str, renderers: str,
                                                                   transformers: bool, untested: bool) -> None:
    decision = decide(verifiers, renderers, has_transformers=transformers, allow_untested=untested)
    if decision.supported:
        assert decision.generation in ("A", "B")
    else:
        assert "pip install" in (decision.reason or "")


def test_the_locked_set_is_generation_a() -> None:
    assert installed_decision().generation == "A"
    assert require_supported() == "A"


def test_refusal_is_a_typed_error(monkeypatch) -> None:
    import adapter.versions.gate as versions

    monkeypatch.setattr(versions, "_installed", lambda name: {"verifiers": "0.2.0"}.get(name, "0.1.12"))
    with pytest.raises(UnsupportedVersionError, match=r"0\.1\.12"):
        require_supported()


def test_cli_versions_prints_the_generation(capsys) -> None:
    assert main(["versions"]) == 0
    out = capsys.readouterr().out
    assert "verifiers: 0.2.0" in out and "renderers: 0.1.10" in out and "generation: A" in out


def test_cli_versions_prints_the_refusal(monkeypatch, capsys) -> None:
    import adapter.versions.gate as versions

    monkeypatch.setattr(versions, "_installed", lambda name: {"verifiers": "0.2.0"}.get(name, "0.1.12"))
    assert main(["versions"]) == 1
    assert "refused: renderers 0.1.12 breaks verifiers 0.2.0" in capsys.readouterr().out


# (verifiers, httpx2 installed beside it) → served, or refused naming the fix (adapter/versions/breaks.py)
BESIDE = [
    ("0.3.1", "2.17.0", False),
    ("0.3.0", "2.18.1", False),
    ("0.3.1", "2.16.2", True),
    ("0.3.1", None, True),
    ("0.4.0", "2.17.0", True),
    ("0.2.0", "2.17.0", True),
]


@pytest.mark.parametrize(("verifiers", "httpx2", "served"), BESIDE)
def test_verifiers_0_3_beside_httpx2_2_17_is_refused_before_any_episode_naming_the_fix(
        verifiers, httpx2, served) -> None:
    renderers = "0.1.10" if verifiers.startswith("0.2.") else "0.1.12"
    decision = decide(verifiers, renderers, beside={"httpx2": httpx2})
    assert decision.supported is served
    if not served:
        assert f"httpx2 {httpx2} breaks verifiers {verifiers}" in decision.reason
        assert decision.reason.endswith('pip install "httpx2<2.17"')


def test_cli_versions_refuses_verifiers_0_3_beside_a_new_httpx2_and_names_the_fix(monkeypatch, capsys) -> None:
    import adapter.versions.gate as versions

    installed = {"verifiers": "0.3.1", "renderers": "0.1.12", "httpx2": "2.17.0"}
    monkeypatch.setattr(versions, "_installed", installed.get)
    assert main(["versions"]) == 1
    out = capsys.readouterr().out
    assert 'refused: httpx2 2.17.0 breaks verifiers 0.3.1' in out and 'pip install "httpx2<2.17"' in out
    assert 'known break: verifiers>=0.3.0,<0.4.0 with httpx2>=2.17.0 is refused; fix: pip install "httpx2<2.17"' in out


def test_the_proven_pre_release_pair_is_served_and_named_as_pre_releases(monkeypatch, capsys) -> None:
    import adapter.versions.gate as versions

    decision = decide("0.4.1.dev86", "0.1.13.dev17")
    assert decision.supported and decision.warning is None and decision.prerelease_cell == "contract-vf041dev"
    installed = {"verifiers": "0.4.1.dev86", "renderers": "0.1.13.dev17"}
    monkeypatch.setattr(versions, "_installed", installed.get)
    assert main(["versions"]) == 0
    assert "generation: B (pre-releases: the pair matrix cell contract-vf041dev proves)" in capsys.readouterr().out


@pytest.mark.parametrize(("verifiers", "renderers"), [("0.4.1.dev87", "0.1.13.dev17"), ("0.4.0", "0.1.13.dev17")])
def test_another_pre_release_runs_only_under_the_opt_in_with_a_warning(verifiers, renderers) -> None:
    assert not decide(verifiers, renderers).supported
    decision = decide(verifiers, renderers, allow_untested=True)
    assert decision.supported and "unproven pre-release" in decision.warning and decision.prerelease_cell is None
