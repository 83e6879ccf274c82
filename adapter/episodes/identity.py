"""Renderer identity: which registered model a local tokenizer or checkpoint is.

Renderers picks its model-specific renderer (tool and reasoning parsing) by the tokenizer's
`name_or_path`, looked up exactly in `renderers.base.MODEL_RENDERER_MAP`. A trainer's local
checkpoint (`/ckpt/Qwen3-8B/iter_0000100/hf`, an HF cache snapshot, a private tokenizer
directory, ...) would miss that lookup and silently get the template fallback, which cannot parse
tool calls. This module maps such paths back to a registered id.

One path (`renderer_identity`): an exact id, an HF cache folder `models--Org--Name`, or a path
component equal to a registered model's name, components searched from the deepest up. Two
registered ids sharing that name with different renderers is an error, never a guess.

A job's sources (`infer_identity`), in order, the first that names a registered model winning:
  1. each path as above (the caller orders them: the tokenizer that is loaded, then the checkpoint);
  2. what each local directory says about itself, from fields real files carry:
     `config.json` `_name_or_path` (older transformers releases' `save_pretrained` wrote it, so
     many published fine-tunes carry it; recent ones, 5.x among them, leave it out) and
     `tokenizer_config.json` `name_or_path` (dropped from saved tokenizers in early 2023,
     transformers PR 21483). The value is the id or path the model was loaded from, and is read
     as one path (an exact id, an HF cache folder, a registered name). A checkpoint saved by a
     recent transformers (Miles' raw `--save-hf` export copies the base checkpoint's) says nothing
     about itself: only its path can name it, else `--renderer-model-name` must.
A path whose name is ambiguous can be settled by a later source that names one of its candidates
(the checkpoint's own `config.json`); if none does, the ambiguity is the error. Only the identity
is inferred: the tokenizer is still loaded from the local directory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from adapter.config.settings import Settings
from adapter.errors import AmbiguousIdentityError

HF_CACHE_PREFIX = "models--"
# (file in the directory, key naming the id or path it was loaded from); see the module docstring
SELF_DESCRIPTIONS: tuple[tuple[str, str], ...] = (
    ("config.json", "_name_or_path"),
    ("tokenizer_config.json", "name_or_path"),
)


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
                "(--renderer-model-name)", matches, component)
        if matches:
            return matches[0]
    return None


@dataclass(frozen=True)
class InferredIdentity:
    """What `infer_identity` found: the registered id (None: Renderers' template fallback),
    the source that named it, and every source it looked at, for messages."""

    model_id: str | None
    source: str | None
    tried: tuple[str, ...]

    def describe(self) -> str:
        return "; ".join(self.tried) if self.tried else "nothing (no tokenizer or checkpoint path)"


def _self_descriptions(label: str, path: str) -> Iterator[tuple[str, str | None, str]]:
    """(where, the id or path the directory says it was loaded from or None, why not) for each
    self-describing file of a local directory."""
    directory = Path(path).expanduser()
    if not directory.is_dir():
        return
    for name, key in SELF_DESCRIPTIONS:
        where = f"{label}'s {name} {key}"
        file = directory / name
        if not file.is_file():
            continue
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            yield where, None, f"unreadable ({type(exc).__name__})"
            continue
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, str) and value.strip():
            yield where, value.strip(), ""
        else:
            yield where, None, "absent"


def infer_identity(paths: Sequence[tuple[str, str | None]], registered: Mapping[str, str] | None = None,
                   *, explicit_flag: str = "--renderer-model-name") -> InferredIdentity:
    """The registered model the job's `paths` name: `(label, path)` pairs in order of trust
    (labels name the flag in messages; empty paths and repeats are skipped). See the module
    docstring for the order; raises `AmbiguousIdentityError` when a path is ambiguous and no
    other source settles it, naming `explicit_flag` (the option that picks the model)."""
    known = registered if registered is not None else registered_models()
    sources: list[tuple[str, str]] = []
    for label, path in paths:
        if path and path not in (seen for _, seen in sources):
            sources.append((label, path))
    tried: list[str] = []
    pending: AmbiguousIdentityError | None = None

    def look(where: str, value: str) -> str | None:
        nonlocal pending
        try:
            found = renderer_identity(value, known)
        except AmbiguousIdentityError as exc:
            tried.append(f"{where} {value!r}: ambiguous ({', '.join(exc.candidates)})")
            pending = pending or exc
            return None
        if found is None:
            tried.append(f"{where} {value!r}: no registered model in it")
        elif pending is not None and found not in pending.candidates:
            tried.append(f"{where} {value!r}: {found}, which does not settle the ambiguity")
            return None
        return found

    def inferred(found: str, where: str) -> InferredIdentity:
        return InferredIdentity(found, where, (*tried, f"{where}: {found}"))

    for label, path in sources:
        if (found := look(label, path)) is not None:
            return inferred(found, label)
    for label, path in sources:
        for where, value, why in _self_descriptions(label, path):
            if value is None:
                tried.append(f"{where}: {why}")
            elif (found := look(where, value)) is not None:
                return inferred(found, where)
    if pending is not None:
        raise AmbiguousIdentityError(
            f"the renderer identity is ambiguous: {pending.component!r} names several registered models with "
            f"different renderers ({', '.join(pending.candidates)}) and nothing else settles it (tried: "
            f"{'; '.join(tried)}): pass {explicit_flag} with one of them", pending.candidates, pending.component)
    return InferredIdentity(None, None, tuple(tried))


def explicit_advice(settings: Settings) -> str:
    """How the running command picks a registered renderer, for warnings and refusals: its own
    flag where it has one (Miles: `--renderer-model-name`; `vf-sglang rollout`: `--model`); a
    command without one (`check`, `demo`) is told the model itself must be one."""
    if settings.offers("renderer_model_name"):
        return f"pass {settings.flag('renderer_model_name')} with a registered model id " \
               "(renderers.base.MODEL_RENDERER_MAP)"
    return "use a model Renderers registers (renderers.base.MODEL_RENDERER_MAP)"
