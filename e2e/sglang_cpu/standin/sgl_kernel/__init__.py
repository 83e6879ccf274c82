"""A CPU stand-in for SGLang's `sgl_kernel`, in plain torch (vf-sglang e2e; never install it).

PyPI has no CPU build of `sgl-kernel` (the `sglang-kernel` wheels are CUDA-only), yet SGLang's
CPU engine (`SGLANG_USE_CPU_ENGINE=1`, non-AMX path) imports a handful of its names for a dense
model. This package supplies exactly those, and lives only on the PYTHONPATH of the CPU server
that `e2e.sglang_cpu` launches:

    copy_all_layer_kv_cache_cpu(data_ptrs, strides, tgt_loc, src_loc)
        for every KV buffer i (base address data_ptrs[i], row stride strides[i] bytes) copy
        row src_loc[j] to row tgt_loc[j]: all rows are read first, then written
    assign_req_to_token_pool_cpu(req_pool_indices, req_to_token, start_offset, end_offset,
                                 out_cache_loc, pool_len)
        req_to_token[req_pool_indices[i], start[i]:end[i]] = the next end[i] - start[i]
        entries of out_cache_loc, packed in batch order
    torch.ops.sgl_kernel.murmur_hash32_cpu(seed, positions, col_indices) -> uint32 [n, m]
        MurmurHash3 (x86, 32-bit, hash seed 0) of the 16-byte little-endian key
        (seed low 32 bits, seed high 32 bits, position, column): the CPU twin of the triton
        kernel in sglang/kernels/ops/sampling/murmur_hash.py (seeded sampling)
    six speculative-decoding names (SPECULATIVE) that raise NotImplementedError naming the op

Every other name is missing the way an absent symbol is (AttributeError naming the op, which
`from sgl_kernel import name` turns into ImportError), so SGLang's `try: from sgl_kernel
import ...` guards keep working. `torch.ops.sgl_kernel.convert_weight_packed` is deliberately
not registered: its presence makes SGLang take the AMX kernels.

Invariant: this package refuses to import (ImportError) where CUDA is available or a real
`sgl_kernel` is installed or importable elsewhere, so it can never shadow the real kernels.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.metadata
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import torch

STANDIN = "the vf-sglang CPU stand-in for sgl_kernel (e2e/sglang_cpu/standin)"
REAL_DISTRIBUTIONS = ("sglang-kernel", "sgl-kernel")
SPECULATIVE = (
    "build_tree_kernel_efficient_cpu",
    "verify_tree_greedy_cpu",
    "assign_draft_cache_locs_contiguous_cpu",
    "assign_extend_cache_locs_cpu",
    "fill_accept_out_cache_loc_cpu",
    "fill_bonus_tokens_cpu",
)
IMPLEMENTED = ("assign_req_to_token_pool_cpu", "copy_all_layer_kv_cache_cpu", "murmur_hash32_cpu")
_MASK32 = 0xFFFFFFFF


def _real_kernels_elsewhere() -> str | None:
    """Why a real `sgl_kernel` is present (an installed distribution or another importable
    package of that name), or None."""
    for name in REAL_DISTRIBUTIONS:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        return f"the distribution {name} {dist.version} is installed ({dist.locate_file('')})"
    here = Path(__file__).resolve().parent.parent
    elsewhere = [entry for entry in sys.path if Path(entry or ".").resolve() != here]
    spec = importlib.machinery.PathFinder.find_spec("sgl_kernel", elsewhere)
    if spec is not None:
        return f"another sgl_kernel is importable from {spec.origin or list(spec.submodule_search_locations or [])}"
    return None


def _refuse_where_real_kernels_belong() -> None:
    if torch.cuda.is_available():
        raise ImportError(
            f"{STANDIN} refuses to load: CUDA is available, so SGLang needs the real kernels "
            "(pip install sglang-kernel). Remove e2e/sglang_cpu/standin from PYTHONPATH."
        )
    reason = _real_kernels_elsewhere()
    if reason is not None:
        raise ImportError(
            f"{STANDIN} refuses to load: {reason}. It would shadow the real kernels; remove "
            "e2e/sglang_cpu/standin from PYTHONPATH or use an environment without sgl_kernel."
        )


_refuse_where_real_kernels_belong()


# --- KV cache and token pool ------------------------------------------------------------------


def _bytes_at(address: int, nbytes: int) -> torch.Tensor:
    """A uint8 tensor over `nbytes` of memory at `address` (no copy; the caller owns it)."""
    return torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(address), dtype=torch.uint8)


def copy_all_layer_kv_cache_cpu(
    data_ptrs: torch.Tensor, strides: torch.Tensor, tgt_loc: torch.Tensor, src_loc: torch.Tensor
) -> None:
    """Copy row `src_loc[j]` to row `tgt_loc[j]` in every KV buffer (gather all, then scatter)."""
    src, tgt = src_loc.to(torch.int64), tgt_loc.to(torch.int64)
    if src.shape != tgt.shape or src.dim() != 1:
        raise ValueError(f"copy_all_layer_kv_cache_cpu: src_loc {tuple(src.shape)} and tgt_loc "
                         f"{tuple(tgt.shape)} must be 1-D and the same length")
    if data_ptrs.numel() != strides.numel():
        raise ValueError(f"copy_all_layer_kv_cache_cpu: {data_ptrs.numel()} data_ptrs but {strides.numel()} strides")
    if src.numel() == 0:
        return
    if int(torch.minimum(src.min(), tgt.min())) < 0:
        raise ValueError("copy_all_layer_kv_cache_cpu: negative cache locations")
    rows = int(torch.maximum(src.max(), tgt.max())) + 1
    for address, row_bytes in zip(data_ptrs.tolist(), strides.tolist(), strict=True):
        buffer = _bytes_at(int(address), rows * int(row_bytes)).view(rows, int(row_bytes))
        buffer[tgt] = buffer[src]  # the right side is a gathered copy: every read happens before any write


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """`req_to_token[req_pool_indices[i], start[i]:end[i]]` = the next `end[i] - start[i]`
    entries of `out_cache_loc`, request after request in batch order."""
    start, end = start_offset.to(torch.int64), end_offset.to(torch.int64)
    lengths = end - start
    if lengths.numel() == 0:
        return
    if bool((lengths < 0).any()) or bool((start < 0).any()) or int(end.max()) > pool_len:
        raise ValueError(f"assign_req_to_token_pool_cpu: offsets outside [0, {pool_len}] or end < start "
                         f"(start {start.tolist()}, end {end.tolist()})")
    total = int(lengths.sum())
    if total > out_cache_loc.numel():
        raise ValueError(f"assign_req_to_token_pool_cpu: {total} slots asked, "
                         f"out_cache_loc has {out_cache_loc.numel()}")
    if total == 0:
        return
    rows = req_pool_indices.to(torch.int64).repeat_interleave(lengths)
    segment_begin = torch.cumsum(lengths, 0) - lengths  # where request i's slots start in out_cache_loc
    within = torch.arange(total, dtype=torch.int64) - segment_begin.repeat_interleave(lengths)
    cols = start.repeat_interleave(lengths) + within
    req_to_token[rows, cols] = out_cache_loc[:total].to(req_to_token.dtype)


# --- seeded sampling: MurmurHash3 ---------------------------------------------------------------


def _mul32(x: torch.Tensor, constant: int) -> torch.Tensor:
    """(x * constant) mod 2**32 for int64 tensors holding uint32 values, without int64 overflow."""
    low = x * (constant & 0xFFFF)
    high = ((x * (constant >> 16)) & 0xFFFF) << 16
    return (low + high) & _MASK32


def _rotl32(x: torch.Tensor, r: int) -> torch.Tensor:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _murmur3_mix(h: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    k = _mul32(_rotl32(_mul32(k, 0xCC9E2D51), 15), 0x1B873593)
    h = _rotl32(h ^ k, 13)
    return (h * 5 + 0xE6546B64) & _MASK32


def _fmix32(h: torch.Tensor) -> torch.Tensor:
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def _as_int64_bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's integers as int64 with the same low 64 bits (uint64 is reinterpreted)."""
    return t.view(torch.int64) if t.dtype == torch.uint64 else t.to(torch.int64)


def murmur_hash32_cpu(seed: torch.Tensor, positions: torch.Tensor, col_indices: torch.Tensor) -> torch.Tensor:
    """uint32 [n, m]: MurmurHash3_x86_32(seed_lo, seed_hi, positions[i] mod 2**32,
    col_indices[j] mod 2**32; hash seed 0) of seed[i] (64 bit), as sglang's triton kernel."""
    if seed.dim() != 1 or seed.shape != positions.shape or col_indices.dim() != 1:
        raise ValueError(f"murmur_hash32_cpu: seed {tuple(seed.shape)} and positions {tuple(positions.shape)} "
                         f"must be the same 1-D shape, col_indices {tuple(col_indices.shape)} 1-D")
    seed64 = _as_int64_bits(seed).unsqueeze(1)
    h = torch.zeros_like(seed64)
    h = _murmur3_mix(h, seed64 & _MASK32)
    h = _murmur3_mix(h, (seed64 >> 32) & _MASK32)  # arithmetic shift, masked: the high word
    h = _murmur3_mix(h, (_as_int64_bits(positions) & _MASK32).unsqueeze(1))
    h = _murmur3_mix(h, (_as_int64_bits(col_indices) & _MASK32).unsqueeze(0))
    return _fmix32(h ^ 16).to(torch.uint32)  # 16: the key's length in bytes


def _register_ops() -> torch.library.Library | None:
    """Define `torch.ops.sgl_kernel.murmur_hash32_cpu` once per process (a reload keeps it)."""
    if hasattr(torch.ops.sgl_kernel, "murmur_hash32_cpu"):
        return None
    library = torch.library.Library("sgl_kernel", "FRAGMENT")
    library.define("murmur_hash32_cpu(Tensor seed, Tensor positions, Tensor col_indices) -> Tensor")
    library.impl("murmur_hash32_cpu", murmur_hash32_cpu, "CPU")
    return library


_LIBRARY = _register_ops()  # kept alive: dropping the Library object unregisters the op


# --- speculative decoding: importable, not implemented ------------------------------------------


def _not_on_cpu(name: str) -> Callable[..., NoReturn]:
    def op(*args: object, **kwargs: object) -> NoReturn:
        raise NotImplementedError(
            f"sgl_kernel.{name} (speculative decoding) is not implemented by {STANDIN}; "
            "serve without --speculative-algorithm, or on a GPU with the real sglang-kernel"
        )

    op.__name__ = op.__qualname__ = name
    return op


build_tree_kernel_efficient_cpu = _not_on_cpu("build_tree_kernel_efficient_cpu")
verify_tree_greedy_cpu = _not_on_cpu("verify_tree_greedy_cpu")
assign_draft_cache_locs_contiguous_cpu = _not_on_cpu("assign_draft_cache_locs_contiguous_cpu")
assign_extend_cache_locs_cpu = _not_on_cpu("assign_extend_cache_locs_cpu")
fill_accept_out_cache_loc_cpu = _not_on_cpu("fill_accept_out_cache_loc_cpu")
fill_bonus_tokens_cpu = _not_on_cpu("fill_bonus_tokens_cpu")


def __getattr__(name: str) -> NoReturn:
    """Any other name is missing, as in a build without that op; the error names it."""
    raise AttributeError(
        f"sgl_kernel has no op {name!r}: {STANDIN} implements only {', '.join(IMPLEMENTED)} "
        f"(and the speculative names, which raise NotImplementedError)",
        name=name,
        obj=sys.modules.get(__name__),
    )
