"""Check `/generate` payloads and engine outputs against SGLang's own code (`sglang_source`).

Consumes: `SGLangSource` objects (one per installed sglang tree), a payload the adapter emits
or an output an engine produced. Emits: a list of problems, each naming the SGLang version
("sglang 0.5.23: ..."); empty means SGLang would accept the payload / could have produced the
output. The lane (`tox -e sglang-schema`) asserts with `assert_accepted` / `assert_sglang_shaped`.

Payload rules, as SGLang applies them to a `/generate` body: every top-level key is a field of
`GenerateReqInput` (FastAPI drops unknown ones silently — a key we think we send would be
lost); `SamplingParams(**sampling_params)` (unknown keys raise), `.normalize(tokenizer)` and
`.verify(vocab_size)`, exactly as `TokenizerManager._create_tokenized_object` calls them;
every input id is below the vocabulary size.

Output rules: the top-level keys are one of the tokenizer manager's token-output shapes;
`meta_info` carries every key SGLang always sets on a finished output (plus the logprob keys
when `return_logprob`), and no key SGLang never sets; `finish_reason` equals what SGLang's
finish-reason class for that reason serialises (`to_json()`), and every
`output_token_logprobs` entry equals what SGLang's `detokenize_logprob_tokens` builds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adapter.reference.sglang_source import SGLangSource, load_source

TREES_ENV = "VF_SGLANG_TREES"  # os.pathsep-separated sglang trees (`uv pip install --no-deps --target`)


def sources_from_env() -> list[SGLangSource]:
    """The trees named by `VF_SGLANG_TREES`, loaded (empty when unset)."""
    raw = os.environ.get(TREES_ENV, "")
    return [load_source(Path(p)) for p in raw.split(os.pathsep) if p]


def _sglang_finish(source: SGLangSource, reason: Any) -> dict[str, Any] | None:
    """What SGLang's own finish-reason class serialises for the same reason, or None when no
    SGLang class produces this `type`."""
    if not isinstance(reason, Mapping):
        return None
    classes, kind = source.finish_classes, reason.get("type")
    if kind == "stop":
        matched = reason.get("matched")
        cls = classes["FINISH_MATCHED_STR" if isinstance(matched, str) else "FINISH_MATCHED_TOKEN"]
        made = cls(matched)
    elif kind == "length":
        made = classes["FINISH_LENGTH"](reason.get("length"))
    elif kind == "abort":
        made = classes["FINISH_ABORT"](reason.get("message"), reason.get("status_code"), reason.get("err_type"))
    else:
        return None
    return json.loads(json.dumps(made.to_json()))


def payload_problems(source: SGLangSource, payload: Mapping[str, Any], *, tokenizer: Any,
                     vocab_size: int) -> list[str]:
    """Why SGLang `source.version` would refuse (or silently drop part of) this `/generate` body."""
    where = f"sglang {source.version}"
    problems = [
        f"{where}: top-level key {key!r} is not a GenerateReqInput field (SGLang drops it silently)"
        for key in payload if key not in source.generate_fields
    ]
    ids = payload.get("input_ids") or []
    if any(not isinstance(i, int) or not 0 <= i < vocab_size for i in ids):
        problems.append(f"{where}: input_ids must be ids in [0, {vocab_size})")
    sampling = payload.get("sampling_params") or {}
    try:
        params = source.sampling_params(**sampling)
        params.normalize(tokenizer)
        params.verify(vocab_size)
    except (TypeError, ValueError) as exc:
        problems.append(f"{where} rejects sampling_params {dict(sampling)!r}: {type(exc).__name__}: {exc}")
    return problems


def _meta_problems(source: SGLangSource, meta: Mapping[str, Any], return_logprob: bool) -> list[str]:
    where, shape = f"sglang {source.version}", source.meta_info
    required = shape.always | (shape.with_logprobs if return_logprob else frozenset())
    problems = [f"{where}: meta_info lacks {key!r}" for key in sorted(required - set(meta))]
    problems += [f"{where}: meta_info has {key!r}, a key SGLang never sets" for key in sorted(set(meta) - shape.known)]
    reason = meta.get("finish_reason")
    expected = _sglang_finish(source, reason)
    if expected is None:
        problems.append(f"{where}: finish_reason {reason!r} is not one SGLang's finish-reason classes produce")
    elif reason != expected:
        problems.append(f"{where}: finish_reason {reason!r} is not SGLang's serialisation {expected!r}")
    return problems


def _logprob_problems(source: SGLangSource, items: Any) -> list[str]:
    where = f"sglang {source.version}"
    if not isinstance(items, list):
        return [f"{where}: meta_info.output_token_logprobs is {type(items).__name__}, not a list"]
    problems = []
    for index, item in enumerate(items):
        if not isinstance(item, list) or len(item) != 3:
            problems.append(f"{where}: output_token_logprobs[{index}] = {item!r} is not [logprob, id, text]")
            continue
        logprob, token_id, text = item
        built = source.detokenize_logprob_tokens([logprob], [token_id])
        if text is not None:
            built = [(logprob, token_id, text)] if isinstance(text, str) else built
        if json.loads(json.dumps(built)) != [item]:
            problems.append(f"{where}: output_token_logprobs[{index}] = {item!r}, SGLang builds {built[0]!r}")
    return problems


def output_problems(source: SGLangSource, output: Any, *, return_logprob: bool = True) -> list[str]:
    """Why this `/generate` output does not have the shape SGLang `source.version` gives."""
    where = f"sglang {source.version}"
    if isinstance(output, list):
        return [p for item in output for p in output_problems(source, item, return_logprob=return_logprob)]
    if not isinstance(output, Mapping) or not isinstance(output.get("meta_info"), Mapping):
        return [f"{where}: an output is an object with a meta_info object, got {output!r:.200}"]
    problems = []
    if frozenset(output) not in source.meta_info.output_shapes:
        shapes = [sorted(s) for s in source.meta_info.output_shapes]
        problems.append(f"{where}: output keys {sorted(output)} are none of SGLang's token-output shapes {shapes}")
    meta = output["meta_info"]
    problems += _meta_problems(source, meta, return_logprob)
    if return_logprob:
        problems += _logprob_problems(source, meta.get("output_token_logprobs"))
    return problems


def assert_accepted(sources: Sequence[SGLangSource], payload: Mapping[str, Any], *, tokenizer: Any,
                    vocab_size: int) -> None:
    problems = [p for s in sources for p in payload_problems(s, payload, tokenizer=tokenizer, vocab_size=vocab_size)]
    assert not problems, "\n".join(problems)


def assert_sglang_shaped(sources: Sequence[SGLangSource], output: Any, *, return_logprob: bool = True) -> None:
    problems = [p for s in sources for p in output_problems(s, output, return_logprob=return_logprob)]
    assert not problems, "\n".join(problems)
