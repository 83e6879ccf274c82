"""One dedicated uv venv per sglang version, built from the committed pins and cached.

    ensure_venv(version) -> Venv   `python -m e2e.sglang_cpu install --version V`

The venv lives at `<cache_root>/sglang-cpu/venvs/sglang-<V>-<key>`, where `key` is the first 12
hex digits of the sha256 of (requirements/sglang-V.txt, the version, PYTHON, LAYOUT): a changed
pin names a new directory. It holds exactly the pinned requirements plus `sglang==V`, all
installed with `--no-deps` (the `.txt` is already the full resolution). Never the project's own
environment, and never the `sgl_kernel` stand-in (that is only put on the server's PYTHONPATH).

Invariants: a directory with that name is complete. It is built in a temporary sibling, marked
with MARKER, then renamed into place (`uv venv --relocatable`, so `bin/python` keeps working
after the rename); a crash leaves no half-built venv under the final name, and of two concurrent
builders the first rename wins. Venvs of older keys are left alone (delete them by hand).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from e2e.sglang_cpu.errors import InstallError
from e2e.sglang_cpu.lock import PYTHON, pinned_requirements
from e2e.sglang_cpu.paths import venvs_dir
from e2e.sglang_cpu.uvcmd import run_uv

logger = logging.getLogger(__name__)

LAYOUT = 2  # bump when the way a venv is built changes without the pins changing (2: bytecode compiled)
MARKER = "vf-sglang-cpu.json"


@dataclass(frozen=True)
class Venv:
    version: str
    path: Path
    key: str
    built: bool  # True when this call built it, False when it came from the cache
    seconds: float  # how long this call took

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def venv_key(version: str, requirements: Path) -> str:
    return pinned_key(requirements, [f"sglang=={version}"])


def pinned_key(requirements: Path, packages: Sequence[str]) -> str:
    """12 hex digits of the sha256 of the pins, the --no-deps packages, PYTHON and LAYOUT."""
    digest = hashlib.sha256()
    for part in (requirements.read_bytes(), "\n".join(packages).encode(), PYTHON.encode(), str(LAYOUT).encode()):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:12]


def venv_path(version: str, root: Path | None = None) -> tuple[Path, str]:
    """Where the venv of `version` lives and its key (it may not exist yet)."""
    key = venv_key(version, pinned_requirements(version))
    return (root or venvs_dir()) / f"sglang-{version}-{key}", key


def _is_complete(path: Path, key: str) -> bool:
    marker = path / MARKER
    if not (marker.is_file() and (path / "bin" / "python").exists()):
        return False
    try:
        return bool(json.loads(marker.read_text())["key"] == key)
    except (ValueError, KeyError, TypeError):
        return False


def _build_into(workdir: Path, requirements: Path, packages: Sequence[str]) -> None:
    run_uv(["venv", "--quiet", "--allow-existing", "--relocatable", "--python", PYTHON, str(workdir)],
           cwd=workdir.parent, error=InstallError)
    # --compile-bytecode: every server process, Ray worker and Miles driver reads bytecode instead of
    # compiling torch, transformers and sglang again under PYTHONDONTWRITEBYTECODE (tox.ini says why)
    run_uv(["pip", "install", "--python", str(workdir / "bin" / "python"), "--no-deps", "--compile-bytecode",
            "--requirement", str(requirements), *packages], cwd=workdir.parent, error=InstallError)


def _publish(workdir: Path, target: Path) -> None:
    """Rename the finished venv into place; a concurrent builder that won the race wins."""
    try:
        workdir.rename(target)
    except OSError:
        if not _is_complete(target, json.loads((workdir / MARKER).read_text())["key"]):
            raise
        shutil.rmtree(workdir, ignore_errors=True)


def ensure_venv(version: str, *, root: Path | None = None, force: bool = False) -> Venv:
    """The venv of `version`: from the cache, or built (minutes cold; seconds with a warm uv cache).

    Raises LockError when the version has no committed pins, InstallError when building fails."""
    requirements = pinned_requirements(version)
    return ensure_pinned_venv(f"sglang-{version}", version=version, requirements=requirements,
                              packages=[f"sglang=={version}"], root=root or venvs_dir(), force=force)


def ensure_pinned_venv(name: str, *, version: str, requirements: Path, packages: Sequence[str], root: Path,
                       force: bool = False) -> Venv:
    """`<root>/<name>-<key>`: exactly `requirements` plus `packages`, all --no-deps, cached by key
    (the module docstring's invariants). Also the miles lane's venv (e2e.miles_cpu.venv)."""
    started = time.monotonic()
    key = pinned_key(requirements, packages)
    target = root / f"{name}-{key}"
    if force and target.exists():
        shutil.rmtree(target)
    if _is_complete(target, key):
        return Venv(version, target, key, built=False, seconds=time.monotonic() - started)
    if target.exists():
        logger.warning("sglang-cpu: %s is incomplete; rebuilding it", target)
        shutil.rmtree(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError as exc:
        raise InstallError(f"cannot write the venv cache {target.parent}: {exc}; set $VF_SGLANG_CACHE") from exc
    try:
        _build_into(workdir, requirements, packages)
        marker = {"version": version, "key": key, "python": PYTHON, "layout": LAYOUT,
                  "requirements": requirements.name, "packages": list(packages),
                  "build_seconds": round(time.monotonic() - started, 1)}
        (workdir / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
        _publish(workdir, target)
    except OSError as exc:
        raise InstallError(f"building the {name} venv into {target} failed: {exc}") from exc
    finally:  # after the rename there is nothing left here; after a failure, the partial build
        shutil.rmtree(workdir, ignore_errors=True)
    logger.info("built %s in %.1f s", target, time.monotonic() - started)
    return Venv(version, target, key, built=True, seconds=time.monotonic() - started)
