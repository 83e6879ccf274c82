"""Each dependency's gate rule, pin and lanes: read where the pins live, and docs/versions.md's table."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

from adapter.cli.compat import NEWEST_BEGIN, NEWEST_END, NEWEST_PENDING, render_doc, with_newest_section
from tools.canary.releases import ResolveError, pinned_version
from tools.canary.rules import RULES, current_pin, markdown_table

REPO = Path(__file__).resolve().parents[2]


def _tox_envs() -> set[str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(REPO / "tox.ini")
    envs = set()
    for section in parser.sections():
        if section.startswith("testenv:"):
            name = section.removeprefix("testenv:")
            group = re.fullmatch(r"(.*)\{(.*)\}", name)
            envs |= {group.group(1) + part for part in group.group(2).split(",")} if group else {name}
    return envs


def test_the_versions_doc_shows_the_bump_rules_as_the_code_holds_them() -> None:
    assert markdown_table() in (REPO / "docs" / "versions.md").read_text(), \
        "paste tools.canary.rules.markdown_table() into docs/versions.md"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.package)
def test_every_lane_a_bump_names_is_a_tox_lane(rule) -> None:
    lanes = {lane for entry in rule.lanes for lane in entry.split(",")}
    assert lanes <= _tox_envs()


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.package)
def test_every_pin_is_read_from_where_it_lives(rule) -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", current_pin(rule.package)), rule.package


def test_a_resolution_is_one_pin() -> None:
    assert pinned_version("verifiers==0.4.0\n", "verifiers") == "0.4.0"
    with pytest.raises(ResolveError, match="printed 0 pins"):
        pinned_version("", "verifiers")


def test_compat_write_carries_the_canarys_section_over() -> None:
    fresh = render_doc()
    assert f"{NEWEST_BEGIN}\n{NEWEST_PENDING}\n{NEWEST_END}" in fresh
    written = with_newest_section(fresh, "| verifiers | 0.4.0 |")
    assert "| verifiers | 0.4.0 |" in render_doc(existing=written)
    assert render_doc(existing=written).count(NEWEST_BEGIN) == 1
