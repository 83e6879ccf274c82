"""The GPU tier's first step: can this machine run the pinned SGLang at all?

sglang 0.5.15's wheels need a CUDA 13 driver and glibc >= 2.34. Without this check a runner
with an older driver fails minutes later, mid-install or at SGLang's first kernel launch, with
an error that names neither. Reads the driver and the CUDA version the driver supports from
`nvidia-smi`'s header ("Driver Version: 580.65.06   CUDA Version: 13.0") and glibc from the
C library; exits 0 with one line, or 1 with the requirement, what was found and what to change.

    python -m e2e.gpu.driver --sglang-version 0.5.15 --min-cuda 13.0 --min-glibc 2.34

Standard library only: it runs on the runner's base interpreter before any venv exists.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

HEADER = re.compile(r"Driver Version:\s*(?P<driver>[\d.]+)\s+CUDA Version:\s*(?P<cuda>[\d.]+)")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def parse_nvidia_smi(output: str) -> tuple[str, str]:
    """(driver version, CUDA version the driver supports) from `nvidia-smi`'s header."""
    match = HEADER.search(output)
    if match is None:
        raise ValueError("nvidia-smi printed no 'Driver Version: ... CUDA Version: ...' header")
    return match["driver"], match["cuda"]


def glibc_version() -> str | None:
    value = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None  # "glibc 2.36"
    return value.split()[-1] if value and value.startswith("glibc") else None


def problems(*, smi_output: str | None, glibc: str | None, sglang: str, min_cuda: str, min_glibc: str) -> list[str]:
    """Every unmet requirement, as a sentence naming the requirement, the finding and the fix."""
    found = []
    if smi_output is None:
        found.append(f"nvidia-smi is not on PATH or failed: sglang {sglang} needs an NVIDIA driver "
                     f"supporting CUDA >= {min_cuda}")
    else:
        try:
            driver, cuda = parse_nvidia_smi(smi_output)
        except ValueError as exc:
            found.append(f"{exc}; cannot tell whether the driver supports CUDA >= {min_cuda}")
        else:
            if _version(cuda) < _version(min_cuda):
                found.append(f"sglang {sglang} wheels need a driver supporting CUDA >= {min_cuda}; this driver "
                             f"({driver}) supports CUDA {cuda}: upgrade the driver or pin an sglang built for "
                             f"CUDA {cuda.split('.')[0]} (sglang_version and sglang_min_cuda in e2e/plans/steps.py)")
    if glibc is None or _version(glibc) < _version(min_glibc):
        found.append(f"sglang {sglang} wheels need glibc >= {min_glibc}; found {glibc or 'no glibc'}: use a newer "
                     "runner image")
    return found


def _smi_output() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    result = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=60)
    return result.stdout if result.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.gpu.driver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sglang-version", required=True)
    parser.add_argument("--min-cuda", required=True)
    parser.add_argument("--min-glibc", required=True)
    args = parser.parse_args(argv)
    output, glibc = _smi_output(), glibc_version()
    found = problems(smi_output=output, glibc=glibc, sglang=args.sglang_version, min_cuda=args.min_cuda,
                     min_glibc=args.min_glibc)
    for problem in found:
        print(f"e2e.gpu.driver: {problem}", file=sys.stderr)
    if not found:
        driver, cuda = parse_nvidia_smi(output or "")
        print(f"driver {driver}, CUDA {cuda}, glibc {glibc}: sglang {args.sglang_version} can run here")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
