"""The GPU tier (docs/contract.md §7), direct variant: Qwen3-0.6B served by real SGLang, code-golf-v1
from the verifiers repository at the pinned tag, 3 groups × 4, verified by `e2e.judges.verify`.
`PlanOptions(variant="miles")` hands over to `e2e.plans.miles_gpu`. It encodes the setup
mistakes that broke before:
  * the driver is checked first (`e2e.gpu.driver`): sglang 0.5.15's wheels need a CUDA 13 driver and
    glibc >= 2.34, and a runner without them fails there with that message, not mid-install;
  * installs go into a `uv venv --system-site-packages` built on the runner's *system* Python
    (`e2e.gpu.interpreter`: `--base-python`, default the system python3 on PATH outside any venv),
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
"""

from __future__ import annotations

import os
from pathlib import Path

from e2e.gpu.interpreter import BaseInterpreter
from e2e.plans.miles_gpu import miles_gpu_plan, miles_plan_notes
from e2e.plans.steps import (
    REPO,
    ROLLOUT_OK_EXIT,
    UV_TOOL_BIN,
    PlanOptions,
    Step,
    base_interpreter,
    check_step,
    env_source_steps,
    site_packages,
    venv_python,
)


def _uv_pip_install(options: PlanOptions) -> tuple[str, ...]:
    return ("uv", "pip", "install", *(("--compile-bytecode",) if options.compile_bytecode else ()))


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


def _setup_steps(options: PlanOptions, base: BaseInterpreter, run: str) -> list[Step]:
    """Driver check, the adapter's venv from the lock, prime, the code-golf env, the model."""
    venv, py = f"{run}/venv", venv_python(f"{run}/venv")
    locked = f"{run}/requirements.txt"
    install_locked = (*_uv_pip_install(options), "--python", py, "--require-hashes", "-r", locked)
    return [
        Step("check-driver", (base.executable, "-m", "e2e.gpu.driver", "--sglang-version", options.sglang_version,
                              "--min-cuda", options.sglang_min_cuda, "--min-glibc", options.sglang_min_glibc),
             cwd=str(REPO), timeout_s=120, gpu=True),
        Step("venv", ("uv", "venv", "--clear", "--python", base.executable, "--system-site-packages", venv),
             produces=(venv,), timeout_s=300),
        Step("check-system-site", (py, "-m", "e2e.gpu.interpreter", "--expect-system-package", options.system_package),
             cwd=str(REPO), timeout_s=120),
        Step("export-lock", ("uv", "export", "--frozen", "--project", str(REPO), "--no-default-groups",
                             "--no-emit-project", "--format", "requirements-txt", "--output-file", locked),
             produces=(locked,), timeout_s=120),
        Step("install-locked", install_locked, timeout_s=1800),
        Step("install-adapter", (*_uv_pip_install(options), "--python", py, "--no-deps", str(REPO)),
             produces=(py,), timeout_s=600),
        Step("install-prime", ("uv", "tool", "install", f"prime=={options.prime_version}"), timeout_s=600),
        *env_source_steps(options, run),
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
    py = venv_python(venv)
    importable = (("PYTHONPATH", os.pathsep.join([site_packages(venv, base.lib_tag), env_src, str(REPO)])),)
    return [
        *_setup_steps(options, base, run),
        Step("sglang-venv", ("uv", "venv", "--clear", "--python", base.executable, "--system-site-packages",
                             sglang_venv), produces=(sglang_venv,), timeout_s=300),
        Step("install-sglang", (*_uv_pip_install(options), "--python", venv_python(sglang_venv),
                                f"sglang=={options.sglang_version}"),
             timeout_s=2400, gpu=True),
        Step("start-sglang", (venv_python(sglang_venv), "-m", "sglang.launch_server", "--model-path", model_dir,
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
        Step("verify", (py, "-m", "e2e.judges.verify", "--samples", f"{run}/samples.jsonl", "--env", "code-golf-v1",
                        "--groups", str(options.groups), "--n", str(options.n)), env=importable, timeout_s=300),
        Step("stop-sglang", ("start-sglang",), kind="stop", always=True, gpu=True),
    ]


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
