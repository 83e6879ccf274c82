"""The miles lane's driver: Miles' own `train.py` (miles-rl 0.0.2 ships none; this is the one of
radixark/miles@a772c3302, whose miles/ray/rollout.py is the wheel's), with ONE stand-in: the train
actor (`e2e.miles_cpu.actor`, what Megatron's actor does under `--debug-rollout-only`), handed to
Miles' unchanged `create_training_models` in place of `allocate_train_group`. Everything else —
`parse_args` (with the rollout class' `add_arguments`), `create_placement_groups`,
`create_rollout_manager`, `RolloutManager.generate` (the rollout function, flattening, trimming,
`--save-debug-rollout-data`, conversion, the dp split), the weight-update and save calls, the loop
and `dispose` — is Miles' code, called as train.py calls it. With `VF_SGLANG_MILES_STARTUP=pr1845`
it runs Miles #1845's start-up and checkpoint order instead (`e2e.miles_cpu.pr1845`: the executor
passes save/load on to the rollout class, `load(start_rollout_id - 1)` on every start, the
executor's save on every checkpoint). It is run exactly as
`vf-sglang miles-command --train-script e2e/miles_cpu/train.py --ray-address 127.0.0.1:PORT`
prints, inside the Miles venv. Offloading (GPU memory tags) is not part of a CPU run.
"""

from __future__ import annotations

import asyncio
from typing import Any

from miles.ray import placement_group
from miles.ray.placement_group import create_placement_groups, create_rollout_manager, create_training_models
from miles.utils.arguments import parse_args
from miles.utils.logging_utils import configure_logger
from miles.utils.misc import should_run_periodic_action
from miles.utils.tracking_utils import init_tracking

from e2e.miles_cpu import pr1845
from e2e.miles_cpu.actor import allocate_stand_in_group


async def train(args: Any) -> None:
    assert args.debug_rollout_only, "the miles lane's stand-in actor only does --debug-rollout-only"
    assert not (args.offload_rollout or args.offload_train), "offloading moves GPU memory: not on a CPU run"
    configure_logger()
    pgs = create_placement_groups(args)
    startup_1845 = pr1845.enabled()
    if startup_1845:
        placement_group.RolloutManager = pr1845.RolloutManagerPR1845
    init_tracking(args)
    rollout_manager, num_rollout_per_epoch = create_rollout_manager(args, pgs["rollout"])
    placement_group.allocate_train_group = allocate_stand_in_group  # the one stand-in
    actor_model, _critic_model = await create_training_models(args, pgs, rollout_manager)
    if startup_1845 and not args.rollout_global_dataset:  # 0.0.2 makes this call only with the global dataset
        await rollout_manager.load.remote(args.start_rollout_id - 1)
    await actor_model.update_weights()
    if args.num_rollout == 0 and args.eval_interval is not None:
        await rollout_manager.eval.remote(rollout_id=0)

    for rollout_id in range(args.start_rollout_id, args.num_rollout):
        if args.eval_interval is not None and rollout_id == 0 and not args.skip_eval_before_train:
            await rollout_manager.eval.remote(rollout_id)
        rollout_data_ref = await rollout_manager.generate.remote(rollout_id)
        await actor_model.train(rollout_id, rollout_data_ref)
        if should_run_periodic_action(rollout_id, args.save_interval, num_rollout_per_epoch, args.num_rollout):
            await actor_model.save_model(rollout_id, force_sync=rollout_id == args.num_rollout - 1)
            if args.rollout_global_dataset or startup_1845:
                await rollout_manager.save.remote(rollout_id)
        await actor_model.clear_memory()
        await actor_model.update_weights()
        if should_run_periodic_action(rollout_id, args.eval_interval, num_rollout_per_epoch):
            await rollout_manager.eval.remote(rollout_id)

    await rollout_manager.dispose.remote()


if __name__ == "__main__":
    asyncio.run(train(parse_args()))
