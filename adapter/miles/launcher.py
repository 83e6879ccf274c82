"""The Miles launcher: the training command and the one environment it and its workers share.

Which rollout entry point Miles loads (`VerifiersRolloutFn` or the legacy `generate_rollout`)
and what the Ray workers see come from ONE merged environment — defaults ← ambient ←
explicit `--extra-env-vars` (explicit wins) — so the two can never disagree; the variable that
selects the ABI is the one the target Miles reads (`adapter.miles.flavor`: main or 0.0.2).
`PYTHONPATH` is joined instead of replaced: the directory holding the `adapter` package
(`ADAPTER_ROOT`, never `adapter/` itself, which would make `import miles` load
`adapter/miles/`) and the environment sources stay importable in every worker (tasksets are
imported by module name, also by tool servers in subprocesses). A bundled EnvConfig
(`fixtures/envs/*.toml`, `adapter/episodes/bundled/*/envs/*.toml`) brings its own tasksets
directory onto that `PYTHONPATH` (`MilesLaunch.added_sources` says which), so the printed
command runs as printed.

Two forms, by the Ray address: an `http(s)://` address is a Ray dashboard, and the command is
`ray job submit --runtime-env-json=... -- python3 train.py ...`; any other address (`auto`,
`HOST:PORT` of the GCS) runs the driver directly, with `RAY_ADDRESS` and the workers'
environment as `RAY_JOB_CONFIG_JSON_ENV_VAR` (what `ray job submit` itself hands its driver).
Behind the router Miles launches (`sglang_router`'s RouterArgs, `--router-` prefix, 5 retries by
default) one model turn at a failing worker would cost 3 × 5 engine calls: the command adds
`--router-disable-retries` unless a `--router-retry*`/`--router-disable-retries` flag is given.
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
from adapter.episodes.bundled import tasksets_for_config
from adapter.episodes.prefork import RUNTIME_VAR
from adapter.errors import ConfigurationError
from adapter.miles.flavor import SELECTORS, Flavor, detect_flavor, select_abi

CLASS_PATH = "adapter.miles.VerifiersRolloutFn"
LEGACY_PATH = "adapter.miles.generate_rollout"
# The directory that holds the `adapter` package (the checkout, or site-packages for a wheel).
ADAPTER_ROOT = str(Path(__file__).resolve().parents[2])
DEFAULT_TRAIN_SCRIPT = "/root/miles/train.py"  # Miles' image
DEFAULT_RAY_ADDRESS = "http://127.0.0.1:8265"  # the Ray dashboard of Miles' image
JOB_CONFIG_VAR = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # how `ray job submit` hands a driver its runtime env
# Keys read from the ambient environment; anything else reaches workers only when explicit.
AMBIENT_KEYS = (*SELECTORS, CONFIG_ENV_VAR, RUNTIME_VAR, "PYTHONPATH")
RETRY_FLAGS = ("--router-retry", "--router-disable-retries")  # prefixes of Miles' router retry flags
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
    env: dict[str, str]  # what the printed command runs with (the driver's environment)
    workers_env: dict[str, str]  # what every Ray worker receives (the runtime env's env_vars)
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


def merged_env(
    *, config: str, env_source_dirs: Sequence[str], ambient: Mapping[str, str], explicit: Mapping[str, str],
    flavor: Flavor = "main",
) -> tuple[bool, dict[str, str]]:
    """(legacy?, the environment): defaults ← ambient ← explicit; the ABI selector rewritten for
    `flavor`; PYTHONPATH joined (explicit, ambient, the adapter's root, the env sources)."""
    for key in explicit:
        check_env_name(key)
    given = {k: ambient[k] for k in AMBIENT_KEYS if k in ambient and k != "PYTHONPATH"}
    given.update({k: v for k, v in explicit.items() if k != "PYTHONPATH"})
    selection = select_abi(flavor, given)
    env = {CONFIG_ENV_VAR: config, **{k: v for k, v in given.items() if k not in SELECTORS}, **selection.env}
    paths: list[str] = []
    for source in (explicit.get("PYTHONPATH", ""), ambient.get("PYTHONPATH", ""),
                   os.pathsep.join([ADAPTER_ROOT, *env_source_dirs])):
        paths += [p for p in source.split(os.pathsep) if p and p not in paths]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return selection.legacy, env


def target_flavor(requested: Flavor | None) -> Flavor:
    """The Miles the command is for: `requested`, else the importable Miles, else an error that
    names `--miles-version` (the launcher cannot guess which variable the job's Miles reads)."""
    if requested is not None:
        return requested
    found = detect_flavor()
    if found is None:
        raise ConfigurationError(
            "Miles is not importable here, so the launcher cannot tell which variable selects the rollout "
            "ABI: pass --miles-version main (Miles' image, MILES_USE_LEGACY_ROLLOUT_V1) or --miles-version "
            "0.0.2 (miles-rl 0.0.2, MILES_EXPERIMENTAL_ROLLOUT_REFACTOR)"
        )
    return found


def _router_flags(miles_args: Sequence[str]) -> list[str]:
    given = any(a.startswith(RETRY_FLAGS) for a in miles_args)
    return [] if given else ["--router-disable-retries"]


def _launch_argv(train: list[str], env: dict[str, str], ray_address: str) -> tuple[list[str], dict[str, str]]:
    runtime_env = {"env_vars": env}
    if ray_address.startswith(("http://", "https://")):
        argv = ["ray", "job", "submit", f"--address={ray_address}",
                f"--runtime-env-json={json.dumps(runtime_env, sort_keys=True)}", "--", *train]
        return argv, env
    driver_env = {**env, "RAY_ADDRESS": ray_address,
                  JOB_CONFIG_VAR: json.dumps({"runtime_env": runtime_env}, sort_keys=True)}
    return train, driver_env


def miles_command(
    *,
    config: str,
    hf_checkpoint: str,
    miles_args: Sequence[str] = (),
    env_source_dirs: Sequence[str] = (),
    extra_env_vars: Mapping[str, str] | None = None,
    ambient: Mapping[str, str] | None = None,
    miles_version: Flavor | None = None,
    train_script: str = DEFAULT_TRAIN_SCRIPT,
    python: str = "python3",
    ray_address: str = DEFAULT_RAY_ADDRESS,
) -> MilesLaunch:
    """The training command for the Miles `miles_version` (default: the importable one)."""
    config_path = str(resolve_config_path(config, {}).resolve())
    sources = [str(Path(d).resolve()) for d in env_source_dirs]
    bundled = tasksets_for_config(config_path)
    added = (str(bundled),) if bundled is not None and str(bundled) not in sources else ()
    legacy, env = merged_env(config=config_path, env_source_dirs=[*sources, *added],
                             ambient=os.environ if ambient is None else ambient, explicit=extra_env_vars or {},
                             flavor=target_flavor(miles_version))
    entry = LEGACY_PATH if legacy else CLASS_PATH
    train = [python, train_script, "--rollout-function-path", entry,
             "--disable-rollout-global-dataset", "--hf-checkpoint", hf_checkpoint, *_router_flags(miles_args)]
    if "--eval-interval" in miles_args and "--eval-prompt-data" not in miles_args:
        # Miles' argument validation requires eval datasets whenever --eval-interval is set;
        # the adapter evaluates the Verifiers taskset instead, so this entry is a placeholder
        # that Miles never reads (the rollout function returns the eval data itself).
        train += ["--eval-prompt-data", "verifiers-taskset", config_path]
    argv, shown_env = _launch_argv([*train, *miles_args], env, ray_address)
    return MilesLaunch(argv=argv, env=shown_env, workers_env=env, added_sources=added)
