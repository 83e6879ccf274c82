"""The tiny model's recipe: it trains on arith-v1's own rows with a noisy teacher (so rewards
vary inside a group), and its compact training loss is exactly the full model's loss."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest

from e2e.engine.tiny_model import RECIPE

ARITH_V1 = Path(__file__).resolve().parents[2] / "adapter" / "rollout" / "bundled" / "a" / "tasksets" / "arith_v1.py"


def _taskset_rows() -> list[list[object]]:
    for node in ast.parse(ARITH_V1.read_text()).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "ROWS":
            return [list(row) for row in ast.literal_eval(node.value)]
    raise AssertionError(f"no ROWS in {ARITH_V1}")


def test_recipe_trains_on_the_rows_the_demo_asks() -> None:
    assert RECIPE["train"]["rows"] == _taskset_rows()


def test_noisy_teacher_gives_every_row_right_close_and_wrong_answers(qwen3_tokenizer: Path) -> None:
    pytest.importorskip("torch", reason="tiny_train needs torch (dependency group `demo`)")
    from transformers import AutoTokenizer

    from e2e.engine.tiny_train import OPS, QUESTION_TEMPLATE, training_examples

    tokenizer = AutoTokenizer.from_pretrained(str(qwen3_tokenizer))
    texts = [tokenizer.decode(ids) for ids, _ in training_examples(tokenizer, RECIPE["train"])]
    for a, op, b in RECIPE["train"]["rows"]:
        question, answer = QUESTION_TEMPLATE.format(a=a, op=op, b=b), OPS[op](a, b)
        answers = {int(t.split("assistant\n")[1].split("<|im_end|>")[0]) for t in texts if question in t}
        offsets = {min(abs(x - answer), 2) for x in answers}
        assert offsets == {0, 1, 2}, f"{question}: answers {sorted(answers)} (want right, ±1 and further off)"


@pytest.mark.e2e
def test_compact_loss_is_the_full_vocabulary_cross_entropy(qwen3_tokenizer: Path) -> None:
    torch = pytest.importorskip("torch", reason="needs torch (dependency group `demo`)")
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    from e2e.engine import tiny_train

    recipe = copy.deepcopy(RECIPE)
    recipe["train"].update(steps=1, batch_size=4)
    tokenizer = AutoTokenizer.from_pretrained(str(qwen3_tokenizer))
    examples = tiny_train.training_examples(tokenizer, recipe["train"])
    vocab = tiny_train.training_vocab(examples, recipe["model"]["pad_token_id"])
    index = {token: i for i, token in enumerate(vocab)}
    torch.manual_seed(0)
    compact = Qwen3ForCausalLM(tiny_train._compact_config(recipe["model"], vocab)).eval()
    full = tiny_train.expand_to_full(compact, vocab, recipe["model"])
    pad = recipe["model"]["pad_token_id"]
    ids, scored = tiny_train._batch(examples, pad)
    compact_ids, _ = tiny_train._batch([([index[t] for t in row], n) for row, n in examples], index[pad])
    with torch.no_grad():
        ours = tiny_train._loss(compact, compact_ids, scored, recipe["model"]["vocab_size"] - len(vocab))
        logits = full(input_ids=ids).logits[:, :-1][scored[:, :-1]]
        exact = torch.nn.functional.cross_entropy(logits.float(), ids[:, 1:][scored[:, :-1]])
    assert float(ours) == pytest.approx(float(exact), rel=1e-5)
    untrained = torch.ones(recipe["model"]["vocab_size"], dtype=torch.bool)
    untrained[vocab] = False
    assert torch.count_nonzero(full.model.embed_tokens.weight[untrained]) == 0


def test_model_cache_is_per_user_and_movable(monkeypatch, tmp_path: Path) -> None:
    from e2e.engine.tiny_model import CACHE_ENV, default_cache_root

    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_root() == tmp_path / "xdg" / "vf-sglang"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    assert default_cache_root() == tmp_path / "mine"
