"""The trainer on a small random Qwen3 (needs torch and transformers, the `demo` group; skipped
in the fast lane, run by `tox -e rl-cpu`): its recompute is the model's own log-softmax at the
rollout temperature, a step with a positive advantage raises that sample's log-probs, and the
checkpoint keeps the served directory's tensor names and dtype."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors import safe_open  # noqa: E402 (after the skips: safetensors comes with them)

from e2e.rl_cpu.metrics import TrainSample, group_advantages  # noqa: E402
from e2e.rl_cpu.trainer import PolicyTrainer, TrainerOptions  # noqa: E402

VOCAB = 64


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A served-like directory: bf16 safetensors, tied embeddings, a config (no tokenizer needed)."""
    torch.manual_seed(0)
    config = transformers.Qwen3Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                      tie_word_embeddings=True, max_position_embeddings=64)
    path = tmp_path_factory.mktemp("served")
    transformers.Qwen3ForCausalLM(config).to(torch.bfloat16).save_pretrained(path)
    (path / "tokenizer.json").write_text("{}")  # stands for the files save() must copy beside the weights
    return path


def sample(tokens: list[int], response: int, lps: list[float], reward: float, key: int) -> TrainSample:
    return TrainSample(tokens=tuple(tokens), response_length=response, loss_mask=(1,) * response,
                       rollout_log_probs=tuple(lps), reward=reward, group_index=0, rollout_key=key,
                       weight_versions=("0",), status="completed")


def test_recompute_is_log_softmax_of_logits_over_temperature(model_dir) -> None:
    trainer = PolicyTrainer(model_dir, TrainerOptions(lr=1e-3, temperature=0.7))
    tokens = [3, 9, 27, 5, 11]
    (got,) = trainer.logprobs([sample(tokens, 2, [0.0, 0.0], 0.0, 0)])
    with torch.no_grad():
        logits = trainer.model(input_ids=torch.tensor([tokens])).logits[0, :-1]
    want = torch.log_softmax(logits / 0.7, -1).gather(-1, torch.tensor(tokens[1:])[:, None]).squeeze(-1)
    assert got == pytest.approx(want.tolist(), abs=1e-5)


def test_padding_in_a_micro_batch_does_not_change_logprobs(model_dir) -> None:
    trainer = PolicyTrainer(model_dir, TrainerOptions(lr=1e-3, temperature=1.0, micro_batch=2))
    short, long = sample([1, 2, 3], 1, [0.0], 0.0, 0), sample([4, 5, 6, 7, 8, 9], 2, [0.0, 0.0], 0.0, 1)
    together = trainer.logprobs([short, long])
    assert together[0] == pytest.approx(trainer.logprobs([short])[0], abs=1e-5)
    assert together[1] == pytest.approx(trainer.logprobs([long])[0], abs=1e-5)


def test_a_step_moves_probability_toward_the_better_rollout(model_dir) -> None:
    trainer = PolicyTrainer(model_dir, TrainerOptions(lr=1e-2, temperature=1.0, epochs=1))
    prompt = [5, 6, 7]
    good, bad = [*prompt, 10, 11], [*prompt, 20, 21]
    rows = [sample(t, 2, trainer.logprobs([sample(t, 2, [0, 0], 0, 0)])[0][-2:], r, i)
            for i, (t, r) in enumerate([(good, 1.0), (bad, 0.0)])]
    before = [sum(lp[-2:]) for lp in trainer.logprobs(rows)]
    stats = trainer.update(rows, group_advantages(rows))
    after = [sum(lp[-2:]) for lp in trainer.logprobs(rows)]
    assert after[0] > before[0] and after[1] < before[1]
    assert stats.grad_norm > 0 and stats.clip_fraction == 0.0  # ratio 1: the rollout was these weights


def test_checkpoint_keeps_the_served_names_dtype_and_files(model_dir, tmp_path) -> None:
    trainer = PolicyTrainer(model_dir, TrainerOptions(lr=1e-3, temperature=1.0))
    out = trainer.save(tmp_path / "weights-1")
    with safe_open(str(model_dir / "model.safetensors"), "pt") as served, \
            safe_open(str(out / "model.safetensors"), "pt") as saved:
        assert set(saved.keys()) == set(served.keys())
        for name in served.keys():  # noqa: SIM118 (safe_open has no __iter__)
            assert saved.get_tensor(name).dtype == torch.bfloat16
            assert torch.equal(saved.get_tensor(name), served.get_tensor(name))  # no step yet: the same weights
    assert (out / "config.json").is_file() and (out / "tokenizer.json").is_file()


def _freeze_queries_and_one_embedding_column(model) -> dict:
    embed = torch.ones_like(model.model.embed_tokens.weight)
    embed[:, 0] = 0.0
    queries = model.model.layers[0].self_attn.q_proj.weight
    return {"model.layers.0.self_attn.q_proj.weight": torch.zeros_like(queries), "model.embed_tokens.weight": embed}


def test_frozen_entries_never_move_and_the_rest_still_trains(model_dir) -> None:
    trainer = PolicyTrainer(model_dir, TrainerOptions(lr=1e-2, temperature=1.0),
                            frozen=_freeze_queries_and_one_embedding_column)
    before = {name: p.detach().clone() for name, p in trainer.params.items()}
    prompt = [5, 6, 7]
    rows = [sample(t, 2, trainer.logprobs([sample(t, 2, [0, 0], 0, 0)])[0][-2:], r, i)
            for i, (t, r) in enumerate([([*prompt, 10, 11], 1.0), ([*prompt, 20, 21], 0.0)])]
    trainer.update(rows, group_advantages(rows))
    after, embed = trainer.params, "model.embed_tokens.weight"
    query, key = "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight"
    assert torch.equal(after[query], before[query])
    assert torch.equal(after[embed][:, 0], before[embed][:, 0])
    assert not torch.equal(after[embed][:, 1:], before[embed][:, 1:])
    assert not torch.equal(after[key], before[key])


def test_masks_for_parameters_the_model_lacks_are_refused(model_dir) -> None:
    from e2e.rl_cpu.errors import ModelLayoutError

    with pytest.raises(ModelLayoutError, match=r"model\.layers\.9\.self_attn\.q_proj\.weight"):
        PolicyTrainer(model_dir, TrainerOptions(lr=1e-3, temperature=1.0),
                      frozen=lambda model: {"model.layers.9.self_attn.q_proj.weight": torch.zeros(1)})
