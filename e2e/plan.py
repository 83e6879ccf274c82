"""The E2E runs as data: ordered `Step`s (argv, env, cwd, what each produces), built from
`PlanOptions`. Tests snapshot the plans on CPU; `e2e.runner` executes them. Values are
literal: the runner never expands `$VARS` in them (a step prepends to PATH with `path_prepend`).

GPU tier (CONTRACT.md §7): Qwen3-0.6B served by real SGLang, code-golf-v1 from the verifiers
repository at the pinned tag, 3 groups × 4, verified by `e2e.verify`. It encodes the setup
mistakes that broke before (issue 15):
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
CPU tier: the same shape against the reference engine and the bundled tasksets.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from e2e.interpreter import BaseInterpreter, resolve_base_python

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


def base_interpreter(options: PlanOptions) -> BaseInterpreter:
    """The interpreter both venvs are built on (taken as given when its tag is given too)."""
    if options.base_python and options.python_tag:
        return BaseInterpreter(options.base_python, options.python_tag.removeprefix("python"),
                               options.base_python_how or f"--base-python {options.base_python}")
    return resolve_base_python(options.base_python)


def _venv_python(venv: str) -> str:
    return f"{venv}/bin/python"


def _site_packages(venv: str, python_tag: str) -> str:
    return f"{venv}/lib/{python_tag}/site-packages"


CODE_GOLF_CONFIG = """# code-golf-v1 on verifiers 0.2.0: the null harness, programs run with python3 locally.
[taskset]
id = "code-golf-v1"

[harness]
id = "null"

[harness.runtime]
type = "subprocess"
"""


def _setup_steps(options: PlanOptions, base: BaseInterpreter, run: str) -> list[Step]:
    """Driver check, the adapter's venv from the lock, prime, the code-golf env, the model."""
    venv, py = f"{run}/venv", _venv_python(f"{run}/venv")
    checkout, env_src, locked = f"{run}/verifiers", f"{run}/environments/code_golf_v1", f"{run}/requirements.txt"
    install_locked = ("uv", "pip", "install", "--python", py, "--require-hashes", "-r", locked)
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
        Step("install-adapter", ("uv", "pip", "install", "--python", py, "--no-deps", str(REPO)),
             produces=(py,), timeout_s=600),
        Step("install-prime", ("uv", "tool", "install", f"prime=={options.prime_version}"), timeout_s=600),
        Step("init-verifiers", ("git", "init", "--quiet", checkout), produces=(checkout,), timeout_s=60),
        Step("fetch-verifiers", ("git", "-C", checkout, "fetch", "--quiet", "--depth", "1", options.verifiers_repo,
                                 f"refs/tags/{options.verifiers_tag}"), timeout_s=600),
        Step("checkout-verifiers", ("git", "-C", checkout, "checkout", "--quiet", "--force", "FETCH_HEAD"),
             timeout_s=60),
        Step("environments-dir", ("mkdir", "-p", f"{run}/environments"), timeout_s=60),
        Step("copy-env", ("cp", "-rT", f"{checkout}/environments/code_golf_v1", env_src), produces=(env_src,),
             timeout_s=60),
        # --no-upgrade: the env's own `dependencies = ["verifiers"]` must not move the pins.
        Step("install-env", (f"{UV_TOOL_BIN}/prime", "--plain", "env", "install", "code-golf-v1", "--no-upgrade"),
             env=(("VIRTUAL_ENV", venv),), path_prepend=(f"{venv}/bin",), cwd=run, timeout_s=1800),
        # The env's own requirements may pull a newer verifiers: put the locked pins back.
        Step("repin-locked", install_locked, timeout_s=1800),
        Step("download-model", (f"{venv}/bin/hf", "download", options.model_id, "--local-dir",
                                options.model_dir or f"{run}/models/{options.model_id}"),
             produces=(options.model_dir or f"{run}/models/{options.model_id}",), timeout_s=1800),
    ]


def gpu_plan(options: PlanOptions | None = None) -> list[Step]:
    options = options or PlanOptions()
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
        Step("install-sglang", ("uv", "pip", "install", "--python", _venv_python(sglang_venv),
                                f"sglang=={options.sglang_version}"), timeout_s=2400, gpu=True),
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


BUNDLED = ("arith-v1", "group-v1", "echo-tool-v1")
ROLLOUT_OK_EXIT = (0, 3)  # 3: complete, with dropped-and-replaced groups (the run's summary names them)
CPU_SEED = 1234


def cpu_plan(run_dir: str = str(REPO / "runs" / "e2e-cpu"), *, groups: int = 2, n: int = 4, port: int = 30555,
             tasksets: tuple[str, ...] = BUNDLED, python: str | None = None, envs_dir: str | None = None,
             seed: int = CPU_SEED) -> list[Step]:
    """The CPU tier: the reference engine, then K groups of each bundled taskset, verified.
    `envs_dir` holds the installed generation's bundled configs (default: fixtures/envs).
    Rollouts are seeded (`--seed`: rollout i of task t samples with seed + t×n + i, which the
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
        steps.append(Step(f"verify-{label}{taskset}", (py, "-m", "e2e.verify", "--samples", out, "--env", taskset,
                                                       "--groups", str(groups), "--n", str(n)), env=env))
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
            Step("install-vf040", ("uv", "pip", "install", "--python", b_py, "verifiers==0.4.0", "-r",
                                   str(CONTRACT_REQUIREMENTS)), timeout_s=1800),
            *_rollouts_and_verify(b_py, url, REPO / "fixtures" / "envs" / "b", run, label="b-", groups=groups, n=n,
                                  tasksets=tasksets, env=b_env, record=True),
        ]
    steps += [
        Step("real-sglang-tests", (py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "sglang_cpu or live",
                                   str(REPO / "tests")), env=(("SGLANG_URL", url), ("VF_SGLANG_CPU", "1")),
             cwd=str(REPO), timeout_s=1500),
        Step("stop-sglang", ("start-sglang",), kind="stop", always=True),
    ]
    return steps
