"""The E2E runs as data: ordered `Step`s (argv, env, cwd, what each produces), built from
`PlanOptions`. Tests snapshot the plans on CPU; `e2e.runner` executes them.

GPU tier (CONTRACT.md §7): Qwen3-0.6B served by real SGLang, code-golf-v1 from the verifiers
repository at the pinned tag, 3 groups × 4, verified by `e2e.verify`. It encodes the setup
mistakes that broke before: installs go into a `uv venv --system-site-packages` (never the
system Python); `prime` is called as `{uv_tool_bin}/prime` (the tool dir is not on PATH; the
runner resolves it with `uv tool dir --bin`); every process that imports the env gets the
venv's site-packages and the env source dir on PYTHONPATH. SGLang runs in its own venv (its
openai pin conflicts with newer verifiers). CPU tier: the same shape against the reference
engine and the bundled tasksets.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

REPO = Path(__file__).resolve().parent.parent
UV_TOOL_BIN = "{uv_tool_bin}"  # resolved by the runner from `uv tool dir --bin`

StepKind = Literal["run", "write", "background", "wait_http", "stop"]


@dataclass(frozen=True)
class Step:
    name: str
    argv: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # added to the runner's environment
    cwd: str | None = None
    produces: tuple[str, ...] = ()
    kind: StepKind = "run"
    content: str = ""  # for "write": the file's text (argv[0] is the path)
    timeout_s: float = 3600.0
    always: bool = False  # runs even after a failure (cleanup)
    gpu: bool = False  # needs CUDA


@dataclass(frozen=True)
class PlanOptions:
    run_dir: str = str(REPO / "runs" / "e2e-gpu")  # made absolute: steps run with other cwds
    model_dir: str | None = None  # default: <run_dir>/models/<model id>
    model_id: str = "Qwen/Qwen3-0.6B"
    verifiers_tag: str = "v0.2.0"
    verifiers_repo: str = "https://github.com/PrimeIntellect-ai/verifiers"
    prime_version: str = "0.18.0"
    sglang_version: str = "0.5.15"
    python: str = field(default_factory=lambda: sys.executable)
    python_tag: str = f"python{sys.version_info.major}.{sys.version_info.minor}"  # the venv's lib dir
    groups: int = 3
    n: int = 4
    max_response_len: int = 512
    max_context_len: int = 2048
    temperature: float = 0.8
    sglang_port: int = 30000
    health_timeout_s: float = 900.0
    trainer: Literal["none", "miles"] = "none"


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


def gpu_plan(options: PlanOptions = PlanOptions()) -> list[Step]:
    run = str(Path(options.run_dir).absolute())
    venv, sglang_venv = f"{run}/venv", f"{run}/sglang-venv"
    model_dir = options.model_dir or f"{run}/models/{options.model_id}"
    env_src = f"{run}/environments/code_golf_v1"  # `prime env install` looks in ./environments
    url = f"http://127.0.0.1:{options.sglang_port}"
    py = _venv_python(venv)
    in_venv = (("VIRTUAL_ENV", venv), ("PATH", f"{venv}/bin{os.pathsep}$PATH"))
    importable = (("PYTHONPATH", os.pathsep.join([_site_packages(venv, options.python_tag), env_src, str(REPO)])),)
    steps = [
        Step("venv", ("uv", "venv", "--clear", "--python", options.python, "--system-site-packages", venv),
             produces=(venv,)),
        Step("install-adapter", ("uv", "pip", "install", "--python", py, str(REPO)), produces=(py,)),
        Step("install-prime", ("uv", "tool", "install", f"prime=={options.prime_version}")),
        Step("clone-verifiers", ("git", "clone", "--depth", "1", "--branch", options.verifiers_tag,
                                 options.verifiers_repo, f"{run}/verifiers"), produces=(f"{run}/verifiers",)),
        Step("environments-dir", ("mkdir", "-p", f"{run}/environments")),
        Step("copy-env", ("cp", "-r", f"{run}/verifiers/environments/code_golf_v1", env_src), produces=(env_src,)),
        # --no-upgrade: the env's own `dependencies = ["verifiers"]` must not move the pins.
        Step("install-env", (f"{UV_TOOL_BIN}/prime", "--plain", "env", "install", "code-golf-v1", "--no-upgrade"),
             env=in_venv, cwd=run),
        # The env's own requirements may pull a newer verifiers: put the adapter's pins back.
        Step("repin-adapter", ("uv", "pip", "install", "--python", py, str(REPO))),
        Step("download-model", (f"{venv}/bin/hf", "download", options.model_id, "--local-dir", model_dir),
             produces=(model_dir,)),
        Step("sglang-venv", ("uv", "venv", "--clear", "--python", options.python, "--system-site-packages",
                             sglang_venv), produces=(sglang_venv,)),
        Step("install-sglang", ("uv", "pip", "install", "--python", _venv_python(sglang_venv),
                                f"sglang=={options.sglang_version}"), gpu=True),
        Step("start-sglang", (_venv_python(sglang_venv), "-m", "sglang.launch_server", "--model-path", model_dir,
                              "--host", "127.0.0.1", "--port", str(options.sglang_port), "--context-length",
                              str(options.max_context_len)),
             kind="background", produces=(f"{run}/logs/start-sglang.log",), gpu=True),
        Step("wait-sglang", (f"{url}/health",), kind="wait_http", timeout_s=options.health_timeout_s, gpu=True),
        Step("write-config", (f"{run}/code-golf-v1.toml",), kind="write", content=CODE_GOLF_CONFIG,
             produces=(f"{run}/code-golf-v1.toml",)),
        *_rollout_steps(options, py=py, url=url, model_dir=model_dir, env_src=env_src, env=importable + in_venv),
        Step("verify", (py, "-m", "e2e.verify", "--samples", f"{run}/samples.jsonl", "--env", "code-golf-v1",
                        "--groups", str(options.groups), "--n", str(options.n)), env=importable),
        Step("stop-sglang", ("start-sglang",), kind="stop", always=True, gpu=True),
    ]
    return steps


def _rollout_steps(options: PlanOptions, *, py: str, url: str, model_dir: str, env_src: str,
                   env: tuple[tuple[str, str], ...]) -> list[Step]:
    run = str(Path(options.run_dir).absolute())
    if options.trainer == "miles":
        command = (py, "-m", "adapter.cli", "miles-command", "--config", f"{run}/code-golf-v1.toml",
                   "--hf-checkpoint", model_dir, "--env-source-dir", env_src, "--", "--num-rollout", "1",
                   "--rollout-batch-size", str(options.groups), "--n-samples-per-prompt", str(options.n),
                   "--rollout-max-response-len", str(options.max_response_len),
                   "--rollout-max-context-len", str(options.max_context_len),
                   "--rollout-temperature", str(options.temperature),
                   "--save-debug-rollout-data", f"{run}/samples.pt")
        return [Step("miles-train", command, env=env, gpu=True, produces=(f"{run}/samples.pt",))]
    command = (py, "-m", "adapter.cli", "rollout", "--sglang-url", url, "--config", f"{run}/code-golf-v1.toml",
               "--model", options.model_id, "--tokenizer", model_dir, "--env-source-dir", env_src,
               "--groups", str(options.groups), "--n", str(options.n),
               "--max-response-len", str(options.max_response_len),
               "--max-context-len", str(options.max_context_len), "--temperature", str(options.temperature),
               "--out", f"{run}/samples.jsonl")
    return [Step("rollouts", command, env=env, gpu=True, produces=(f"{run}/samples.jsonl",))]


BUNDLED = ("arith-v1", "group-v1", "echo-tool-v1")


def cpu_plan(run_dir: str = str(REPO / "runs" / "e2e-cpu"), *, groups: int = 2, n: int = 4, port: int = 30555,
             tasksets: tuple[str, ...] = BUNDLED, python: str | None = None, envs_dir: str | None = None) -> list[Step]:
    """The CPU tier: the reference engine, then K groups of each bundled taskset, verified.
    `envs_dir` holds the installed generation's bundled configs (default: fixtures/envs)."""
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
            "--max-response-len", "32", "--out", out), produces=(out,)))
        steps.append(Step(f"verify-{taskset}", (py, "-m", "e2e.verify", "--samples", out, "--env", taskset,
                                                "--groups", str(groups), "--n", str(n))))
    steps.append(Step("stop-engine", ("start-engine",), kind="stop", always=True))
    return steps
