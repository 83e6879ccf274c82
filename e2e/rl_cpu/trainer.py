"""The minimal policy-gradient trainer: an fp32 copy of the served model, one PPO-style step per batch.

Consumes the served HuggingFace directory (`model.safetensors` + config + tokenizer, as SGLang
loads it) and `TrainSample`s with their advantages (`e2e.rl_cpu.metrics`). Emits per-token
log-probabilities at the rollout temperature (`logprobs`), the update (`update`) and a checkpoint
in the served directory's layout and dtype (`save`), ready for `/update_weights_from_disk`.

Weights: fp32 master weights take the optimizer's steps; the model that computes (log-probs and
gradients) holds the master weights rounded to the served dtype, so the trainer's recompute runs
on exactly the weights SGLang serves (mixed precision as Megatron does it). Only the mismatch
between SGLang's kernels and this fp32 recompute is left for the KL check to measure.

Loss (where `loss_mask` is 1 only): ratio = exp(logp − rollout_log_probs), the PPO clipped
surrogate −min(ratio·A, clip(ratio, 1±ε)·A), a token mean per rollout, then the mean over rollouts
(Miles' per-rollout token-weighted mean); gradient norm clipped as Miles' --clip-grad.

Optimizer: Adam (Miles' choice) or plain SGD. Adam's first steps move every weight by about the
learning rate whatever its gradient (the update is m/√v, ±1 at step 1), and on the tiny model an
Adam lr that teaches echo-tool within 8 steps breaks the tool call's format on the way (measured:
at lr 1e-3 and 1.5e-3 the first token `<tool_call>` rose to 0.7–0.8 while parsed calls stayed at
20–50 %); SGD moves along the gradient, which the rollouts concentrate on the tokens that decided
the reward. `frozen` masks keep chosen entries fixed (the planted copy heads).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging

from e2e.rl_cpu.errors import ModelLayoutError
from e2e.rl_cpu.metrics import TrainSample

WEIGHTS = "model.safetensors"


@dataclass(frozen=True)
class TrainerOptions:
    lr: float
    temperature: float
    epochs: int = 1  # optimizer steps per batch (each on the whole batch)
    clip_eps: float = 0.2
    clip_grad: float = 1.0
    optimizer: str = "adam"  # "adam" (Adam on the fp32 master weights) or "sgd" (plain gradient steps)
    micro_batch: int = 8  # sequences per forward: the logits are [micro_batch, len, 151936] fp32


@dataclass(frozen=True)
class UpdateStats:
    loss: float  # the last epoch's loss
    clip_fraction: float  # share of masked tokens whose ratio was clipped, over all epochs
    grad_norm: float  # before clipping, the last epoch


def served_tensors(model_dir: Path) -> dict[str, tuple[torch.dtype, tuple[int, ...]]]:
    """Name → (dtype, shape) of every tensor in the served weights."""
    path = model_dir / WEIGHTS
    if not path.is_file():
        raise ModelLayoutError(f"{path} is missing: the loop trains the single-file safetensors model it serves "
                               "(pass the tiny model's directory, or merge a sharded checkpoint first)")
    with safe_open(str(path), framework="pt") as weights:
        return {name: (weights.get_slice(name).get_dtype(), tuple(weights.get_slice(name).get_shape()))
                for name in weights.keys()}  # noqa: SIM118 (safe_open has no __iter__)


_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}


class PolicyTrainer:
    """The policy being trained: built from the served directory, stepped on rollout batches."""

    def __init__(self, model_dir: Path, options: TrainerOptions,
                 frozen: Callable[[Any], Mapping[str, torch.Tensor]] | None = None) -> None:
        """`frozen`: given the loaded model, parameter name → mask (1.0 trains, 0.0 stays), e.g.
        the tiny model's planted copy heads (`tiny_plant.planted_masks`); the masked gradient is
        what Adam sees, so a frozen entry never moves."""
        self.source = model_dir
        self.options = options
        hf_logging.disable_progress_bar()  # the lane's log shows steps, not weight-loading bars
        self.model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
        layout = served_tensors(model_dir)
        params = dict(self.model.named_parameters())  # tied weights appear once, as served
        if set(params) != set(layout):
            raise ModelLayoutError(f"the model's parameters and {model_dir / WEIGHTS} differ: only in the model "
                                   f"{sorted(set(params) - set(layout))}, only in the file "
                                   f"{sorted(set(layout) - set(params))}")
        unknown = sorted({dtype for dtype, _ in layout.values()} - set(_DTYPES))
        if unknown:
            raise ModelLayoutError(f"{model_dir / WEIGHTS} holds {unknown} tensors; the trainer handles "
                                   "bf16, fp16 and fp32 weights only")
        self.served_dtype = {name: _DTYPES[dtype] for name, (dtype, _) in layout.items()}
        self.frozen = dict(frozen(self.model)) if frozen is not None else {}
        if unknown_frozen := sorted(set(self.frozen) - set(params)):
            raise ModelLayoutError(f"frozen masks name parameters the model does not have: {unknown_frozen}")
        self.params = params
        self.master = {name: p.detach().clone() for name, p in params.items()}
        if options.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer {options.optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")
        self.optimizer = OPTIMIZERS[options.optimizer](self.master.values(), lr=options.lr)
        self._round_to_served()

    def _round_to_served(self) -> None:
        with torch.no_grad():
            for name, p in self.params.items():
                p.copy_(self.master[name].to(self.served_dtype[name]).float())

    def _batches(self, samples: Sequence[TrainSample]) -> Iterator[list[TrainSample]]:
        size = self.options.micro_batch
        for start in range(0, len(samples), size):
            yield list(samples[start:start + size])

    def _hidden(self, batch: list[TrainSample]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded ids [batch, width] and the last hidden states [batch, width, hidden]."""
        width = max(len(s.tokens) for s in batch)
        ids = torch.zeros(len(batch), width, dtype=torch.long)
        attention = torch.zeros(len(batch), width, dtype=torch.long)
        for row, sample in enumerate(batch):
            ids[row, :len(sample.tokens)] = torch.tensor(sample.tokens)
            attention[row, :len(sample.tokens)] = 1
        return ids, self.model.model(input_ids=ids, attention_mask=attention).last_hidden_state

    def _logp(self, hidden: torch.Tensor, next_ids: torch.Tensor) -> torch.Tensor:
        """log p(next_ids | hidden) at the rollout temperature, over the whole vocabulary."""
        logits = self.model.lm_head(hidden).float() / self.options.temperature
        return torch.log_softmax(logits, dim=-1).gather(-1, next_ids[..., None]).squeeze(-1)

    def _response_logprobs(self, batch: list[TrainSample]) -> list[torch.Tensor]:
        """Per sample, the log-probs of its response tokens only (the lm_head runs on those
        positions alone: the vocabulary projection is most of the cost)."""
        ids, hidden = self._hidden(batch)
        out = []
        for row, sample in enumerate(batch):
            end = len(sample.tokens) - 1
            positions = slice(end - sample.response_length, end)
            out.append(self._logp(hidden[row, positions], ids[row, positions.start + 1:end + 1]))
        return out

    def logprobs(self, samples: Sequence[TrainSample]) -> list[list[float]]:
        """Per sample, the trainer's log-prob of tokens[1:] on the current (served) weights."""
        out: list[list[float]] = []
        with torch.no_grad():
            for batch in self._batches(samples):
                ids, hidden = self._hidden(batch)
                logp = self._logp(hidden[:, :-1], ids[:, 1:])  # right padding: a row's tail is ignored
                out += [logp[row, :len(s.tokens) - 1].tolist() for row, s in enumerate(batch)]
        return out

    def _batch_loss(self, batch: list[TrainSample], advantages: list[float]) -> tuple[torch.Tensor, int, int]:
        """Sum over the batch of each rollout's token-mean clipped loss; clipped and masked token counts."""
        total = torch.zeros(())
        clipped = masked = 0
        eps = self.options.clip_eps
        for new, sample, advantage in zip(self._response_logprobs(batch), batch, advantages, strict=True):
            mask = torch.tensor(sample.loss_mask, dtype=torch.float32)
            ratio = torch.exp(new - torch.tensor(sample.rollout_log_probs))
            surrogate = torch.minimum(ratio * advantage, ratio.clamp(1 - eps, 1 + eps) * advantage)
            total = total - (surrogate * mask).sum() / mask.sum().clamp(min=1.0)
            clipped += int((((ratio - 1).abs() > eps).float() * mask).sum())
            masked += int(mask.sum())
        return total, clipped, masked

    def update(self, samples: Sequence[TrainSample], advantages: Sequence[float]) -> UpdateStats:
        """`epochs` optimizer steps on the whole batch; the model is left on the new served-dtype weights."""
        clipped = masked = 0
        loss_value = grad_norm = 0.0
        for _ in range(self.options.epochs):
            self.model.zero_grad(set_to_none=True)
            loss_value = 0.0
            for start in range(0, len(samples), self.options.micro_batch):
                batch = list(samples[start:start + self.options.micro_batch])
                loss, c, m = self._batch_loss(batch, list(advantages[start:start + len(batch)]))
                (loss / len(samples)).backward()
                loss_value += loss.item() / len(samples)
                clipped, masked = clipped + c, masked + m
            for name, p in self.params.items():
                grad = None if p.grad is None else p.grad.detach().clone()
                if grad is not None and name in self.frozen:
                    grad *= self.frozen[name]
                self.master[name].grad = grad
            grad_norm = float(torch.nn.utils.clip_grad_norm_(list(self.master.values()), self.options.clip_grad))
            self.optimizer.step()
            self._round_to_served()
        return UpdateStats(loss=loss_value, clip_fraction=clipped / max(masked, 1), grad_norm=grad_norm)

    def save(self, out_dir: Path) -> Path:
        """The current weights as a model directory SGLang can load: the served directory's other
        files (config, tokenizer) copied, `model.safetensors` with its tensor names and dtypes."""
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True)
        for path in self.source.iterdir():
            if path.is_file() and path.name != WEIGHTS:
                shutil.copy2(path, out_dir / path.name)
        tensors = {name: self.master[name].to(self.served_dtype[name]).contiguous() for name in self.master}
        save_file(tensors, str(out_dir / WEIGHTS), metadata={"format": "pt"})
        return out_dir
