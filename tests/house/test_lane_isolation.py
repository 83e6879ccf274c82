"""A tox lane never takes over the checkout's `.venv`.

Recent tox (measured: 4.67) writes a PEP 832 `.venv` redirect file naming the lane's env into a
checkout that has no `.venv` directory; uv follows it, so the README's `uv run vf-sglang demo`
then ran in, and re-synced (torch included), whichever lane ran last. tox.ini's
`venv_redirect = false` stops it. This test runs a real lane in a temporary copy of the checkout
(its tracked and untracked, not ignored, files: the working tree as it is), then `uv run vf-sglang
versions`, twice, and checks each environment holds what it held before the other one ran.

    uvx --with tox-uv tox -e lane-isolation                 # sets VF_SGLANG_LANE_ISOLATION=1 (lane: lint)
    VF_SGLANG_LANE_ISOLATION=rl-cpu uv run pytest -m lane_isolation   # by hand, naming the lanes

It needs uv (and tox through `uv tool run`) and uv's cache or PyPI, so outside that lane it skips.
The lane's own verdict is not this test's: it checks the environments, whatever the lane found, so
the lane runs with `--notest` (tox creates and syncs its env, where the redirect was written, and
skips its commands: mypy twice cost the lane 2-4 minutes), and no environment here compiles
bytecode (UV_COMPILE_BYTECODE is the lanes' own speed-up; here it would compile torch twice).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENABLE = "VF_SGLANG_LANE_ISOLATION"
_ON = {"1", "true", "yes", "on"}

pytestmark = [
    pytest.mark.lane_isolation,
    pytest.mark.skipif(not os.environ.get(ENABLE), reason=f"runs tox in a copy of the checkout: "
                       f"`uvx --with tox-uv tox -e lane-isolation` (sets {ENABLE}=1)"),
]


def _lanes() -> list[str]:
    value = os.environ.get(ENABLE, "").strip()
    if not value or value.lower() in _ON:
        return ["lint"]
    return [lane.strip() for lane in value.split(",") if lane.strip()]


def _copy_checkout(dest: Path) -> Path:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True, timeout=60).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if name.split("/", 1)[0] in {".venv", ".tox"}:  # e.g. a redirect file an older tox left
            continue
        source = REPO / name
        if source.is_file() and not source.is_symlink():  # a file deleted in the work tree is left out
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    assert not (dest / ".venv").exists() and (dest / "uv.lock").is_file()
    return dest


def _clean_env() -> dict[str, str]:
    """The caller's environment without this test's own venv (a tox lane's or the project's)."""
    env = {key: value for key, value in os.environ.items()
           if key not in {"VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH", "PYTHONHOME", "UV_COMPILE_BYTECODE",
                          ENABLE}
           and not key.startswith(("TOX_", "_TOX"))}
    if sys.prefix != sys.base_prefix:  # inside a venv: its bin/ off PATH
        here = Path(sys.prefix).resolve()
        env["PATH"] = os.pathsep.join(part for part in env.get("PATH", "").split(os.pathsep)
                                      if part and Path(part).resolve().parent != here)
    return env


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    assert Path(found).exists(), "uv must be on PATH (the test extra installs it)"
    return found


def _run(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=timeout)


def _state(env_dir: Path) -> tuple[str, str]:
    """What an environment holds: its pyvenv.cfg and every installed distribution."""
    assert env_dir.is_dir() and (env_dir / "pyvenv.cfg").is_file(), f"{env_dir} is not a virtual environment"
    frozen = subprocess.run([_uv(), "pip", "freeze", "--python", str(env_dir)], env=_clean_env(),
                            capture_output=True, text=True, check=True, timeout=120).stdout
    return (env_dir / "pyvenv.cfg").read_text(), frozen


def _tail(result: subprocess.CompletedProcess[str]) -> str:
    return (result.stdout + result.stderr)[-3000:]


@pytest.mark.parametrize("lane", _lanes())
def test_a_lane_and_uv_run_leave_each_others_environment_alone(tmp_path: Path, lane: str) -> None:
    checkout = _copy_checkout(tmp_path / "checkout")
    lane_env, project_env = checkout / ".tox" / lane, checkout / ".venv"

    def tox() -> subprocess.CompletedProcess[str]:
        return _run([_uv(), "tool", "run", "--with", "tox-uv", "tox", "-e", lane, "--notest"], checkout, timeout=1800)

    def versions() -> None:
        result = _run([_uv(), "run", "vf-sglang", "versions"], checkout, timeout=900)
        assert "verifiers:" in result.stdout, _tail(result)

    # a fresh clone: the lane runs first, with no project environment yet
    first = tox()
    wrote = project_env.read_text().strip() if project_env.is_file() else "a directory"
    assert not project_env.exists(), f"the lane wrote {project_env} ({wrote})"
    lane_held = _state(lane_env)
    assert lane_held[1], _tail(first)

    versions()  # uv run builds the project's own .venv, and leaves the lane's env as it was
    assert project_env.is_dir() and not project_env.is_symlink()
    assert _state(lane_env) == lane_held
    project_held = _state(project_env)

    tox()  # the lane again, with the project environment there
    assert _state(project_env) == project_held
    assert _state(lane_env) == lane_held

    versions()
    assert _state(project_env) == project_held
    assert _state(lane_env) == lane_held
