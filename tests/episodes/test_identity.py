"""Renderer identity from checkpoint paths and what checkpoint directories say (the real registry)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from adapter.config.settings import Settings
from adapter.episodes.identity import infer_identity, registered_models, renderer_identity
from adapter.errors import AmbiguousIdentityError
from adapter.rollout.job import renderer_model_for

REGISTRY = {
    "Qwen/Qwen3-0.6B": "qwen3",
    "Qwen/Qwen3-8B": "qwen3",
    "Org/Shared-7B": "org",
    "Other/Shared-7B": "other",
    "A/Twin-1B": "twin",
    "B/Twin-1B": "twin",
}

CASES = [
    ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B"),
    ("/ckpt/Qwen3-0.6B", "Qwen/Qwen3-0.6B"),
    ("/ckpt/qwen3-0.6b/", "Qwen/Qwen3-0.6B"),
    ("/ckpt/Qwen3-8B/iter_0000100/hf", "Qwen/Qwen3-8B"),
    ("/hf/hub/models--Qwen--Qwen3-0.6B/snapshots/" + "a" * 40, "Qwen/Qwen3-0.6B"),
    ("/hf/hub/models--Other--Shared-7B/snapshots/abc", "Other/Shared-7B"),
    ("/ckpt/my-finetune", None),
    ("/ckpt/Twin-1B", "A/Twin-1B"),  # same renderer either way: no ambiguity
]


@pytest.mark.parametrize(("path", "identity"), CASES)
def test_identity(path: str, identity: str | None) -> None:
    assert renderer_identity(path, REGISTRY) == identity


def test_ambiguous_basename_is_reported_not_picked() -> None:
    with pytest.raises(AmbiguousIdentityError, match=r"Org/Shared-7B.*Other/Shared-7B"):
        renderer_identity("/ckpt/Shared-7B", REGISTRY)


def test_real_registry_resolves_hf_cache_paths_and_reports_real_ambiguity() -> None:
    assert registered_models()["Qwen/Qwen3-0.6B"] == "qwen3"
    cache = "/hf/hub/models--Qwen--Qwen3-0.6B/snapshots/" + "0" * 40
    assert renderer_identity(cache) == "Qwen/Qwen3-0.6B"
    # renderers registers Qwen3-0.6B twice (qwen3 and prime-qwen3): a bare name must not pick
    with pytest.raises(AmbiguousIdentityError, match=r"PrimeIntellect/Qwen3-0\.6B"):
        renderer_identity("/models/Qwen3-0.6B")


# --- a job's sources: the loaded tokenizer, the checkpoint, what their directories say -----------

# Qwen3-4B-Instruct-2507's published config.json fields (transformers 4.51 wrote it: no name in it).
QWEN3_4B_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 2560, "initializer_range": 0.02, "intermediate_size": 9728,
    "max_position_embeddings": 262144, "max_window_layers": 36, "model_type": "qwen3",
    "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 5000000, "sliding_window": None, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
}
SNAPSHOT = "hub/models--Qwen--Qwen3-4B-Instruct-2507/snapshots/" + "c" * 40


def checkpoint(root: Path, relative: str, *, config: dict[str, Any] | None = None,
               tokenizer_config: dict[str, Any] | None = None) -> str:
    """A real directory under `root` holding the given self-describing files."""
    directory = root / relative
    directory.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (directory / "config.json").write_text(json.dumps(config, indent=2))
    if tokenizer_config is not None:
        (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
    return str(directory)


def saved_by_transformers_4(name_or_path: str) -> dict[str, Any]:
    """config.json as older transformers' save_pretrained wrote it: the id or path the model was
    loaded from under `_name_or_path`, first (its keys are sorted)."""
    return {"_name_or_path": name_or_path, **QWEN3_4B_CONFIG, "transformers_version": "4.46.3"}


# (tokenizer dir, checkpoint dir, expected id); each dir is (path under tmp_path, config.json,
# tokenizer_config.json) or None
INFERENCE = [
    pytest.param(("custom-tokenizer", None, None), (SNAPSHOT, QWEN3_4B_CONFIG, None),
                 "Qwen/Qwen3-4B-Instruct-2507", id="local-tokenizer+hf-cache-checkpoint"),
    pytest.param(("models/Qwen3-8B", None, None), (SNAPSHOT, QWEN3_4B_CONFIG, None),
                 "Qwen/Qwen3-8B", id="the-loaded-tokenizer-wins"),
    pytest.param(None, ("ckpt/run-7/iter_0000100/hf", saved_by_transformers_4("Qwen/Qwen3-4B-Instruct-2507"), None),
                 "Qwen/Qwen3-4B-Instruct-2507", id="checkpoint-config-names-an-id"),
    pytest.param(None, ("ckpt/run-7/hf", saved_by_transformers_4("/root/.cache/huggingface/" + SNAPSHOT), None),
                 "Qwen/Qwen3-4B-Instruct-2507", id="checkpoint-config-names-an-hf-cache-path"),
    pytest.param(None, ("ckpt/run-7/hf", saved_by_transformers_4("/models/Qwen3-14B"), None),
                 "Qwen/Qwen3-14B", id="checkpoint-config-names-a-registered-folder"),
    pytest.param(("tokenizer", None, {"tokenizer_class": "Qwen2Tokenizer", "name_or_path": "Qwen/Qwen3-4B"}),
                 ("ckpt/run-7/hf", QWEN3_4B_CONFIG, None), "Qwen/Qwen3-4B", id="old-tokenizer-config-names-an-id"),
    pytest.param(None, ("ckpt/Qwen3-0.6B/iter_0000100/hf", saved_by_transformers_4("Qwen/Qwen3-0.6B"), None),
                 "Qwen/Qwen3-0.6B", id="config-settles-an-ambiguous-folder"),
    pytest.param(None, ("ckpt/run-7/hf", QWEN3_4B_CONFIG, None), None, id="config-without-a-name"),
    pytest.param(None, ("ckpt/run-7/hf", saved_by_transformers_4("/data/my-finetune"), None), None,
                 id="config-names-an-unregistered-path"),
    pytest.param(("custom-tokenizer", None, None), None, None, id="tokenizer-alone-unregistered"),
]


@pytest.mark.parametrize(("tokenizer", "ckpt", "expected"), INFERENCE)
def test_job_identity_is_inferred_from_tokenizer_then_checkpoint(tmp_path, tokenizer, ckpt, expected) -> None:
    paths = [(label, checkpoint(tmp_path, where, config=config, tokenizer_config=tok) if spec else None)
             for label, spec in (("--sglang-tokenizer-path", tokenizer), ("--hf-checkpoint", ckpt))
             for where, config, tok in [spec or (None, None, None)]]
    inferred = infer_identity(paths)
    assert inferred.model_id == expected
    assert inferred.model_id is None or registered_models()[inferred.model_id]  # real registry ids only


def test_what_was_tried_is_reported_in_order(tmp_path) -> None:
    tokenizer = checkpoint(tmp_path, "custom-tokenizer", tokenizer_config={"tokenizer_class": "Qwen2Tokenizer"})
    ckpt = checkpoint(tmp_path, "ckpt/run-7/hf", config=QWEN3_4B_CONFIG)
    inferred = infer_identity([("--sglang-tokenizer-path", tokenizer), ("--hf-checkpoint", ckpt)])
    assert inferred.model_id is None
    assert inferred.tried == (
        f"--sglang-tokenizer-path {tokenizer!r}: no registered model in it",
        f"--hf-checkpoint {ckpt!r}: no registered model in it",
        "--sglang-tokenizer-path's tokenizer_config.json name_or_path: absent",
        "--hf-checkpoint's config.json _name_or_path: absent",
    )


def test_an_unreadable_config_is_reported_not_fatal(tmp_path) -> None:
    ckpt = checkpoint(tmp_path, "ckpt/run-7/hf")
    Path(ckpt, "config.json").write_text('{"_name_or_path": "Qwen/Qwen3-8B",')  # truncated write
    inferred = infer_identity([("--hf-checkpoint", ckpt)])
    assert inferred.model_id is None
    assert "--hf-checkpoint's config.json _name_or_path: unreadable (JSONDecodeError)" in inferred.tried


def test_an_ambiguous_folder_not_settled_is_an_error_naming_the_flag(tmp_path) -> None:
    # the config names a registered model, but not one of the folder's two candidates: no guess
    ckpt = checkpoint(tmp_path, "ckpt/Qwen3-0.6B/hf", config=saved_by_transformers_4("Qwen/Qwen3-8B"))
    with pytest.raises(AmbiguousIdentityError, match=r"PrimeIntellect/Qwen3-0\.6B, Qwen/Qwen3-0\.6B") as error:
        infer_identity([("--hf-checkpoint", ckpt)], explicit_flag="--model")
    message = str(error.value)
    assert "does not settle" in message and message.endswith("pass --model with one of them")


def test_a_config_saved_by_the_installed_transformers_carries_no_name(tmp_path) -> None:
    """Why a modern checkpoint is identified by its path only: transformers 5's save_pretrained
    drops `_name_or_path`, so its directory says nothing about which model it is."""
    from transformers import Qwen3Config

    config = Qwen3Config(hidden_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    config.name_or_path = "Qwen/Qwen3-4B-Instruct-2507"
    config.save_pretrained(tmp_path / "ckpt")
    assert "_name_or_path" not in json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert infer_identity([("--hf-checkpoint", str(tmp_path / "ckpt"))]).model_id is None


# --- the job: the explicit option first, the flags of the running command in messages ----------

def test_explicit_renderer_model_name_is_taken_as_given(tmp_path) -> None:
    ckpt = checkpoint(tmp_path, SNAPSHOT, config=QWEN3_4B_CONFIG)
    settings = Settings(renderer_model_name="my-org/unregistered-model", hf_checkpoint=ckpt)
    assert renderer_model_for(settings) == "my-org/unregistered-model"


def test_the_loaded_tokenizer_argument_replaces_sglang_tokenizer_path(tmp_path) -> None:
    settings = Settings(sglang_tokenizer_path=checkpoint(tmp_path, "models/Qwen3-8B"),
                        hf_checkpoint=checkpoint(tmp_path, "ckpt/run-7/hf"))
    assert renderer_model_for(settings) == "Qwen/Qwen3-8B"
    # a tokenizer given to the job is the one loaded: sglang_tokenizer_path names nothing then
    assert renderer_model_for(settings, tokenizer_path=checkpoint(tmp_path, "custom-tokenizer")) is None


@pytest.mark.parametrize(("flags", "advice"), [
    (None, "pass --renderer-model-name with a registered model id"),
    ({"renderer_model_name": "--model", "hf_checkpoint": "--tokenizer"}, "pass --model with a registered model id"),
    ({"sglang_router_policy": "--router-policy"}, "use a model Renderers registers"),
])
def test_the_fallback_warning_says_what_was_tried_and_which_flag_helps(tmp_path, caplog, flags, advice) -> None:
    ckpt = checkpoint(tmp_path, "ckpt/run-7/hf", config=QWEN3_4B_CONFIG)
    with caplog.at_level(logging.WARNING, logger="adapter.rollout.job"):
        assert renderer_model_for(Settings(hf_checkpoint=ckpt, flag_names=flags)) is None
    (record,) = [r for r in caplog.records if r.name == "adapter.rollout.job"]
    message = record.getMessage()
    flag = (flags or {}).get("hf_checkpoint", "--hf-checkpoint")
    assert f"{flag} {ckpt!r}: no registered model in it" in message
    assert f"{flag}'s config.json _name_or_path: absent" in message
    assert advice in message and "--hf-checkpoint to" not in message
