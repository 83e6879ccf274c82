"""Fail-fast rules (docs/contract.md §5), as one table, checked before any episode runs.

Consumes `Settings` and, for the rules that need the loaded environment, `EnvFacts`. Emits
nothing on success; otherwise one `ConfigurationError` listing every broken rule, each naming
the flag and what to do instead. Messages name options as `{settings_field}` templates, rendered
with the settings' own flag names (`Settings.flag`): Miles' flags by default, a `vf-sglang`
command's own when it built the settings, so the message names what the user typed. Config-file rules live in
`adapter.config.env_config`, version rules in `adapter.versions.gate`; this table holds the trainer-option and
taskset rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from adapter.config.settings import Settings
from adapter.errors import ConfigurationError


@dataclass(frozen=True)
class EnvFacts:
    """What the rules need to know about a loaded environment."""

    task_count: int
    has_group_reward: bool


Check = Callable[[Settings, "EnvFacts | None"], bool]


@dataclass(frozen=True)
class Rule:
    name: str
    violated: Check
    # names the flag, why it cannot work, and what to do instead; options are written as
    # `{settings_field}` and rendered with the flag names of the command that runs
    message: str

    def render(self, settings: Settings) -> str:
        return self.message.format_map(settings.flag_map())


def _env(check: Callable[[Settings, EnvFacts], bool]) -> Check:
    """A rule that applies only once the environment is known."""
    return lambda settings, env: env is not None and check(settings, env)


RULES: tuple[Rule, ...] = (
    Rule("trainer_prompt_dataset", lambda s, _: s.rollout_global_dataset,
         "the trainer's own prompt dataset is enabled: the Verifiers taskset replaces it; "
         "pass --disable-rollout-global-dataset (and drop --prompt-data)"),
    Rule("partial_rollout", lambda s, _: s.partial_rollout,
         "{partial_rollout} is set: a live Verifiers episode cannot be paused and resumed; "
         "remove {partial_rollout}"),
    Rule("multimodal_keys", lambda s, _: bool(s.multimodal_keys),
         "{multimodal_keys} is set: the adapter feeds text-only renderer inputs; remove it and "
         "use a text taskset"),
    Rule("chat_template_path", lambda s, _: s.chat_template_path is not None,
         "{chat_template_path} is set: Renderers owns prompt formatting; remove it and pass "
         "template options with {apply_chat_template_kwargs}"),
    Rule("opd", lambda s, _: s.use_opd,
         "{use_opd} is set: on-policy distillation needs extra token metadata the adapter does "
         "not carry; remove {use_opd}"),
    Rule("routing_replay", lambda s, _: s.use_rollout_routing_replay,
         "{use_rollout_routing_replay} is set: routed-expert data is not carried through "
         "Verifiers traces; remove the flag"),
    Rule("indexer_replay", lambda s, _: s.use_rollout_indexer_replay,
         "{use_rollout_indexer_replay} is set: indexer data is not carried through Verifiers "
         "traces; remove the flag"),
    Rule("recompute_logprobs_via_prefill", lambda s, _: s.recompute_logprobs_via_prefill,
         "{recompute_logprobs_via_prefill} is set: the adapter does not re-score rollouts by SGLang "
         "prefill, so rollout_log_probs would silently stay the sampling (decode) logprobs; remove "
         "{recompute_logprobs_via_prefill}"),
    Rule("keep_sampling_mask", lambda s, _: s.keep_sampling_mask,
         "{keep_sampling_mask} is set: Miles would train against SGLang's truncated sampling support "
         "(rollout_sampling_mask_ids/offsets), which Verifiers' traces do not carry, so the adapter cannot "
         "fill it; remove {keep_sampling_mask} (truncated sampling then trains on the full distribution)"),
    Rule("eval_group_rm", lambda s, _: s.group_rm and s.eval_enabled,
         "{group_rm} with evaluation on: group reward models are not run on eval samples; "
         "remove {group_rm} or turn eval off ({eval_interval})"),
    Rule("empty_taskset", _env(lambda s, env: env.task_count == 0),
         "the taskset has zero tasks: check the EnvConfig's [taskset] (id and its arguments)"),
    Rule("group_reward_train_n",
         _env(lambda s, env: env.has_group_reward and s.train_enabled
              and s.n_samples_per_prompt < 2),
         "the taskset has group rewards, which need at least 2 rollouts per task: set "
         "{n_samples_per_prompt} 2 or more"),
    Rule("group_reward_eval_n",
         _env(lambda s, env: env.has_group_reward and s.eval_enabled
              and s.n_samples_per_eval_prompt < 2),
         "the taskset has group rewards, which need at least 2 rollouts per eval task: set "
         "{n_samples_per_eval_prompt} 2 or more"),
)


def violations(settings: Settings, env: EnvFacts | None = None) -> list[Rule]:
    return [rule for rule in RULES if rule.violated(settings, env)]


def validate(settings: Settings, env: EnvFacts | None = None) -> None:
    """Raise one `ConfigurationError` naming every broken rule (by the flags of the command that
    runs: `Settings.flag`), or return."""
    broken = violations(settings, env)
    if broken:
        lines = "\n".join(f"- [{rule.name}] {rule.render(settings)}" for rule in broken)
        raise ConfigurationError(f"unsupported configuration ({len(broken)} problem(s)):\n{lines}")
