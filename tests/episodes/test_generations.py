"""The generation seam: one spec per Verifiers API generation, chosen by the version gate;
bundled fixtures per generation under one root each; per-user harness caches."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from adapter.episodes.bundled import BUNDLED_IDS, tasksets_for_config
from adapter.episodes.caches import harness_uv_cache, user_cache_dir, with_harness_cache
from adapter.episodes.generations import SPECS, harness_runtime, installed, shape_of

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_generation_is_chosen_by_the_version_gate() -> None:
    from adapter.versions.gate import require_supported

    assert installed() is SPECS[require_supported()]


def test_each_generation_has_one_root_and_no_module_shadows_another() -> None:
    roots = {spec.name: spec.bundled_tasksets() for spec in SPECS.values()}
    assert len({r.parent for r in roots.values()}) == len(SPECS)
    for spec in SPECS.values():
        modules = {p.stem for p in spec.bundled_tasksets().glob("*.py")}
        assert modules == {taskset.replace("-", "_") for taskset in BUNDLED_IDS}
        for taskset in BUNDLED_IDS:
            assert tasksets_for_config(spec.bundled_config(taskset)) == spec.bundled_tasksets().resolve()


def test_the_repository_configs_are_links_to_the_bundled_ones() -> None:
    for spec, folder in ((SPECS["A"], REPO / "fixtures" / "envs"), (SPECS["B"], REPO / "fixtures" / "envs" / "b")):
        for taskset in BUNDLED_IDS:
            link = folder / f"{taskset}.toml"
            assert link.is_symlink() and not Path(link.readlink()).is_absolute()
            assert link.resolve() == spec.bundled_config(taskset).resolve()


def test_an_unknown_bundled_taskset_lists_the_known_ones() -> None:
    from adapter.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="arith-v1, group-v1, echo-tool-v1"):
        SPECS["A"].bundled_config("nope")


def test_shape_detection_prefers_roles_under_agent() -> None:
    assert shape_of({"harness": {}}) is SPECS["A"]
    assert shape_of({"agent": {"harness": {}}}) is SPECS["B"]
    assert shape_of({"taskset": {"id": "x"}}) is None


def test_no_bundled_config_hard_codes_a_cache_path() -> None:
    for spec in SPECS.values():
        for taskset in BUNDLED_IDS:
            text = spec.bundled_config(taskset).read_text()
            data = tomllib.loads(text)
            assert "UV_CACHE_DIR" not in str(data) and "/tmp" not in str(data), spec.bundled_config(taskset)


def test_caches_are_per_user_and_respect_xdg_and_uv_cache_dir(tmp_path) -> None:
    home_default = user_cache_dir({})
    assert home_default == Path.home().absolute() / ".cache" / "vf-sglang"
    assert user_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "vf-sglang"
    pin = "2026-07-28T13:44:00Z"
    assert harness_uv_cache(pin, {"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "vf-sglang" / "uv-harness" / \
        "2026-07-28T13-44-00Z"
    assert harness_uv_cache(pin, {"UV_CACHE_DIR": str(tmp_path / "uv")}).parent == tmp_path / "uv" / \
        "vf-sglang-harness"
    assert harness_uv_cache("2025-01-01", {}) != harness_uv_cache(pin, {})


def test_a_pinned_harness_gets_its_own_cache_unless_it_sets_one() -> None:
    pinned = with_harness_cache({"UV_EXCLUDE_NEWER": "2026-07-28T13:44:00Z"}, {"XDG_CACHE_HOME": "/x"})
    assert pinned["UV_CACHE_DIR"] == "/x/vf-sglang/uv-harness/2026-07-28T13-44-00Z"
    assert with_harness_cache({"UV_EXCLUDE_NEWER": "d", "UV_CACHE_DIR": "/mine"})["UV_CACHE_DIR"] == "/mine"
    assert "UV_CACHE_DIR" not in with_harness_cache({"OTHER": "1"})


def test_generation_a_gives_a_pinned_harness_a_per_user_cache(monkeypatch, tmp_path) -> None:
    a = pytest.importorskip("adapter.episodes.generations.a", reason="needs verifiers 0.2.x (generation A)")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("UV_CACHE_DIR", raising=False)
    with SPECS["A"].bundled_config("arith-v1").open("rb") as handle:
        data = tomllib.load(handle)
    configured = a.with_pinned_harness_cache(data)
    assert configured["harness"]["env"]["UV_CACHE_DIR"].startswith(str(tmp_path / "vf-sglang" / "uv-harness"))
    assert "UV_CACHE_DIR" not in data["harness"]["env"]  # the loaded document is not mutated




def test_generation_b_stops_on_a_model_call_verifiers_recorded_as_not_implemented() -> None:
    """Miles' `test_unsupported_trace_error_is_not_resampled_forever` (tests/fast/examples/
    experimental/verifiers/test_verifiers_rollout.py), which decides by a message prefix. Verifiers
    0.3.x/0.4.0 run their own TrainClient, so a `NotImplementedError` in it (or in Renderers) only
    comes back as data: the interception server records each model call's exception class name
    (`trace.calls[i].error.type`). That field alone decides; a message that merely mentions it does
    not, and the refusal names what was not implemented and where it was recorded."""
    from types import SimpleNamespace

    from adapter.episodes.generations.b import unsupported_call
    from adapter.errors import UnsupportedFeatureError

    def error(kind: str, message: str) -> SimpleNamespace:
        return SimpleNamespace(type=kind, message=message, status_code=None)

    def trace(trace_id: str, *errors: SimpleNamespace | None) -> SimpleNamespace:
        return SimpleNamespace(id=trace_id, calls=[SimpleNamespace(error=e) for e in errors])

    healthy = trace("t0", None)
    lookalike = trace("t1", error("ProviderError", "NotImplementedError: upstream said so"))
    unimplemented = trace("t2", None, error("NotImplementedError",
                                            "The renderer client only supports unnamespaced function tools."))
    assert unsupported_call([healthy, lookalike, SimpleNamespace(id="t3")]) is None
    refusal = unsupported_call([healthy, lookalike, unimplemented])
    assert isinstance(refusal, UnsupportedFeatureError)
    assert "(trace t2, model call 1): NotImplementedError: The renderer client only supports unnamespaced " \
           "function tools. Every episode" in str(refusal)


@pytest.mark.parametrize(("asked", "release", "runs", "said"), [
    ("prefork", "0.2.0", "prefork", "harness runtime: prefork (each harness program and tool server forked"),
    ("prefork", "0.4.0", "prefork", "harness runtime: prefork"),
    ("prefork", "0.4.1.dev86", "prefork", "harness runtime: prefork"),
    ("prefork", "0.4.2", "subprocess", "samples are proven identical to it only on verifiers 0.2.0, 0.2.1, 0.3.0, "
                                       "0.3.1, 0.4.0, 0.4.1.dev86, not 0.4.2"),
    ("subprocess", "0.4.0", "subprocess", "harness runtime: subprocess (Verifiers' own: one fresh interpreter"),
])
def test_the_prefork_runtime_runs_only_where_a_matrix_cell_proves_it(asked, release, runs, said) -> None:
    runtime, line = harness_runtime(asked, release)
    assert runtime == runs
    assert said in line
