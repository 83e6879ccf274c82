"""Strict JSON at C speed for both edges of the bridge (Renderers bodies, SGLang outputs).

Consumes raw bytes; emits plain Python values, or raises `JSONBodyError` naming what was wrong.
What "strict" means here, and who enforces it:
  * size: at most `limit` bytes (checked before parsing);
  * syntax: orjson — UTF-8 only, no `NaN`/`Infinity` literals, integers beyond 64 bits and
    floats that overflow to infinity are refused or arrive as floats (so a strict `int`
    field refuses them), nesting deeper than 1,024 levels is refused;
  * duplicate object keys are refused (orjson and every other fast parser keep the last
    one silently): when no key text repeats anywhere in the document, none can repeat within
    an object (one C-level regex pass); otherwise the number of keys in the raw text must equal
    the number in the parsed value re-encoded; only on a mismatch does the slow stdlib parser
    run, to name the key.
`dumps` is orjson's encoder (compact bytes; non-finite floats would become null, which is
why every float crossing the wire is checked finite before it is encoded).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from adapter.errors import JSONBodyError

# Every JSON string, with a capture when a colon follows it (then it is an object key). Run
# from the start of a valid document, each match consumes a whole string, so the scan never
# starts inside one: the count of captured matches is the number of object keys.
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"(\s*:)?')  # "unrolled": one class scan per run
# The same scan, capturing each key's raw text (for the fast path: no key name repeats at all).
_KEYS = re.compile(rb'"([^"\\]*(?:\\.[^"\\]*)*)"(\s*:)?')

DEFAULT_LIMIT = 64 * 1024 * 1024


def _key_count(raw: bytes) -> int:
    colons = _STRINGS.findall(raw)  # the captured colon (or b"") of every string, at C level
    return len(colons) - colons.count(b"")


def _all_keys_distinct(raw: bytes) -> bool:
    """True when no key text repeats anywhere in the document (and none is escaped, so equal
    keys cannot hide behind different spellings): then no object can hold a duplicate."""
    keys = [key for key, colon in _KEYS.findall(raw) if colon]
    return len(set(keys)) == len(keys) and b"\\" not in b"".join(keys)


def _duplicate_key(raw: bytes) -> str:
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen and not found:
                found.append(key)
            seen.add(key)
        return dict(items)

    json.loads(raw, object_pairs_hook=pairs)
    return found[0] if found else "?"


def loads(raw: bytes, *, what: str, limit: int = DEFAULT_LIMIT) -> Any:
    """Parse one strict JSON document; `what` names it in errors ("the generate body")."""
    if len(raw) > limit:
        raise JSONBodyError(f"{what} is {len(raw):,} bytes, over the {limit:,}-byte limit")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise JSONBodyError(f"{what} is not valid JSON: {exc}") from exc
    if b'"' in raw and not _all_keys_distinct(raw) and _key_count(raw) != _key_count(orjson.dumps(value)):
        raise JSONBodyError(f"{what} has a duplicate key {_duplicate_key(raw)!r}: every key must be unique")
    return value


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)
