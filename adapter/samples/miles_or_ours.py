"""The one "Miles' class or ours" rule: a name from a Miles module when Miles is importable
(the trainer's own types, so Miles' isinstance checks and asserts see its classes), else the
adapter's field-compatible stand-in. `adapter.samples.sample_type.sample_class` and
`adapter.miles.abi.abi_types` both resolve through it, once per process each."""

from __future__ import annotations

import importlib
from typing import Any


def miles_or_ours(module: str, ours: dict[str, Any]) -> tuple[Any, ...]:
    """`ours`' names (in order) from Miles' `module` when it imports, else `ours`' values.
    Only a missing Miles falls back: a Miles that imports but lacks a name is an error."""
    try:
        miles = importlib.import_module(module)
    except ImportError:
        return tuple(ours.values())
    return tuple(getattr(miles, name) for name in ours)
