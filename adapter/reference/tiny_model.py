"""A tiny Qwen3-shaped model for the reference engine, built locally and cached by its recipe.

Consumes: the real Qwen3 tokenizer (`adapter.reference.assets.install_qwen3_tokenizer`, pinned and
sha256-checked) and `RECIPE` below (model shape, training hyperparameters, data seed).
Emits: a self-contained HuggingFace model directory (config, generation config, safetensors
weights, tokenizer files, `recipe.json`) under
`<cache_root>/tiny-qwen3-<first 12 hex of sha256(recipe)>`, where `cache_root` defaults to
`$VF_SGLANG_CACHE`, else `$XDG_CACHE_HOME/vf-sglang` or `~/.cache/vf-sglang`.

What it learns: arith-v1's rows answered by a noisy teacher (right, off by one, further off),
and echo-tool-v1's two turns (call `echo_tools_stamp` with the task's word, then repeat the
stamp), also from a noisy teacher (it calls, picks the right word, copies exactly, each only
some of the time), so rewards vary and RL has something to improve. Three layers: the first two
train freely; the last holds two attention heads planted before training that copy the token a
fixed distance back (the stamp's digits and the word sit at constant distances from their
sources; `tiny_plant.py` says why and how), and training learns when and how strongly to use
them. See `tiny_train.py` and `tiny_tools.py` for the data.

Invariants: a directory with that name is complete: it is built in a temporary sibling and
renamed into place, so a crash never leaves a half-written model behind and two concurrent
builders agree on one result. Changing anything that changes the weights must change the
recipe (bump `RECIPE_VERSION` for code changes); the hash then names a new directory.
Training is seeded and runs on one thread with deterministic algorithms (see `tiny_train.py`
for the data and the compact-vocabulary loss that keeps it to seconds); weights are not
guaranteed bit-identical across CPUs, so tests assert properties, never exact sampled ids.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from adapter.reference.errors import TinyModelBuildError

logger = logging.getLogger(__name__)

RECIPE_VERSION = 4
CACHE_ENV = "VF_SGLANG_CACHE"
MODEL_PREFIX = "tiny-qwen3-"
RECIPE_FILE = "recipe.json"
WEIGHTS_FILE = "model.safetensors"

RECIPE: dict[str, Any] = {
    "recipe_version": RECIPE_VERSION,
    "model": {
        "vocab_size": 151936,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 3,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 64,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": True,
        "bos_token_id": 151643,
        "eos_token_id": [151645, 151643],
        "pad_token_id": 151643,
    },
    "train": {
        "init_seed": 0,
        "data_seed": 20240601,
        "steps": 200,
        "batch_size": 32,
        "lr": 6e-3,
        "warmup_steps": 10,
        "weight_decay": 0.0,
        "threads": 1,
        "ranges": {"add_max": 25, "sub_max": 30, "mul_max": 12},
        # arith-v1's twelve rows (fixtures/tasksets/arith_v1.py), answered by a noisy teacher
        # so the model samples right (1.0), off-by-one (0.5) and wrong (0.0) answers for each.
        "rows": [[3, "+", 4], [7, "+", 5], [12, "+", 9], [20, "+", 22], [6, "*", 7], [8, "*", 3],
                 [9, "*", 9], [4, "*", 12], [15, "-", 6], [30, "-", 17], [11, "+", 11], [5, "*", 5]],
        "row_fraction": 0.9,
        "answer_mix": {"exact": 0.6, "near": 0.25},
        # group-v1's "say the word" prompts, a few per step beside the rows (tiny_train.say_examples)
        "say": {"data_seed": 20240603, "per_step": 2, "words": ["banana", "violet", "harbor", "pepper"],
                "mix": {"exact": 0.6, "other": 0.25}},
        # echo-tool-v1 episodes (tiny_tools.py) by a noisy teacher: a batch of `batch_size` of them
        # in every step, its loss weighted by `loss_weight`; stamps are random `stamp_digits` digits.
        "tools": {
            "data_seed": 20240602,
            "batch_size": 4,
            "loss_weight": 1.5,
            "words": ["apple", "river", "lantern", "cobalt"],
            "stamp_digits": 26,
            "behaviour": {"call": 0.92, "right_word": 0.5, "copy": 0.99},
            # half the episodes render the tool block as generation B's harness does (tiny_tools.py)
            "mcp2_share": 0.5,
        },
    },
    # positional copy heads in the last layer (tiny_plant.py): the distance each query head looks
    # back (checked against the tool templates at build time), its sharpness and initial gains.
    "plant": {
        "offsets": [35, 36],
        "span": 400,
        "monotone": 30,
        "solver_iters": 40,
        "sharpness": 12.0,
        "shared": 0.05,
        "copy_embed": 1.0,
        "digit_gain": [3.0, 0.0],
        "word_gain": [1.0, 1.0],
    },
    "save_dtype": "bfloat16",
}


def recipe_hash(recipe: dict[str, Any]) -> str:
    """First 12 hex digits of the sha256 of the recipe's canonical JSON."""
    canonical = json.dumps(recipe, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def default_cache_root() -> Path:
    """`$VF_SGLANG_CACHE`, else the user's cache dir (`$XDG_CACHE_HOME/vf-sglang`, else
    `~/.cache/vf-sglang`: `adapter.episodes.caches.user_cache_dir`)."""
    from adapter.episodes.caches import user_cache_dir

    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else user_cache_dir()


def _is_complete(model_dir: Path, recipe: dict[str, Any]) -> bool:
    marker = model_dir / RECIPE_FILE
    if not (marker.is_file() and (model_dir / WEIGHTS_FILE).is_file()):
        return False
    try:
        return bool(json.loads(marker.read_text())["recipe"] == recipe)
    except (ValueError, KeyError, TypeError):
        return False


@contextlib.contextmanager
def _deterministic_torch(threads: int) -> Iterator[None]:
    """Seeded-build settings (thread count, deterministic kernels), restored afterwards."""
    import torch

    saved_threads = torch.get_num_threads()
    saved_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved_deterministic)
        torch.set_num_threads(saved_threads)


def _train_into(workdir: Path, recipe: dict[str, Any], *, progress: bool) -> dict[str, Any]:
    """Build, train and save the model and tokenizer into `workdir`; returns build stats."""
    import torch
    import transformers

    from adapter.reference.assets import install_qwen3_tokenizer
    from adapter.reference.tiny_train import train_model

    install_qwen3_tokenizer(workdir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(workdir))
    train = recipe["train"]
    started = time.monotonic()
    with _deterministic_torch(train["threads"]):
        model, final_loss = train_model(tokenizer, recipe, progress=progress)
    model.generation_config = transformers.GenerationConfig(  # type: ignore[no-untyped-call]  # transformers lacks the annotation
        bos_token_id=recipe["model"]["bos_token_id"],
        eos_token_id=recipe["model"]["eos_token_id"],
        pad_token_id=recipe["model"]["pad_token_id"],
        do_sample=False,
    )
    # the tokenizer files already in `workdir` are the pinned ones, byte for byte
    model.to(getattr(torch, recipe["save_dtype"])).save_pretrained(str(workdir))
    return {"final_loss": round(final_loss, 4), "train_seconds": round(time.monotonic() - started, 1)}


def _publish(workdir: Path, target: Path) -> None:
    """Rename the finished build into place; a concurrent builder that won the race wins."""
    workdir.chmod(0o755)  # mkdtemp made it private; the cache is readable like any HF cache
    for path in workdir.iterdir():
        path.chmod(0o644)
    try:
        workdir.rename(target)
    except OSError:
        if not target.is_dir():
            raise
        shutil.rmtree(workdir, ignore_errors=True)


def build_tiny_model(cache_root: Path | None = None, *, progress: bool = True,
                     recipe: dict[str, Any] | None = None) -> Path:
    """The tiny model's directory: loaded from the cache, or built once (seconds: see README).
    `recipe`: another recipe than RECIPE (e.g. the lanes' `e2e.tiny.variants.arith_only(RECIPE)`), cached
    under its own hash.

    Raises `TinyModelBuildError` when the cache root cannot be written or the build fails."""
    recipe = copy.deepcopy(RECIPE if recipe is None else recipe)
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    target = root / f"{MODEL_PREFIX}{recipe_hash(recipe)}"
    if _is_complete(target, recipe):
        return target
    if target.exists():
        logger.warning("tiny-qwen3: %s is incomplete or from another recipe; rebuilding", target)
        shutil.rmtree(target, ignore_errors=True)
    try:
        root.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=root))
    except OSError as exc:
        raise TinyModelBuildError(f"cannot write the model cache {root}: {exc}; set ${CACHE_ENV}") from exc
    try:
        stats = _train_into(workdir, recipe, progress=progress)
        manifest = {"recipe": recipe, "recipe_hash": recipe_hash(recipe), "build": stats}
        (workdir / RECIPE_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        _publish(workdir, target)
    except (OSError, RuntimeError, ValueError) as exc:  # AssetError is a RuntimeError
        shutil.rmtree(workdir, ignore_errors=True)
        raise TinyModelBuildError(f"building the tiny model into {target} failed: {exc}") from exc
    except BaseException:  # interrupted: leave no half-built directory behind
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    logger.info("tiny-qwen3: built %s (final loss %.4f)", target, stats["final_loss"])
    return target
