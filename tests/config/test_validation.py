"""Fail-fast rules (docs/contract.md §5): each rule fires alone, names its flag, and all are listed."""

from __future__ import annotations

import argparse

import pytest

from adapter.config.rules import RULES, EnvFacts, validate, violations
from adapter.config.settings import Settings
from adapter.errors import ConfigurationError

OK_ENV = EnvFacts(task_count=3, has_group_reward=False)
GROUP_ENV = EnvFacts(task_count=3, has_group_reward=True)

# rule name: (settings overrides, env facts, text the message must contain)
CASES = {
    "trainer_prompt_dataset": ({"rollout_global_dataset": True}, OK_ENV,
                               "--disable-rollout-global-dataset"),
    "partial_rollout": ({"partial_rollout": True}, OK_ENV, "--partial-rollout"),
    "multimodal_keys": ({"multimodal_keys": {"image": "images"}}, OK_ENV, "--multimodal-keys"),
    "chat_template_path": ({"chat_template_path": "t.jinja"}, OK_ENV,
                           "--apply-chat-template-kwargs"),
    "opd": ({"use_opd": True}, OK_ENV, "--use-opd"),
    "routing_replay": ({"use_rollout_routing_replay": True}, OK_ENV,
                       "--use-rollout-routing-replay"),
    "indexer_replay": ({"use_rollout_indexer_replay": True}, OK_ENV,
                       "--use-rollout-indexer-replay"),
    "recompute_logprobs_via_prefill": ({"recompute_logprobs_via_prefill": True}, OK_ENV,
                                       "--recompute-logprobs-via-prefill"),
    "keep_sampling_mask": ({"keep_sampling_mask": True, "rollout_top_p": 0.9}, OK_ENV, "--keep-sampling-mask"),
    "eval_group_rm": ({"group_rm": True, "eval_interval": 5}, OK_ENV, "--group-rm"),
    "empty_taskset": ({}, EnvFacts(task_count=0, has_group_reward=False), "zero tasks"),
    "group_reward_train_n": ({"n_samples_per_prompt": 1}, GROUP_ENV, "--n-samples-per-prompt"),
    "group_reward_eval_n": ({"eval_interval": 5, "n_samples_per_eval_prompt": 1}, GROUP_ENV,
                            "--n-samples-per-eval-prompt"),
}


def test_every_rule_has_a_case() -> None:
    assert sorted(CASES) == sorted(rule.name for rule in RULES)


@pytest.mark.parametrize("name", CASES)
def test_rule_fires_alone_and_names_what_to_do(name: str, make_settings) -> None:
    overrides, env, text = CASES[name]
    settings = make_settings(**overrides)
    assert [rule.name for rule in violations(settings, env)] == [name]
    with pytest.raises(ConfigurationError, match=text):
        validate(settings, env)


def test_a_well_formed_run_passes(make_settings) -> None:
    validate(make_settings(), OK_ENV)
    validate(make_settings(), GROUP_ENV)


def test_every_broken_rule_is_listed_at_once(make_settings) -> None:
    settings = make_settings(partial_rollout=True, use_opd=True)
    with pytest.raises(ConfigurationError, match=r"2 problem\(s\)") as caught:
        validate(settings)
    assert "--partial-rollout" in str(caught.value) and "--use-opd" in str(caught.value)


def test_env_rules_wait_for_the_environment(make_settings) -> None:
    validate(make_settings(n_samples_per_prompt=1))  # env unknown yet: nothing to check


def test_eval_only_run_skips_the_train_group_size_check(make_settings) -> None:
    settings = make_settings(num_rollout=0, n_samples_per_prompt=1, eval_interval=1,
                             n_samples_per_eval_prompt=4)
    validate(settings, GROUP_ENV)


def test_settings_from_a_bare_namespace_take_the_field_defaults() -> None:
    settings = Settings.from_args(argparse.Namespace())
    assert settings == Settings()
    assert settings.apply_chat_template_kwargs == {}
    # Miles' own prompt dataset is on by default, so a bare namespace is refused.
    assert [r.name for r in violations(settings)] == ["trainer_prompt_dataset"]


def test_settings_parse_miles_shapes() -> None:
    args = argparse.Namespace(rollout_stop="</a>", rollout_stop_token_ids=[7, 8],
                              apply_chat_template_kwargs='{"enable_thinking": false}')
    settings = Settings.from_args(args)
    assert settings.rollout_stop == ("</a>",)
    assert settings.rollout_stop_token_ids == (7, 8)
    assert settings.apply_chat_template_kwargs == {"enable_thinking": False}


def test_recompute_logprobs_via_prefill_is_refused_at_construction_naming_the_flag(make_settings) -> None:
    """Miles' `test_unsupported_wiring_fails_before_any_episode_runs` (its example's fail-fast
    table, tests/fast/examples/experimental/verifiers/test_verifiers_rollout.py): Miles' example
    re-scores its samples by prefill when the flag is set; the adapter does not, so the flag,
    read from Miles' own args, is refused before any episode instead of silently ignored."""
    from adapter.miles.abi import RolloutFnConstructorInput
    from adapter.miles.binding import VerifiersRolloutFn

    args = argparse.Namespace(recompute_logprobs_via_prefill=True, rollout_global_dataset=False)
    settings = Settings.from_args(args)
    assert [rule.name for rule in violations(settings, OK_ENV)] == ["recompute_logprobs_via_prefill"]
    with pytest.raises(ConfigurationError, match=r"--recompute-logprobs-via-prefill is set: .*remove "
                                                 r"--recompute-logprobs-via-prefill"):
        validate(settings, OK_ENV)
    with pytest.raises(ConfigurationError, match=r"\[recompute_logprobs_via_prefill\] --recompute-logprobs"):
        VerifiersRolloutFn(RolloutFnConstructorInput(args, None))  # Miles constructs it: refused there
    validate(make_settings(recompute_logprobs_via_prefill=False), OK_ENV)


def test_eval_clears_trainings_minimum_new_tokens_as_miles_does() -> None:
    """Miles' `test_eval_args_clear_training_prompt_cap_and_preserve_other_fallbacks` and
    `test_sampling_config_preserves_miles_minimum_tokens` (its example's `_make_eval_args` sets
    `rollout_min_new_tokens = eval_min_new_tokens`, tests/fast/examples/experimental/verifiers/
    test_verifiers_rollout.py): training's minimum reaches the train sampling config, eval's is
    its own — unset, eval samples carry no minimum at all."""
    from adapter.episodes.generations.a import sampling_config

    settings = Settings(rollout_min_new_tokens=3, rollout_max_response_len=8, eval_min_new_tokens=None)
    assert sampling_config(settings).model_dump(exclude_none=True)["min_tokens"] == 3
    evaluated = settings.for_eval()
    assert evaluated.rollout_min_new_tokens is None
    assert "min_tokens" not in sampling_config(evaluated).model_dump(exclude_none=True)
    assert Settings(rollout_min_new_tokens=3, eval_min_new_tokens=1).for_eval().rollout_min_new_tokens == 1
    assert evaluated.rollout_max_response_len == 8  # the other eval_* fall back to rollout_* as before


def test_eval_settings_override_rollout_settings() -> None:
    settings = Settings(rollout_temperature=1.0, eval_temperature=0.0, rollout_top_p=0.9,
                        rollout_max_prompt_len=100, eval_max_prompt_len=None,
                        reward_key="a", eval_reward_key="b", n_samples_per_eval_prompt=3)
    evaluated = settings.for_eval()
    assert (evaluated.rollout_temperature, evaluated.rollout_top_p) == (0.0, 0.9)
    assert evaluated.rollout_max_prompt_len is None
    assert (evaluated.reward_key, evaluated.n_samples_per_prompt) == ("b", 3)
    assert Settings(reward_key="a").for_eval().reward_key == "a"


@pytest.mark.parametrize(
    ("lora", "live"),
    [({}, False), ({"lora_rank": 8}, True), ({"lora_adapter_path": "/a"}, True),
     ({"lora_rank": 8, "lora_train_only": True}, False)],
    ids=["none", "rank", "adapter_path", "train_only"],
)
def test_rollout_lora_is_live_only_when_it_serves_rollouts(lora, live) -> None:
    assert Settings(**lora).rollout_lora_live is live


def test_from_args_reads_every_field_and_nothing_else() -> None:
    import dataclasses

    names = [f.name for f in dataclasses.fields(Settings)]
    args = argparse.Namespace(**{name: None for name in names}, not_a_setting=1)
    args.rollout_temperature, args.n_samples_per_prompt = 0.25, 5
    settings = Settings.from_args(args)
    assert (settings.rollout_temperature, settings.n_samples_per_prompt) == (0.25, 5)
    assert not hasattr(settings, "not_a_setting")
