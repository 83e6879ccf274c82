"""A reference engine (transformers + torch, CPU) speaking SGLang's native HTTP wire, and the
tiny Qwen3-shaped model it serves. It stands in for SGLang in the demo and the tests; it is not
SGLang.

Owns: the engine (`server`, `generator`, `requests`, `params`, `sampling`), its errors
(`errors`, the tiny model's `TinyModelBuildError` among them, re-exported here), the
tiny model's recipe (`tiny_model`, `tiny_train`, `tiny_plant`, `tiny_tools`, `tiny_bash`; the
variants only the lanes build are in `e2e/tiny/`), the Qwen3 tokenizer files it uses (`assets`)
and SGLang's own pure modules where an sglang tree is at hand (`sglang_source`: the engine then
refuses what SGLang's SamplingParams refuses).
May import: `errors`, `config`, `wire`, `engine`, `bridge`, `versions`, `samples`, `episodes`,
`rollout`, `miles`; only `vf-sglang demo` and `vf-sglang engine` import it
(`adapter/cli/reference_engine.py`), once a command has passed its checks.

    build_tiny_model(cache_root=None, *, progress=True) -> Path   the cached model directory
    create_engine_app(model_dir, *, model_id="Qwen/Qwen3-0.6B")   the Starlette app
    TinyModelBuildError                                           the model cache is unusable

Serve the app with `adapter.bridge.serve.served(app)` (loopback, ephemeral port). torch and
transformers come from the `demo` extra (`pip install 'vf-sglang[demo]'`; the `demo` dependency
group in a checkout); importing this package stays cheap: the two names load their modules (and
torch) on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from adapter.reference.errors import TinyModelBuildError

if TYPE_CHECKING:
    from adapter.reference.server import create_engine_app
    from adapter.reference.tiny_model import build_tiny_model

__all__ = ["TinyModelBuildError", "build_tiny_model", "create_engine_app"]
_HOMES = {"build_tiny_model": "adapter.reference.tiny_model", "create_engine_app": "adapter.reference.server"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
