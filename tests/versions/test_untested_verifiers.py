"""Trying a newer release on purpose: with VF_SGLANG_ALLOW_UNTESTED_VERIFIERS=1
a verifiers newer than the newest known (same major) runs as the newest known generation, with a
warning that names the release and says it is untested; it never accepts a pair the gate knows to
be broken, nor a new major."""

from __future__ import annotations

import logging

import pytest

import adapter.versions.gate as versions
from adapter.cli.entry import main
from adapter.errors import UnsupportedVersionError
from adapter.versions.gate import ALLOW_UNTESTED_ENV, NEWEST_KNOWN, decide, installed_decision, require_supported


def _install(monkeypatch: pytest.MonkeyPatch, verifiers: str, renderers: str) -> None:
    monkeypatch.setattr(versions, "_installed", lambda name: {"verifiers": verifiers, "renderers": renderers}.get(name))
    # a fresh once-per-process memory for this test, the process's own restored afterwards
    monkeypatch.setattr(versions, "_WARNED", set())


@pytest.mark.parametrize("verifiers", ["0.4.1", "0.4.7.dev1", "0.5.0", "0.9.3"])
def test_opt_in_runs_a_newer_release_as_the_newest_generation_with_a_warning(verifiers: str) -> None:
    decision = decide(verifiers, "0.1.12", allow_untested=True)
    assert decision.supported and decision.generation == "B"
    assert decision.warning is not None
    assert verifiers in decision.warning and "untested" in decision.warning and NEWEST_KNOWN in decision.warning
    assert ALLOW_UNTESTED_ENV in decision.warning


@pytest.mark.parametrize(("verifiers", "renderers", "expected"), [
    ("0.2.0", "0.1.11", "breaks verifiers 0.2.0"),  # a known break stays refused
    ("0.2.1", "0.1.12", "breaks verifiers 0.2.1"),
    ("0.3.1", "0.1.9", "needs renderers >= 0.1.10"),
    ("0.4.1", "0.1.10", "runs untested as 0.4.0, which needs renderers >= 0.1.12"),  # the newest known's floor
    ("0.1.9", "0.1.10", "predates the V1 API"),
    ("1.0.0", "0.1.12", "new major release"),
])
def test_opt_in_never_un_refuses_what_the_gate_refuses(verifiers: str, renderers: str, expected: str) -> None:
    decision = decide(verifiers, renderers, allow_untested=True)
    assert not decision.supported and expected in (decision.reason or "")
    if verifiers != "0.4.1":
        assert decision.reason == decide(verifiers, renderers).reason


def test_opt_in_leaves_known_releases_as_they_are() -> None:
    for verifiers, renderers in versions.PROVEN:
        assert decide(verifiers, renderers, allow_untested=True) == decide(verifiers, renderers)


def test_opt_in_still_needs_transformers() -> None:
    decision = decide("0.4.1", "0.1.12", has_transformers=False, allow_untested=True)
    assert not decision.supported and "pip install transformers" in (decision.reason or "")


@pytest.mark.parametrize(("value", "allowed"), [("1", True), ("true", True), ("YES", True), ("0", False),
                                                ("", False), ("no", False)])
def test_the_gate_reads_the_opt_in_from_the_environment(monkeypatch, value: str, allowed: bool) -> None:
    _install(monkeypatch, "0.4.1", "0.1.12")
    monkeypatch.setenv(ALLOW_UNTESTED_ENV, value)
    assert installed_decision().supported is allowed


def test_without_the_opt_in_a_newer_release_is_a_typed_refusal(monkeypatch) -> None:
    _install(monkeypatch, "0.4.1", "0.1.12")
    monkeypatch.delenv(ALLOW_UNTESTED_ENV, raising=False)
    with pytest.raises(UnsupportedVersionError, match=ALLOW_UNTESTED_ENV):
        require_supported()


def test_require_supported_logs_the_warning_once(monkeypatch, caplog) -> None:
    _install(monkeypatch, "0.4.1", "0.1.12")
    monkeypatch.setenv(ALLOW_UNTESTED_ENV, "1")
    with caplog.at_level(logging.WARNING, logger="adapter.versions.gate"):
        assert require_supported() == "B"
        assert require_supported() == "B"
    warnings = [r.getMessage() for r in caplog.records if r.name == "adapter.versions.gate"]
    assert len(warnings) == 1 and "verifiers 0.4.1" in warnings[0] and "untested" in warnings[0]


def test_require_supported_warns_once_per_untested_version(monkeypatch, caplog) -> None:
    monkeypatch.setenv(ALLOW_UNTESTED_ENV, "1")
    _install(monkeypatch, "0.4.1", "0.1.12")
    with caplog.at_level(logging.WARNING, logger="adapter.versions.gate"):
        require_supported()
        newer = {"verifiers": "0.4.2", "renderers": "0.1.12"}
        monkeypatch.setattr(versions, "_installed", newer.get)
        require_supported()
        require_supported()
    warnings = [r.getMessage() for r in caplog.records if r.name == "adapter.versions.gate"]
    assert [("verifiers 0.4.1" in w, "verifiers 0.4.2" in w) for w in warnings] == [(True, False), (False, True)]


def test_cli_versions_prints_the_untested_warning(monkeypatch, capsys) -> None:
    _install(monkeypatch, "0.4.1", "0.1.12")
    monkeypatch.setenv(ALLOW_UNTESTED_ENV, "1")
    main(["versions"])  # the exit status also reports the installed openai's fit, which is not this test's
    out = capsys.readouterr().out
    assert "generation: B" in out
    assert "warning: verifiers 0.4.1 is untested: it is newer than the newest release this adapter knows (0.4.0)" in out
