"""The reference engine's errors (`adapter.reference`: the demo's stand-in for SGLang, never SGLang),
beside its code; the product's own are in `adapter.errors`.

    ReferenceEngineError(Exception)  base of every error the reference engine raises on purpose
    ├── BadRequestError           a /generate or /abort_request body it refuses (HTTP 400 with
    │                             SGLang's `{"error": {"message"}}`)
    │   └── ContextLengthError    the prompt, or prompt + max_new_tokens, does not fit the model's
    │                             context; says "maximum context length" so Verifiers recognises an
    │                             overlong prompt
    AssetError(RuntimeError)      a pinned asset (the Qwen3 tokenizer files) is missing or not the
                                  file it should be (`adapter.reference.assets`)
    SGLangSourceError(RuntimeError)  a directory holds no sglang tree `adapter.reference.sglang_source`
                                  can read
    TinyModelBuildError(Exception)  the tiny model (`vf-sglang demo`/`engine`, the lanes) could not be
                                  built, or its cache is unusable (`adapter.reference.tiny_model`)
"""

from __future__ import annotations


class ReferenceEngineError(Exception):
    """Base of every error the reference engine (`adapter.reference`) raises on purpose."""


class BadRequestError(ReferenceEngineError):
    """The request is malformed or asks for something the reference engine does not do."""


class ContextLengthError(BadRequestError):
    """The prompt does not fit the model's context (max_position_embeddings)."""


class AssetError(RuntimeError):
    """A pinned asset is missing or is not the file it should be."""


class SGLangSourceError(RuntimeError):
    """The directory does not hold an sglang tree `adapter.reference.sglang_source` can read."""


class TinyModelBuildError(Exception):
    """Building, saving or reusing the cached tiny model failed (`adapter.reference.tiny_model`)."""
