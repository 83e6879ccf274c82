"""The one way into the reference engine (`adapter.reference`) from the commands.

`vf-sglang demo` and `vf-sglang engine` start a reference engine (transformers on CPU, the tiny
Qwen3-shaped model, SGLang's `/generate` wire). It needs torch (the `demo` extra) and is never
imported by the rest of `adapter/`: only these two functions reach it, and only once a command
has passed its checks.

    tiny_model(progress=...)       the cached tiny model directory (built once)
    engine_app(model_dir)          the reference engine's ASGI app, serving `model_id`
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapter.errors import ConfigurationError

QWEN3 = "Qwen/Qwen3-0.6B"


def tiny_model(*, progress: bool) -> Path:
    """The cached tiny model (built once); an unusable cache is the user's to fix: one line."""
    from adapter.reference import TinyModelBuildError, build_tiny_model

    try:
        return build_tiny_model(progress=progress)
    except TinyModelBuildError as exc:
        raise ConfigurationError(str(exc)) from exc


def engine_app(model_dir: Path, *, model_id: str = QWEN3) -> Any:
    """The reference engine's ASGI app on `model_dir` (imports torch)."""
    from adapter.reference import create_engine_app

    return create_engine_app(model_dir, model_id=model_id)
