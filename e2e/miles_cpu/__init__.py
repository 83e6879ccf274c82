"""Real Miles on a CPU box: the published miles-rl 0.0.2's own driver, Ray, RolloutManager,
conversion and debug dump running the adapter (`python -m e2e.miles_cpu lane`, `tox -e miles`).

    venv.py      the cached Miles venv (miles-rl --no-deps + the rollout path's pins)
    train.py     the driver: Miles' train.py loop, run in the Miles venv
    actor.py     the ONE stand-in: the train actor under --debug-rollout-only (no GPU, no Megatron)
    planted.py   a rollout class with a planted defect, which Miles itself must refuse
    pr1845.py    Miles #1845's start-up and checkpoint order on 0.0.2's RolloutManager
    services.py  the Ray head and the reference engine, inside the lane's network namespace
    lane.py      the cases, the printed command parsed and run, the checks called
    checks.py    what Miles ingested, judged (pure)

Only `venv`, `lane`, `services`, `checks` and `__main__` run in the project's environment;
`train`, `actor`, `planted` and `pr1845` import Miles and Ray and run inside the Miles venv.
"""

LANE_DIR_VAR = "VF_SGLANG_MILES_LANE_DIR"  # where the stand-in actor writes converted_<id>.json
STARTUP_VAR = "VF_SGLANG_MILES_STARTUP"  # "pr1845": the driver runs Miles #1845's start-up order (pr1845.py)
