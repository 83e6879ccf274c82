"""SGLang plugin for deterministic inference on CPU (vf-sglang e2e; only on the CPU server's PYTHONPATH).

Discovered by SGLang's own plugin loader (`sglang.srt.plugins.load_plugins`, entry-point group
`sglang.srt.plugins`, name `vf_sglang_cpu`) through the `vf_sglang_cpu_standin-0.dist-info`
directory next to this file; SGLang runs `register()` once in each of its processes (main,
scheduler, detokenizer) before it builds its server args. With `--enable-deterministic-inference`
it makes SGLang's CPU engine usable:

  * `torch_native` becomes a deterministic attention backend (SGLang accepts only GPU
    backends otherwise and refuses to start);
  * `torch_native` also counts as radix-cache capable in that mode, so the prefix cache stays
    on (SGLang would otherwise set `disable_radix_cache`);
  * `ModelRunner.maybe_enable_batch_invariant_mode` is REPLACEd (HookRegistry) by a no-op: it
    installs triton `aten::mm` overrides and fails with "No supported accelerator (CUDA/XPU)".
    On CPU the torch_native path is already batch-invariant enough for seeded sampling;
  * only where SGLang's `murmur_hash32` has no CPU branch of its own (0.5.16: it always launches
    its triton kernel, and triton has no CPU driver: "0 active drivers", the scheduler dies on
    the first sampled request): an AROUND hook sends CPU tensors to the stand-in's
    `torch.ops.sgl_kernel.murmur_hash32_cpu`, which is what 0.5.23's own CPU branch calls.

Owns nothing else; it does nothing unless `SGLANG_USE_CPU_ENGINE=1` (SGLang's CPU platform).
Written against sglang 0.5.23's `sglang.srt.plugins` API; 0.5.16 has the same names (the
`add_*_choices` helpers are importable from `sglang.srt.server_args` in both).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("vf_sglang_cpu_plugin")

BACKEND = "torch_native"
BATCH_INVARIANT_TARGET = "sglang.srt.model_executor.model_runner.ModelRunner.maybe_enable_batch_invariant_mode"
MURMUR_TARGET = "sglang.kernels.ops.sampling.murmur_hash.murmur_hash32"
CPU_OP = "murmur_hash32_cpu"


def _batch_invariant_mode_off(*_args: object, **_kwargs: object) -> None:
    """Stands in for `ModelRunner.maybe_enable_batch_invariant_mode` on CPU: nothing to enable."""


def _allow_torch_native() -> None:
    from sglang.srt import server_args

    if BACKEND not in server_args.DETERMINISTIC_ATTENTION_BACKEND_CHOICES:
        server_args.add_deterministic_attention_backend_choices([BACKEND])
    if BACKEND not in server_args.RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND:
        server_args.add_radix_supported_deterministic_attention_backend_choices([BACKEND])


def _murmur_hash32_on_cpu(original: Callable[..., Any], seed: Any, positions: Any, col_indices: Any) -> Any:
    """AROUND `murmur_hash32`: CPU tensors go to the stand-in's op, anything else to SGLang's kernel."""
    if seed.device.type != "cpu":
        return original(seed, positions, col_indices)
    import sgl_kernel  # noqa: F401  (registers torch.ops.sgl_kernel.murmur_hash32_cpu)
    import torch

    return torch.ops.sgl_kernel.murmur_hash32_cpu.default(seed, positions, col_indices)


def _murmur_lacks_cpu_branch() -> bool:
    """True where SGLang's `murmur_hash32` never calls the CPU op itself (0.5.16; 0.5.23 does)."""
    from sglang.kernels.ops.sampling import murmur_hash  # cheap here: triton is already imported

    return CPU_OP not in murmur_hash.murmur_hash32.__code__.co_names


def register() -> None:
    """The plugin's entry point: SGLang calls it, then applies the registered hooks."""
    if os.environ.get("SGLANG_USE_CPU_ENGINE") != "1":
        logger.warning("vf_sglang_cpu plugin: SGLANG_USE_CPU_ENGINE is not 1; leaving SGLang unchanged")
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    _allow_torch_native()
    HookRegistry.register(BATCH_INVARIANT_TARGET, _batch_invariant_mode_off, HookType.REPLACE)
    if _murmur_lacks_cpu_branch():
        HookRegistry.register(MURMUR_TARGET, _murmur_hash32_on_cpu, HookType.AROUND)
        logger.warning("vf_sglang_cpu plugin: %s has no CPU branch; CPU tensors go to torch.ops.sgl_kernel.%s",
                       MURMUR_TARGET, CPU_OP)
    # a warning, so it shows before SGLang configures logging: SGLang now runs differently
    logger.warning("vf_sglang_cpu plugin: %s allowed for deterministic inference (radix cache kept); "
                   "ModelRunner.maybe_enable_batch_invariant_mode replaced by a no-op", BACKEND)
