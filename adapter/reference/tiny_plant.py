"""Copy heads planted in the tiny model before it trains: positional attention that reads a
token a fixed distance back and writes its identity where the output layer reads it.

Consumes: the compact model `tiny_train.py` builds (seeded init), the compact indices of the
tokens that may be copied (the ten digits and the tool words' pieces), and the recipe's
`plant` section (see `tiny_model.py`). Emits: the planted weights, in place, and gradient
masks that keep the planted mechanism fixed while everything else trains.

Why. Retrieval by content (find the stamp, copy it) does not form in a few hundred steps of
this model. But echo-tool-v1's copies are positional: a stamp's digits are one token each, so
every reply digit sits a constant number of tokens after its source digit in the tool response,
and the call's word sits a constant number of tokens after the word in the user message (one
distance per number of word pieces: `tiny_tools.copy_offsets`). A head whose query and key do
not depend on content attends by relative position alone, and RoPE makes that a fixed distance.

What is planted (all in residual coordinates of the compact model):
  * dimension 0 of every embedding row is the constant `shared` (frozen), and no layer before
    the last writes there (their output rows for that dimension are zero and frozen), so the
    last layer's input is exactly `shared` in dimension 0 at every position;
  * the last layer's queries and keys read only that dimension (frozen, and frozen norms): after
    q_norm/k_norm they are the same vectors at every position, whatever the token. Key: 1 on
    the first half of the rotary pairs. Query of head h: the coefficients, in HF's rotate_half
    convention, of a sum of the 32 RoPE frequencies whose attention score peaks at distance
    `offsets[h]` over 0..`span` and rises with distance below `monotone` (so a sequence shorter
    than the offset, e.g. an arithmetic prompt, attends to its first token, `<|im_start|>`, which
    carries nothing to copy); the coefficients solve a small margin problem (seeded, float64,
    `solver_iters` L-BFGS steps), scaled so the peak wins by `sharpness` logits;
  * copy slots: dimensions 1..k, one per copyable token; its embedding row holds `copy_embed`
    in its slot and every other row 0 there (trainable); the last layer's values read the slots
    and its outputs write them back (head h with gain `digit_gain[h]` for digits and
    `word_gain[h]` for word pieces: trainable). Through the tied output layer, a copied slot
    raises exactly its token's logit.
Training then learns how strongly to follow each copy and when (the noisy teacher's word mix,
the stamp's exact copies); the planted heads only make the copy available. The last layer's
attention is positional only; the layers before it attend by content as usual (which is why
the model has three layers: with two, the arithmetic rows lost their only content layer to
the tool lessons).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

SHARED_DIM = 0

Masks = dict[str, torch.Tensor]  # parameter name -> 1.0 where it trains, 0.0 where frozen


def rope_frequencies(head_dim: int, theta: float) -> torch.Tensor:
    """HF's default RoPE inverse frequencies (float64), one per rotary pair."""
    return theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)


def positional_query(freqs: torch.Tensor, offset: int, plant: Mapping[str, Any]) -> tuple[torch.Tensor, float]:
    """Unit coefficients c (cos terms, then sin terms) of s(d) = sum_f c_f cos(d w_f) + c'_f sin(d w_f)
    with s(offset) above every other s(d), d in 0..span, and s increasing on 0..monotone; and that
    margin. Solved as min |c|^2 with every margin >= 1 (squared-hinge penalty, L-BFGS)."""
    span, monotone = plant["span"], plant["monotone"]
    d = torch.arange(span + 1, dtype=torch.float64)[:, None]
    basis = torch.cat([torch.cos(d * freqs), torch.sin(d * freqs)], dim=1)
    others = [k for k in range(span + 1) if k != offset]
    gaps = torch.cat([basis[offset] - basis[others], basis[1 : monotone + 1] - basis[:monotone]])
    coef = torch.zeros(basis.shape[1], dtype=torch.float64, requires_grad=True)
    solver = torch.optim.LBFGS([coef], max_iter=plant["solver_iters"], line_search_fn="strong_wolfe",
                               tolerance_grad=1e-12, tolerance_change=1e-14)

    def objective() -> torch.Tensor:
        solver.zero_grad()
        loss = coef.pow(2).sum() + 1e3 * torch.relu(1 - gaps @ coef).pow(2).sum()
        loss.backward()
        return loss

    solver.step(objective)
    coef = coef.detach()
    margin = float((gaps @ coef).min() / coef.norm())
    if margin <= 0:
        raise ValueError(f"no positional query peaks at distance {offset} (margin {margin})")
    return coef / coef.norm(), margin


def planted_masks(model: Any) -> Masks:
    """The gradient masks of a planted model (1.0 trains, 0.0 stays): the shared dimension of the
    embeddings, the rows of the earlier layers that would write into it, the last layer's norm
    entry for it and its positional queries and keys (`q_proj`, `k_proj`, `q_norm`, `k_norm`).
    A function of the model's shape only, so a trainer that fine-tunes a planted model (the RL
    lane) keeps the mechanism as the build did: one step of Adam moves every entry by about its
    learning rate, and entries of 5e-4 in a query that reads 0.05 make the copy heads attend by
    content (measured: a single update at lr 5e-4 took the tool-call rate from 0.88 to 0)."""
    layers = model.model.layers
    masks: Masks = {}

    def frozen(name: str, weight: torch.Tensor, rows: Any = slice(None)) -> None:
        masks.setdefault(name, torch.ones_like(weight))[rows] = 0.0

    frozen("model.embed_tokens.weight", model.model.embed_tokens.weight, (slice(None), SHARED_DIM))
    for number, layer in enumerate(layers[:-1]):
        frozen(f"model.layers.{number}.self_attn.o_proj.weight", layer.self_attn.o_proj.weight, SHARED_DIM)
        frozen(f"model.layers.{number}.mlp.down_proj.weight", layer.mlp.down_proj.weight, SHARED_DIM)
    prefix, last = f"model.layers.{len(layers) - 1}", layers[-1]
    frozen(f"{prefix}.input_layernorm.weight", last.input_layernorm.weight, SHARED_DIM)
    for name in ("q_proj", "k_proj", "q_norm", "k_norm"):
        frozen(f"{prefix}.self_attn.{name}.weight", getattr(last.self_attn, name).weight)
    return masks


def plant_copy_heads(model: Any, digits: list[int], pieces: list[int], plant: Mapping[str, Any]) -> Masks:
    """Plant the copy heads into the compact `model` (in place; see the module docstring) for the
    copyable compact token indices `digits` and `pieces`; returns the gradient masks."""
    config = model.config
    head_dim, heads, offsets = config.head_dim, config.num_attention_heads, plant["offsets"]
    if config.num_key_value_heads != 1 or len(offsets) != heads or head_dim % 2:
        raise ValueError("copy heads need one KV head and one offset per query head")
    slots = [*digits, *pieces]
    if 1 + len(slots) > config.hidden_size:
        raise ValueError(f"{len(slots)} copy slots do not fit in {config.hidden_size} dimensions")
    freqs = rope_frequencies(head_dim, config.rope_parameters["rope_theta"])
    half = head_dim // 2
    last = model.model.layers[-1]
    attention = last.self_attn
    with torch.no_grad():
        embed = model.model.embed_tokens.weight
        embed[:, SHARED_DIM] = plant["shared"]
        embed[:, 1 : 1 + len(slots)] = 0.0
        for slot, token in enumerate(slots):
            embed[token, 1 + slot] = plant["copy_embed"]
        for layer in model.model.layers[:-1]:
            layer.self_attn.o_proj.weight[SHARED_DIM] = 0.0
            layer.mlp.down_proj.weight[SHARED_DIM] = 0.0
        last.input_layernorm.weight[SHARED_DIM] = 1.0
        key = torch.zeros(head_dim, dtype=torch.float64)
        key[:half] = 1.0
        attention.k_proj.weight.zero_()
        attention.k_proj.weight[:, SHARED_DIM] = key.float()
        attention.q_proj.weight.zero_()
        margins = []
        for head, offset in enumerate(offsets):
            coef, margin = positional_query(freqs, offset, plant)
            query = torch.cat([coef[:half], -coef[half:]])  # real part, then minus the imaginary part
            attention.q_proj.weight[head * head_dim : (head + 1) * head_dim, SHARED_DIM] = query.float()
            margins.append(margin)
        # score = q.k / sqrt(head_dim) = sqrt(2) * wq * wk * s(d) for unit coefficients and this key
        scale = (plant["sharpness"] / (2**0.5 * min(margins))) ** 0.5
        attention.q_norm.weight.fill_(scale)
        attention.k_norm.weight.fill_(scale)
        attention.v_proj.weight.zero_()
        attention.o_proj.weight.zero_()
        for slot in range(len(slots)):
            attention.v_proj.weight[slot, 1 + slot] = 1.0
            gains = plant["digit_gain"] if slot < len(digits) else plant["word_gain"]
            for head, gain in enumerate(gains):
                attention.o_proj.weight[1 + slot, head * head_dim + slot] = gain
    return planted_masks(model)


def freeze_masked(model: Any, masks: Masks) -> None:
    """Zero the gradient of every frozen entry (with no weight decay, Adam then never moves it)."""
    parameters = dict(model.named_parameters())
    for name, mask in masks.items():
        parameters[name].register_hook(lambda grad, mask=mask: grad * mask)
