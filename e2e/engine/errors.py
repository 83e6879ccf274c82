"""Typed errors of the reference engine: one hierarchy, callers branch on the type.

    ReferenceEngineError
    ├── BadRequestError      a /generate or /abort_request body the engine refuses; the HTTP
    │                        layer answers it with 400 and SGLang's `{"error": {"message"}}`.
    │   └── ContextLengthError  the prompt (or prompt + max_new_tokens) does not fit the model's
    │                        context; the message carries "maximum context length" so
    │                        Verifiers recognises it as an overlong prompt.
    └── TinyModelBuildError  the tiny model could not be built or its cache is unusable.

The reference engine is a test double for SGLang's native HTTP wire; it is never SGLang.
"""

from __future__ import annotations


class ReferenceEngineError(Exception):
    """Base of every error the reference engine raises on purpose."""


class BadRequestError(ReferenceEngineError):
    """The request is malformed or asks for something the reference engine does not do."""


class ContextLengthError(BadRequestError):
    """The prompt does not fit the model's context (max_position_embeddings)."""


class TinyModelBuildError(ReferenceEngineError):
    """Building, saving or reusing the cached tiny model failed."""
