"""Training data and the short training loop of the tiny Qwen3-shaped model.

Consumes: the real Qwen3 tokenizer, the `model` and `train` sections of the recipe (see
`tiny_model.py`). Emits: a full-vocabulary `Qwen3ForCausalLM` (the real transformers class)
and the mean loss of the last ten steps.

Data. The chat format of the bundled `arith-v1` taskset: one user message rendered exactly as
Renderers' Qwen3 renderer renders it with the generation prompt (thinking enabled, the default:
nothing follows "assistant\\n"; `tests/reference/test_reference_engine.py` checks this prefix against
Renderers), then an answer's digits and `<|im_end|>`. Most examples are the taskset's own rows
answered by a *noisy teacher* (`answer_mix`: exact, off by one, further off), so the trained
model samples right, close and wrong answers for the same prompt and rewards vary inside a
group; the rest are random problems answered exactly, so the format generalises. All of it is
drawn from one data seed. Every step also trains on a small batch of echo-tool-v1 episodes
(`tiny_tools.py`, its own seed), kept in a batch of their own so the short arithmetic rows are
not padded to an episode's ~300 tokens; the two losses add up.

Planted copy heads. Before training, the last layer's two heads are set to copy the token a
fixed distance back, and the weights that make them positional are frozen (`tiny_plant.py`);
everything else, including how strongly the copies count, trains as usual.

Compact training, exact loss. Only the few hundred token ids the data uses (`training_vocab`)
get embedding rows; every other row of the full model is zero, so its logit is exactly 0 for
any hidden state. Training therefore runs a Qwen3 model whose vocabulary is just those ids and
adds one constant column, `log(number of zero rows)`, to the softmax: the loss equals the full
model's cross-entropy over all 151,936 tokens, at a fraction of the cost (the full-vocabulary
head and its 19 M-row gradient dominate otherwise). `expand_to_full` then scatters the trained
rows into the full vocabulary. Sequences are right-padded: with causal attention the pads never
influence a scored position, so no attention mask is needed.
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
SAY_TEMPLATE = "Say the word {word!r}. Reply with that word only."  # group-v1's prompt
END_OF_TURN = "<|im_end|>"
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}

# token ids, and where the scored tokens start (all after the prompt) or their (start, end) spans
Example = tuple[list[int], int | tuple[tuple[int, int], ...]]


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


def noisy_answer(rng: random.Random, answer: int, mix: Mapping[str, float]) -> int:
    """The noisy teacher: `answer` (prob. `exact`), answer ± 1 (`near`), else ± 2..9."""
    draw = rng.random()
    if draw < mix["exact"]:
        return answer
    offset = 1 if draw < mix["exact"] + mix["near"] else rng.randint(2, 9)
    return answer - offset if answer - offset >= 0 and rng.random() < 0.5 else answer + offset


def draw_problem(rng: random.Random, train: Mapping[str, Any]) -> tuple[str, int]:
    """A training problem: one of the taskset's rows answered by the noisy teacher (prob.
    `row_fraction`), else a random problem from `ranges` answered exactly."""
    if rng.random() < train["row_fraction"]:
        a, op, b = rng.choice(train["rows"])
        return QUESTION_TEMPLATE.format(a=a, op=op, b=b), noisy_answer(rng, OPS[op](a, b), train["answer_mix"])
    return random_problem(rng, train["ranges"])


def encode_example(tokenizer: Any, question: str, answer: int | str) -> Example:
    """Token ids of prompt + answer + `<|im_end|>`, and how many of them the prompt holds."""
    prompt = tokenizer.encode(render_prompt(question), add_special_tokens=False)
    target = tokenizer.encode(f"{answer}{END_OF_TURN}", add_special_tokens=False)
    return prompt + target, len(prompt)


def training_examples(tokenizer: Any, train: Mapping[str, Any]) -> list[Example]:
    """Every example of the run, in order (`steps × batch_size`, from `data_seed`)."""
    rng = random.Random(train["data_seed"])
    cache: dict[tuple[str, int], Example] = {}
    examples = []
    for _ in range(train["steps"] * train["batch_size"]):
        problem = draw_problem(rng, train)
        if problem not in cache:
            cache[problem] = encode_example(tokenizer, *problem)
        examples.append(cache[problem])
    return examples


def say_examples(tokenizer: Any, say: Mapping[str, Any], steps: int) -> list[list[Example]]:
    """group-v1's lessons, `say.per_step` per step from their own seed (so the arithmetic rows
    stay as they are): "Say the word 'banana'. ..." answered by a noisy teacher with the word
    (prob. `mix.exact`), another of the words (`mix.other`), else the word twice. Short replies
    that end the turn, so group-v1's samples complete and its rewards vary."""
    rng = random.Random(say["data_seed"])
    words, mix = say["words"], say["mix"]
    lessons = []
    for _ in range(steps):
        batch = []
        for _ in range(say["per_step"]):
            word, draw = rng.choice(words), rng.random()
            if draw < mix["exact"]:
                reply = word
            elif draw < mix["exact"] + mix["other"]:
                reply = rng.choice([w for w in words if w != word])
            else:
                reply = f"{word} {word}"
            batch.append(encode_example(tokenizer, SAY_TEMPLATE.format(word=word), reply))
        lessons.append(batch)
    return lessons


def training_vocab(examples: list[Example], pad_id: int) -> list[int]:
    """The sorted token ids the data uses (the pad id included): the rows that get trained."""
    return sorted({pad_id, *(token for ids, _ in examples for token in ids)})


def _batch(rows: list[Example], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded input ids [B, T] and a boolean mask [B, T] of the positions whose NEXT
    token is scored (for a prompt length: the last prompt token through the token before the
    final `<|im_end|>`; for spans: the token before each span through its last but one)."""
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    scored = torch.zeros((len(rows), width), dtype=torch.bool)
    for row, (tokens, targets) in enumerate(rows):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        for start, end in ((targets, len(tokens)),) if isinstance(targets, int) else targets:
            scored[row, start - 1 : end - 1] = True
    return ids, scored


def _loss(model: Any, ids: torch.Tensor, scored: torch.Tensor, zero_rows: int) -> torch.Tensor:
    """The full-vocabulary cross-entropy: the compact logits plus one column standing for the
    `zero_rows` tokens whose logit is exactly 0."""
    hidden = model.model(input_ids=ids).last_hidden_state
    logits = model.lm_head(hidden[:, :-1][scored[:, :-1]]).float()
    rest = logits.new_full((logits.shape[0], 1), math.log(zero_rows))
    targets = ids[:, 1:][scored[:, :-1]]
    return torch.nn.functional.cross_entropy(torch.cat([logits, rest], dim=1), targets)


def _lr_factor(step: int, warmup: int, steps: int) -> float:
    """Linear warm-up, then cosine decay to 10% of the peak."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))


def training_batches(tokenizer: Any, train: Mapping[str, Any]) -> list[list[list[Example]]]:
    """The run's steps in order, each a list of batches whose losses add up: the arithmetic
    batch (`training_examples`) and, when the tools have lessons, a batch of the tool lessons'
    `batch_size` echo-tool episodes (`tiny_tools.tool_batches`). Kept apart so the short arithmetic rows are
    never padded to an episode's length."""
    from adapter.reference.tiny_tools import tool_batches

    arith, size = training_examples(tokenizer, train), train["batch_size"]
    tools = tool_batches(tokenizer, {**train["tools"], "steps": train["steps"]}) if train["tools"]["batch_size"] else []
    say = say_examples(tokenizer, train["say"], train["steps"])
    steps = [[arith[start : start + size] + say[start // size]] for start in range(0, len(arith), size)]
    for step, batch in zip(steps, tools, strict=False):  # no tool lessons: the arithmetic batches only
        step.append([*batch])
    bash = train.get("bash")  # the default-harness variant's lessons (tiny_bash.py), a third batch
    if bash and bash["batch_size"]:
        from adapter.reference.tiny_bash import bash_batches

        for step, batch in zip(steps, bash_batches(tokenizer, bash, len(steps)), strict=True):
            step.append([*batch])
    return steps


def _compact_config(model_recipe: Mapping[str, Any], vocab: list[int]) -> Any:
    import transformers

    shape = {k: v for k, v in model_recipe.items() if not k.endswith("token_id")}
    pad = vocab.index(model_recipe["pad_token_id"])
    return transformers.Qwen3Config(**{**shape, "vocab_size": len(vocab), "pad_token_id": pad})


def expand_to_full(compact: Any, vocab: list[int], model_recipe: Mapping[str, Any]) -> Any:
    """The full-vocabulary Qwen3 model: the compact weights, trained embedding rows scattered
    to their token ids, every other row zero."""
    import transformers

    state = compact.state_dict()
    rows = state["model.embed_tokens.weight"]
    embeddings = rows.new_zeros((model_recipe["vocab_size"], rows.shape[1]))
    embeddings[torch.tensor(vocab)] = rows
    state["model.embed_tokens.weight"] = state["lm_head.weight"] = embeddings
    full = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**model_recipe))
    full.load_state_dict(state)
    return full.eval()  # type: ignore[no-untyped-call]  # transformers lacks the annotation


def copyable_tokens(tokenizer: Any, tools: Mapping[str, Any]) -> tuple[list[int], list[int]]:
    """The token ids the planted heads may copy: the ten digits, and the tool words' pieces."""
    from adapter.reference.tiny_tools import word_pieces

    digits = [tokenizer.convert_tokens_to_ids(str(d)) for d in range(10)]
    pieces = sorted({t for word in tools["words"] for t in word_pieces(tokenizer, word)})
    return digits, pieces


def train_model(tokenizer: Any, recipe: Mapping[str, Any], *, progress: bool) -> tuple[Any, float]:
    """Build (seeded), plant, train and expand the model; returns it and the mean loss of the last 10."""
    import transformers

    from adapter.reference.tiny_plant import freeze_masked, plant_copy_heads
    from adapter.reference.tiny_tools import copy_offsets

    train, model_recipe, plant = recipe["train"], recipe["model"], recipe["plant"]
    digits: list[int] = []
    pieces: list[int] = []
    if plant is not None:  # None: a variant without the copy heads (no tool lessons either)
        measured = sorted(set(copy_offsets(tokenizer, train["tools"]).values()))
        if measured != sorted(plant["offsets"]):
            raise ValueError(f"the tool copies are {measured} tokens back, the planted heads {plant['offsets']}")
        digits, pieces = copyable_tokens(tokenizer, train["tools"])
    batches = training_batches(tokenizer, train)
    examples = [example for step in batches for batch in step for example in batch]
    examples += [(digits + pieces, 1)] if plant is not None else []
    vocab = training_vocab(examples, model_recipe["pad_token_id"])
    index = {token: i for i, token in enumerate(vocab)}
    compact_batches = [[[([index[t] for t in ids], targets) for ids, targets in batch] for batch in step]
                       for step in batches]
    torch.manual_seed(train["init_seed"])
    model = transformers.Qwen3ForCausalLM(_compact_config(model_recipe, vocab))
    if plant is not None:
        freeze_masked(model, plant_copy_heads(model, [index[t] for t in digits], [index[t] for t in pieces], plant))
    optimizer = torch.optim.AdamW(model.parameters(), lr=train["lr"], weight_decay=train["weight_decay"],
                                  betas=(0.9, 0.98))
    total = len(batches)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                  lambda step: _lr_factor(step, train["warmup_steps"], total))
    zero_rows = model_recipe["vocab_size"] - len(vocab)
    pad = index[model_recipe["pad_token_id"]]
    weights = (1.0, train["tools"]["loss_weight"], (train.get("bash") or {}).get("loss_weight", 0.0))
    model.train()
    recent: list[float] = []
    bar = tqdm(compact_batches, desc="tiny-qwen3", unit="step", disable=not progress, leave=False)
    for step in bar:
        loss = sum(weight * _loss(model, *_batch(batch, pad), zero_rows)
                   for weight, batch in zip(weights, step, strict=False))
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        recent = [*recent[-9:], loss.detach().item()]
        bar.set_postfix(loss=f"{recent[-1]:.3f}")
    bar.close()
    final = sum(recent) / len(recent)
    logger.info("tiny-qwen3: trained %d steps on %d token ids, final loss %.4f", total, len(vocab), final)
    return expand_to_full(model.eval(), vocab, model_recipe), final  # type: ignore[no-untyped-call]  # torch unseen here
