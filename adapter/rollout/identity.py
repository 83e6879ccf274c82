"""Renderer identity from a checkpoint path: which registered model a local checkpoint is.

Renderers picks its model-specific renderer (tool and reasoning parsing) by the tokenizer's
`name_or_path`, looked up exactly in `renderers.base.MODEL_RENDERER_MAP`. A trainer's local
checkpoint (`/ckpt/Qwen3-0.6B/iter_0000100/hf`, an HF cache snapshot, ...) would miss that
lookup and silently get the template fallback. This module maps the path back to a registered
id: an exact id, an HF cache folder `models--Org--Name`, or a path component equal to a
registered model's name. Two registered ids sharing that name is an error, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath

from adapter.errors import ConfigurationError

HF_CACHE_PREFIX = "models--"


class AmbiguousIdentityError(ConfigurationError):
    """A checkpoint path matches more than one registered model."""


def registered_models() -> Mapping[str, str]:
    """Renderers' registry: model id → renderer name."""
    from renderers.base import MODEL_RENDERER_MAP

    return dict(MODEL_RENDERER_MAP)


def _by_name(registered: Mapping[str, str]) -> dict[str, list[str]]:
    index: dict[str, list[str]] = {}
    for model_id in sorted(registered):
        index.setdefault(model_id.rsplit("/", 1)[-1].casefold(), []).append(model_id)
    return index


def renderer_identity(path: str, registered: Mapping[str, str] | None = None) -> str | None:
    """The registered model id for `path`, or None when nothing matches (the caller then
    gets Renderers' template fallback). Components are searched from the deepest up."""
    known = registered if registered is not None else registered_models()
    if path in known:
        return path
    by_name = _by_name(known)
    for component in reversed(PurePath(path).parts):
        if component.startswith(HF_CACHE_PREFIX):
            candidate = component[len(HF_CACHE_PREFIX):].replace("--", "/", 1)
            if candidate in known:
                return candidate
        matches = by_name.get(component.casefold(), [])
        if len({known[m] for m in matches}) > 1:
            raise AmbiguousIdentityError(
                f"checkpoint {path!r}: {component!r} matches several registered renderers "
                f"{matches} with different renderers: pass the model id explicitly "
                "(--renderer-model-name)"
            )
        if matches:
            return matches[0]
    return None
