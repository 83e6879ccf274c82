"""The GPU tier's SGLang steps rehearsed against real SGLang on CPU (`tox -e sglang-cpu`)."""

from __future__ import annotations

import sys
from pathlib import Path

from e2e.plans.steps import BUNDLED, REPO, ROLLOUT_OK_EXIT, Step, check_step

# What generation B's venv of the SGLang rehearsal installs beside verifiers 0.4.0 (tox's matrix
# cells install the same file).
CONTRACT_REQUIREMENTS = REPO / "e2e" / "requirements-contract.txt"
VF040_PINS = REPO / "e2e" / "pins" / "contract-vf040.txt"  # the contract-vf040 cell's transitive pins
# The pre-release pair the gate serves (its cell's pins): the new client's wire against real SGLang.
VF041DEV_PINS = REPO / "e2e" / "pins" / "contract-vf041dev.txt"
NEW_CLIENT_TEST = REPO / "tests" / "real_sglang" / "test_new_client.py"


# Tasksets whose recorded rollouts on real SGLang must be multi-turn: the least share of samples
# with two or more model turns (the tiny model calls echo-tool-v1's tool in about 3 of 4 episodes).
MULTI_TURN_SHARE = {"echo-tool-v1": 0.5}
# Generation B's recorded rollouts: the multi-turn tool taskset only. What B changes is before the
# bridge (Verifiers' TrainClient and Renderers' client: its own prompts and tool schemas, so other
# tokens than A's); the bridge builds SGLang's /generate with the same code for both, and an
# echo-tool-v1 episode makes every kind of engine call the single-turn tasksets make (a first turn)
# and more (a later turn on a cached prefix, after a masked tool response). B's single-turn and group
# rewards are judged in every B matrix cell (tests/contract), on the scripted engine.
B_TASKSETS = ("echo-tool-v1",)


def _rollouts_and_verify(py: str, url: str, configs: Path, run: str, *, label: str, groups: int, n: int,
                         tasksets: tuple[str, ...], env: tuple[tuple[str, str], ...] = (),
                         seed: int | None = None, record: bool = False) -> list[Step]:
    steps: list[Step] = []
    for taskset in tasksets:
        out = f"{run}/{label}{taskset}.jsonl"
        argv = [py, "-m", "adapter.cli", "rollout", "--sglang-url", url, "--config", str(configs / f"{taskset}.toml"),
                "--model", "Qwen/Qwen3-0.6B", "--tokenizer", "{tiny_model_dir}", "--groups", str(groups),
                "--n", str(n), "--max-response-len", "32", "--out", out]
        argv += ["--seed", str(seed)] if seed is not None else []
        argv += ["--record", f"{run}/cassettes/{label}{taskset}"] if record else []
        steps.append(Step(f"rollouts-{label}{taskset}", tuple(argv), env=env, produces=(out,), timeout_s=900,
                          ok_exit=ROLLOUT_OK_EXIT))
        verify = [py, "-m", "e2e.judges.verify", "--samples", out, "--env", taskset, "--groups", str(groups),
                  "--n", str(n)]
        # every turn against the exchanges that made it (e2e/judges/turns.py)
        if record and taskset in MULTI_TURN_SHARE:
            verify += ["--cassette", f"{run}/cassettes/{label}{taskset}", "--min-multi-turn",
                       str(MULTI_TURN_SHARE[taskset])]
        steps.append(Step(f"verify-{label}{taskset}", tuple(verify), env=env))
    return steps


def sglang_cpu_plan(run_dir: str = str(REPO / "runs" / "e2e-sglang-cpu"), *, version: str = "0.5.23",
                    port: int = 30666, groups: int = 2, n: int = 4, tasksets: tuple[str, ...] = BUNDLED,
                    python: str | None = None, generation_b: bool = True) -> list[Step]:
    """The GPU tier's SGLang steps rehearsed against real SGLang on CPU: its venv, start, health
    wait, `check`, recorded rollouts (generation A's `tasksets` here; generation B's `B_TASKSETS`
    among them, in a verifiers 0.4.0 venv), verify, the real-SGLang tests, stop. Only the
    CUDA-specific steps (driver check, CUDA wheels, `--attention-backend`) are left for a GPU box.
    The server runs deterministic: the rollouts carry no `--seed`, so the adapter must seed them
    itself (or the verify of group rewards fails)."""
    py = python or sys.executable
    run = str(Path(run_dir).absolute())
    url = f"http://127.0.0.1:{port}"
    vf040, vf041dev = f"{run}/venv-vf040", f"{run}/venv-vf041dev"
    steps = [
        Step("install-sglang", (py, "-m", "e2e.sglang_cpu", "install", "--version", version), timeout_s=1800),
        Step("reset-outputs", ("rm", "-rf", f"{run}/cassettes", *(f"{run}/{p}{t}.jsonl" for p in ("", "b-")
                                                                  for t in tasksets)), timeout_s=60),
        Step("start-sglang", (py, "-m", "e2e.sglang_cpu", "serve", "--version", version, "--deterministic",
                              "--port", str(port), "--log", f"{run}/logs/sglang-server.log"), kind="background",
             produces=(f"{run}/logs/start-sglang.log",)),
        Step("wait-sglang", (f"{url}/health",), kind="wait_http", timeout_s=600.0),
        check_step(py, url, "{tiny_model_dir}"),
        *_rollouts_and_verify(py, url, REPO / "fixtures" / "envs", run, label="", groups=groups, n=n,
                              tasksets=tasksets, record=True),
    ]
    if generation_b:
        b_py = f"{vf040}/bin/python"
        b_env = (("PYTHONPATH", str(REPO)),)
        steps += [
            Step("venv-vf040", ("uv", "venv", "--clear", "--python", py, vf040), produces=(vf040,), timeout_s=300),
            Step("install-vf040", ("uv", "pip", "install", "--compile-bytecode", "--python", b_py, "verifiers==0.4.0",
                                   "-r", str(CONTRACT_REQUIREMENTS), "-c", str(VF040_PINS)), timeout_s=1800),
            *_rollouts_and_verify(b_py, url, REPO / "fixtures" / "envs" / "b", run, label="b-", groups=groups, n=n,
                                  tasksets=tuple(t for t in tasksets if t in B_TASKSETS), env=b_env, record=True),
            # the new client (renderers 0.1.13.dev17): a top-k head and weight versions through the bridge
            Step("venv-vf041dev", ("uv", "venv", "--clear", "--python", py, vf041dev), produces=(vf041dev,),
                 timeout_s=300),
            Step("install-vf041dev", ("uv", "pip", "install", "--python", f"{vf041dev}/bin/python",
                                      "-r", str(VF041DEV_PINS)), timeout_s=1800),
            Step("new-client-wire", (f"{vf041dev}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                     "-m", "sglang_cpu", str(NEW_CLIENT_TEST)),
                 env=(*b_env, ("SGLANG_URL", url), ("VF_SGLANG_CPU", "1")), cwd=str(REPO), timeout_s=600),
        ]
    steps += [
        Step("real-sglang-tests", (py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=12", "-m",
                                   "sglang_cpu or live", str(REPO / "tests")),
             env=(("SGLANG_URL", url), ("SGLANG_LOG", f"{run}/logs/sglang-server.log"), ("VF_SGLANG_CPU", "1")),
             cwd=str(REPO), timeout_s=1500),
        Step("stop-sglang", ("start-sglang",), kind="stop", always=True),
    ]
    return steps
