"""Renderer identity from checkpoint paths."""

from __future__ import annotations

import pytest

from adapter.rollout.identity import AmbiguousIdentityError, registered_models, renderer_identity

REGISTRY = {
    "Qwen/Qwen3-0.6B": "qwen3",
    "Qwen/Qwen3-8B": "qwen3",
    "Org/Shared-7B": "org",
    "Other/Shared-7B": "other",
    "A/Twin-1B": "twin",
    "B/Twin-1B": "twin",
}

CASES = [
    ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B"),
    ("/ckpt/Qwen3-0.6B", "Qwen/Qwen3-0.6B"),
    ("/ckpt/qwen3-0.6b/", "Qwen/Qwen3-0.6B"),
    ("/ckpt/Qwen3-8B/iter_0000100/hf", "Qwen/Qwen3-8B"),
    ("/hf/hub/models--Qwen--Qwen3-0.6B/snapshots/" + "a" * 40, "Qwen/Qwen3-0.6B"),
    ("/hf/hub/models--Other--Shared-7B/snapshots/abc", "Other/Shared-7B"),
    ("/ckpt/my-finetune", None),
    ("/ckpt/Twin-1B", "A/Twin-1B"),  # same renderer either way: no ambiguity
]


@pytest.mark.parametrize(("path", "identity"), CASES)
def test_identity(path: str, identity: str | None) -> None:
    assert renderer_identity(path, REGISTRY) == identity


def test_ambiguous_basename_is_reported_not_picked() -> None:
    with pytest.raises(AmbiguousIdentityError, match=r"Org/Shared-7B.*Other/Shared-7B"):
        renderer_identity("/ckpt/Shared-7B", REGISTRY)


def test_real_registry_resolves_hf_cache_paths_and_reports_real_ambiguity() -> None:
    assert registered_models()["Qwen/Qwen3-0.6B"] == "qwen3"
    cache = "/hf/hub/models--Qwen--Qwen3-0.6B/snapshots/" + "0" * 40
    assert renderer_identity(cache) == "Qwen/Qwen3-0.6B"
    # renderers registers Qwen3-0.6B twice (qwen3 and prime-qwen3): a bare name must not pick
    with pytest.raises(AmbiguousIdentityError, match=r"PrimeIntellect/Qwen3-0\.6B"):
        renderer_identity("/models/Qwen3-0.6B")
