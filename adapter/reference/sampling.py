"""Pure next-token sampling: logits + `SamplingParams` → (token id, logprob).

Consumes: one step's logits (a 1-D tensor over the vocabulary), the request's validated
`SamplingParams` and its `torch.Generator`. Emits: the sampled id and its logprob.

Logprob convention (SGLang's, as the adapter's contract expects): the logprob is
`log_softmax(logits / temperature)[token]`, taken BEFORE top-k/top-p/min-p truncation; greedy
requests (temperature < 1e-6 or top_k == 1) take the argmax and report
`log_softmax(logits)[token]`. Truncation only decides which tokens may be drawn.
Reproducibility: a request with `sampling_seed` draws from a generator seeded with it, so the
same seed, prompt and parameters give the same tokens within one build of the engine; without
a seed the generator is seeded from the OS entropy source.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from adapter.reference.params import SamplingParams

SEED_MODULUS = 2**63  # torch.Generator.manual_seed takes [0, 2**64); negative seeds wrap


def make_generator(seed: int | None) -> torch.Generator:
    """A per-request CPU generator: seeded when `seed` is given, nondeterministic otherwise."""
    generator = torch.Generator(device="cpu")
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed % SEED_MODULUS)
    return generator


def mask_tokens(logits: torch.Tensor, token_ids: Iterable[int]) -> torch.Tensor:
    """A copy of `logits` in which `token_ids` can never be drawn (min_new_tokens)."""
    ids = [i for i in token_ids if 0 <= i < logits.shape[-1]]
    if not ids:
        return logits
    masked = logits.clone()
    masked[ids] = float("-inf")
    return masked


def _truncated(probs: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """`probs` with the tokens outside top-k, top-p and min-p zeroed (not renormalised:
    `torch.multinomial` takes unnormalised weights)."""
    if params.top_k <= 0 and params.top_p >= 1.0 and params.min_p <= 0.0:
        return probs
    ordered, order = torch.sort(probs, descending=True)
    keep = torch.ones_like(ordered, dtype=torch.bool)
    if params.top_k > 0:
        keep[params.top_k :] = False
    if params.top_p < 1.0:
        before = torch.cumsum(ordered, dim=0) - ordered  # mass strictly before each token
        keep &= before < params.top_p
    if params.min_p > 0.0:
        keep &= ordered >= params.min_p * ordered[0]
    keep[0] = True  # the most likely token always stays drawable
    kept = torch.zeros_like(probs)
    kept[order[keep]] = ordered[keep]
    return kept


def sample_next(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> tuple[int, float]:
    """The next token and its logprob (see the module docstring for the convention)."""
    if logits.dim() != 1:
        raise ValueError(f"expected 1-D logits over the vocabulary, got shape {tuple(logits.shape)}")
    logits = logits.float()
    if params.greedy:
        token = int(torch.argmax(logits))
        return token, float(torch.log_softmax(logits, dim=-1)[token])
    logprobs = torch.log_softmax(logits / params.temperature, dim=-1)
    weights = _truncated(logprobs.exp(), params)
    token = int(torch.multinomial(weights, 1, generator=generator))
    return token, float(logprobs[token])
