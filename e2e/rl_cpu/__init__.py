"""A small RL loop on CPU through real SGLang: the samples the adapter emits must train.

Test harness, not product code: it drives the adapter exactly as Miles would (the class ABI,
`adapter.miles.VerifiersRolloutFn`) and imports `adapter`, never the other way round.

    config.py   `RLConfig` (hyperparameters, thresholds) and the Miles-style args namespace
    metrics.py  `TrainSample` (a Miles sample, checked), Miles' grpo advantages, the k3 mismatch
                KL over masked tokens, the planted bugs; plain Python (the fast lane tests it)
    trainer.py  `PolicyTrainer`: fp32 master weights, recompute on the served-dtype weights,
                PPO-style clipped step, checkpoint in the served layout (torch, transformers)
    sync.py     `/update_weights_from_disk` + `/model_info`: load a checkpoint as a version
    loop.py     `run(config) -> RunRecord`: server, rollouts, recompute, update, sync per step
    records.py  `StepRecord`, `RunRecord` (JSON-able)
    checks.py   the assertions: KL ≤ limit, planted bugs caught, weight versions, reward up
    report.py   docs/rl-cpu.md's table and docs/rl-cpu.png's plot
    __main__.py `python -m e2e.rl_cpu`: the lane `tox -e rl-cpu`

Importing this package is cheap: torch and the adapter load with `loop` only.
"""
