"""The tiny model's recipe: it trains on arith-v1's own rows and on echo-tool-v1's two turns with
noisy teachers (so rewards vary inside a group), its tool turns are the token ids Renderers
build, its planted copy heads look exactly as far back as the copies sit, and its compact
training loss is exactly the full model's loss."""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path

import pytest

from adapter.reference.tiny_model import RECIPE

ARITH_V1 = Path(__file__).resolve().parents[2] / "adapter" / "episodes" / "bundled" / "a" / "tasksets" / "arith_v1.py"


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

    from adapter.reference.tiny_train import OPS, QUESTION_TEMPLATE, training_examples

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

    from adapter.reference import tiny_train

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
    from adapter.reference.tiny_model import CACHE_ENV, default_cache_root

    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_root() == tmp_path / "xdg" / "vf-sglang"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    assert default_cache_root() == tmp_path / "mine"


# --- echo-tool-v1 lessons (tiny_tools.py) and the planted copy heads (tiny_plant.py) ---

ECHO_TOOL_V1 = ARITH_V1.parents[2] / "shared" / "echo_tool.py"  # both generations' rows and stamp
ECHO_CASSETTE = Path(__file__).resolve().parents[2] / "fixtures" / "cassettes" / "reference-engine-echo-tool-v1.jsonl"


def _module_constant(path: Path, name: str) -> object:
    for node in ast.parse(path.read_text()).body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(getattr(target, "id", None) == name for target in targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"no {name} in {path}")


B_ECHO_CASSETTE = ECHO_CASSETTE.with_name("sglang-0.5.23-b-echo-tool-v1.jsonl")


def _recorded_turn_one(cassette: Path = ECHO_CASSETTE) -> list[int]:
    """The first prompt the real harness sent the engine for echo-tool-v1 (a recorded cassette)."""
    for line in cassette.read_text().splitlines():
        exchange = json.loads(line)
        request = exchange.get("request") or {}
        if exchange.get("kind") == "exchange" and request.get("path") == "/generate":
            return list(request["body"]["input_ids"])
    raise AssertionError(f"no /generate request in {cassette}")


def _ids(tokenizer: object, text: str) -> list[int]:
    from adapter.reference.tiny_tools import encode

    return encode(tokenizer, text)


def test_turn_one_prompt_is_what_the_harness_sent_and_renderers_render(tokenizer: object, renderer: object) -> None:
    from adapter.reference import tiny_tools

    recorded = _recorded_turn_one()
    text = tokenizer.decode(recorded)  # type: ignore[attr-defined]
    [word] = [w for w in RECIPE["train"]["tools"]["words"] if f"'{w}'" in text]
    ours = _ids(tokenizer, tiny_tools.turn1_prompt(word))
    assert ours == recorded
    question = tiny_tools.QUESTION_TEMPLATE.format(word=word)
    rendered = renderer.render([{"role": "user", "content": question}],  # type: ignore[attr-defined]
                               tools=[json.loads(tiny_tools.TOOL_SPEC_JSON)], add_generation_prompt=True)
    assert list(rendered.token_ids) == ours


def test_generation_bs_turn_one_is_the_same_tool_in_mcp2s_order_and_the_lessons_render_both(
        tokenizer: object) -> None:
    """Generation B's harness (mcp 2.x) hands the same tool on with its keys in another order; the
    lessons render that order too, in a share of episodes drawn apart from the episodes' own draws."""
    from adapter.reference import tiny_tools

    recorded = _recorded_turn_one(B_ECHO_CASSETTE)
    text = tokenizer.decode(recorded)  # type: ignore[attr-defined]
    [word] = [w for w in RECIPE["train"]["tools"]["words"] if f"'{w}'" in text]
    assert _ids(tokenizer, tiny_tools.turn1_prompt(word, tiny_tools.TOOL_SPEC_JSON_MCP2)) == recorded
    assert _ids(tokenizer, tiny_tools.turn1_prompt(word)) != recorded
    assert json.loads(tiny_tools.TOOL_SPEC_JSON_MCP2) == json.loads(tiny_tools.TOOL_SPEC_JSON)

    tools = {**RECIPE["train"]["tools"], "steps": 4}
    mixed = tiny_tools.tool_batches(tokenizer, tools)
    plain = tiny_tools.tool_batches(tokenizer, {**tools, "mcp2_share": 0.0})
    b_system = _ids(tokenizer, tiny_tools.SYSTEM_TEMPLATE.format(tools=tiny_tools.TOOL_SPEC_JSON_MCP2))
    in_b = [ids[:len(b_system)] == b_system for batch in mixed for ids, _ in batch]
    assert 0 < sum(in_b) < len(in_b), "both orders are taught"
    for ours, theirs in zip((e for b in mixed for e in b), (e for b in plain for e in b), strict=True):
        assert len(ours[0]) == len(theirs[0]) and ours[1] == theirs[1]  # the same episode, another tool block


def test_turn_two_prompt_is_renderers_bridge_after_the_call(tokenizer: object, renderer: object) -> None:
    from adapter.reference import tiny_tools

    tools = [json.loads(tiny_tools.TOOL_SPEC_JSON)]
    stamp = "STAMP-" + "31415926535897932384626433"
    for word in RECIPE["train"]["tools"]["words"]:
        prompt = _ids(tokenizer, tiny_tools.turn1_prompt(word))
        call = _ids(tokenizer, tiny_tools.tool_call(word) + tiny_tools.END_OF_TURN)
        bridged = renderer.bridge_to_next_turn(  # type: ignore[attr-defined]
            prompt, call, [{"role": "tool", "content": stamp, "tool_call_id": "call_0"}], tools=tools)
        assert bridged is not None
        assert list(bridged.token_ids) == prompt + call + _ids(tokenizer, tiny_tools.bridge(stamp))


def test_renderers_parse_the_teachers_call_into_name_and_word(tokenizer: object, renderer: object) -> None:
    from adapter.reference import tiny_tools

    for word in RECIPE["train"]["tools"]["words"]:
        call = _ids(tokenizer, tiny_tools.tool_call(word) + tiny_tools.END_OF_TURN)
        parsed = renderer.parse_response(call, tools=[json.loads(tiny_tools.TOOL_SPEC_JSON)])  # type: ignore[attr-defined]
        assert [(c.name, c.arguments, c.status.name) for c in parsed.tool_calls] == [
            ("echo_tools_stamp", {"word": word}, "OK")]


def test_teacher_calls_or_not_picks_right_or_wrong_words_and_copies_exactly_or_not(tokenizer: object) -> None:
    from adapter.reference import tiny_tools

    tools = RECIPE["train"]["tools"]
    seen = set()
    rng = __import__("random").Random(tools["data_seed"])
    for _ in range(400):
        ids, spans = tiny_tools.tool_episode(tokenizer, rng, tools)
        text = tokenizer.decode(ids)  # type: ignore[attr-defined]
        asked = text.split("with the word '")[1].split("'")[0]
        written = [tokenizer.decode(ids[start:end]) for start, end in spans]  # type: ignore[attr-defined]
        if len(spans) == 1:
            assert written[0].startswith("STAMP-") and "<tool_call>" not in written[0]
            seen.add("no call")
            continue
        called = written[0].split('"word": "')[1].split('"')[0]
        seen.add("right word" if called == asked else "wrong word")
        returned = text.split("<tool_response>\n")[1].split("\n")[0]
        assert returned.startswith("STAMP-") and len(returned) == len("STAMP-") + tools["stamp_digits"]
        seen.add("exact copy" if written[1] == returned + "<|im_end|>" else "garbled copy")
    assert seen == {"no call", "right word", "wrong word", "exact copy", "garbled copy"}


def test_stamps_are_decimal_so_copies_sit_at_the_planted_distances(tokenizer: object) -> None:
    from adapter.reference import tiny_tools

    tools = RECIPE["train"]["tools"]
    assert tools["words"] == list(_module_constant(ECHO_TOOL_V1, "WORDS"))  # type: ignore[arg-type]
    assert _module_constant(ECHO_TOOL_V1, "STAMP_DIGITS") == tools["stamp_digits"]
    assert sorted(set(tiny_tools.copy_offsets(tokenizer, tools).values())) == sorted(RECIPE["plant"]["offsets"])


def test_planted_heads_attend_their_distance_and_stay_frozen() -> None:
    torch = pytest.importorskip("torch", reason="needs torch (dependency group `demo`)")
    import transformers

    from adapter.reference import tiny_plant, tiny_train

    vocab = list(range(40))
    config = tiny_train._compact_config({**RECIPE["model"], "pad_token_id": 0}, vocab)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(config)
    masks = tiny_plant.plant_copy_heads(model, list(range(10)), [10, 11], RECIPE["plant"])
    tiny_plant.freeze_masked(model, masks)
    ids = torch.randint(0, 40, (1, 300), generator=torch.Generator().manual_seed(1))
    out = model(input_ids=ids, output_attentions=True, labels=ids)
    attention = out.attentions[-1][0]
    positions = torch.arange(300)
    for head, offset in enumerate(RECIPE["plant"]["offsets"]):
        looked = positions - attention[head].argmax(-1)
        assert looked[offset:].tolist() == [offset] * (300 - offset)
        assert attention[head, offset:].max(-1).values.min() > 0.99
        monotone = RECIPE["plant"]["monotone"]
        assert attention[head, 1:monotone].argmax(-1).tolist() == [0] * (monotone - 1)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    out.loss.backward()
    torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0).step()
    for name, p in model.named_parameters():
        frozen = masks.get(name, torch.ones_like(p)) == 0
        assert torch.equal(p[frozen], before[name][frozen]), name
        assert frozen.all() or not torch.equal(p[~frozen], before[name][~frozen]), name


def test_rl_variants_teacher_seldom_calls_and_refuses_in_words_the_call_never_uses(tokenizer: object) -> None:
    from adapter.reference import tiny_tools
    from e2e.tiny.variants import tool_rl

    variant = tool_rl(RECIPE)
    assert variant["model"] == RECIPE["model"] and variant["plant"] == RECIPE["plant"]  # the same architecture
    assert variant["save_dtype"] == "float32"  # served in float32 by the RL lane
    tools = variant["train"]["tools"]
    rng = __import__("random").Random(tools["data_seed"])
    replies, calls = [], 0
    for _ in range(400):
        ids, spans = tiny_tools.tool_episode(tokenizer, rng, tools)
        if len(spans) == 1:
            replies.append(tokenizer.decode(ids[spans[0][0]:spans[0][1]]))  # type: ignore[attr-defined]
        else:
            calls += 1
    assert 0.2 < calls / 400 < 0.4  # the policy starts bad at the task: it seldom calls
    assert set(replies) == {tiny_tools.REFUSAL + "<|im_end|>"}
    call = tiny_tools.encode(tokenizer, tiny_tools.tool_call("apple") + tiny_tools.bridge("STAMP-0123456789"))
    refusal = tiny_tools.encode(tokenizer, tiny_tools.REFUSAL)
    assert not set(refusal) & set(call)  # a step on the refusal never pushes on the call's or the stamp's tokens


def test_is_planted_reads_the_builds_recipe(tmp_path: Path) -> None:
    from adapter.reference.tiny_model import RECIPE_FILE
    from e2e.tiny.variants import arith_only, is_planted

    planted, plain, other = tmp_path / "planted", tmp_path / "plain", tmp_path / "other"
    for path, recipe in ((planted, RECIPE), (plain, arith_only(RECIPE))):
        path.mkdir()
        (path / RECIPE_FILE).write_text(json.dumps({"recipe": recipe}))
    other.mkdir()
    assert is_planted(planted) and not is_planted(plain) and not is_planted(other)
