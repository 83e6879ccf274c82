"""A planted incompatible release, to show the canary catches a break: renderers 0.1.12 as published,
with `renderers.client.parse_generate_response` renamed, repacked as renderers 0.1.13.

The gate accepts renderers >= 0.1.12 under verifiers 0.4.0 with no ceiling, so this is exactly the
release a user could install tomorrow. `plant_renderers(out)` writes the wheel into `out` (a
`--find-links` directory); it needs the package index once (pip download) and the `wheel` tool.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

from e2e.sglang_cpu.uvcmd import uv_env, uv_executable

BASE, PLANTED = "0.1.12", "0.1.13"
RENAMED = ("parse_generate_response", "parse_generate_payload")
TIMEOUT_S = 300


def _uvx(*args: str, cwd: Path) -> None:
    subprocess.run([uv_executable(), "tool", "run", *args], cwd=cwd, env=uv_env(), check=True, timeout=TIMEOUT_S,
                   stdout=subprocess.DEVNULL)


def plant_renderers(out: Path) -> Path:
    """The planted wheel's path (built once per `out`)."""
    out.mkdir(parents=True, exist_ok=True)
    existing = sorted(out.glob(f"renderers-{PLANTED}-*.whl"))
    if existing:
        return existing[0]
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    _uvx("--from", "pip", "pip", "download", "--quiet", "--no-deps", f"renderers=={BASE}", "-d", str(work), cwd=work)
    (wheel,) = work.glob(f"renderers-{BASE}-*.whl")
    tree = work / f"renderers-{PLANTED}"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tree)
    client = tree / "renderers" / "client.py"
    client.write_text(client.read_text().replace(*RENAMED))
    info = tree / f"renderers-{BASE}.dist-info"
    metadata = info / "METADATA"
    metadata.write_text(metadata.read_text().replace(f"\nVersion: {BASE}\n", f"\nVersion: {PLANTED}\n", 1))
    info.rename(tree / f"renderers-{PLANTED}.dist-info")
    _uvx("wheel", "pack", str(tree), "-d", str(out), cwd=work)
    shutil.rmtree(work, ignore_errors=True)
    (planted,) = out.glob(f"renderers-{PLANTED}-*.whl")
    return planted
