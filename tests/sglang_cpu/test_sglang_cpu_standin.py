"""The `sgl_kernel` stand-in (e2e/sglang_cpu/standin/sgl_kernel) in the project's own torch: its ops
against plain references, the names it does not implement, and its refusal to load where real
kernels belong. Fast lane; skipped without torch (dependency group `demo`)."""

from __future__ import annotations

import importlib.util
import struct
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from e2e.sglang_cpu.paths import STANDIN_DIR

torch = pytest.importorskip("torch", reason="the stand-in's ops need torch (dependency group `demo`)")

STANDIN_INIT = STANDIN_DIR / "sgl_kernel" / "__init__.py"
# MurmurHash3_x86_32 (hash seed 0) of struct.pack("<IIII", seed_lo, seed_hi, position, column),
# computed with the mmh3 C library: (seed, position, column, hash).
MMH3_VECTORS = [
    (0, 0, 0, 2167721464),
    (1, 0, 0, 2451737883),
    (42, 7, 3, 966665676),
    (2**64 - 1, 2**32 - 1, 2**32 - 1, 3843634286),
    (0x0123456789ABCDEF, 123456, 151935, 39780474),
    (2**63, 1, 1, 860581914),
]


def _load(name: str) -> ModuleType:
    """Execute the stand-in as a fresh module `name` (never as `sgl_kernel` in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, STANDIN_INIT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def standin() -> ModuleType:
    if torch.cuda.is_available():
        pytest.skip("the stand-in refuses to load where CUDA is available (by design)")
    return _load("vf_sglang_cpu_standin_under_test")


def murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    """Textbook MurmurHash3_x86_32, independent of the stand-in (checked against published vectors)."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    def scramble(k: int) -> int:
        return (rotl((k * 0xCC9E2D51) & 0xFFFFFFFF, 15) * 0x1B873593) & 0xFFFFFFFF

    h = seed
    full = len(data) // 4 * 4
    for (k,) in struct.iter_unpack("<I", data[:full]):
        h = (rotl(h ^ scramble(k), 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    tail = data[full:]
    if tail:
        h ^= scramble(int.from_bytes(tail, "little"))
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _key(seed: int, position: int, column: int) -> bytes:
    return struct.pack("<IIII", seed & 0xFFFFFFFF, seed >> 32, position & 0xFFFFFFFF, column & 0xFFFFFFFF)


def test_reference_murmur3_matches_published_vectors() -> None:
    assert murmur3_x86_32(b"", 0) == 0
    assert murmur3_x86_32(b"", 1) == 0x514E28B7
    assert murmur3_x86_32(b"test", 0) == 0xBA6BD213
    assert murmur3_x86_32(b"Hello, world!", 1234) == 0xFAF6CDB3
    assert all(murmur3_x86_32(_key(s, p, c)) == h for s, p, c, h in MMH3_VECTORS)


def test_murmur_op_matches_mmh3_vectors(standin: ModuleType) -> None:
    seed = torch.tensor([v[0] for v in MMH3_VECTORS], dtype=torch.uint64)
    positions = torch.tensor([v[1] for v in MMH3_VECTORS], dtype=torch.int64)
    columns = torch.tensor([v[2] for v in MMH3_VECTORS], dtype=torch.int64)
    hashed = torch.ops.sgl_kernel.murmur_hash32_cpu.default(seed, positions, columns)
    assert hashed.dtype == torch.uint32 and hashed.shape == (len(MMH3_VECTORS),) * 2
    assert [int(hashed[i, i]) for i in range(len(MMH3_VECTORS))] == [v[3] for v in MMH3_VECTORS]


@given(seeds=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=4),
       columns=st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=5),
       position=st.integers(0, 2**31 - 1))
def test_murmur_op_is_murmur3_of_seed_position_column(standin: ModuleType, seeds: list[int], columns: list[int],
                                                      position: int) -> None:
    positions = [position + i for i in range(len(seeds))]
    hashed = standin.murmur_hash32_cpu(torch.tensor(seeds, dtype=torch.uint64), torch.tensor(positions),
                                       torch.tensor(columns, dtype=torch.int64))
    expected = [[murmur3_x86_32(_key(s, p, c)) for c in columns] for s, p in zip(seeds, positions, strict=True)]
    assert hashed.to(torch.int64).tolist() == expected


def test_murmur_op_refuses_mismatched_shapes(standin: ModuleType) -> None:
    with pytest.raises(ValueError, match="same 1-D shape"):
        standin.murmur_hash32_cpu(torch.zeros(2, dtype=torch.uint64), torch.zeros(3), torch.arange(4))


def _reference_assign(req_pool_indices: list[int], req_to_token: torch.Tensor, start: list[int], end: list[int],
                      out_cache_loc: list[int]) -> torch.Tensor:
    expected, taken = req_to_token.clone(), 0
    for row, lo, hi in zip(req_pool_indices, start, end, strict=True):
        expected[row, lo:hi] = torch.tensor(out_cache_loc[taken:taken + hi - lo], dtype=expected.dtype)
        taken += hi - lo
    return expected


def test_assign_req_to_token_pool_packs_slots_in_batch_order(standin: ModuleType) -> None:
    req_to_token = torch.full((4, 8), -1, dtype=torch.int32)
    standin.assign_req_to_token_pool_cpu(torch.tensor([2, 0]), req_to_token, torch.tensor([3, 0]),
                                         torch.tensor([5, 1]), torch.tensor([10, 11, 12, 99]), 8)
    assert req_to_token[2].tolist() == [-1, -1, -1, 10, 11, -1, -1, -1]
    assert req_to_token[0].tolist() == [12, -1, -1, -1, -1, -1, -1, -1]
    assert (req_to_token[[1, 3]] == -1).all()


@given(data=st.data())
def test_assign_req_to_token_pool_matches_a_loop(standin: ModuleType, data: st.DataObject) -> None:
    pool_len = 12
    rows = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=6, unique=True))
    start = [data.draw(st.integers(0, pool_len)) for _ in rows]
    end = [data.draw(st.integers(lo, pool_len)) for lo in start]
    out_cache_loc = list(range(100, 100 + sum(e - s for s, e in zip(start, end, strict=True)) + 2))
    req_to_token = torch.zeros((6, pool_len), dtype=torch.int32)
    expected = _reference_assign(rows, req_to_token, start, end, out_cache_loc)
    standin.assign_req_to_token_pool_cpu(torch.tensor(rows), req_to_token, torch.tensor(start), torch.tensor(end),
                                         torch.tensor(out_cache_loc), pool_len)
    assert torch.equal(req_to_token, expected)


def test_assign_req_to_token_pool_refuses_offsets_past_the_pool(standin: ModuleType) -> None:
    with pytest.raises(ValueError, match="outside"):
        standin.assign_req_to_token_pool_cpu(torch.tensor([0]), torch.zeros((1, 4), dtype=torch.int32),
                                             torch.tensor([2]), torch.tensor([5]), torch.arange(3), 4)


def test_copy_all_layer_kv_cache_moves_rows_in_every_buffer_by_address(standin: ModuleType) -> None:
    k = torch.randn(8, 2, 4).to(torch.bfloat16)  # [slots, heads, head_dim], like a KV buffer
    v = torch.randn(8, 3)
    before = [k.clone(), v.clone()]
    data_ptrs = torch.tensor([k.data_ptr(), v.data_ptr()], dtype=torch.int64)
    strides = torch.tensor([k.stride(0) * k.element_size(), v.stride(0) * v.element_size()], dtype=torch.int64)
    # a chain (0→1→2): every row is read before any is written
    standin.copy_all_layer_kv_cache_cpu(data_ptrs, strides, torch.tensor([1, 2, 6]), torch.tensor([0, 1, 5]))
    for after, old in zip((k, v), before, strict=True):
        assert torch.equal(after[[1, 2, 6]], old[[0, 1, 5]])
        untouched = [0, 3, 4, 5, 7]
        assert torch.equal(after[untouched], old[untouched])


def test_copy_all_layer_kv_cache_with_no_locations_touches_nothing(standin: ModuleType) -> None:
    k = torch.randn(4, 2)
    before = k.clone()
    nowhere = torch.tensor([], dtype=torch.int64)
    standin.copy_all_layer_kv_cache_cpu(torch.tensor([k.data_ptr()]), torch.tensor([8]), nowhere, nowhere)
    assert torch.equal(k, before)


def test_amx_marker_op_is_not_registered(standin: ModuleType) -> None:
    assert hasattr(torch.ops.sgl_kernel, "murmur_hash32_cpu")
    assert not hasattr(torch.ops.sgl_kernel, "convert_weight_packed")  # else SGLang takes its AMX kernels


@pytest.mark.parametrize("name", ["build_tree_kernel_efficient_cpu", "verify_tree_greedy_cpu",
                                  "assign_draft_cache_locs_contiguous_cpu", "assign_extend_cache_locs_cpu",
                                  "fill_accept_out_cache_loc_cpu", "fill_bonus_tokens_cpu"])
def test_speculative_names_import_but_raise_naming_the_op(standin: ModuleType, name: str) -> None:
    assert name in standin.SPECULATIVE
    with pytest.raises(NotImplementedError, match=name):
        getattr(standin, name)(torch.zeros(1))


def test_other_names_are_missing_like_absent_symbols(standin: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AttributeError, match="fused_sigmoid_mul_cpu"):
        _ = standin.fused_sigmoid_mul_cpu
    assert not hasattr(standin, "gptq_gemm")
    monkeypatch.setitem(sys.modules, "sgl_kernel", _load("sgl_kernel"))  # as the server imports it
    with pytest.raises(ImportError, match="cannot import name 'rmsnorm' from 'sgl_kernel'"):
        exec("from sgl_kernel import rmsnorm")  # what SGLang's `try: from sgl_kernel import` guards catch


def test_refuses_to_load_where_cuda_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ImportError, match="CUDA is available"):
        _load("vf_sglang_cpu_standin_with_cuda")


def test_refuses_to_load_beside_an_installed_sglang_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist_info = tmp_path / "sglang_kernel-0.4.10.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang-kernel\nVersion: 0.4.10\n")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match=r"sglang-kernel 0\.4\.10 is installed"):
        _load("vf_sglang_cpu_standin_beside_a_distribution")


def test_refuses_to_load_beside_another_importable_sgl_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sgl_kernel").mkdir()
    (tmp_path / "sgl_kernel" / "__init__.py").write_text("")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="another sgl_kernel is importable"):
        _load("vf_sglang_cpu_standin_beside_a_package")

