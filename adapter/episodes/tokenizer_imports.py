"""Import transformers' tokenizer names on the calling thread before a renderer pool is built.

Renderers' `RendererPool` builds its renderers on worker threads, and each first call of
`renderers.base.load_tokenizer` runs `from transformers import AutoTokenizer` (and friends) there.
transformers' lazy module is not thread-safe on first access: two threads importing at once can
fail one with `ImportError: cannot import name 'AutoTokenizer'`, which Verifiers reports as the
engine call's 502 and the adapter as a dropped group (measured with renderers 0.1.10 and
transformers 5.24: 3 of 6 fresh processes with a pool of 2; 0 of 4 once imported here first).
"""

from __future__ import annotations


def import_tokenizer_classes() -> None:
    """Resolve, once, every transformers name `load_tokenizer` imports lazily (idempotent, cheap after)."""
    from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerFast  # noqa: F401
    from transformers.models.auto.tokenization_auto import get_tokenizer_config  # noqa: F401
