"""Pinned requirements for real SGLang on CPU: `python -m e2e.sglang_cpu lock --version V`.

Reads the `Requires-Dist` of the `sglang==V` wheel from PyPI, drops the extras and the
CUDA-only packages (`is_cuda_only`: they fail to import or are useless without a GPU), adds the
project's torch pins (TORCH_PINS), and writes two committed files under requirements/:

    sglang-V.in    the filtered requirements, readable: what SGLang asks for on CPU
    sglang-V.txt   `uv pip compile` of it for CPython PYTHON on x86-64 Linux: every package ==
                   pinned; `e2e.sglang_cpu.venv` installs exactly this, plus sglang itself --no-deps

The venv built from a `.txt` is keyed by that file's hash, so a changed pin builds a new venv.
"""

from __future__ import annotations

import email.parser
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from e2e.sglang_cpu.errors import LockError
from e2e.sglang_cpu.paths import REQUIREMENTS_DIR, requirements_in, requirements_txt
from e2e.sglang_cpu.uvcmd import run_uv

PYTHON = "3.11"
PLATFORM = "x86_64-manylinux_2_28"
# The project locks torch 2.13.0. PyPI's default build (CUDA 13 wheels, which import fine
# without a GPU) pairs with PyPI's torchvision 0.28.0; the +cpu torch build breaks PyPI's
# torchvision (`operator torchvision::nms does not exist`), which SGLang imports at start-up.
TORCH_PINS = ("torch==2.13.0", "torchvision==0.28.0")
CUDA_ONLY_NAMES = frozenset({
    "cuda-python", "flash-attn-4", "humming-kernels", "kernels", "quack-kernels", "sgl-deep-ep",
    "sgl-deep-gemm", "sgl-flash-mla", "sglang-kernel", "tilelang", "timm",
})
# torch* also drops SGLang's own torch pin and its torch-built companions (torchaudio,
# torchcodec, torchao, torch_memory_saver); TORCH_PINS brings back the two that are needed.
CUDA_ONLY_PREFIXES = ("flashinfer-", "nvidia-", "nvshmem4py", "torch")
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"\bextra\s*==")


def normalized_name(requirement: str) -> str:
    """The PEP 503 name of a requirement line (`flashinfer_python[cu13]==0.7.2` → `flashinfer-python`)."""
    match = _NAME.match(requirement)
    if match is None:
        raise LockError(f"cannot read a package name from the requirement {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def is_cuda_only(requirement: str) -> bool:
    name = normalized_name(requirement)
    return name in CUDA_ONLY_NAMES or name.startswith(CUDA_ONLY_PREFIXES)


def cpu_requirements(requires_dist: Iterable[str]) -> list[str]:
    """SGLang's unconditional requirements (no extras) minus the CUDA-only ones, plus TORCH_PINS."""
    kept = [r.strip() for r in requires_dist if not _EXTRA_MARKER.search(r) and not is_cuda_only(r)]
    return [*kept, *TORCH_PINS]


def sglang_requires_dist(version: str) -> list[str]:
    """`Requires-Dist` of the `sglang==version` wheel (fetched with `uv pip install --no-deps --target`)."""
    with tempfile.TemporaryDirectory(prefix="vf-sglang-lock-") as tmp:
        run_uv(["pip", "install", "--quiet", "--no-deps", "--python", PYTHON, "--target", "wheel",
                f"sglang=={version}"], cwd=Path(tmp), error=LockError)
        found = list(Path(tmp, "wheel").glob("sglang-*.dist-info/METADATA"))
        if len(found) != 1:
            raise LockError(f"sglang=={version} installed no single sglang-*.dist-info/METADATA ({found})")
        metadata = email.parser.Parser().parsestr(found[0].read_text(encoding="utf-8"), headersonly=True)
    return list(metadata.get_all("Requires-Dist") or [])


def _input_text(version: str, requirements: list[str]) -> str:
    header = [
        f"# sglang=={version}'s Requires-Dist without extras and without the CUDA-only packages,",
        "# plus the project's torch (e2e/sglang_cpu/lock.py says which and why). Generated: edit the",
        f"# filter, then run `python -m e2e.sglang_cpu lock --version {version}`.",
    ]
    return "\n".join([*header, *requirements]) + "\n"


def compile_requirements(version: str) -> Path:
    """`uv pip compile` requirements/sglang-V.in into requirements/sglang-V.txt (run in that
    directory, so the annotations name the `.in` file, not a temporary path)."""
    source, target = requirements_in(version), requirements_txt(version)
    if not source.is_file():
        raise LockError(f"{source} is missing: run `python -m e2e.sglang_cpu lock --version {version}`")
    run_uv(["pip", "compile", "--quiet", source.name, "--output-file", target.name,
            "--python-version", PYTHON, "--python-platform", PLATFORM,
            "--custom-compile-command", f"python -m e2e.sglang_cpu lock --version {version}"],
           cwd=REQUIREMENTS_DIR, error=LockError)
    return target


def lock(version: str) -> Path:
    """Write requirements/sglang-V.in from the wheel's metadata and compile it; the `.txt` path."""
    requirements = cpu_requirements(sglang_requires_dist(version))
    REQUIREMENTS_DIR.mkdir(parents=True, exist_ok=True)
    requirements_in(version).write_text(_input_text(version, requirements), encoding="utf-8")
    return compile_requirements(version)


def pinned_requirements(version: str) -> Path:
    """The committed requirements/sglang-V.txt, or LockError naming the command that makes it."""
    path = requirements_txt(version)
    if not path.is_file():
        raise LockError(f"no pinned requirements for sglang {version} ({path}): "
                        f"run `python -m e2e.sglang_cpu lock --version {version}` and commit the result")
    return path
