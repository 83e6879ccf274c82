"""The harness runtime switch as a user meets it: `vf-sglang versions` says which runtime runs and
why, a value other than the two is refused naming the variable, and `miles-command` hands the
variable to Miles' driver and every Ray worker (docs/harness-runtime.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from adapter.episodes.prefork import RUNTIME_VAR
from adapter.miles.launcher import JOB_CONFIG_VAR, miles_command


def _versions(value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != RUNTIME_VAR}
    if value is not None:
        env[RUNTIME_VAR] = value
    return subprocess.run([sys.executable, "-m", "adapter.cli", "versions"], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize(("value", "said"), [
    (None, "harness runtime: prefork (each harness program and tool server forked from a warm interpreter"),
    ("subprocess", "harness runtime: subprocess (Verifiers' own: one fresh interpreter per harness program"),
])
def test_versions_says_which_harness_runtime_runs(value, said) -> None:
    done = _versions(value)
    assert done.returncode == 0, done.stderr
    assert said in done.stdout


def test_an_unknown_harness_runtime_is_refused_naming_the_variable() -> None:
    done = _versions("threads")
    assert done.returncode == 2
    assert f"{RUNTIME_VAR}='threads' is not a harness runtime: set prefork" in done.stderr


def test_miles_command_hands_the_switch_to_the_driver_and_every_worker(tmp_path) -> None:
    config = tmp_path / "env.toml"
    config.write_text('[taskset]\nid = "arith-v1"\n[harness]\nid = "null"\n')
    launch = miles_command(config=str(config), hf_checkpoint="/ckpt/q", miles_version="main",
                           ray_address="127.0.0.1:6379", ambient={RUNTIME_VAR: "subprocess"})
    assert launch.env[RUNTIME_VAR] == "subprocess"
    assert json.loads(launch.env[JOB_CONFIG_VAR])["runtime_env"]["env_vars"][RUNTIME_VAR] == "subprocess"
