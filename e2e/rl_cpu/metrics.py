"""What the trainer reads from a Miles sample, and the numbers computed from it, in plain Python.

Consumes Miles `Sample`s as the rollout function returns them (docs/contract.md §4:
`len(loss_mask) == len(rollout_log_probs) == response_length`, the response being the last
`response_length` entries of `tokens`) and, per sample, the trainer's per-token log-probabilities
`trainer_lp` of the whole sequence: `trainer_lp[j] = log p(tokens[j+1] | tokens[:j+1])`, so
`len(trainer_lp) == len(tokens) - 1`, at the rollout temperature.

Emits:
  * `group_advantages`: Miles' reward normalisation for grpo (docs/contract.md §8.5,
    `miles/ray/rollout/train_data_conversion.py`): per `group_index`, one reward per rollout
    (`rollout_id`, else `index`; siblings must agree), minus the group mean, divided by the
    group's unbiased std + 1e-6 when there are ≥ 2 rollouts and the std is > 0.
  * `mismatch_kl`: the k3 estimator E[exp(d) - d - 1], d = trainer − rollout log-prob, over the
    tokens under `loss_mask` (a token-weighted mean over the batch), and `token_pairs` feeding it;
    `tool_turn_kl`, the same over the turns that follow a tool's answer.
  * planted bugs (`PLANTED`): copies of a sample with the logprobs shifted by one position or the
    mask one token early; the KL check must catch both.

No torch here: the fast lane (no `demo` group) runs this module's tests.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from e2e.rl_cpu.errors import SampleShapeError

STD_EPS = 1e-6  # Miles: normalized / (std + 1e-6)


@dataclass(frozen=True)
class TrainSample:
    """The fields of one Miles `Sample` the loop uses, checked once."""

    tokens: tuple[int, ...]  # prompt + response
    response_length: int
    loss_mask: tuple[int, ...]  # per response token, 1 = sampled (trained on)
    rollout_log_probs: tuple[float, ...]  # SGLang's log-prob per response token (0.0 where not sampled)
    reward: float
    group_index: int
    rollout_key: int  # Miles' unit inside a group: rollout_id, else index
    weight_versions: tuple[str, ...]
    status: str

    def __post_init__(self) -> None:
        n = self.response_length
        if not (len(self.loss_mask) == len(self.rollout_log_probs) == n) or not 0 < n < len(self.tokens):
            raise SampleShapeError(
                f"sample of group {self.group_index}: loss_mask, rollout_log_probs and response_length must agree "
                f"and leave a prompt in tokens: got {len(self.loss_mask)}, {len(self.rollout_log_probs)}, {n} "
                f"of {len(self.tokens)} tokens (docs/contract.md §4)")

    @property
    def prompt_length(self) -> int:
        return len(self.tokens) - self.response_length

    @property
    def trained_tokens(self) -> int:
        return sum(self.loss_mask)

    @classmethod
    def from_miles(cls, sample: Any) -> TrainSample:
        """From a Miles `Sample` (ours or Miles' own class); the reward must be a number
        (run without --reward-key, or the reward hook's scalar)."""
        if not isinstance(sample.reward, int | float) or isinstance(sample.reward, bool):
            raise SampleShapeError(f"sample {sample.index}: reward {sample.reward!r} is not a number; "
                                   "the loop trains on scalar rewards (leave reward_key unset)")
        key = sample.rollout_id if sample.rollout_id is not None else sample.index
        status = getattr(sample.status, "value", sample.status)
        return cls(tokens=tuple(sample.tokens), response_length=sample.response_length,
                   loss_mask=tuple(sample.loss_mask), rollout_log_probs=tuple(sample.rollout_log_probs),
                   reward=float(sample.reward), group_index=int(sample.group_index), rollout_key=int(key),
                   weight_versions=tuple(sample.weight_versions), status=str(status))


def group_advantages(samples: Sequence[TrainSample], *, std_normalization: bool = True) -> list[float]:
    """One advantage per sample, aligned with `samples`, normalised as Miles does for grpo."""
    groups: dict[int, dict[int, list[int]]] = {}
    for row, sample in enumerate(samples):
        groups.setdefault(sample.group_index, {}).setdefault(sample.rollout_key, []).append(row)
    advantages = [0.0] * len(samples)
    for group_index, rollouts in groups.items():
        shared = [_shared_reward(samples, rows, group_index) for rows in rollouts.values()]
        mean = math.fsum(shared) / len(shared)
        centred = [r - mean for r in shared]
        if std_normalization and len(shared) > 1:
            std = statistics.stdev(shared)  # unbiased, as torch.Tensor.std()
            if std > 0:
                centred = [c / (std + STD_EPS) for c in centred]
        for rows, value in zip(rollouts.values(), centred, strict=True):
            for row in rows:
                advantages[row] = value
    return advantages


def _shared_reward(samples: Sequence[TrainSample], rows: list[int], group_index: int) -> float:
    rewards = [samples[row].reward for row in rows]
    if any(r != rewards[0] for r in rewards[1:]):
        raise SampleShapeError(f"group {group_index}: the samples of one rollout must share one reward "
                               f"(Miles raises ValueError): rows {rows} have {rewards}")
    return rewards[0]


def response_logprobs(sample: TrainSample, trainer_lp: Sequence[float]) -> list[float]:
    """The trainer's log-probs of the response tokens (the last `response_length` of `trainer_lp`)."""
    if len(trainer_lp) != len(sample.tokens) - 1:
        raise SampleShapeError(f"trainer log-probs must cover tokens[1:]: got {len(trainer_lp)} for "
                               f"{len(sample.tokens)} tokens")
    return list(trainer_lp[len(trainer_lp) - sample.response_length:])


def token_pairs(sample: TrainSample, trainer_lp: Sequence[float]) -> list[tuple[float, float]]:
    """(trainer, rollout) log-prob of every token under the loss mask."""
    mine = response_logprobs(sample, trainer_lp)
    return [(t, r) for t, r, m in zip(mine, sample.rollout_log_probs, sample.loss_mask, strict=True) if m]


def k3(trainer: float, rollout: float) -> float:
    """exp(d) - d - 1 with d = trainer - rollout: ≥ 0, 0 only when they agree."""
    d = trainer - rollout
    return math.expm1(d) - d


def after_tool_pairs(sample: TrainSample, trainer_lp: Sequence[float]) -> list[tuple[float, float]]:
    """(trainer, rollout) log-prob of the masked tokens of the turns after a tool's answer: those
    that follow a masked-out stretch of the response (the tool response and the next generation
    prompt, which the model did not sample)."""
    mine = response_logprobs(sample, trainer_lp)
    pairs, bridged = [], False
    for t, r, m in zip(mine, sample.rollout_log_probs, sample.loss_mask, strict=True):
        bridged = bridged or not m
        if m and bridged:
            pairs.append((t, r))
    return pairs


def tool_turn_kl(samples: Sequence[TrainSample], trainer_lps: Sequence[Sequence[float]]) -> float | None:
    """The mismatch KL over the turns after a tool's answer only (`after_tool_pairs`); None when
    no sample of the batch has such a turn."""
    values = [k3(t, r) for s, lp in zip(samples, trainer_lps, strict=True) for t, r in after_tool_pairs(s, lp)]
    return math.fsum(values) / len(values) if values else None


def mismatch_kl(samples: Sequence[TrainSample], trainer_lps: Sequence[Sequence[float]]) -> float:
    """Mean k3 over every masked token of the batch (token-weighted). SampleShapeError when no
    token is under a mask: there is nothing to compare."""
    values = [k3(t, r) for s, lp in zip(samples, trainer_lps, strict=True) for t, r in token_pairs(s, lp)]
    if not values:
        raise SampleShapeError("no token is under loss_mask in this batch: the mismatch KL is undefined")
    return math.fsum(values) / len(values)


def surprisal(samples: Iterable[TrainSample]) -> float:
    """Mean −log-prob of the sampled tokens (under `loss_mask`) in nats: how uncertain the policy
    was. A policy sure of every token (≈ 0) gives a planted bug nothing to change: shifting
    log-probs that are all ≈ 0 leaves them ≈ 0."""
    values = [-lp for s in samples for lp, m in zip(s.rollout_log_probs, s.loss_mask, strict=True) if m]
    return math.fsum(values) / len(values) if values else 0.0


def reward_stats(samples: Iterable[TrainSample]) -> tuple[float, float]:
    """Mean and population std of the rewards."""
    rewards = [s.reward for s in samples]
    return statistics.fmean(rewards), statistics.pstdev(rewards)


# --- planted bugs: the KL check must catch each ------------------------------------------------


def shift_logprobs(sample: TrainSample) -> TrainSample:
    """The adapter's logprobs shifted by one position: each token carries its predecessor's."""
    return replace(sample, rollout_log_probs=(0.0, *sample.rollout_log_probs[:-1]))


def mask_one_early(sample: TrainSample) -> TrainSample:
    """The response window starts one token early: `loss_mask` (and the logprobs) mark each
    sampled token's predecessor, the last prompt token included."""
    return replace(sample, response_length=sample.response_length + 1,
                   loss_mask=(*sample.loss_mask, 0), rollout_log_probs=(*sample.rollout_log_probs, 0.0))


PLANTED: dict[str, Callable[[TrainSample], TrainSample]] = {
    "shift-logprobs": shift_logprobs,
    "mask-one-early": mask_one_early,
}
