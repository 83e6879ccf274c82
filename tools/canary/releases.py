"""The newest published release of a package, as the package index answers it through uv.

`newest(spec)` resolves one requirement (`verifiers`, `verifiers<0.3`) on its own (`--no-deps`),
for CPython 3.11, without pre-releases (with them for `prerelease=True`), exactly as `uv pip install`
would pick it: the index and mirrors a user configured for uv apply (UV_INDEX_URL, ...), and
`find_links` directories are searched too (a planted local wheel is then "published").
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from e2e.sglang_cpu.uvcmd import uv_env, uv_executable

PYTHON = "3.11"
TIMEOUT_S = 120.0


class ResolveError(RuntimeError):
    """The index did not answer a release for a requirement."""


def newest(spec: str, *, find_links: Sequence[Path] = (), prerelease: bool = False) -> str:
    """The version uv resolves for `spec` alone (e.g. "0.4.0" for "verifiers"); with `prerelease`,
    pre-releases count too ("0.4.1.dev86")."""
    argv = [uv_executable(), "pip", "compile", "--no-deps", "--no-header", "--no-annotate", "--quiet",
            "--python-version", PYTHON, *(["--prerelease", "allow"] if prerelease else []), "-"]
    for directory in find_links:
        argv += ["--find-links", str(directory)]
    try:
        done = subprocess.run(argv, input=spec + "\n", env=uv_env(), capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ResolveError(f"resolving {spec!r} took over {TIMEOUT_S:.0f} s (is the package index reachable?)") from exc
    if done.returncode != 0:
        raise ResolveError(f"uv could not resolve {spec!r}: {done.stderr.strip().splitlines()[-1:]}")
    return pinned_version(done.stdout, spec)


def pinned_version(compiled: str, spec: str) -> str:
    """The version of the one `name==version` line `uv pip compile` printed."""
    lines = [line.strip() for line in compiled.splitlines() if "==" in line and not line.lstrip().startswith("#")]
    if len(lines) != 1:
        raise ResolveError(f"resolving {spec!r} printed {len(lines)} pins, expected one: {compiled!r}")
    return lines[0].split("==", 1)[1].split(";", 1)[0].strip()
