"""The Miles launcher: the training command and the one environment it and its workers share.

Which rollout entry point Miles loads (`VerifiersRolloutFn` or the legacy `generate_rollout`)
and what the Ray workers see come from ONE merged environment — defaults ← ambient ←
explicit `--extra-env-vars` (explicit wins) — so the two can never disagree. `PYTHONPATH`
is joined instead of replaced: the adapter and the environment sources stay importable in
every worker (tasksets are imported by module name, also by tool servers in subprocesses).
A bundled EnvConfig (`fixtures/envs/*.toml`, `adapter/rollout/bundled/*/envs/*.toml`) brings its own
tasksets directory onto that `PYTHONPATH` (`MilesLaunch.added_sources` says which), so the
printed command runs as printed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from adapter.config.env_config import CONFIG_ENV_VAR, resolve_config_path
from adapter.errors import ConfigurationError
from adapter.rollout.bundled import tasksets_for_config

LEGACY_FLAG = "MILES_USE_LEGACY_ROLLOUT_V1"
CLASS_PATH = "adapter.miles.VerifiersRolloutFn"
LEGACY_PATH = "adapter.miles.generate_rollout"
ADAPTER_ROOT = str(Path(__file__).resolve().parent.parent)
# Keys read from the ambient environment; anything else reaches workers only when explicit.
AMBIENT_KEYS = (LEGACY_FLAG, CONFIG_ENV_VAR, "PYTHONPATH")
# A portable environment-variable name (POSIX shells accept no other in `NAME=value cmd`).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_env_name(key: str) -> str:
    """`key` when it is a valid environment-variable name; anything else (spaces, `;`, `$(...)`,
    `=`) is refused, so a key can never become shell syntax in the printed command."""
    if not isinstance(key, str) or not ENV_NAME.fullmatch(key):
        raise ConfigurationError(
            f"--extra-env-vars: {key!r} is not an environment variable name (letters, digits and _, "
            "not starting with a digit)"
        )
    return key


@dataclass(frozen=True)
class MilesLaunch:
    argv: list[str]
    env: dict[str, str]  # what the launcher runs with and what every Ray worker receives
    added_sources: tuple[str, ...] = ()  # bundled tasksets dirs added to PYTHONPATH on our own

    @property
    def rollout_function_path(self) -> str:
        return self.argv[self.argv.index("--rollout-function-path") + 1]

    def shell(self) -> str:
        """One line for a POSIX shell: `NAME=value ... argv`, every value and argument quoted,
        every name checked (`check_env_name`), so the line runs exactly this command."""
        exports = " ".join(f"{check_env_name(k)}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return f"{exports} {shlex.join(self.argv)}"


def parse_env_vars(text: str | None) -> dict[str, str]:
    """`--extra-env-vars`: a JSON object, or `KEY=VALUE` pairs separated by commas."""
    if not text:
        return {}
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigurationError(f"--extra-env-vars: not a JSON object: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigurationError("--extra-env-vars: the JSON form must be an object of names to values")
        return {check_env_name(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}
    pairs = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigurationError(f"--extra-env-vars: {item!r} is not KEY=VALUE")
        pairs[check_env_name(key)] = value
    return pairs


def _is_on(value: str) -> bool:
    return value.strip().lower() not in {"", "0", "false", "no", "off"}


def merged_env(
    *, config: str, env_source_dirs: Sequence[str], ambient: Mapping[str, str], explicit: Mapping[str, str]
) -> dict[str, str]:
    for key in explicit:
        check_env_name(key)
    env = {LEGACY_FLAG: "0", CONFIG_ENV_VAR: config}
    env.update({k: ambient[k] for k in AMBIENT_KEYS if k in ambient and k != "PYTHONPATH"})
    env.update({k: v for k, v in explicit.items() if k != "PYTHONPATH"})
    paths: list[str] = []
    for source in (explicit.get("PYTHONPATH", ""), ambient.get("PYTHONPATH", ""),
                   os.pathsep.join([ADAPTER_ROOT, *env_source_dirs])):
        paths += [p for p in source.split(os.pathsep) if p and p not in paths]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def miles_command(
    *,
    config: str,
    hf_checkpoint: str,
    miles_args: Sequence[str] = (),
    env_source_dirs: Sequence[str] = (),
    extra_env_vars: Mapping[str, str] | None = None,
    ambient: Mapping[str, str] | None = None,
    miles_root: str = "/root/miles",
    ray_address: str = "http://127.0.0.1:8265",
) -> MilesLaunch:
    config_path = str(resolve_config_path(config, {}).resolve())
    sources = [str(Path(d).resolve()) for d in env_source_dirs]
    bundled = tasksets_for_config(config_path)
    added = (str(bundled),) if bundled is not None and str(bundled) not in sources else ()
    env = merged_env(config=config_path, env_source_dirs=[*sources, *added],
                     ambient=os.environ if ambient is None else ambient, explicit=extra_env_vars or {})
    entry = LEGACY_PATH if _is_on(env[LEGACY_FLAG]) else CLASS_PATH
    train = ["python3", f"{miles_root}/train.py", "--rollout-function-path", entry,
             "--disable-rollout-global-dataset", "--hf-checkpoint", hf_checkpoint]
    if "--eval-interval" in miles_args and "--eval-prompt-data" not in miles_args:
        # Miles' argument validation requires eval datasets whenever --eval-interval is set;
        # the adapter evaluates the Verifiers taskset instead, so this entry is a placeholder
        # that Miles never reads (the rollout function returns the eval data itself).
        train += ["--eval-prompt-data", "verifiers-taskset", config_path]
    runtime_env = json.dumps({"env_vars": env}, sort_keys=True)
    argv = ["ray", "job", "submit", f"--address={ray_address}", f"--runtime-env-json={runtime_env}",
            "--", *train, *miles_args]
    return MilesLaunch(argv=argv, env=env, added_sources=added)
