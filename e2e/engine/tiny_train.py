"""Training data and the short training loop of the tiny Qwen3-shaped model.

Consumes: a randomly initialised causal LM, the real Qwen3 tokenizer and the `train` section
of the recipe (see `tiny_model.py`). Emits: the trained model (in place) and its final loss.

The data is the chat format of the bundled `arith-v1` taskset: one user message rendered
exactly as Renderers' Qwen3 renderer renders it with the generation prompt (thinking enabled,
the default: nothing follows "assistant\\n"; `tests/test_reference_engine.py` checks this
prefix against Renderers), then the answer's digits and `<|im_end|>`. Questions are random
("What is {a} {op} {b}? Answer with just the number.") from a fixed data seed, so the model
learns the format and to stop, and gets only some sums right. Loss is taken on the answer
and `<|im_end|>` only; the LM head is applied to those positions only (the full-vocabulary
head dominates the cost otherwise). Sequences are right-padded: with causal attention, the
pads never influence a scored position, so no attention mask is needed.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Mapping
from typing import Any

import torch
from tqdm import tqdm

logger = logging.getLogger(__name__)

# Renderers' Qwen3 renderer, one user message, add_generation_prompt=True (thinking on).
PROMPT_TEMPLATE = "<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
QUESTION_TEMPLATE = "What is {a} {op} {b}? Answer with just the number."
END_OF_TURN = "<|im_end|>"
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def render_prompt(question: str) -> str:
    """The prompt text the engine sees for one user message (the generation prompt included)."""
    return PROMPT_TEMPLATE.format(question=question)


def random_problem(rng: random.Random, ranges: Mapping[str, Any]) -> tuple[str, int]:
    """One arithmetic question in the taskset's wording, and its answer."""
    op = rng.choice(sorted(OPS))
    if op == "*":
        a, b = rng.randint(1, ranges["mul_max"]), rng.randint(1, ranges["mul_max"])
    elif op == "-":
        a = rng.randint(1, ranges["sub_max"])
        b = rng.randint(0, a)
    else:
        a, b = rng.randint(0, ranges["add_max"]), rng.randint(0, ranges["add_max"])
    return QUESTION_TEMPLATE.format(a=a, op=op, b=b), OPS[op](a, b)


def draw_problem(rng: random.Random, train: Mapping[str, Any]) -> tuple[str, int]:
    """A training problem: one of the recipe's anchor rows with probability
    `anchor_fraction`, else a random one from `ranges`."""
    anchors = train["anchors"]
    if anchors and rng.random() < train["anchor_fraction"]:
        a, op, b = rng.choice(anchors)
        return QUESTION_TEMPLATE.format(a=a, op=op, b=b), OPS[op](a, b)
    return random_problem(rng, train["ranges"])


def encode_example(tokenizer: Any, question: str, answer: int) -> tuple[list[int], int]:
    """Token ids of prompt + answer + `<|im_end|>`, and how many of them the prompt holds."""
    prompt = tokenizer.encode(render_prompt(question), add_special_tokens=False)
    target = tokenizer.encode(f"{answer}{END_OF_TURN}", add_special_tokens=False)
    return prompt + target, len(prompt)


def _batch(tokenizer: Any, rng: random.Random, train: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded input ids [B, T] and a boolean mask [B, T] of the positions whose NEXT
    token is scored (the last prompt token through the token before `<|im_end|>`)."""
    rows = [encode_example(tokenizer, *draw_problem(rng, train)) for _ in range(train["batch_size"])]
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    scored = torch.zeros((len(rows), width), dtype=torch.bool)
    for row, (tokens, prompt_len) in enumerate(rows):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        scored[row, prompt_len - 1 : len(tokens) - 1] = True
    return ids, scored


def _loss(model: Any, ids: torch.Tensor, scored: torch.Tensor) -> torch.Tensor:
    hidden = model.model(input_ids=ids).last_hidden_state
    logits = model.lm_head(hidden[:, :-1][scored[:, :-1]])
    targets = ids[:, 1:][scored[:, :-1]]
    return torch.nn.functional.cross_entropy(logits.float(), targets)


def _lr_factor(step: int, train: Mapping[str, Any]) -> float:
    """Linear warm-up, then cosine decay to 10% of the peak."""
    warmup, steps = train["warmup_steps"], train["steps"]
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))


def train_model(model: Any, tokenizer: Any, train: Mapping[str, Any], *, progress: bool) -> float:
    """Train `model` in place for `train["steps"]` steps; returns the mean loss of the last 10."""
    rng = random.Random(train["data_seed"])
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=train["lr"], weight_decay=train["weight_decay"], betas=(0.9, 0.98), fused=True
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: _lr_factor(step, train))
    model.train()
    recent: list[float] = []
    bar = tqdm(range(train["steps"]), desc="tiny-qwen3", unit="step", disable=not progress, leave=False)
    for _ in bar:
        ids, scored = _batch(tokenizer, rng, train)
        loss = _loss(model, ids, scored)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        recent = [*recent[-9:], loss.detach().item()]
        bar.set_postfix(loss=f"{recent[-1]:.3f}")
    bar.close()
    model.eval()
    final = sum(recent) / len(recent)
    logger.info("tiny-qwen3: trained %d steps, final loss %.4f", train["steps"], final)
    return final
