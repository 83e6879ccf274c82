"""The E2E runs as data: ordered `Step`s (argv, env, cwd, what each produces), built from
`PlanOptions`. Tests snapshot the plans on CPU; `e2e.runner` executes them. Values are
literal: the runner never expands `$VARS` in them (a step prepends to PATH with `path_prepend`).

GPU tier (docs/contract.md §7): Qwen3-0.6B served by real SGLang, code-golf-v1 from the verifiers
repository at the pinned tag, 3 groups × 4, verified by `e2e.verify`. It encodes the setup
mistakes that broke before:
  * the driver is checked first (`e2e.driver`): sglang 0.5.15's wheels need a CUDA 13 driver and
    glibc >= 2.34, and a runner without them fails there with that message, not mid-install;
  * installs go into a `uv venv --system-site-packages` built on the runner's *system* Python
    (`e2e.interpreter`: `--base-python`, default the system python3 on PATH outside any venv),
    and a step proves a system-site package (`torch`) imports in the new venv;
  * installs come from the lock: `uv export --frozen` writes requirements with hashes, installed
    with `--require-hashes`; the adapter itself with `--no-deps`; the same pins are put back
    after `prime env install`;
  * every step is idempotent, so a second run on the same run dir passes: venvs `--clear`,
    the verifiers checkout is `git init` + `fetch` + `checkout --force`, the env is copied with
    `cp -rT`, the rollout outputs are reset before the rollouts;
  * `prime` is called as `{uv_tool_bin}/prime` (the tool dir is not on PATH; the runner resolves
    it with `uv tool dir --bin`); every process that imports the env gets the venv's
    site-packages and the env source dir on PYTHONPATH;
  * SGLang runs in its own venv (its openai pin conflicts with newer verifiers), launched with
    `--attention-backend fa3`: what SGLang picks by itself for MHA models such as Qwen3 on Hopper
    (H100/H200, CUDA >= 12.3), set explicitly so a different GPU fails loudly instead of silently
    changing kernels (use `flashinfer` on Ampere/Ada). Miles' own E2E flag
    `--attention-backend flash` is Megatron's, for the trainer, not SGLang's;
  * once SGLang is up, `vf-sglang check` (adapter/cli/check.py) runs the live conformance checks
    against it, and the rollouts are recorded as a cassette (`--record <run>/cassette`), a
    replayable artefact for the contract suite (fixtures/cassettes/).
Proxies: the runner adds the loopback hosts to every step's NO_PROXY/no_proxy
(adapter/engine/proxies.py); engine and bridge calls never go through a proxy.

GPU tier, Miles variant (`PlanOptions(variant="miles")`, `--variant miles`): Miles' own verifiers
E2E (`tests/e2e/long/test_qwen3_0.6B_verifiers.py`) with the adapter as the rollout function, in
Miles' image: the image is checked first (`e2e.miles_image`: Miles main, its SGLang 0.5.16, train.py,
Megatron-LM, the model's Megatron flags); the adapter goes into a `--system-site-packages` venv with
pip (which keeps the image's packages; `check-image-kept` proves torch, transformers, openai, ray,
sglang and miles still import from the image); the HF checkpoint is converted with Miles' tool;
a Ray head is started; and the command and environment of `adapter.miles.launcher.miles_command`
(what `vf-sglang miles-command` prints) run Miles' `train.py` with the class `VerifiersRolloutFn`
(Miles' E2E from #2695 on; `--miles-abi legacy`: the legacy `generate_rollout`), code-golf-v1
from a `[taskset]`-only config (its default harness, with tools), Miles-managed SGLang (one engine
per GPU behind Miles' router), Miles' flags and one GRPO step, dumping `--dump-details`;
`e2e.verify --miles-dump` then checks Miles' own `rollout_data/0.pt` as Miles' E2E does.

CPU tier: the same shape against the reference engine and the bundled tasksets.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from e2e.interpreter import BaseInterpreter, resolve_base_python

if TYPE_CHECKING:
    from adapter.miles.launcher import MilesLaunch

REPO = Path(__file__).resolve().parent.parent
UV_TOOL_BIN = "{uv_tool_bin}"  # resolved by the runner from `uv tool dir --bin`

StepKind = Literal["run", "write", "background", "wait_http", "stop"]


@dataclass(frozen=True)
class Step:
    name: str
    argv: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # set in the runner's environment, literally (no $VAR expansion)
    path_prepend: tuple[str, ...] = ()  # directories put before the runner's PATH
    cwd: str | None = None
    produces: tuple[str, ...] = ()
    kind: StepKind = "run"
    content: str = ""  # for "write": the file's text (argv[0] is the path)
    timeout_s: float = 3600.0  # enforced whether or not the step prints
    always: bool = False  # runs even after a failure (cleanup)
    gpu: bool = False  # needs CUDA
    # exit statuses that count as success: `vf-sglang rollout` exits 3 when the batch is complete
    # but some groups were dropped and replaced (counted by reason in its summary); verify judges it
    ok_exit: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class PlanOptions:
    run_dir: str = str(REPO / "runs" / "e2e-gpu")  # made absolute: steps run with other cwds
    model_dir: str | None = None  # default: <run_dir>/models/<model id>
    model_id: str = "Qwen/Qwen3-0.6B"
    verifiers_tag: str = "v0.2.0"
    verifiers_repo: str = "https://github.com/PrimeIntellect-ai/verifiers"
    prime_version: str = "0.18.0"
    sglang_version: str = "0.5.15"
    sglang_min_cuda: str = "13.0"  # what sglang 0.5.15's wheels need from the driver ...
    sglang_min_glibc: str = "2.34"  # ... and from the C library
    sglang_attention_backend: str = "fa3"  # SGLang's own choice on H100/H200 (module docstring)
    base_python: str | None = None  # None: the system python3 on PATH outside any venv
    python_tag: str | None = None  # "python3.11" (the venvs' lib dir); None: asked from base_python
    base_python_how: str | None = None  # how base_python was chosen, shown in the plan
    system_package: str = "torch"  # must import from the base interpreter's site in the new venv
    groups: int = 3
    n: int = 4
    max_response_len: int = 512
    max_context_len: int = 2048
    temperature: float = 0.8
    sglang_port: int = 30000
    health_timeout_s: float = 900.0
    # direct: the adapter's own `rollout` against SGLang it starts; miles: Miles' train.py in Miles' image
    variant: Literal["direct", "miles"] = "direct"
    miles_root: str = "/root/miles"  # Miles' image (docker/Dockerfile)
    megatron_path: str = "/root/Megatron-LM"
    miles_sglang_version: str = "0.5.16"  # the SGLang Miles' image pins
    miles_gpus: int = 2  # Miles' E2E: colocated training, one SGLang engine per GPU behind Miles' router
    miles_model_type: str = "qwen3-0.6B"  # Miles' scripts/models/<type>.py (MILES_MODEL_ARGS)
    # class: `VerifiersRolloutFn`, as Miles' E2E runs it from #2695 on; legacy: `generate_rollout`
    # (MILES_USE_LEGACY_ROLLOUT_V1=1), as it ran it before
    miles_abi: Literal["class", "legacy"] = "class"
    # every `uv pip install` compiles the venv's bytecode (each process then reads it, whatever
    # PYTHONDONTWRITEBYTECODE says); False only where a CPU rehearsal repeats installs to test steps
    compile_bytecode: bool = True


def base_interpreter(options: PlanOptions) -> BaseInterpreter:
    """The interpreter both venvs are built on (taken as given when its tag is given too)."""
    if options.base_python and options.python_tag:
        return BaseInterpreter(options.base_python, options.python_tag.removeprefix("python"),
                               options.base_python_how or f"--base-python {options.base_python}")
    return resolve_base_python(options.base_python)


def _uv_pip_install(options: PlanOptions) -> tuple[str, ...]:
    return ("uv", "pip", "install", *(("--compile-bytecode",) if options.compile_bytecode else ()))


def _venv_python(venv: str) -> str:
    return f"{venv}/bin/python"


def _site_packages(venv: str, python_tag: str) -> str:
    return f"{venv}/lib/{python_tag}/site-packages"


CODE_GOLF_CONFIG = """# code-golf-v1 on verifiers 0.2.0 under its default harness, the coding agent
# (bash + edit tools) Miles' own E2E runs it with; the harness program's mcp is pinned
# before 2.x (it breaks tools in 0.2.0).
[taskset]
id = "code-golf-v1"

[harness]
id = "default"
env = { UV_EXCLUDE_NEWER = "2026-07-28T13:44:00Z" }

[harness.runtime]
type = "subprocess"
"""


def _env_source_steps(options: PlanOptions, run: str) -> list[Step]:
    """code_golf_v1's source from the verifiers repository at the pinned tag, under ./environments."""
    checkout, env_src = f"{run}/verifiers", f"{run}/environments/code_golf_v1"
    return [
        Step("init-verifiers", ("git", "init", "--quiet", checkout), produces=(checkout,), timeout_s=60),
        Step("fetch-verifiers", ("git", "-C", checkout, "fetch", "--quiet", "--depth", "1", options.verifiers_repo,
                                 f"refs/tags/{options.verifiers_tag}"), timeout_s=600),
        Step("checkout-verifiers", ("git", "-C", checkout, "checkout", "--quiet", "--force", "FETCH_HEAD"),
             timeout_s=60),
        Step("environments-dir", ("mkdir", "-p", f"{run}/environments"), timeout_s=60),
        Step("copy-env", ("cp", "-rT", f"{checkout}/environments/code_golf_v1", env_src), produces=(env_src,),
             timeout_s=60),
    ]


def _setup_steps(options: PlanOptions, base: BaseInterpreter, run: str) -> list[Step]:
    """Driver check, the adapter's venv from the lock, prime, the code-golf env, the model."""
    venv, py = f"{run}/venv", _venv_python(f"{run}/venv")
    locked = f"{run}/requirements.txt"
    install_locked = (*_uv_pip_install(options), "--python", py, "--require-hashes", "-r", locked)
    return [
        Step("check-driver", (base.executable, "-m", "e2e.driver", "--sglang-version", options.sglang_version,
                              "--min-cuda", options.sglang_min_cuda, "--min-glibc", options.sglang_min_glibc),
             cwd=str(REPO), timeout_s=120, gpu=True),
        Step("venv", ("uv", "venv", "--clear", "--python", base.executable, "--system-site-packages", venv),
             produces=(venv,), timeout_s=300),
        Step("check-system-site", (py, "-m", "e2e.interpreter", "--expect-system-package", options.system_package),
             cwd=str(REPO), timeout_s=120),
        Step("export-lock", ("uv", "export", "--frozen", "--project", str(REPO), "--no-default-groups",
                             "--no-emit-project", "--format", "requirements-txt", "--output-file", locked),
             produces=(locked,), timeout_s=120),
        Step("install-locked", install_locked, timeout_s=1800),
        Step("install-adapter", (*_uv_pip_install(options), "--python", py, "--no-deps", str(REPO)),
             produces=(py,), timeout_s=600),
        Step("install-prime", ("uv", "tool", "install", f"prime=={options.prime_version}"), timeout_s=600),
        *_env_source_steps(options, run),
        # --no-upgrade: the env's own `dependencies = ["verifiers"]` must not move the pins.
        Step("install-env", (f"{UV_TOOL_BIN}/prime", "--plain", "env", "install", "code-golf-v1", "--no-upgrade"),
             env=(("VIRTUAL_ENV", venv), ("UV_COMPILE_BYTECODE", "1" if options.compile_bytecode else "0")),
             path_prepend=(f"{venv}/bin",), cwd=run, timeout_s=1800),
        # The env's own requirements may pull a newer verifiers: put the locked pins back.
        Step("repin-locked", install_locked, timeout_s=1800),
        Step("download-model", (f"{venv}/bin/hf", "download", options.model_id, "--local-dir",
                                options.model_dir or f"{run}/models/{options.model_id}"),
             produces=(options.model_dir or f"{run}/models/{options.model_id}",), timeout_s=1800),
    ]


def gpu_plan(options: PlanOptions | None = None) -> list[Step]:
    options = options or PlanOptions()
    if options.variant == "miles":
        return miles_gpu_plan(options)
    base = base_interpreter(options)
    run = str(Path(options.run_dir).absolute())
    venv, sglang_venv = f"{run}/venv", f"{run}/sglang-venv"
    model_dir = options.model_dir or f"{run}/models/{options.model_id}"
    env_src = f"{run}/environments/code_golf_v1"  # `prime env install` looks in ./environments
    url = f"http://127.0.0.1:{options.sglang_port}"
    py = _venv_python(venv)
    importable = (("PYTHONPATH", os.pathsep.join([_site_packages(venv, base.lib_tag), env_src, str(REPO)])),)
    return [
        *_setup_steps(options, base, run),
        Step("sglang-venv", ("uv", "venv", "--clear", "--python", base.executable, "--system-site-packages",
                             sglang_venv), produces=(sglang_venv,), timeout_s=300),
        Step("install-sglang", (*_uv_pip_install(options), "--python", _venv_python(sglang_venv),
                                f"sglang=={options.sglang_version}"),
             timeout_s=2400, gpu=True),
        Step("start-sglang", (_venv_python(sglang_venv), "-m", "sglang.launch_server", "--model-path", model_dir,
                              "--host", "127.0.0.1", "--port", str(options.sglang_port), "--context-length",
                              str(options.max_context_len), "--attention-backend", options.sglang_attention_backend),
             kind="background", produces=(f"{run}/logs/start-sglang.log",), gpu=True),
        Step("wait-sglang", (f"{url}/health",), kind="wait_http", timeout_s=options.health_timeout_s, gpu=True),
        check_step(py, url, model_dir, env=importable, gpu=True),
        Step("write-config", (f"{run}/code-golf-v1.toml",), kind="write", content=CODE_GOLF_CONFIG,
             produces=(f"{run}/code-golf-v1.toml",)),
        Step("reset-outputs", ("rm", "-rf", f"{run}/samples.jsonl", f"{run}/samples.pt", f"{run}/cassette"),
             timeout_s=60),
        *_rollout_steps(options, py=py, url=url, model_dir=model_dir, env_src=env_src, env=importable, venv=venv),
        Step("verify", (py, "-m", "e2e.verify", "--samples", f"{run}/samples.jsonl", "--env", "code-golf-v1",
                        "--groups", str(options.groups), "--n", str(options.n)), env=importable, timeout_s=300),
        Step("stop-sglang", ("start-sglang",), kind="stop", always=True, gpu=True),
    ]


def check_step(py: str, url: str, model_dir: str, *, env: tuple[tuple[str, str], ...] = (),
               gpu: bool = False) -> Step:
    """The live conformance checks (adapter/cli/check.py) against the real server: the same step
    in the GPU tier and in its CPU rehearsal (`sglang_cpu_plan`)."""
    return Step("check-sglang", (py, "-m", "adapter.cli", "check", "--sglang-url", url, "--tokenizer", model_dir),
                env=env, timeout_s=900, gpu=gpu)


def gpu_plan_notes(options: PlanOptions) -> list[str]:
    """What the dry run states above the steps: the choices a GPU runner depends on."""
    if options.variant == "miles":
        return miles_plan_notes(options)
    base, run = base_interpreter(options), str(Path(options.run_dir).absolute())
    return [
        f"base interpreter: {base.executable} (Python {base.version}), {base.how}",
        f"system site: step check-system-site imports {options.system_package} from the base's site in the new venv",
        f"driver: step check-driver needs CUDA >= {options.sglang_min_cuda} and glibc >= {options.sglang_min_glibc} "
        f"(sglang {options.sglang_version} wheels) before anything is installed",
        f"installs: locked: uv export --frozen (hashes) -> {run}/requirements.txt, installed with --require-hashes; "
        "the adapter with --no-deps",
        "re-runnable: every step is idempotent (venvs --clear, git init/fetch/checkout --force, cp -rT, "
        "outputs reset before the rollouts)",
        "proxies: every step's NO_PROXY/no_proxy gets 127.0.0.1,localhost,::1; engine and bridge calls are "
        "never proxied",
        "deadlines: each step's timeout holds without output; on expiry its process group is killed and the "
        "step named",
        f"sglang: --attention-backend {options.sglang_attention_backend}; after start: vf-sglang check "
        f"(adapter/cli/check.py), rollouts recorded to {run}/cassette",
    ]


def _rollout_steps(options: PlanOptions, *, py: str, url: str, model_dir: str, env_src: str,
                   env: tuple[tuple[str, str], ...], venv: str) -> list[Step]:
    run = str(Path(options.run_dir).absolute())
    env = (*env, ("VIRTUAL_ENV", venv))
    command = (py, "-m", "adapter.cli", "rollout", "--sglang-url", url, "--config", f"{run}/code-golf-v1.toml",
               "--model", options.model_id, "--tokenizer", model_dir, "--env-source-dir", env_src,
               "--groups", str(options.groups), "--n", str(options.n),
               "--max-response-len", str(options.max_response_len),
               "--max-context-len", str(options.max_context_len), "--temperature", str(options.temperature),
               "--out", f"{run}/samples.jsonl", "--record", f"{run}/cassette")
    return [Step("rollouts", command, env=env, path_prepend=(f"{venv}/bin",), gpu=True, timeout_s=1800,
                 produces=(f"{run}/samples.jsonl", f"{run}/cassette"), ok_exit=ROLLOUT_OK_EXIT)]


# ---- The Miles variant: Miles' own E2E (tests/e2e/long/test_qwen3_0.6B_verifiers.py at 31f1ca961) with the
# adapter as its rollout function. It runs inside Miles' image: Miles at /root/miles, Megatron-LM, the image's
# SGLang 0.5.16 and CUDA torch, all seen through a `--system-site-packages` venv.

# `[taskset]` only, as Miles' E2E writes it: code-golf-v1's default harness (bash and edit tools), not `null`.
MILES_CONFIG = REPO / "e2e" / "code-golf-v1-miles.toml"
# Caps pip honours while installing the adapter beside the image's packages (Miles' example's own).
MILES_CONSTRAINTS = REPO / "e2e" / "requirements-miles.txt"
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
    pythonpath = os.pathsep.join([options.miles_root, options.megatron_path, _site_packages(venv, base.lib_tag),
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
    `rollout_data/0.pt`, which `e2e.verify --miles-dump` checks as Miles' E2E does."""
    base = base_interpreter(options)
    run = str(Path(options.run_dir).absolute())
    venv, py, base_bin = f"{run}/venv", _venv_python(f"{run}/venv"), str(Path(base.executable).parent)
    model_dir = options.model_dir or f"{run}/models/{options.model_id}"
    torch_dist, dump = f"{model_dir}_torch_dist", f"{run}/dump"
    model_args = MILES_MODEL_ARGS[options.miles_model_type]
    launch = miles_launch(options, base=base, run=run)
    unproxied = tuple((name, "") for name in PROXY_VARIABLES)
    image_kept = tuple(arg for name in MILES_IMAGE_PACKAGES for arg in ("--expect-system-package", name))
    return [
        Step("check-miles-image", (base.executable, "-m", "e2e.miles_image", "--miles-root", options.miles_root,
                                   "--megatron-path", options.megatron_path, "--sglang-version",
                                   options.miles_sglang_version, "--model-type", options.miles_model_type,
                                   f"--model-args={' '.join(model_args)}"), cwd=str(REPO), timeout_s=300),
        Step("check-gpus", (base.executable, "-m", "e2e.miles_image", "--min-gpus", str(options.miles_gpus)),
             cwd=str(REPO), timeout_s=120, gpu=True),
        Step("venv", ("uv", "venv", "--clear", "--python", base.executable, "--system-site-packages", venv),
             produces=(venv,), timeout_s=300),
        Step("check-system-site", (py, "-m", "e2e.interpreter", *image_kept), cwd=str(REPO), timeout_s=300),
        # pip, not uv: pip sees the image's packages through the system site and installs only what they
        # lack (uv would install the whole lock into the venv and shadow the image's torch, transformers,
        # openai); as Miles' E2E installs its example's requirements.
        Step("install-adapter", (py, "-m", "pip", "install", "--constraint", str(MILES_CONSTRAINTS), str(REPO)),
             produces=(_site_packages(venv, base.lib_tag) + "/adapter/__init__.py",), timeout_s=1800),
        Step("check-image-kept", (py, "-m", "e2e.interpreter", *image_kept), cwd=str(REPO), timeout_s=300),
        *_env_source_steps(options, run),
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
        Step("verify-miles-dump", (py, "-m", "e2e.verify", "--miles-dump", f"{dump}/rollout_data/0.pt", "--env",
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
        f"verify: Miles' dump {run}/dump/rollout_data/0.pt (e2e.verify --miles-dump), as Miles' E2E asserts",
        "proxies: http(s)_proxy emptied for Ray and the job (Miles' E2E pops them); NO_PROXY/no_proxy get "
        "127.0.0.1,localhost,::1",
        "deadlines: each step's timeout holds without output; on expiry its process group is killed and the "
        "step named; a step that exits 0 without its `produces` fails, naming them",
    ]


BUNDLED = ("arith-v1", "group-v1", "echo-tool-v1")
ROLLOUT_OK_EXIT = (0, 3)  # 3: complete, with dropped-and-replaced groups (the run's summary names them)
CPU_SEED = 1234


def cpu_plan(run_dir: str = str(REPO / "runs" / "e2e-cpu"), *, groups: int = 2, n: int = 4, port: int = 30555,
             tasksets: tuple[str, ...] = BUNDLED, python: str | None = None, envs_dir: str | None = None,
             seed: int = CPU_SEED) -> list[Step]:
    """The CPU tier: the reference engine, then K groups of each bundled taskset, verified.
    `envs_dir` holds the installed generation's bundled configs (default: fixtures/envs).
    Rollouts are seeded (`--seed`: rollout i of the c-th group samples with seed + c×n + i, which the
    reference engine honours), so a run's rewards — and its verdict — are the same every time."""
    configs = Path(envs_dir) if envs_dir else REPO / "fixtures" / "envs"
    py = python or sys.executable
    run_dir = str(Path(run_dir).absolute())
    url = f"http://127.0.0.1:{port}"
    steps = [
        Step("start-engine", (py, "-m", "adapter.cli", "engine", "--port", str(port)), kind="background",
             produces=(f"{run_dir}/logs/start-engine.log",)),
        Step("wait-engine", (f"{url}/health",), kind="wait_http", timeout_s=600.0),
    ]
    for taskset in tasksets:
        out = f"{run_dir}/{taskset}.jsonl"
        steps.append(Step(f"rollouts-{taskset}", (
            py, "-m", "adapter.cli", "rollout", "--sglang-url", url, "--config",
            str(configs / f"{taskset}.toml"), "--model", "Qwen/Qwen3-0.6B",
            "--tokenizer", "{tiny_model_dir}", "--groups", str(groups), "--n", str(n),
            "--max-response-len", "32", "--seed", str(seed), "--out", out), produces=(out,), ok_exit=ROLLOUT_OK_EXIT))
        steps.append(Step(f"verify-{taskset}", (py, "-m", "e2e.verify", "--samples", out, "--env", taskset,
                                                "--groups", str(groups), "--n", str(n))))
    steps.append(Step("stop-engine", ("start-engine",), kind="stop", always=True))
    return steps


# What generation B's venv of the SGLang rehearsal installs beside verifiers 0.4.0 (tox's matrix
# cells install the same file).
CONTRACT_REQUIREMENTS = REPO / "e2e" / "requirements-contract.txt"


# Tasksets whose recorded rollouts on real SGLang must be multi-turn: the least share of samples
# with two or more model turns (the tiny model calls echo-tool-v1's tool in about 3 of 4 episodes).
MULTI_TURN_SHARE = {"echo-tool-v1": 0.5}


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
        verify = [py, "-m", "e2e.verify", "--samples", out, "--env", taskset, "--groups", str(groups), "--n", str(n)]
        if record and taskset in MULTI_TURN_SHARE:  # every turn against the exchanges that made it (e2e/turns.py)
            verify += ["--cassette", f"{run}/cassettes/{label}{taskset}", "--min-multi-turn",
                       str(MULTI_TURN_SHARE[taskset])]
        steps.append(Step(f"verify-{label}{taskset}", tuple(verify), env=env))
    return steps


def sglang_cpu_plan(run_dir: str = str(REPO / "runs" / "e2e-sglang-cpu"), *, version: str = "0.5.23",
                    port: int = 30666, groups: int = 2, n: int = 4, tasksets: tuple[str, ...] = BUNDLED,
                    python: str | None = None, generation_b: bool = True) -> list[Step]:
    """The GPU tier's SGLang steps rehearsed against real SGLang on CPU: its venv, start, health
    wait, `check`, recorded rollouts (generation A here, generation B in a verifiers 0.4.0 venv),
    verify, the real-SGLang tests, stop. Only the CUDA-specific steps (driver check, CUDA wheels,
    `--attention-backend`) are left for a GPU box. The server runs deterministic: the rollouts
    carry no `--seed`, so the adapter must seed them itself (or the verify of group rewards fails)."""
    py = python or sys.executable
    run = str(Path(run_dir).absolute())
    url = f"http://127.0.0.1:{port}"
    vf040 = f"{run}/venv-vf040"
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
                                   "-r", str(CONTRACT_REQUIREMENTS)), timeout_s=1800),
            *_rollouts_and_verify(b_py, url, REPO / "fixtures" / "envs" / "b", run, label="b-", groups=groups, n=n,
                                  tasksets=tasksets, env=b_env, record=True),
        ]
    steps += [
        Step("real-sglang-tests", (py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=12", "-m",
                                   "sglang_cpu or live", str(REPO / "tests")),
             env=(("SGLANG_URL", url), ("VF_SGLANG_CPU", "1")), cwd=str(REPO), timeout_s=1500),
        Step("stop-sglang", ("start-sglang",), kind="stop", always=True),
    ]
    return steps
