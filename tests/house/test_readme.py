"""The README fits on two screens and stays true: every fenced command runs as written (the
demo and the tox lanes by their `--help` or their env: each costs minutes), every lane it names
is a tox env, every document it links exists."""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 120
BUNDLED_CONFIG = ROOT / "fixtures" / "envs" / "arith-v1.toml"


def fenced_commands(text: str) -> list[str]:
    """Each shell command in the README's ```bash blocks (continuations joined, comments cut)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", "", block)
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def tox_envs() -> set[str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "tox.ini")
    envs: set[str] = set()
    for section in parser.sections():
        name = section.removeprefix("testenv:")
        if section.startswith("testenv:"):
            group = re.fullmatch(r"(.*)\{(.*)\}", name)
            envs |= {group.group(1) + part for part in group.group(2).split(",")} if group else {name}
    return envs


def vf_sglang(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("vf-sglang")
    head = [exe] if exe else [sys.executable, "-m", "adapter.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*head, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_readme_fits_on_two_screens() -> None:
    assert len(README.read_text().splitlines()) <= MAX_LINES


def test_the_readme_has_the_sections_a_newcomer_reads() -> None:
    headings = re.findall(r"^## (.+)$", README.read_text(), flags=re.M)
    assert headings[:6] == ["The two commands", "Using it from Miles", "Commands", "Test lanes",
                            "Supported versions", "Where things are"]


def test_every_fenced_command_is_one_this_project_can_run() -> None:
    """Each part of each command is a setup step (`pip install`), a tox lane that exists, or a
    `vf-sglang` call (checked below)."""
    envs = tox_envs()
    for command in fenced_commands(README.read_text()):
        for part in (p.strip() for p in command.split("&&")):
            words = shlex.split(part)
            if words[:2] == ["pip", "install"]:
                continue
            if "tox" in words:
                assert words[words.index("-e") + 1] in envs, part
            elif "vf-sglang" in words:
                continue
            else:
                pytest.fail(f"a README command no test runs: {part}")


def test_the_demo_command_answers_its_help(tmp_path: Path) -> None:
    (demo,) = [c for c in fenced_commands(README.read_text()) if "vf-sglang demo" in c]
    words = shlex.split(demo.split("&&")[-1])
    done = vf_sglang([*words[words.index("vf-sglang") + 1:], "--help"], tmp_path)
    assert done.returncode == 0 and "--groups" in done.stdout


def test_the_miles_command_runs_as_written(tmp_path: Path) -> None:
    """`vf-sglang miles-command` as the README writes it, with its `env.toml` a bundled config:
    it prints the `ray job submit` line the README promises."""
    (miles,) = [c for c in fenced_commands(README.read_text()) if "miles-command" in c]
    (tmp_path / "env.toml").write_text(BUNDLED_CONFIG.read_text())
    words = shlex.split(miles)
    done = vf_sglang(words[words.index("vf-sglang") + 1:], tmp_path)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.strip().splitlines()[-1]
    assert "ray job submit" in printed and "adapter.miles.VerifiersRolloutFn" in printed


def test_every_lane_the_readme_names_is_a_tox_env() -> None:
    text = README.read_text().split("## Test lanes", 1)[1].split("\n## ", 1)[0]
    envs = tox_envs()
    named = [name for row in re.findall(r"^\| (`.+?) \|", text, flags=re.M) for name in re.findall(r"`([^`]+)`", row)]
    assert len(named) >= 12
    for name in named:
        pattern = re.compile(name.replace("*", ".*") + "$")
        assert any(pattern.match(env) for env in envs), name


def test_every_document_the_readme_links_exists() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert links and [link for link in links if not (ROOT / link).exists()] == []


def test_e2e_readme_maps_every_lane_and_every_harness() -> None:
    from tools.ci.lanes import LANES, NOT_IN_CI

    text = (ROOT / "e2e" / "README.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    named = {env for row in rows for env in re.findall(r"`([\w*-]+)`", row.split(" | ")[0])}
    for lane, spec in LANES.items():
        assert any(re.fullmatch(n.replace("*", ".*"), env) for env in spec.envs for n in named), lane
    assert set(NOT_IN_CI) <= named
    entries = [p.name for p in (ROOT / "e2e").iterdir()
               if p.name not in ("__init__.py", "__pycache__", "README.md") and not p.name.startswith(".")]
    assert [name for name in entries if f"`{name}" not in text] == []
