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


def _tracked_files() -> list[str]:
    import subprocess

    return subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()


# Files that hold `package==X` as generated text, test data or a matrix cell's own pair, never
# as a copy of the default pin.
NOT_COPIES = {"uv.lock", "docs/compatibility.md", "docs/versions.md", "README.md", "tox.ini",
              "tests/canary/test_pins.py", "tests/canary/test_rules.py", "tests/versions/test_refusals.py",
              "tests/episodes/test_harness_pins.py", "tests/sglang_cpu/test_sglang_cpu_launch.py"}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.package)
def test_bump_knows_every_copy_of_a_pin(rule) -> None:
    """Each tracked file restating today's pin is where the pin lives, a copy the rule lists (bump
    rewrites it), a compiled lock bump recompiles, or test data: a new copy fails here."""
    from tools.canary.bump import pin_pattern

    pin = current_pin(rule.package)
    pattern = pin_pattern(rule.package, pin)
    # e2e/pins and the lanes' compiled requirements (.txt) are resolutions: recompiled, not copied
    holding = {name for name in _tracked_files()
               if not name.startswith("e2e/pins/") and name.endswith((".py", ".md", ".in", ".toml", ".ini"))
               and pattern.search((REPO / name).read_text(errors="replace"))}
    home = {"pyproject.toml"} | {name for name in holding if rule.pinned == "sglang-cpu" and "/requirements/" in name}
    assert holding - home - set(rule.copies) - NOT_COPIES == set()
    assert set(rule.copies) <= holding  # every listed copy still holds the pin


def test_bump_rewrites_each_copy_and_leaves_longer_versions_alone(tmp_path) -> None:
    from tools.canary.bump import rewrite_copies
    from tools.canary.rules import Rule

    (tmp_path / "a.md").write_text("pip install smg==1.13.0\nsmg==1.13.01 xsmg==1.13.0 smg==1.13.0.\n")
    rule = Rule("smg", "tox", "", (), copies=("a.md",))
    assert rewrite_copies(rule, "1.13.0", "1.14.0", tmp_path) == ["a.md"]
    assert (tmp_path / "a.md").read_text() == "pip install smg==1.14.0\nsmg==1.13.01 xsmg==1.13.0 smg==1.14.0.\n"
    with pytest.raises(SystemExit, match=r"holds no `smg==1\.13\.0`"):
        rewrite_copies(rule, "1.13.0", "1.15.0", tmp_path)
