"""The miles lane's ONE stand-in: the train actor, doing what Miles' Megatron actor does under
`--debug-rollout-only` (miles-rl 0.0.2, `miles/backends/megatron_utils/actor.py`), on a CPU.

Miles' `create_training_models` builds `MegatronTrainRayActor` even under `--debug-rollout-only`,
and its `init` calls `torch.cuda.set_device`, starts NCCL and initialises Megatron: the one hard
GPU dependency of the rollout path (docs/miles.md, "What is stood in, and why"). With `--debug-rollout-only` that actor
then only

  (a) reports `{"dp_size": intra_dp.size}` to `rollout_manager.set_train_parallel_config`
      (Miles' own `TrainRayActor.set_rollout_manager`, inherited here unchanged);
  (b) in `train()` calls Miles' `get_rollout_data` (the dp shard → tensors) and `log_rollout_data`;
  (c) returns at once from `update_weights` and `save_model`.

`DebugRolloutOnlyActor` does exactly that, with a world-size-1 gloo group on 127.0.0.1 as Miles'
`ParallelState` (every dimension size 1) and `torch.cuda.current_device` answering "cpu" in this
process only (get_rollout_data places its tensors there). It also writes what Miles handed it,
per rollout, to `$VF_SGLANG_MILES_LANE_DIR/converted_<rollout_id>.json`, for the lane's checks.
`StandInTrainGroup` is Miles' own `RayTrainGroup` with only the actor class swapped; the driver
(`e2e.miles_cpu.train`) hands it to Miles' unchanged `create_training_models`.

Runs inside the Miles venv only (imports ray, torch and miles); nothing in the project imports it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import ray
import torch
import torch.distributed as dist
from miles.backends.training_utils.data import get_rollout_data
from miles.backends.training_utils.log_utils import log_rollout_data
from miles.backends.training_utils.parallel import GroupInfo, ParallelState, set_parallel_state
from miles.ray.actor_group import RayTrainGroup
from miles.ray.train_actor import TrainRayActor
from miles.utils.misc import get_free_port
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from e2e.miles_cpu import LANE_DIR_VAR


def _one_rank_state() -> ParallelState:
    world = dist.group.WORLD
    one = GroupInfo(rank=0, size=1, group=world, gloo_group=world)
    return ParallelState(intra_dp=one, intra_dp_cp=one, cp=one, tp=one, pp=one, ep=one, etp=one)


def _lengths(values: list[Any]) -> list[int]:
    return [len(v) for v in values]


def converted_summary(rollout_id: int, data: dict[str, Any]) -> dict[str, Any]:
    """What Miles' conversion produced, as plain JSON: per-sample lengths, rewards, versions."""
    summary: dict[str, Any] = {
        "rollout_id": rollout_id,
        "keys": sorted(data),
        "tokens": _lengths(data["tokens"]),
        "total_lengths": list(data["total_lengths"]),
        "response_lengths": list(data["response_lengths"]),
        "loss_masks": _lengths(data["loss_masks"]),
        "loss_mask_sums": [int(m.sum()) for m in data["loss_masks"]],
        "rewards": [float(r) for r in data["rewards"]],
        "raw_reward": [float(r) for r in data["raw_reward"]],
        "truncated": list(data["truncated"]),
        "sample_indices": list(data["sample_indices"]),
        "weight_versions": data.get("weight_versions"),
    }
    if "rollout_log_probs" in data:
        summary["rollout_log_probs"] = _lengths(data["rollout_log_probs"])
        summary["rollout_log_probs_finite"] = all(bool(torch.isfinite(t).all()) for t in data["rollout_log_probs"])
    return summary


class DebugRolloutOnlyActor(TrainRayActor):
    """Miles' train actor under `--debug-rollout-only`, without Megatron or a GPU (module docstring)."""

    def init(self, args: Any, role: str, with_ref: bool = False) -> int:
        self.args, self.role, self.with_ref = args, role, with_ref
        torch.cuda.current_device = lambda: "cpu"  # this process only: get_rollout_data's tensors
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{get_free_port(start_port=29600)}",
                                world_size=1, rank=0)
        args.rank, args.world_size = dist.get_rank(), dist.get_world_size()
        set_parallel_state(_one_rank_state())
        self.train_parallel_config = {"dp_size": 1}
        return 0  # Megatron returns here too under --debug-rollout-only: start_rollout_id 0

    def train(self, rollout_id: int, rollout_data_ref: Any) -> None:
        rollout_data = get_rollout_data(self.args, rollout_data_ref)
        log_rollout_data(rollout_id, self.args, rollout_data)
        out = os.environ.get(LANE_DIR_VAR)
        if out:
            path = Path(out) / f"converted_{rollout_id}.json"
            path.write_text(json.dumps(converted_summary(rollout_id, rollout_data), indent=1) + "\n")

    def save_model(self, rollout_id: int, force_sync: bool = False) -> None:
        return None

    def update_weights(self) -> None:
        return None

    def clear_memory(self) -> None:
        return None

    def sleep(self, tags: Any = None) -> None:
        return None

    def wake_up(self, tags: Any = None) -> None:
        return None

    def connect_actor_critic(self, critic_group: Any) -> None:
        raise NotImplementedError("the miles lane runs no critic (--use-critic is not part of it)")

    def _get_parallel_config(self) -> dict[str, int]:
        return dict(self.train_parallel_config)


class StandInTrainGroup(RayTrainGroup):
    """Miles' `RayTrainGroup` with `DebugRolloutOnlyActor` as its actor class (one rank)."""

    def _allocate_gpus_for_actor(self, pg: Any, num_gpus_per_actor: float) -> list[Any]:
        assert self._num_nodes * self._num_gpus_per_node == 1, "the stand-in runs world size 1"
        pg, reordered_bundle_indices, _gpu_ids = pg
        actor = ray.remote(num_gpus=1)(DebugRolloutOnlyActor).options(
            num_cpus=num_gpus_per_actor, num_gpus=num_gpus_per_actor,  # the job's runtime env, as Miles'
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=reordered_bundle_indices[0]),
        ).remote(1, 0, None, None)
        return [actor]


def allocate_stand_in_group(args: Any, num_nodes: int, num_gpus_per_node: int, pg: Any, role: str,
                            with_ref: bool) -> StandInTrainGroup:
    """Drop-in for `miles.ray.placement_group.allocate_train_group` (same signature and shares)."""
    return StandInTrainGroup(args=args, num_nodes=num_nodes, num_gpus_per_node=num_gpus_per_node, pg=pg,
                             num_gpus_per_actor=0.4, role=role, with_ref=with_ref)
