"""The tiny model's variants only the lanes build: each is a function of the product's recipe
(`adapter.reference.tiny_model.RECIPE`) and is built by `build_tiny_model(recipe=...)`, cached under
its own hash like the recipe itself.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from adapter.reference.tiny_model import RECIPE_FILE

# The tool lessons' share in generation B's tool-block order (adapter/reference/tiny_tools.py) for a
# variant served under generation A only (the RL loop, the default harness): none, so its lessons,
# and so its weights, are what they were before the recipe taught B's order too (the lanes' bars
# were set on them; a strict one, every default-harness episode multi-turn, failed 3 of 4 with half).
A_ONLY = 0.0


def arith_only(recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe's arithmetic-only variant: two layers, no planted heads, no tool or say lessons,
    the earlier teacher (exact 0.5, near 0.3). The router lane's engines serve it; the RL loop takes
    it with `--model arith-only --taskset arith-v1` (its defaults are tuned for `tool_rl`; this one
    is served in bf16, and `tool_rl` says why the planted model is not)."""
    variant = copy.deepcopy(recipe)
    variant["model"]["num_hidden_layers"] = 2
    variant["train"]["tools"]["batch_size"] = 0
    variant["train"]["say"]["per_step"] = 0
    variant["train"]["answer_mix"] = {"exact": 0.5, "near": 0.3}
    variant["plant"] = None
    return variant


def default_harness(recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe's default-harness variant: the same model and lessons, plus echo-tool-v1 under
    Verifiers' default (bash + edit) harness (`tiny_bash.py`): a bash call `echo <word>`, then the
    stamp call, then the stamp. Its episodes are ~560 tokens, so the planted heads' profile is solved
    over a longer span. Same architecture as the recipe's model: the sglang-cpu lane loads it into a
    running server (`/update_weights_from_disk`) for the default-harness episodes."""
    variant = copy.deepcopy(recipe)
    tools = variant["train"]["tools"]
    tools["mcp2_share"] = A_ONLY
    variant["train"]["bash"] = {
        "data_seed": 20240604, "batch_size": 2, "loss_weight": 1.5, "words": tools["words"],
        "stamp_digits": tools["stamp_digits"], "behaviour": {"bash": 0.9, "copy": 0.99},
    }
    if variant["plant"] is not None:
        variant["plant"]["span"] = 800
    return variant


def tool_rl(recipe: dict[str, Any]) -> dict[str, Any]:
    """The RL lane's variant: the same model and lessons, but its echo-tool teacher seldom calls the
    tool (prob. 0.3; otherwise it replies "I cannot call tools.", reward 0) and, when it calls,
    picks the task's word and copies the stamp almost always; trained twice as long on twice the
    tool episodes, so the call's format is sharp (each token ≥ 0.9 at T = 0.8). So the policy starts
    bad at the task (calls ≈ 1 in 4) and has one thing to learn: call the tool, then answer with
    its result. The refusal is short and shares no token with the call or the stamp: a made-up
    stamp as the wrong reply made each step push "STAMP-" and digits down, and the second turn's
    copies broke with it. Saved and served in float32: with bf16 the planted heads' sharp
    attention makes SGLang's bf16 activations and the trainer's fp32 recompute drift apart once the
    weights move (measured mismatch KL 1.2e-2 after two steps; in float32, ~1e-14)."""
    variant = copy.deepcopy(recipe)
    tools = variant["train"]["tools"]
    tools["behaviour"] = {"call": 0.3, "right_word": 0.95, "copy": 0.99, "skip_reply": "refuse"}
    tools["batch_size"] = 8
    tools["mcp2_share"] = A_ONLY
    variant["train"]["steps"] = 400
    variant["save_dtype"] = "float32"
    return variant


def is_planted(model_dir: Path) -> bool:
    """Whether the tiny model in `model_dir` holds planted copy heads (its `recipe.json` says so);
    a trainer fine-tuning it must then keep `tiny_plant.planted_masks` frozen. False for a
    directory that is not a tiny-model build."""
    try:
        return json.loads((Path(model_dir) / RECIPE_FILE).read_text())["recipe"].get("plant") is not None
    except (OSError, ValueError, KeyError, AttributeError):
        return False
