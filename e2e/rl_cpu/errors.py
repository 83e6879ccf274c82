"""Typed errors of `e2e.rl_cpu`: one hierarchy; every message says what to do next.

    RLCPUError
    ├── SampleShapeError  a sample the trainer cannot use (lengths disagree, no reward number)
    ├── ModelLayoutError  the served directory is not a single-file safetensors model the trainer can mirror
    ├── WeightSyncError   SGLang refused a checkpoint or reports another weight version
    └── ChecksFailed      the run finished and one of its assertions failed (listed in the message)
"""

from __future__ import annotations


class RLCPUError(RuntimeError):
    """Base of every error `e2e.rl_cpu` raises on purpose."""


class SampleShapeError(RLCPUError):
    """A rollout sample breaks the Miles shape the trainer relies on (docs/contract.md §4)."""


class ModelLayoutError(RLCPUError):
    """The served weights and the HuggingFace model built from the same directory disagree."""


class WeightSyncError(RLCPUError):
    """`/update_weights_from_disk` failed, or `/model_info` names another version than the one loaded."""


class ChecksFailed(RLCPUError):
    """The loop ran; at least one of its checks (`e2e.rl_cpu.checks`) failed."""
