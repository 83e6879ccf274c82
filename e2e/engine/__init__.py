"""A reference engine (transformers + torch, CPU) speaking SGLang's native HTTP wire, and the
tiny Qwen3-shaped model it serves. It stands in for SGLang in tests and the demo; it is not
SGLang.

    build_tiny_model(cache_root=None, *, progress=True) -> Path   the cached model directory
    create_engine_app(model_dir, *, model_id="Qwen/Qwen3-0.6B")   the Starlette app
    TinyModelBuildError                                           the model cache is unusable

Serve the app with `adapter.bridge.serve.served(app)` (loopback, ephemeral port). torch and
transformers come from the `demo` dependency group; importing this package stays cheap: the
two names load their modules (and torch) on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from e2e.engine.errors import TinyModelBuildError

if TYPE_CHECKING:
    from e2e.engine.server import create_engine_app
    from e2e.engine.tiny_model import build_tiny_model

__all__ = ["TinyModelBuildError", "build_tiny_model", "create_engine_app"]
_HOMES = {"build_tiny_model": "e2e.engine.tiny_model", "create_engine_app": "e2e.engine.server"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
