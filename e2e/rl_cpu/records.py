"""What one run measured: a `StepRecord` per step and the `RunRecord` around them, JSON-able.

Written by `e2e.rl_cpu.loop`, read by `checks` (the assertions) and `report` (table and plot);
`RunRecord.to_json`/`from_json` keep a run's numbers beside its checkpoints (`run.json`), so the
report can be rebuilt and the checks replayed without a server. `dump_step`/`load_step` keep one
step's samples with the trainer's log-probs (`--record-steps`; the tests' recorded data).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from e2e.rl_cpu.metrics import TrainSample


@dataclass(frozen=True)
class StepRecord:
    step: int  # k: rollouts on weight version str(k), then the update to k + 1
    reward_mean: float
    reward_std: float
    mismatch_kl: float  # k3 over masked tokens: rollout_log_probs vs the trainer on the same weights
    planted_kl: dict[str, float]  # the same KL with each planted bug applied to this step's samples
    tool_turn_kl: float | None  # the mismatch KL over the turns after a tool's answer (None: no such turn)
    tool_turns: int  # samples of the step with a turn after a tool's answer
    surprisal: float  # mean −rollout log-prob of the sampled tokens (nats): where the planted bugs can show
    samples: int
    groups: int
    tokens: int  # tokens under loss_mask
    weight_versions: list[list[str]]  # distinct `weight_versions` seen on this step's samples
    statuses: dict[str, int]
    loss: float
    clip_fraction: float
    grad_norm: float
    rollout_s: float
    train_s: float  # recompute + update + save
    sync_s: float  # /update_weights_from_disk
    seconds: float  # the whole step


@dataclass(frozen=True)
class RunRecord:
    config: dict[str, Any]
    sglang_version: str
    startup_s: float  # SGLang spawn to /health 200
    total_s: float  # the whole run, server start-up included
    cpus: int
    load_before: tuple[float, float, float]  # os.getloadavg() when the run started
    load_after: tuple[float, float, float]
    steps: list[StepRecord] = field(default_factory=list)
    control: list[StepRecord] = field(default_factory=list)  # the lr-0 run on the same seeds (may be empty)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        data = json.loads(text)
        steps = [StepRecord(**step) for step in data.pop("steps")]
        control = [StepRecord(**step) for step in data.pop("control", [])]
        return cls(**{**data, "load_before": tuple(data["load_before"]), "load_after": tuple(data["load_after"]),
                      "steps": steps, "control": control})


def dump_step(path: Path, samples: list[TrainSample], trainer_lps: list[list[float]]) -> None:
    """One step's samples and, per sample, the trainer's log-probs of tokens[1:]."""
    rows = [{**asdict(s), "trainer_lp": lp} for s, lp in zip(samples, trainer_lps, strict=True)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, separators=(",", ":")) + "\n")


def load_step(path: Path) -> tuple[list[TrainSample], list[list[float]]]:
    """What `dump_step` wrote: the samples (checked again) and the trainer's log-probs."""
    rows = json.loads(path.read_text())
    samples = [TrainSample(**{name: tuple(value) if isinstance(value, list) else value
                              for name, value in row.items() if name != "trainer_lp"}) for row in rows]
    return samples, [row["trainer_lp"] for row in rows]
