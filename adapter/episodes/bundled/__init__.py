"""The bundled offline tasksets and their EnvConfigs, shipped as package data.

One root per Verifiers API generation (`a/`, `b/`), each holding `envs/<id>.toml` and
`tasksets/<module>.py`; see README.md here. Found with `importlib.resources`, so an installed
wheel finds them as a source checkout does. `adapter.episodes.generations` maps a generation to its
root; this module only knows the layout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path

from adapter.errors import ConfigurationError

BUNDLED_IDS = ("arith-v1", "group-v1", "echo-tool-v1")


def root(name: str) -> Path:
    """The directory of one generation's bundle (`a` or `b`), as a real path."""
    path = Path(str(files(__name__).joinpath(name)))
    if not path.is_dir():
        raise ConfigurationError(f"the bundled tasksets for {name!r} are missing from this install ({path})")
    return path


def config_path(name: str, taskset: str) -> Path:
    path = root(name) / "envs" / f"{taskset}.toml"
    if not path.is_file():
        raise ConfigurationError(f"no bundled taskset {taskset!r} for this verifiers release: pick one of "
                                 f"{', '.join(BUNDLED_IDS)}")
    return path


def tasksets_for_config(config: str | os.PathLike[str]) -> Path | None:
    """The tasksets directory of a bundled EnvConfig (symlinks resolved), else None."""
    resolved = Path(config).resolve()
    bundle = Path(str(files(__name__))).resolve()
    if resolved.parent.name == "envs" and resolved.parent.parent.parent == bundle:
        return resolved.parent.parent / "tasksets"
    return None


def add_env_sources(dirs: Sequence[str | os.PathLike[str]]) -> None:
    """Make taskset modules importable here and in the subprocesses Verifiers starts."""
    paths = [str(Path(d).resolve()) for d in dirs]
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*paths, *current]))
