"""The E2E runs as data: ordered `Step`s (argv, env, cwd, what each produces), built from
`PlanOptions`. Tests snapshot the plans on CPU; `e2e.runner` executes them. Values are
literal: the runner never expands `$VARS` in them (a step prepends to PATH with `path_prepend`).
Proxies: the runner adds the loopback hosts to every step's NO_PROXY/no_proxy
(adapter/engine/proxies.py); engine and bridge calls never go through a proxy.

What the plans share: `Step`, `PlanOptions` (the GPU tier's options, both variants), the base
interpreter, and the step builders more than one plan uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from e2e.gpu.interpreter import BaseInterpreter, resolve_base_python

REPO = Path(__file__).resolve().parents[2]
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


def venv_python(venv: str) -> str:
    return f"{venv}/bin/python"


def site_packages(venv: str, python_tag: str) -> str:
    return f"{venv}/lib/{python_tag}/site-packages"


def env_source_steps(options: PlanOptions, run: str) -> list[Step]:
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


def check_step(py: str, url: str, model_dir: str, *, env: tuple[tuple[str, str], ...] = (),
               gpu: bool = False) -> Step:
    """The live conformance checks (adapter/cli/check.py) against the real server: the same step
    in the GPU tier and in its CPU rehearsal (`sglang_cpu_plan`)."""
    return Step("check-sglang", (py, "-m", "adapter.cli", "check", "--sglang-url", url, "--tokenizer", model_dir),
                env=env, timeout_s=900, gpu=gpu)


BUNDLED = ("arith-v1", "group-v1", "echo-tool-v1")
ROLLOUT_OK_EXIT = (0, 3)  # 3: complete, with dropped-and-replaced groups (the run's summary names them)
