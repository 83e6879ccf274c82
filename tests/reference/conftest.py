"""The real Qwen3 tokenizer and Renderers' Qwen3 renderer, for the tiny model's lesson tests
(`test_tiny_model.py`, `test_tiny_bash.py`): the lessons must be the ids Renderers produce."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tokenizer(qwen3_tokenizer: Path) -> object:
    from renderers.base import load_tokenizer

    loaded = load_tokenizer(str(qwen3_tokenizer))
    loaded.name_or_path = "Qwen/Qwen3-0.6B"
    return loaded


@pytest.fixture(scope="module")
def renderer(tokenizer: object) -> object:
    import renderers

    return renderers.create_renderer(tokenizer, renderers.Qwen3RendererConfig())
