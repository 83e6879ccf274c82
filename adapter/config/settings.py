"""The trainer options the adapter reads, validated once into one frozen object.

Consumes a Miles-style `argparse.Namespace` (attribute names are Miles' flags with `-` → `_`).
The dataclass is the one table: each field is one attribute the adapter reads, with Miles' own
default (`miles/utils/arguments.py`); `from_args` reads exactly `dataclasses.fields(Settings)`,
so a missing attribute takes that default. To read a new option, add a field; nothing else.
Emits `Settings`, which every other module takes instead of the raw namespace. Derived values
(eval overrides, the live-LoRA decision) are properties, so they cannot disagree with the
fields they come from. `Settings` also knows each field's flag in the command that runs
(`flag`): Miles' own by default, a `vf-sglang` command's when it builds `Settings` with its
`flag_names`, so a refusal anywhere names what the user typed without a map passed around.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from adapter.config.limits import DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_SESSIONS

# The SGLang router policies Miles launches its router with (`--sglang-router-policy`); the
# `vf-sglang` commands offer the same (`--router-policy`).
ROUTER_POLICIES = ("consistent_hashing", "round_robin", "manual")
# The router policies under which SGLang's router needs a routing key per session.
ROUTING_KEY_POLICIES = frozenset({"consistent_hashing", "manual"})

# The LoRA name Miles registers on the engines for the live rollout adapter.
MILES_LORA_NAME = "miles_lora"


def _as_tuple(value: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, int)):
        return (value,)
    return tuple(value)


def _as_kwargs(value: Any) -> dict[str, Any]:
    """Miles parses --apply-chat-template-kwargs with json.loads; its default is the string '{}'."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        value = json.loads(value)
    return dict(value)


class FlagNames(dict[str, str]):
    """A flag map: `Settings` field → the flag that fills it in the command that runs (the
    `vf-sglang` subcommands pass theirs, e.g. `rollout_batch_size` → `--groups`); a field the
    map does not name gets Miles' own flag (`n_samples_per_prompt` → `--n-samples-per-prompt`)."""

    def __missing__(self, field: str) -> str:
        return miles_flag(field)


def miles_flag(field: str) -> str:
    """Miles' flag for a `Settings` field (Miles' argument names, `-` for `_`)."""
    return "--" + field.replace("_", "-")


# Fields Miles hands over in another shape than the one `Settings` holds.
_MILES_SHAPES: dict[str, Callable[[Any], Any]] = {
    "rollout_stop": _as_tuple,
    "rollout_stop_token_ids": _as_tuple,
    "apply_chat_template_kwargs": _as_kwargs,
}


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every trainer option the adapter reads. Field names are Miles' argument names."""

    rollout_batch_size: int | None = None
    n_samples_per_prompt: int = 1
    over_sampling_batch_size: int | None = None
    rollout_max_response_len: int | None = None
    rollout_max_prompt_len: int | None = None
    rollout_max_context_len: int | None = None
    rollout_temperature: float = 1.0
    rollout_top_p: float = 1.0
    rollout_top_k: int = -1
    # Miles #1521: min-p sampling (0.0 disables); sent to SGLang as `min_p` when set.
    rollout_min_p: float = 0.0
    # Miles #1521: train against SGLang's truncated sampling support (#2595's per-token masks);
    # Verifiers' traces carry no sampling support, so the adapter refuses it (adapter.config.rules).
    keep_sampling_mask: bool = False
    rollout_min_new_tokens: int | None = None
    rollout_stop: tuple[str, ...] | None = None
    rollout_stop_token_ids: tuple[int, ...] | None = None
    rollout_skip_special_tokens: bool = False
    rollout_seed: int = 42
    rollout_shuffle: bool = False
    # Miles' own prompt dataset, on by default there: the adapter refuses it (the taskset
    # replaces it); Miles turns it off with --disable-rollout-global-dataset, and the
    # vf-sglang commands, which have no prompt dataset, pass False.
    rollout_global_dataset: bool = True
    reward_key: str | None = None
    eval_reward_key: str | None = None
    partial_rollout: bool = False
    multimodal_keys: Any = None
    chat_template_path: str | None = None
    apply_chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    use_opd: bool = False
    use_rollout_routing_replay: bool = False
    use_rollout_indexer_replay: bool = False
    # Miles re-scores its own rollouts by SGLang prefill with it; the adapter does not (refused).
    recompute_logprobs_via_prefill: bool = False
    hf_checkpoint: str | None = None
    sglang_tokenizer_path: str | None = None
    sglang_router_ip: str | None = None
    sglang_router_port: int | None = None
    sglang_model_routers: Mapping[str, Any] | None = None
    sglang_router_policy: str | None = None
    use_miles_router: bool = False
    sglang_enable_deterministic_inference: bool = False
    sglang_server_concurrency: int = DEFAULT_MAX_IN_FLIGHT
    lora_rank: int = 0
    lora_adapter_path: str | None = None
    lora_train_only: bool = False
    num_rollout: int | None = None
    eval_interval: int | None = None
    n_samples_per_eval_prompt: int = 1
    eval_temperature: float | None = None
    eval_top_p: float | None = None
    eval_top_k: int | None = None
    eval_max_response_len: int | None = None
    eval_max_context_len: int | None = None
    eval_max_prompt_len: int | None = None
    eval_min_new_tokens: int | None = None
    group_rm: bool = False
    custom_rm_path: str | None = None
    dynamic_sampling_filter_path: str | None = None
    verifiers_config: str | None = None
    renderer_model_name: str | None = None
    session_lru_size: int = DEFAULT_MAX_SESSIONS
    # Miles sizes its in-flight bound from these (see `max_in_flight`).
    rollout_num_gpus: int | None = None
    rollout_num_gpus_per_engine: int = 1
    # Reward and filter hooks (adapter.rollout.hooks).
    rm_type: str | None = None
    rollout_sample_filter_path: str | None = None
    rollout_all_samples_process_path: str | None = None
    multi_lora_n_adapters: int = 0
    # Miles' conversion cannot size a dynamic batch of compact (rollout_id-carrying) data.
    use_dynamic_global_batch_size: bool = False
    # Not a Miles option: the flags of the `vf-sglang` command that built these settings
    # (`Settings` field → flag); None under Miles, whose flags are the fields' own names.
    flag_names: Mapping[str, str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_args(cls, args: Any) -> Settings:
        """Build from a Miles-style namespace: every field it carries, parsed from Miles'
        shapes; missing attributes keep the field's (Miles') default."""
        values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
        for name, parse in _MILES_SHAPES.items():
            if name in values:
                values[name] = parse(values[name])
        return cls(**values)

    @property
    def rollout_lora_live(self) -> bool:
        """A LoRA adapter serves rollouts (so requests name it); train-only LoRA does not."""
        lora_on = self.lora_rank > 0 or self.lora_adapter_path is not None
        return lora_on and not self.lora_train_only

    @property
    def max_in_flight(self) -> int:
        """Miles' bound on concurrent engine requests: `sglang_server_concurrency` per engine,
        times the number of engines (`rollout_num_gpus // rollout_num_gpus_per_engine`; one
        engine when `rollout_num_gpus` is unset). Never below 1."""
        per_engine = max(self.rollout_num_gpus_per_engine, 1)
        gpus = self.rollout_num_gpus if self.rollout_num_gpus is not None else per_engine
        return max(self.sglang_server_concurrency * gpus // per_engine, 1)

    def flag_map(self) -> FlagNames:
        """Field → flag in the command that runs, Miles' flag for a field the command does not name."""
        return FlagNames(self.flag_names or {})

    def flag(self, name: str) -> str:
        """The flag that sets field `name` in the command that runs (Miles' where it has no other)."""
        return self.flag_map()[name]

    def offers(self, name: str) -> bool:
        """Whether the command that runs has a flag for field `name` (Miles has one for every field)."""
        return self.flag_names is None or name in self.flag_names

    @property
    def needs_routing_key(self) -> bool:
        return self.sglang_router_policy in ROUTING_KEY_POLICIES

    @property
    def eval_enabled(self) -> bool:
        return self.eval_interval is not None

    @property
    def train_enabled(self) -> bool:
        return self.num_rollout != 0

    def for_eval(self) -> Settings:
        """The same settings with Miles' `eval_*` overrides applied over `rollout_*` (its example's
        `_make_eval_args`): an unset `eval_*` keeps the `rollout_*` value, except the prompt cap and
        the minimum new tokens, which eval always takes from `eval_*`."""
        overrides: dict[str, Any] = {
            "reward_key": self.eval_reward_key or self.reward_key,
            "n_samples_per_prompt": self.n_samples_per_eval_prompt,
            # Miles always copies eval_max_prompt_len (None disables the first-turn cap) and
            # eval_min_new_tokens (None clears training's minimum: eval samples stop freely).
            "rollout_max_prompt_len": self.eval_max_prompt_len,
            "rollout_min_new_tokens": self.eval_min_new_tokens,
        }
        pairs = {
            "eval_temperature": "rollout_temperature",
            "eval_top_p": "rollout_top_p",
            "eval_top_k": "rollout_top_k",
            "eval_max_response_len": "rollout_max_response_len",
            "eval_max_context_len": "rollout_max_context_len",
        }
        for eval_name, rollout_name in pairs.items():
            value = getattr(self, eval_name)
            if value is not None:
                overrides[rollout_name] = value
        return dataclasses.replace(self, **overrides)
