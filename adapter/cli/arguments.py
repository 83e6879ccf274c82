"""The CLI's cheap input checks, run before any slow work (before a model is built, before an
engine loads weights, before the first episode).

    check_model_dir(path, flag=...)      a HuggingFace model directory the reference engine can
                                         load: config.json, weights, a readable tokenizer
    check_tokenizer_dir(path, flag=...)  the tokenizer files in a directory parse
    check_port_free(host, port, flag=...) the address can be listened on right now

Each failure is one `ConfigurationError` line naming the flag the user typed and what to do;
each check costs well under a second (the tokenizer check parses `tokenizer.json` with the
`tokenizers` library, without importing transformers or torch).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from adapter.errors import ConfigurationError

WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")


def check_tokenizer_dir(path: Path, *, flag: str) -> None:
    """`tokenizer.json` (or, without it, `tokenizer_config.json`) in `path` can be read and parsed."""
    fast, config = path / "tokenizer.json", path / "tokenizer_config.json"
    if not (fast.is_file() or config.is_file()):
        raise ConfigurationError(f"{flag} {path}: no tokenizer (neither tokenizer.json nor "
                                 "tokenizer_config.json): pass a checkpoint or tokenizer directory")
    try:
        if fast.is_file():
            from tokenizers import Tokenizer

            Tokenizer.from_file(str(fast))
        else:
            json.loads(config.read_text())
    except OSError as exc:
        raise ConfigurationError(f"{flag} {path}: cannot read the tokenizer: {exc.strerror or exc}") from exc
    except Exception as exc:  # `tokenizers` raises a bare Exception for a malformed file; json a ValueError
        raise ConfigurationError(f"{flag} {path}: the tokenizer files do not parse ({exc}): "
                                 "pass a directory holding a complete HuggingFace tokenizer") from exc


def check_model_dir(path: str, *, flag: str) -> Path:
    """The model directory, checked: it exists and holds config.json, weights and a tokenizer."""
    model_dir = Path(path).expanduser()
    fix = f"pass a HuggingFace model directory (config.json, weights, tokenizer) or omit {flag}"
    if not model_dir.is_dir():
        raise ConfigurationError(f"{flag} {model_dir}: no such directory: {fix}")
    if not (model_dir / "config.json").is_file():
        raise ConfigurationError(f"{flag} {model_dir}: no config.json, so not a model directory: {fix}")
    if not any(any(model_dir.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        raise ConfigurationError(f"{flag} {model_dir}: no weights ({' or '.join(WEIGHT_PATTERNS)}): {fix}")
    check_tokenizer_dir(model_dir, flag=flag)
    return model_dir


def check_port_free(host: str, port: int, *, flag: str = "--port") -> None:
    """Listening on `host:port` works now (port 0, "any free port", always does)."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigurationError(f"{flag} {port}: cannot listen on {host}:{port} ({exc.strerror or exc}): "
                                     f"pick a free port, or omit {flag} to get one") from exc
