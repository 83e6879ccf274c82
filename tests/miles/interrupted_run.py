"""One Miles rollout-function process for the interruption proof (tests/miles/test_interrupts.py):
it builds the adapter's rollout function as Miles does, with the class ABI (awaited on this
process' event loop) or the legacy function ABI (called from the main thread, as Miles' driver
calls it), and runs train calls against an engine slow enough that episodes stay in flight,
until a signal ends the process:

    python -m tests.miles.interrupted_run URL TOKENIZER_DIR {class,legacy}
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from adapter.episodes.bundled import add_env_sources
from adapter.episodes.generations import installed
from adapter.miles.abi import RolloutFnConstructorInput, RolloutFnTrainInput
from adapter.miles.binding import VerifiersRolloutFn, generate_rollout
from tests.miles.test_episodes import ENVS


def miles_args(url: str, tokenizer: str) -> argparse.Namespace:
    host, port = url.removeprefix("http://").split(":")
    return argparse.Namespace(
        verifiers_config=str(ENVS / "echo-tool-v1.toml"), hf_checkpoint=tokenizer,
        renderer_model_name="Qwen/Qwen3-0.6B", rollout_global_dataset=False, rollout_batch_size=4,
        n_samples_per_prompt=2, rollout_max_response_len=64, rollout_max_context_len=1024,
        sglang_router_ip=host, sglang_router_port=int(port), rollout_temperature=0.7)


async def class_abi(args: argparse.Namespace) -> None:
    function = VerifiersRolloutFn(RolloutFnConstructorInput(args, None))
    try:
        for rollout_id in range(100):
            await function(RolloutFnTrainInput(rollout_id=rollout_id))
    finally:
        await function.aclose()


def legacy_abi(args: argparse.Namespace) -> None:
    for rollout_id in range(100):
        generate_rollout(args, rollout_id, None)


if __name__ == "__main__":
    url, tokenizer, abi = sys.argv[1:4]
    add_env_sources([installed().bundled_tasksets()])
    if abi == "class":
        asyncio.run(class_abi(miles_args(url, tokenizer)))
    else:
        legacy_abi(miles_args(url, tokenizer))
