"""The harness program is held to this environment's versions (`adapter.episodes.harness_pins`).

Pure cases: the held program read as uv reads it (the PEP 723 block, parsed as TOML). The real uv
builds a held program in tests/contract/test_harness_environment.py, in every matrix cell.
"""

from __future__ import annotations

import importlib.metadata
import re
import textwrap
import tomllib

import pytest
from packaging.utils import canonicalize_name

from adapter.episodes import harness_pins
from adapter.episodes.harness_pins import held, host_pins, pins_for, unheld

PROGRAM = textwrap.dedent("""\
    # /// script
    # requires-python = ">=3.11"
    # dependencies = ["openai", "mcp>=1.24.0,<2", "httpx"]
    # ///
    import openai
""")
PINS = ("httpx==0.28.1", "httpx2==2.16.2", "openai==3.57.0")


def block(source: str) -> dict:
    """The PEP 723 metadata as uv reads it."""
    match = re.search(r"(?m)^# /// script\n(?P<body>(?:^#(?: .*)?\n)+?)^# ///$", source)
    assert match is not None
    return tomllib.loads("".join(line[2:] + "\n" for line in match.group("body").splitlines()))


def test_a_held_program_constrains_uv_to_the_pins_and_keeps_its_own_requirements() -> None:
    metadata = block(held(PROGRAM, PINS))
    assert metadata["tool"]["uv"]["constraint-dependencies"] == list(PINS)
    assert metadata["dependencies"] == block(PROGRAM)["dependencies"]
    assert held(PROGRAM, PINS).endswith("# ///\nimport openai\n")


@pytest.mark.parametrize("again", [(), ("openai==3.63.0",), PINS])
def test_holding_again_replaces_the_pins_and_unheld_gives_the_release_program_back(again) -> None:
    program = held(held(PROGRAM, PINS), again)
    assert program == held(PROGRAM, again)
    assert unheld(program) == PROGRAM
    assert block(program).get("tool", {}).get("uv", {}).get("constraint-dependencies", []) == list(again)


def test_a_program_with_its_own_uv_table_is_refused_not_broken() -> None:
    own = PROGRAM.replace("# ///\nimport", '# [tool.uv]\n# exclude-newer = "2026-01-01T00:00:00Z"\n# ///\nimport')
    with pytest.raises(ValueError, match=r"\[tool.uv\]"):
        held(own, PINS)


@pytest.mark.parametrize(("harness_env", "environ"), [
    pytest.param({"UV_EXCLUDE_NEWER": "2026-07-28T13:44:00Z"}, {}, id="the-harness-env"),
    pytest.param({}, {"UV_EXCLUDE_NEWER": "2026-07-28T13:44:00Z"}, id="this-process"),
])
def test_a_date_pinned_harness_keeps_its_own_resolution(harness_env, environ) -> None:
    assert pins_for(harness_env, environ) == ()


def test_host_pins_name_every_installed_distribution_at_its_version() -> None:
    pins = dict(pin.split("==", 1) for pin in pins_for({}, {}))
    for name in ("httpx", "pydantic", "packaging", "verifiers", "renderers"):
        assert pins[name] == importlib.metadata.version(name)
    assert list(pins) == sorted(pins) and all(canonicalize_name(name) == name for name in pins)


def test_hold_sets_the_program_where_verifiers_reads_it_until_its_last_release(monkeypatch) -> None:
    harness = pytest.importorskip("verifiers.v1.harnesses.null.harness")
    found = harness_pins.program_attribute(harness.NullHarness)
    assert found is not None and found[0] is harness
    # Verifiers' own program, no hold live (another test's environment may still hold it): restored after
    monkeypatch.setattr(harness_pins, "_HELD", {})
    monkeypatch.setattr(harness, found[1], unheld(getattr(harness, found[1])))
    original = getattr(harness, found[1])
    program = harness_pins.hold(harness.NullHarness, {})
    assert getattr(harness, found[1]) == program != original
    assert block(program)["tool"]["uv"]["constraint-dependencies"] == list(host_pins())
    assert harness_pins.hold(harness.NullHarness, {}) == program  # a second run's environment holds it too
    harness_pins.release(harness.NullHarness)
    assert getattr(harness, found[1]) == program  # the other still holds it
    harness_pins.release(harness.NullHarness)
    assert getattr(harness, found[1]) == original  # the last release puts Verifiers' own back


def test_a_package_the_program_pins_itself_follows_the_program_not_the_host() -> None:
    program = PROGRAM.replace('"mcp>=1.24.0,<2"', '"mcp==2.3.0"')
    pins = ("httpx==0.28.1", "mcp==2.2.0", "mcp-types==2.2.0", "openai==3.57.0", "pydantic==2.12.0")
    host = {"mcp": ["mcp-types==2.2.0", "pydantic>=2.12.0", "httpx>=0.27"]}.get
    assert harness_pins.compatible(pins, program, host) == ("httpx==0.28.1", "openai==3.57.0", "pydantic==2.12.0")
    assert harness_pins.compatible(pins, PROGRAM, host) == ("httpx==0.28.1", "openai==3.57.0", "pydantic==2.12.0")
    assert harness_pins.compatible(("mcp==1.30.0",), PROGRAM, host) == ("mcp==1.30.0",)
