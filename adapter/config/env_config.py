"""EnvConfig TOML loading (docs/contract.md §5.2): from an explicit path or `VERIFIERS_CONFIG`.

Consumes a path (or nothing, then `$VERIFIERS_CONFIG`); emits `EnvConfigFile(path, data)` with
the parsed table. Refused with `EnvConfigError` before any episode runs: an unset config, a
path that is not `.toml` or does not exist, invalid TOML, a root that is not a table, a V0
(legacy) config, and harnesses that speak the Responses dialect. Validation against
Verifiers' own `EnvConfig` model happens in the generation shim, which owns the import; the
shape check (which generation a config is written for) is `GenerationSpec.check_config`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapter.errors import EnvConfigError

CONFIG_ENV_VAR = "VERIFIERS_CONFIG"

# Harnesses whose agent calls the model through the OpenAI Responses API; the TrainClient
# renders chat-completions only, so their turns cannot be tokenized faithfully.
RESPONSES_DIALECT_HARNESSES = {"codex": "Codex posts Responses API calls"}


@dataclass(frozen=True)
class EnvConfigFile:
    path: Path
    data: dict[str, Any]

    @property
    def env_id(self) -> str:
        taskset = self.data.get("taskset")
        if isinstance(taskset, Mapping) and taskset.get("id"):
            return str(taskset["id"])
        return "verifiers"


def resolve_config_path(path: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> Path:
    raw = os.fspath(path) if path is not None else environ.get(CONFIG_ENV_VAR)
    if not raw:
        raise EnvConfigError(
            "no Verifiers EnvConfig given: pass --verifiers-config PATH.toml or set "
            f"{CONFIG_ENV_VAR}=PATH.toml"
        )
    resolved = Path(raw).expanduser()
    if resolved.suffix.lower() != ".toml":  # as Miles checks it: `.TOML` is a TOML file too
        raise EnvConfigError(f"EnvConfig {resolved} must be a .toml file (got {resolved.suffix!r})")
    if not resolved.is_file():
        raise EnvConfigError(f"EnvConfig {resolved} does not exist")
    return resolved


def _harness_ids(data: Mapping[str, Any]) -> list[str]:
    """Harness ids in either config shape: `[harness]` (0.2.x) or `[agent.harness]` (0.3+)."""
    found = []
    for holder in (data, data.get("agent")):
        harness = holder.get("harness") if isinstance(holder, Mapping) else None
        if isinstance(harness, Mapping) and harness.get("id"):
            found.append(str(harness["id"]))
    return found


def check_env_config_data(data: Any, *, source: str = "EnvConfig") -> dict[str, Any]:
    """The checks that need only the parsed document."""
    if not isinstance(data, Mapping):
        raise EnvConfigError(f"{source}: the root must be a TOML table, got {type(data).__name__}")
    taskset = data.get("taskset")
    has_taskset = isinstance(taskset, Mapping) and bool(taskset.get("id"))
    if data.get("id") is not None and not has_taskset:
        raise EnvConfigError(
            f"{source}: a V0 (legacy) config (top-level `id = {data['id']!r}`) is not supported: "
            "write a V1 config with `[taskset] id = ...` and a `[harness]` table"
        )
    if not has_taskset:
        raise EnvConfigError(f"{source}: no `[taskset]` with an `id`: a V1 EnvConfig needs one")
    for harness_id in _harness_ids(data):
        if harness_id in RESPONSES_DIALECT_HARNESSES:
            raise EnvConfigError(
                f"{source}: harness {harness_id!r} needs the Responses dialect "
                f"({RESPONSES_DIALECT_HARNESSES[harness_id]}), which the TrainClient cannot "
                "render: use a chat-completions harness such as `null`, `default` or `bash`"
            )
    return dict(data)


def load_env_config(
    path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None
) -> EnvConfigFile:
    """Load and check the EnvConfig from `path`, or from `$VERIFIERS_CONFIG` when None."""
    resolved = resolve_config_path(path, os.environ if environ is None else environ)
    try:
        with resolved.open("rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise EnvConfigError(f"EnvConfig {resolved} is not valid TOML: {exc}") from exc
    return EnvConfigFile(path=resolved, data=check_env_config_data(data, source=str(resolved)))
