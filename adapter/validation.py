"""Fail-fast rules (CONTRACT.md §5), as one table, checked before any episode runs.

Consumes `Settings` and, for the rules that need the loaded environment, `EnvFacts`. Emits
nothing on success; otherwise one `ConfigurationError` listing every broken rule, each naming
the flag and what to do instead. Config-file rules live in `adapter.config`, version rules in
`adapter.versions`; this table holds the trainer-option and taskset rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from adapter.errors import ConfigurationError
from adapter.settings import Settings


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
    message: str  # names the flag, why it cannot work, and what to do instead


def _env(check: Callable[[Settings, EnvFacts], bool]) -> Check:
    """A rule that applies only once the environment is known."""
    return lambda settings, env: env is not None and check(settings, env)


RULES: tuple[Rule, ...] = (
    Rule("trainer_prompt_dataset", lambda s, _: s.rollout_global_dataset,
         "the trainer's own prompt dataset is enabled: the Verifiers taskset replaces it; "
         "pass --disable-rollout-global-dataset (and drop --prompt-data)"),
    Rule("partial_rollout", lambda s, _: s.partial_rollout,
         "--partial-rollout is set: a live Verifiers episode cannot be paused and resumed; "
         "remove --partial-rollout"),
    Rule("multimodal_keys", lambda s, _: bool(s.multimodal_keys),
         "--multimodal-keys is set: the adapter feeds text-only renderer inputs; remove it and "
         "use a text taskset"),
    Rule("chat_template_path", lambda s, _: s.chat_template_path is not None,
         "--chat-template-path is set: Renderers owns prompt formatting; remove it and pass "
         "template options with --apply-chat-template-kwargs"),
    Rule("opd", lambda s, _: s.use_opd,
         "--use-opd is set: on-policy distillation needs extra token metadata the adapter does "
         "not carry; remove --use-opd"),
    Rule("routing_replay", lambda s, _: s.use_rollout_routing_replay,
         "--use-rollout-routing-replay is set: routed-expert data is not carried through "
         "Verifiers traces; remove the flag"),
    Rule("indexer_replay", lambda s, _: s.use_rollout_indexer_replay,
         "--use-rollout-indexer-replay is set: indexer data is not carried through Verifiers "
         "traces; remove the flag"),
    Rule("eval_group_rm", lambda s, _: s.group_rm and s.eval_enabled,
         "--group-rm with evaluation on: group reward models are not run on eval samples; "
         "remove --group-rm or turn eval off (--eval-interval)"),
    Rule("empty_taskset", _env(lambda s, env: env.task_count == 0),
         "the taskset has zero tasks: check the EnvConfig's [taskset] (id and its arguments)"),
    Rule("group_reward_train_n",
         _env(lambda s, env: env.has_group_reward and s.train_enabled
              and s.n_samples_per_prompt < 2),
         "the taskset has group rewards, which need at least 2 rollouts per task: set "
         "--n-samples-per-prompt 2 or more"),
    Rule("group_reward_eval_n",
         _env(lambda s, env: env.has_group_reward and s.eval_enabled
              and s.n_samples_per_eval_prompt < 2),
         "the taskset has group rewards, which need at least 2 rollouts per eval task: set "
         "--n-samples-per-eval-prompt 2 or more"),
)


def violations(settings: Settings, env: EnvFacts | None = None) -> list[Rule]:
    return [rule for rule in RULES if rule.violated(settings, env)]


def validate(settings: Settings, env: EnvFacts | None = None) -> None:
    """Raise one `ConfigurationError` naming every broken rule, or return."""
    broken = violations(settings, env)
    if broken:
        lines = "\n".join(f"- [{rule.name}] {rule.message}" for rule in broken)
        raise ConfigurationError(f"unsupported configuration ({len(broken)} problem(s)):\n{lines}")
