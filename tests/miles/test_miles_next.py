"""Miles as it is about to be: each open pull request's own files (fixtures/miles_next, verbatim,
laid over Miles main by conformance.miles_next) judge the adapter's samples and its class.

Under every flavour a multi-turn tool sample (three model turns, two masked tool responses, a
weight update in the middle of the last answer) must pass that Miles' `Sample.validate()`,
round-trip through its `to_dict()`/`from_dict()`, and pass #2662's log-prob guard; where `Sample`
holds `WeightVersionsPerCall` (#1891) it carries one per model turn at absolute offsets; where
`BaseRolloutFn` exists (#1845) Miles' own `load_rollout_function` accepts the adapter's class; a
#2637 train input's `trainer_model_id` reaches every sample.

The vendored `miles/utils/types.py` imports torch: the `e2e` lane (the `demo` group) runs these.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

import adapter.miles  # noqa: F401  # the process' own, restored after each fresh import below
from adapter.bridge.stats import SessionStats
from adapter.miles.abi import abi_types
from adapter.samples.conversion import trace_to_samples
from adapter.samples.sample_type import sample_class, span_classes
from adapter.wire.types import parse_engine_output
from conformance.miles_next import FIXTURES, FLAVOURS, MAIN, write_tree
from conformance.sglang_outputs import sglang_output
from conformance.traces import TraceSpec, Turn, build_trace

pytestmark = pytest.mark.miles_next
pytest.importorskip("torch", reason="Miles' miles/utils/types.py imports torch: tox -e e2e runs these (group demo)")

GUARD = FIXTURES / "pr2662-e710e8ecd" / "miles" / "rollout" / "logprob_guard.py"
TOOL = (151644, 872, 198, 27, 14172, 29, 151645, 198)  # a tool response's tokens, never sampled
TURNS = (
    Turn((40, 41, 42), (-0.5, -0.25, -0.125), "call", followup_ids=TOOL),
    Turn((43, 44), (-0.75, -0.0625), "call again", followup_ids=TOOL),
    Turn((45, 46, 151645), (-0.3, -0.2, -0.01), "done"),
)
# What the engine said per answer: the third answer's weights changed after its first token.
ANSWER_SPANS = ([("3", 0, 3)], [("3", 0, 2)], [("3", 0, 1), ("4", 1, 3)])


# Flavours whose own compatibility.load_rollout_function refuses a class not subclassing BaseRolloutFn.
REFUSES_PLAIN_CLASSES = {"pr1845-d2624723d"}


class PlainRolloutFn:
    """A class-based rollout function that subclasses nothing (what #1845 refuses)."""

    def __init__(self, constructor_input: Any) -> None:
        self.constructor_input = constructor_input


def _forget_miles() -> None:
    for name in [m for m in sys.modules if m == "miles" or m.startswith("miles.")]:
        del sys.modules[name]
    for cached in (sample_class, abi_types, span_classes):
        cached.cache_clear()


@pytest.fixture(params=list(FLAVOURS))
def flavour(request, tmp_path, monkeypatch) -> Iterator[str]:
    """Miles `main` with one PR's files over it, importable as `miles` for this test only."""
    write_tree(tmp_path, request.param)
    monkeypatch.syspath_prepend(str(tmp_path))
    _forget_miles()
    yield request.param
    _forget_miles()


def _trace_and_stats() -> tuple[Any, Any]:
    """The trace Verifiers would record, and the bridge's stats of its three engine calls (each
    call's prompt is everything before its completion: the bridge records that length)."""
    spec = TraceSpec(turns=TURNS, rewards={"correct": 1.0})
    trace = build_trace(spec)
    stats = SessionStats()
    position = len(spec.prompt_ids)
    for turn, spans in zip(TURNS, ANSWER_SPANS, strict=True):
        position += len(turn.scaffold_ids)
        output = sglang_output(turn.completion_ids, turn.logprobs, weight_version=spans[-1][0])
        output["meta_info"]["weight_versions"] = [{"version": v, "start": a, "end": b} for v, a, b in spans]
        stats.record(trace.id, parse_engine_output(output).meta_info, prompt_len=position)
        position += len(turn.completion_ids) + len(turn.followup_ids)
    return trace, stats.get(trace.id)


def _sample() -> Any:
    trace, stats = _trace_and_stats()
    (sample,) = trace_to_samples(trace, rollout_id=0, stats=stats)
    return sample


def _model_turns(sample: Any) -> list[tuple[int, int]]:
    """The sampled runs, read from the loss mask alone, at absolute offsets in `tokens`."""
    start = len(sample.tokens) - sample.response_length
    runs, open_at = [], None
    for offset, bit in enumerate([*sample.loss_mask, 0]):
        if bit and open_at is None:
            open_at = offset
        elif not bit and open_at is not None:
            runs.append((start + open_at, start + offset))
            open_at = None
    return runs


def _guard() -> ModuleType:
    spec = importlib.util.spec_from_file_location("miles_pr2662_logprob_guard", GUARD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_adapter_builds_the_flavours_own_sample(flavour) -> None:
    sample = _sample()
    assert type(sample) is importlib.import_module("miles.utils.types").Sample
    sample.validate()  # Miles' own asserts: lengths, and (#1891 on) every span inside the tokens, in order


def test_a_multi_turn_tool_sample_round_trips_through_the_flavours_dict(flavour) -> None:
    sample = _sample()
    restored = type(sample).from_dict(sample.to_dict())
    restored.validate()
    assert restored.to_dict() == sample.to_dict()
    assert restored.weight_versions == sample.weight_versions


def test_the_log_prob_guard_passes_and_log_probs_sit_on_model_tokens_only(flavour) -> None:
    sample = _sample()
    _guard().guard_rollout_log_probs([sample], [sample.loss_mask])
    start = len(sample.tokens) - sample.response_length
    sampled = {offset for begin, end in _model_turns(sample) for offset in range(begin, end)}
    assert len(_model_turns(sample)) == 3  # two tool responses split three model turns
    for offset, (bit, log_prob) in enumerate(zip(sample.loss_mask, sample.rollout_log_probs, strict=True)):
        assert bool(bit) == (start + offset in sampled)
        assert (log_prob != 0.0) == bool(bit)  # every sampled log-prob here is non-zero; masked ones are 0.0


def test_a_planted_nan_on_a_model_token_is_refused_by_the_guard(flavour) -> None:
    sample = _sample()
    sample.rollout_log_probs[sample.loss_mask.index(1)] = float("nan")
    with pytest.raises(ValueError, match="active_nan=1"):
        _guard().guard_rollout_log_probs([sample], [sample.loss_mask])


def test_weight_versions_take_the_shape_the_flavours_sample_declares(flavour) -> None:
    sample = _sample()
    if span_classes() is None:  # list[str]: each answer's versions in order
        assert sample.weight_versions == ["3", "3", "3", "4"]
        return
    turns = _model_turns(sample)
    assert [call.to_dicts() for call in sample.weight_versions] == [  # what Miles' conversion calls
        [{"version": v, "abs_start": begin + a, "abs_end": begin + b} for v, a, b in spans]
        for (begin, _), spans in zip(turns, ANSWER_SPANS, strict=True)
    ]
    assert sample.oldest_weight_version == 3


def _fresh_binding(monkeypatch) -> ModuleType:
    """`adapter.miles` imported again, as Miles imports it by path, under this flavour (the
    process' own modules come back when the test ends)."""
    import adapter

    monkeypatch.setattr(adapter, "miles", sys.modules["adapter.miles"])
    for name in ("adapter.miles", "adapter.miles.binding"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module("adapter.miles.binding")


def test_miles_own_loader_accepts_the_class_and_only_a_subclass_where_it_asks(flavour, monkeypatch) -> None:
    binding = _fresh_binding(monkeypatch)
    monkeypatch.setattr(binding, "build_orchestrator", lambda args, data_source, **_: SimpleNamespace())
    compatibility = importlib.import_module("miles.rollout.inference_rollout.compatibility")
    base_types = importlib.import_module("miles.rollout.base_types")
    constructor = base_types.RolloutFnConstructorInput(args=SimpleNamespace(), data_source=None)
    built = compatibility.load_rollout_function(constructor, "adapter.miles.VerifiersRolloutFn")
    assert isinstance(built, binding.VerifiersRolloutFn) and built.constructor_input is constructor
    base = getattr(base_types, "BaseRolloutFn", None)
    if base is not None:  # #1845's class, also in later heads' base_types
        assert issubclass(binding.VerifiersRolloutFn, base)
    if flavour in REFUSES_PLAIN_CLASSES:
        with pytest.raises(TypeError, match="must subclass"):
            compatibility.load_rollout_function(constructor, f"{__name__}.PlainRolloutFn")
    else:
        plain = compatibility.load_rollout_function(constructor, f"{__name__}.PlainRolloutFn")
        assert isinstance(plain, PlainRolloutFn)


async def test_a_train_inputs_trainer_model_id_reaches_every_sample(flavour, monkeypatch) -> None:
    binding = _fresh_binding(monkeypatch)
    samples = [_sample(), _sample()]

    async def train(rollout_id: int, *, weight_version: Any = None) -> Any:
        return SimpleNamespace(groups=[samples], metrics={})

    monkeypatch.setattr(binding, "build_orchestrator", lambda args, data_source, **_: SimpleNamespace(train=train))
    base_types = importlib.import_module("miles.rollout.base_types")
    fn = binding.VerifiersRolloutFn(base_types.RolloutFnConstructorInput(args=SimpleNamespace(), data_source=None))
    fields = base_types.RolloutFnTrainInput.__dataclass_fields__
    given = {"trainer_model_id": "policy-b"} if "trainer_model_id" in fields else {}
    out = await fn(base_types.RolloutFnTrainInput(rollout_id=0, **given))
    assert isinstance(out, base_types.RolloutFnTrainOutput)
    if given:
        assert [s.to_dict()["trainer_model_id"] for s in out.samples[0]] == ["policy-b", "policy-b"]
    else:
        assert not any(hasattr(s, "trainer_model_id") for s in out.samples[0])
    if flavour == "pr2694-1c7c31519":  # #2694's default: no padding asked for
        assert out.postprocess.pad_to_dp is False


def test_every_flavour_is_vendored_with_its_licence() -> None:
    assert "Apache License" in (FIXTURES / "LICENSE").read_text()
    assert {path.name for path in FIXTURES.iterdir() if path.is_dir()} == set(FLAVOURS)
    assert (FIXTURES / MAIN / "miles" / "utils" / "types.py").is_file()
