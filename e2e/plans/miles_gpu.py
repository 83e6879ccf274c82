"""GPU tier, Miles variant (`PlanOptions(variant="miles")`, `--variant miles`): Miles' own verifiers
E2E (`tests/e2e/long/test_qwen3_0.6B_verifiers.py`) with the adapter as the rollout function, in
Miles' image: the image is checked first (`e2e.gpu.miles_image`: Miles main, its SGLang 0.5.16, train.py,
Megatron-LM, the model's Megatron flags); the adapter goes into a `--system-site-packages` venv with
pip (which keeps the image's packages; `check-image-kept` proves torch, transformers, openai, ray,
sglang and miles still import from the image); the HF checkpoint is converted with Miles' tool;
a Ray head is started; and the command and environment of `adapter.miles.launcher.miles_command`
(what `vf-sglang miles-command` prints) run Miles' `train.py` with the class `VerifiersRolloutFn`
(Miles' E2E from #2695 on; `--miles-abi legacy`: the legacy `generate_rollout`), code-golf-v1
from a `[taskset]`-only config (its default harness, with tools), Miles-managed SGLang (one engine
per GPU behind Miles' router), Miles' flags and one GRPO step, dumping `--dump-details`;
`e2e.judges.verify --miles-dump` then checks Miles' own `rollout_data/0.pt` as Miles' E2E does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from e2e.gpu.interpreter import BaseInterpreter
from e2e.plans.steps import REPO, PlanOptions, Step, base_interpreter, env_source_steps, site_packages, venv_python

if TYPE_CHECKING:
    from adapter.miles.launcher import MilesLaunch

# ---- The Miles variant: Miles' own E2E (tests/e2e/long/test_qwen3_0.6B_verifiers.py at 31f1ca961) with the
# adapter as its rollout function. It runs inside Miles' image: Miles at /root/miles, Megatron-LM, the image's
# SGLang 0.5.16 and CUDA torch, all seen through a `--system-site-packages` venv.

# `[taskset]` only, as Miles' E2E writes it: code-golf-v1's default harness (bash and edit tools), not `null`.
MILES_CONFIG = REPO / "e2e" / "gpu" / "code-golf-v1-miles.toml"
# Caps pip honours while installing the adapter beside the image's packages (Miles' example's own).
MILES_CONSTRAINTS = REPO / "e2e" / "gpu" / "requirements-miles.txt"
RAY_DASHBOARD = "http://127.0.0.1:8265"  # `ray start --head` in Miles' image; `ray job submit` talks to it
# Megatron's architecture flags, as Miles' `scripts/models/<type>.py` declares them (31f1ca961); the
# check-miles-image step compares them with the image's own table before anything runs.
MILES_MODEL_ARGS: dict[str, tuple[str, ...]] = {
    "qwen3-0.6B": ("--swiglu", "--num-layers", "28", "--hidden-size", "1024", "--ffn-hidden-size", "3072",
                   "--num-attention-heads", "16", "--group-query-attention", "--num-query-groups", "8",
                   "--use-rotary-position-embeddings", "--disable-bias-linear", "--normalization", "RMSNorm",
                   "--norm-epsilon", "1e-6", "--rotary-base", "1000000", "--vocab-size", "151936",
                   "--kv-channels", "128", "--qk-layernorm"),
}
# The image's stack, which must stay what the venv (and every Ray worker, whose PYTHONPATH starts with
# the venv's site-packages) imports after the adapter is installed: nothing of it may be shadowed.
MILES_IMAGE_PACKAGES = ("torch", "transformers", "openai", "ray", "sglang", "miles")
PROXY_VARIABLES = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")  # Miles' E2E pops them


def miles_train_args(options: PlanOptions, *, model_dir: str, dump: str) -> list[str]:
    """Miles' E2E flags (its `execute()`), after the model's Megatron flags; the launcher adds
    `--rollout-function-path`, `--disable-rollout-global-dataset` and `--hf-checkpoint`."""
    return [
        *MILES_MODEL_ARGS[options.miles_model_type],
        # Renderers picks its renderer from a registered model id; a local snapshot path carries none
        "--sglang-tokenizer-path", options.model_id, "--ref-load", f"{model_dir}_torch_dist",
        "--num-rollout", "1", "--rollout-batch-size", str(options.groups),
        "--n-samples-per-prompt", str(options.n), "--over-sampling-batch-size", str(options.groups),
        "--rollout-max-response-len", str(options.max_response_len),
        "--rollout-max-context-len", str(options.max_context_len), "--rollout-temperature", str(options.temperature),
        "--global-batch-size", str(options.groups * options.n), "--balance-data", "--advantage-estimator", "grpo",
        "--entropy-coef", "0.0", "--eps-clip", "0.2", "--eps-clip-high", "0.28",
        "--optimizer", "adam", "--lr", "1e-6", "--lr-decay-style", "constant", "--weight-decay", "0.1",
        "--adam-beta1", "0.9", "--adam-beta2", "0.98", "--no-gradient-accumulation-fusion",
        "--rollout-num-gpus-per-engine", "1", "--sglang-mem-fraction-static", "0.6", "--sglang-enable-metrics",
        "--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "1", "--context-parallel-size", "1",
        "--use-dynamic-batch-size", "--max-tokens-per-gpu", "4096",
        "--attention-backend", "flash",  # Megatron's (the trainer's), not SGLang's
        "--actor-num-nodes", "1", "--actor-num-gpus-per-node", str(options.miles_gpus), "--colocate",
        "--dump-details", dump,
    ]


def miles_launch(options: PlanOptions, *, base: BaseInterpreter, run: str) -> MilesLaunch:
    """The train command and its environment, built by the adapter's own launcher (what
    `vf-sglang miles-command` prints), with the workers' PYTHONPATH of Miles' E2E: Miles, Megatron,
    the venv's site-packages, the env source (the launcher adds the adapter's root)."""
    from adapter.miles.launcher import miles_command

    model_dir = options.model_dir or f"{run}/models/{options.model_id}"
    env_src, venv = f"{run}/environments/code_golf_v1", f"{run}/venv"
    pythonpath = os.pathsep.join([options.miles_root, options.megatron_path, site_packages(venv, base.lib_tag),
                                  env_src])
    return miles_command(
        config=str(MILES_CONFIG), hf_checkpoint=model_dir,
        miles_args=miles_train_args(options, model_dir=model_dir, dump=f"{run}/dump"),
        env_source_dirs=[env_src],
        extra_env_vars={"MILES_USE_LEGACY_ROLLOUT_V1": "1" if options.miles_abi == "legacy" else "0",
                        "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1",
                        "CUDA_DEVICE_MAX_CONNECTIONS": "1", "MASTER_ADDR": "127.0.0.1",
                        "no_proxy": "127.0.0.1,localhost,::1"},
        ambient={},  # the plan is data: nothing of the machine that prints it leaks into it
        miles_version="main", train_script=f"{options.miles_root}/train.py", python="python3",
        ray_address=RAY_DASHBOARD,
    )


def miles_gpu_plan(options: PlanOptions) -> list[Step]:
    """Miles' own E2E, step by step, with the adapter as the rollout function (the class
    `VerifiersRolloutFn`, or the legacy `generate_rollout` with `miles_abi="legacy"`): Miles'
    `train.py` starts two SGLang engines (the image's 0.5.16) behind its router,
    runs 3 groups × 4 code-golf episodes through the adapter, trains one GRPO step and dumps
    `rollout_data/0.pt`, which `e2e.judges.verify --miles-dump` checks as Miles' E2E does."""
    base = base_interpreter(options)
    run = str(Path(options.run_dir).absolute())
    venv, py, base_bin = f"{run}/venv", venv_python(f"{run}/venv"), str(Path(base.executable).parent)
    model_dir = options.model_dir or f"{run}/models/{options.model_id}"
    torch_dist, dump = f"{model_dir}_torch_dist", f"{run}/dump"
    model_args = MILES_MODEL_ARGS[options.miles_model_type]
    launch = miles_launch(options, base=base, run=run)
    unproxied = tuple((name, "") for name in PROXY_VARIABLES)
    image_kept = tuple(arg for name in MILES_IMAGE_PACKAGES for arg in ("--expect-system-package", name))
    return [
        Step("check-miles-image", (base.executable, "-m", "e2e.gpu.miles_image", "--miles-root", options.miles_root,
                                   "--megatron-path", options.megatron_path, "--sglang-version",
                                   options.miles_sglang_version, "--model-type", options.miles_model_type,
                                   f"--model-args={' '.join(model_args)}"), cwd=str(REPO), timeout_s=300),
        Step("check-gpus", (base.executable, "-m", "e2e.gpu.miles_image", "--min-gpus", str(options.miles_gpus)),
             cwd=str(REPO), timeout_s=120, gpu=True),
        Step("venv", ("uv", "venv", "--clear", "--python", base.executable, "--system-site-packages", venv),
             produces=(venv,), timeout_s=300),
        Step("check-system-site", (py, "-m", "e2e.gpu.interpreter", *image_kept), cwd=str(REPO), timeout_s=300),
        # pip, not uv: pip sees the image's packages through the system site and installs only what they
        # lack (uv would install the whole lock into the venv and shadow the image's torch, transformers,
        # openai); as Miles' E2E installs its example's requirements.
        Step("install-adapter", (py, "-m", "pip", "install", "--constraint", str(MILES_CONSTRAINTS), str(REPO)),
             produces=(site_packages(venv, base.lib_tag) + "/adapter/__init__.py",), timeout_s=1800),
        Step("check-image-kept", (py, "-m", "e2e.gpu.interpreter", *image_kept), cwd=str(REPO), timeout_s=300),
        *env_source_steps(options, run),
        Step("download-model", ("hf", "download", options.model_id, "--local-dir", model_dir),
             path_prepend=(base_bin,), produces=(f"{model_dir}/config.json",), timeout_s=1800),
        Step("reset-outputs", ("rm", "-rf", dump, torch_dist), timeout_s=60),
        Step("convert-checkpoint", ("torchrun", "--nproc-per-node", str(options.miles_gpus),
                                    f"{options.miles_root}/tools/convert_hf_to_torch_dist.py", *model_args,
                                    "--hf-checkpoint", model_dir, "--save", torch_dist),
             env=(("PYTHONPATH", os.pathsep.join([options.miles_root, options.megatron_path])),),
             path_prepend=(base_bin,), produces=(f"{torch_dist}/latest_checkpointed_iteration.txt",),
             timeout_s=1200, gpu=True),
        # Ray's workers inherit the head's environment: its PATH makes `python3` the image's, and no proxy
        Step("start-ray", ("ray", "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--num-gpus",
                           str(options.miles_gpus), "--disable-usage-stats"),
             env=(("PYTHONUNBUFFERED", "1"), *unproxied), path_prepend=(base_bin,), kind="background",
             produces=(f"{run}/logs/start-ray.log",)),
        Step("wait-ray", (f"{RAY_DASHBOARD}/api/version",), kind="wait_http", timeout_s=300),
        Step("miles-train", tuple(launch.argv), env=(*sorted(launch.env.items()), *unproxied),
             path_prepend=(base_bin,), produces=(f"{dump}/rollout_data/0.pt", f"{dump}/train_data/0_0.pt"),
             timeout_s=2400, gpu=True),
        Step("verify-miles-dump", (py, "-m", "e2e.judges.verify", "--miles-dump", f"{dump}/rollout_data/0.pt", "--env",
                                   "code-golf-v1", "--groups", str(options.groups), "--n", str(options.n)),
             cwd=str(REPO), timeout_s=300),
        Step("stop-ray", ("start-ray",), kind="stop", always=True),
    ]


def miles_plan_notes(options: PlanOptions) -> list[str]:
    base, run = base_interpreter(options), str(Path(options.run_dir).absolute())
    return [
        f"variant: miles: Miles' train.py in Miles' image ({options.miles_root}, {options.megatron_path}, "
        f"sglang {options.miles_sglang_version}), as Miles' tests/e2e/long/test_qwen3_0.6B_verifiers.py",
        "rollout ABI: " + ("the class VerifiersRolloutFn (MILES_USE_LEGACY_ROLLOUT_V1=0), as Miles' E2E from #2695 "
                           "on; --miles-abi legacy runs the legacy generate_rollout"
                           if options.miles_abi == "class" else
                           "the legacy generate_rollout (MILES_USE_LEGACY_ROLLOUT_V1=1), as Miles' E2E before #2695"),
        f"base interpreter: {base.executable} (Python {base.version}), {base.how}",
        "image: step check-miles-image checks miles (main), sglang, torch, ray, pip, train.py, Megatron-LM and "
        f"the {options.miles_model_type} model arguments before anything is installed",
        f"installs: pip in a --system-site-packages venv, constrained by {MILES_CONSTRAINTS.name}; step "
        f"check-image-kept proves {', '.join(MILES_IMAGE_PACKAGES)} still import from the image",
        f"config: {MILES_CONFIG.name} ([taskset] only: code-golf-v1's default harness, with tools)",
        f"miles: {options.miles_gpus} GPUs colocated, one SGLang engine per GPU behind Miles' router, "
        f"{options.groups} groups x {options.n}, one GRPO step; the command and environment from "
        "adapter.miles.launcher.miles_command (vf-sglang miles-command)",
        f"verify: Miles' dump {run}/dump/rollout_data/0.pt (e2e.judges.verify --miles-dump), as Miles' E2E asserts",
        "proxies: http(s)_proxy emptied for Ray and the job (Miles' E2E pops them); NO_PROXY/no_proxy get "
        "127.0.0.1,localhost,::1",
        "deadlines: each step's timeout holds without output; on expiry its process group is killed and the "
        "step named; a step that exits 0 without its `produces` fails, naming them",
    ]
