"""Our engines (the scripted engine, the reference engine) held against real SGLang's answers.

    output_shape(output)          {"text": "str", "meta_info.finish_reason": "dict", ...}: every
                                  key of a `/generate` output and of its `meta_info` (and the
                                  finish reason's keys) with the JSON type of its value
    mirror_problems(reals, out)   one line per key the mirror lacks, adds, or types differently,
                                  held against many real answers (several SGLang versions): a key
                                  every one of them sends is required, a key none sends is refused,
                                  and a value's type must be one SGLang used for it
    recorded_generates(cassette)  the recorded `/generate` exchanges of a cassette (request body,
                                  response body), answered 200

The truth is a cassette recorded from real SGLang (`fixtures/cassettes/sglang-<version>-*`).
A `None` on one side and a value on the other is not a type difference (SGLang sends nulls).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

_JSON_TYPES = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"), (dict, "dict"))


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return next(name for kind, name in _JSON_TYPES if isinstance(value, kind))


def output_shape(output: Mapping[str, Any]) -> dict[str, str]:
    shape = {key: _type(value) for key, value in output.items()}
    meta = output.get("meta_info")
    if isinstance(meta, Mapping):
        shape |= {f"meta_info.{key}": _type(value) for key, value in meta.items()}
        finish = meta.get("finish_reason")
        if isinstance(finish, Mapping):
            shape |= {f"meta_info.finish_reason.{key}": _type(value) for key, value in finish.items()}
    return shape


def _compatible(real: str, mirror: str) -> bool:
    return real == mirror or "null" in (real, mirror) or {real, mirror} == {"int", "float"}


def recorded_generates(cassette: Path) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for line in cassette.read_text().splitlines():
        record = json.loads(line)
        request, response = record.get("request") or {}, record.get("response") or {}
        if (record.get("kind") == "exchange" and request.get("path") == "/generate" and response.get("status") == 200
                and isinstance(response.get("body"), dict)):
            yield request["body"], response["body"]


def mirror_problems(reals: list[Mapping[str, Any]], mirror: Mapping[str, Any], *, who: str = "mirror") -> list[str]:
    shapes = [output_shape(real) for real in reals]
    required = set.intersection(*(set(shape) for shape in shapes))
    types: dict[str, set[str]] = {}
    for shape in shapes:
        for key, kind in shape.items():
            types.setdefault(key, set()).add(kind)
    have = output_shape(mirror)
    lines = [f"{who} lacks {key!r} ({'/'.join(sorted(types[key]))}), which SGLang always sends"
             for key in sorted(required - set(have))]
    lines += [f"{who} sends {key!r}, which SGLang never sends" for key in sorted(set(have) - set(types))]
    lines += [f"{who} sends {key!r} as {have[key]}, SGLang as {'/'.join(sorted(types[key]))}"
              for key in sorted(set(have) & set(types)) if not any(_compatible(k, have[key]) for k in types[key])]
    return lines
