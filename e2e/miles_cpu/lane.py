"""The miles lane: real Miles (`miles-rl==0.0.2`) runs the adapter as a user runs it, and the
lane checks what Miles ingested.

    python -m e2e.miles_cpu lane --run-dir runs/miles        (`tox -e miles`)

Outside the namespace (`prepare`): the tiny model, the real-SGLang venv and the Miles venv, all
cached. Then the lane re-runs itself under `unshare --net` (loopback only: Ray binds every
interface otherwise) and, in there, starts real SGLang 0.5.23 on CPU (passed to Miles as an
external engine), a worker that fails every /generate (for the router case) and a Ray head with
one declared GPU and its dashboard. Each case asks `vf-sglang miles-command` — run by the Miles
venv's Python, so the installed Miles is detected — for the command, parses the printed line
(`NAME=value ... argv`, nothing restated) and runs exactly that: the driver
`e2e/miles_cpu/train.py` with the printed environment, whose Ray workers get the printed runtime
env, or, given the dashboard's address, `ray job submit` of that driver. Afterwards
`e2e.miles_cpu.checks` judges Miles' dumps, its converted batches and its logged metrics, and
`results.json` records every case.

CASES: the class ABI (0.0.2's opt-in) with echo-tool-v1 (multi-turn: the tiny model calls the
tool in 6 of the 8 seeded episodes, and the tool's response is fed back as a masked span); the
legacy function with arith-v1 through `ray job submit`, behind Miles' own router and a failing
worker; and a planted defect (a rollout class that cuts one loss mask short)
that Miles' own conversion must refuse: the lane fails unless that case fails for that reason.
The tool case's rollout-0 dump is also judged by `python -m e2e.judges.verify --miles-dump`, the GPU
plan's verifier of Miles' own dump.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from e2e.miles_cpu import LANE_DIR_VAR, STARTUP_VAR, checks

REPO = Path(__file__).resolve().parents[2]
ENVS = REPO / "fixtures" / "envs"
ARITH, ECHO_TOOL = ENVS / "arith-v1.toml", ENVS / "echo-tool-v1.toml"
TRAIN_SCRIPT = REPO / "e2e" / "miles_cpu" / "train.py"
PLANTED_PATH = "e2e.miles_cpu.planted.LossMaskShortRolloutFn"
PLANTED_MESSAGE = "loss mask length"  # Miles' own assert in _convert_samples_to_train_data
SHAPE = {"num_rollout": 2, "rollout_batch_size": 2, "n_samples_per_prompt": 2}
DRIVER_TIMEOUT_S = 420.0
# Where Miles' rollout traffic goes. engine: Miles' router address is the engine itself (no router).
# miles: Miles starts its own router (sglang_router 0.3.2, from its --router-* arguments) before the
# engine and a worker whose every /generate fails (503), with the printed command's router flags
# (the launcher adds --router-disable-retries).
RouterMode = Literal["engine", "miles"]
ROUTER_POLICY = "consistent_hashing"  # a trace's turns stay on one worker (the adapter sends its key)


@dataclass(frozen=True)
class Resume:
    """`--load DIR --start-rollout-id 1`: DIR is `load_from`'s save directory (its rollout function's
    state for rollout 0; the case then trains rollout 1 and must draw what `load_from` drew), or,
    with `load_from` None, a checkpoint directory without the adapter's state (the case must start,
    and its driver log carry the adapter's warning naming the file). Either way DIR holds the
    Megatron marker `latest_checkpointed_iteration.txt` that a run without --debug-rollout-only
    writes: without it Miles' parse_args replaces --load and starts at rollout 0 (load(-1))."""

    load_from: str | None
    start_rollout_id: int = 1


@dataclass(frozen=True)
class Case:
    name: str
    legacy: bool  # the legacy function ABI (else the class)
    planted: bool = False  # expected to fail in Miles' conversion
    config: Path = ARITH  # the EnvConfig (a bundled taskset's)
    multi_turn_share: float = 0.0  # the least share of samples with two or more model turns
    verify_env: str | None = None  # run `e2e.judges.verify --miles-dump --env <this>` on rollout 0's dump
    router: RouterMode = "engine"
    # the printed command's `ray job submit` form against the lane's Ray dashboard (else the driver
    # run directly against the GCS address, with the job's runtime env handed over as Ray would)
    submit: bool = False
    # Miles #1845's start-up and checkpoint order (e2e.miles_cpu.pr1845), with `--save <case>/ckpt
    # --save-interval 1`: the rollout class' save(r) after every rollout, load(start - 1) at start
    pr1845: bool = False
    resume: Resume | None = None  # a run started with --load (Miles calls load(start_rollout_id - 1))


START_WARNING = "no saved rollout state at"  # adapter.miles.checkpoint's warning, with the file after it
MEGATRON_MARKER = "latest_checkpointed_iteration.txt"

CASES = (
    # a fresh run with --save and no --load, in #1845's order: load(-1), then save(0), save(1)
    Case("sglang-class-echo-tool", legacy=False, config=ECHO_TOOL, multi_turn_share=0.5,
         verify_env="echo-tool-v1", pr1845=True),
    # a new process with --load at start_rollout_id 1: load(0) restores, rollout 1 draws what the first run drew
    Case("sglang-class-echo-tool-resume", legacy=False, config=ECHO_TOOL, pr1845=True,
         resume=Resume(load_from="sglang-class-echo-tool")),
    # --load at a checkpoint without the adapter's state: it starts, with the warning
    Case("sglang-class-load-without-state", legacy=False, pr1845=True, resume=Resume(load_from=None)),
    # the legacy function, launched by the printed `ray job submit`, behind Miles' own router: miles-rl
    # 0.0.2 refuses --sglang-router-policy under its class ABI opt-in (MILES_EXPERIMENTAL_ROLLOUT_REFACTOR=1,
    # an assert in its sglang validate_args). One case for both: each is a property of the launch
    # (the job's form; the router Miles starts inside it), and a Miles driver costs ~70 s of the lane
    Case("sglang-legacy-job-submit-miles-router", legacy=True, submit=True, router="miles"),
    Case("sglang-planted-loss-mask", legacy=False, planted=True),
)
CONFIGS = tuple(dict.fromkeys(case.config for case in CASES))  # each made ready before the namespace


@dataclass
class CaseResult:
    name: str
    ok: bool
    seconds: float
    exit_code: int | None
    problems: list[str] = field(default_factory=list)
    rollout_function_path: str = ""
    failing_worker_calls: list[int] = field(default_factory=list)  # per failing model turn (router cases)


def megatron_model_args(model_dir: Path) -> list[str]:
    """The Megatron model flags Miles' `hf_validate_args` compares with the checkpoint's config.json
    (what Miles' scripts/models/*.sh give for a real model)."""
    config = json.loads((model_dir / "config.json").read_text())
    rope = (config.get("rope_parameters") or {}).get("rope_theta", config.get("rope_theta"))
    args = ["--hidden-size", str(config["hidden_size"]), "--num-attention-heads", str(config["num_attention_heads"]),
            "--num-layers", str(config["num_hidden_layers"]), "--ffn-hidden-size", str(config["intermediate_size"]),
            "--norm-epsilon", str(config["rms_norm_eps"]), "--rotary-base", str(int(rope))]
    return args if config.get("tie_word_embeddings", True) else [*args, "--untie-embeddings-and-output-weights"]


def router_args(engine_url: str, router: RouterMode, *, failing_url: str = "", port: int = 0) -> list[str]:
    """Miles' router flags: its router address at the engine, or its own router (Miles launches
    it when no --sglang-router-ip is given) on `port` before the engine and the failing worker."""
    if router == "engine":
        host, engine_port = engine_url.removeprefix("http://").rsplit(":", 1)
        return ["--sglang-router-ip", host, "--sglang-router-port", engine_port]
    return ["--sglang-router-port", str(port), "--sglang-router-policy", ROUTER_POLICY,
            "--worker-urls", engine_url, failing_url]


def miles_args(engine_url: str, case_dir: Path, model_dir: Path, *, deterministic: bool = False,
               router: Sequence[str] = ()) -> list[str]:
    """Miles' flags for a case (`router`: `router_args`; default: the engine as the router).
    `deterministic`: the engine runs SGLang's deterministic inference, and Miles'
    `--sglang-enable-deterministic-inference` makes the adapter seed every rollout
    (`rollout_seed + position × n + i`), so a case samples the same tokens on every run."""
    addr = engine_url.removeprefix("http://")
    seeded = ["--sglang-enable-deterministic-inference"] if deterministic else []
    return [*seeded, "--debug-rollout-only", "--rollout-external", "--rollout-external-engine-addrs", addr,
            *(router or router_args(engine_url, "engine")),
            "--rollout-num-gpus", "1", "--rollout-num-gpus-per-engine", "1",
            "--num-rollout", str(SHAPE["num_rollout"]), "--rollout-batch-size", str(SHAPE["rollout_batch_size"]),
            "--n-samples-per-prompt", str(SHAPE["n_samples_per_prompt"]), "--global-batch-size", "4",
            "--rollout-max-response-len", "32", "--rollout-temperature", "1.0", "--advantage-estimator", "grpo",
            "--save-debug-rollout-data", str(case_dir / "rollout_{rollout_id}.pt"), *megatron_model_args(model_dir)]


def save_dir(case_dir: Path) -> Path:
    return case_dir / "ckpt"


def load_dir(case: Case, case_dir: Path) -> Path:
    """A resumed case's --load: `load_from`'s save directory, or a checkpoint of its own without
    the adapter's state."""
    assert case.resume is not None
    return (save_dir(case_dir.parent / case.resume.load_from) if case.resume.load_from
            else case_dir / "checkpoint-without-adapter-state")


def checkpoint_args(case: Case, case_dir: Path) -> list[str]:
    """Miles' checkpoint flags: `--save` every rollout under #1845's order, `--load` (its
    directory given Megatron's marker: `Resume`) and the first rollout for a resumed case."""
    args = ["--save", str(save_dir(case_dir)), "--save-interval", "1"] if case.pr1845 else []
    if case.resume is not None:
        directory = load_dir(case, case_dir)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / MEGATRON_MARKER).write_text(f"{case.resume.start_rollout_id}\n")
        args += ["--load", str(directory), "--start-rollout-id", str(case.resume.start_rollout_id)]
    return args


def parse_printed(line: str) -> tuple[dict[str, str], list[str]]:
    """`NAME=value ... argv` (one POSIX shell line, as `MilesLaunch.shell` prints) → (env, argv)."""
    words = shlex.split(line)
    env: dict[str, str] = {}
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    return env, words


def printed_command(venv_python: Path, case: Case, *, ray_address: str, checkpoint: Path, case_dir: Path,
                    engine_url: str, model_dir: Path, failing_url: str = "") -> str:
    """What `vf-sglang miles-command` prints for this case, run with the Miles venv's Python."""
    from e2e.common.ports import free_port

    # MILES_HOST_IP: the address Miles binds its own router to (the namespace has loopback only)
    explicit = {LANE_DIR_VAR: str(case_dir), "MILES_USE_LEGACY_ROLLOUT_V1": "1" if case.legacy else "0",
                "MILES_HOST_IP": "127.0.0.1", **({STARTUP_VAR: "pr1845"} if case.pr1845 else {})}
    router = router_args(engine_url, case.router, failing_url=failing_url, port=free_port())
    argv = [str(venv_python), "-m", "adapter.cli", "miles-command", "--config", str(case.config),
            "--hf-checkpoint", str(checkpoint), "--train-script", str(TRAIN_SCRIPT), "--python", str(venv_python),
            "--ray-address", ray_address, "--extra-env-vars", json.dumps(explicit),
            "--", *miles_args(engine_url, case_dir, model_dir, deterministic=True, router=router),
            *checkpoint_args(case, case_dir)]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
           "PYTHONPATH": str(REPO)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, timeout=300)
    return done.stdout.strip().splitlines()[-1]


def router_problems(router: RouterMode, argv: Sequence[str], per_turn: Sequence[int]) -> list[str]:
    """A router case's failing worker, judged: the printed command carries
    `--router-disable-retries`, the worker got model turns, and none cost more calls there than
    the adapter's attempts per turn."""
    from adapter.config.limits import ENGINE_ATTEMPTS_PER_TURN

    if router == "engine":
        return []
    if "--router-disable-retries" not in argv:
        return ["the printed command lacks --router-disable-retries before Miles' own router"]
    if not per_turn:
        return ["the failing worker got no model turn: Miles' router never routed one to it"]
    worst = max(per_turn)
    if worst > ENGINE_ATTEMPTS_PER_TURN:
        return [f"a failing model turn cost {worst} calls at the failing worker behind Miles' router "
                f"(per turn: {list(per_turn)}); the adapter's budget is {ENGINE_ATTEMPTS_PER_TURN}"]
    return []


def launch_problems(case: Case, argv: Sequence[str]) -> list[str]:
    """A `submit` case ran the printed command's `ray job submit` form (the dashboard address it
    was given makes the launcher print it), any other case the driver itself."""
    submitted = list(argv[:3]) == ["ray", "job", "submit"]
    if case.submit and not submitted:
        return [f"the printed command for the Ray dashboard is not `ray job submit`: {shlex.join(argv[:4])} ..."]
    if submitted and not case.submit:
        return ["the printed command for the GCS address is `ray job submit`, not the driver"]
    return []


def failing_worker_turns(failing_url: str) -> list[int]:
    """The failing worker's calls per distinct request (per model turn), most first."""
    import httpx

    return [int(c) for c in httpx.get(f"{failing_url}/stats", timeout=10.0).json()["per_prompt"]]


def reset_failing_worker(failing_url: str) -> None:
    """Zero the failing worker's counts before a case."""
    import httpx

    httpx.post(f"{failing_url}/reset", timeout=10.0).raise_for_status()


def run_case(case: Case, *, venv: Path, ray_address: str, engine_url: str, engine_version: str,
             checkpoint: Path, model_dir: Path, run_dir: Path, has_rollout_id: bool,
             failing_url: str = "") -> CaseResult:
    from e2e.common.process import StepTimeout, run_with_deadline

    case_dir = run_dir / case.name
    case_dir.mkdir(parents=True, exist_ok=True)
    if case.router != "engine":
        reset_failing_worker(failing_url)
    line = printed_command(venv / "bin" / "python", case, ray_address=ray_address, checkpoint=checkpoint,
                           case_dir=case_dir, engine_url=engine_url, model_dir=model_dir, failing_url=failing_url)
    (case_dir / "command.sh").write_text(line + "\n")
    env, argv = parse_printed(line)
    if case.planted:  # the only change to the printed command: the rollout class Miles loads
        argv[argv.index("--rollout-function-path") + 1] = PLANTED_PATH
    base = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
            "TMPDIR": os.environ.get("TMPDIR", "/tmp"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1"}  # no UV_OFFLINE: the adapter decides it (adapter.episodes.harness_uv)
    log_path = case_dir / "driver.log"
    started = time.monotonic()
    with log_path.open("w") as log:
        try:
            code: int | None = run_with_deadline(argv, env={**base, **env}, cwd=str(REPO), timeout_s=DRIVER_TIMEOUT_S,
                                                 on_line=lambda text: print(text, file=log, flush=True))
        except StepTimeout as exc:
            code = None
            print(f"lane: {exc}", file=log)
    seconds = time.monotonic() - started
    text = log_path.read_text(errors="replace")
    result = CaseResult(case.name, False, round(seconds, 1), code, rollout_function_path=argv[argv.index(
        "--rollout-function-path") + 1])
    if case.planted:
        result.ok = code not in (0, None) and PLANTED_MESSAGE in text
        if not result.ok:
            result.problems.append(f"the planted short loss mask was not refused by Miles (exit {code})")
        return result
    result.problems += launch_problems(case, argv)
    if code != 0:
        result.problems.append(f"the driver exited {code}: see {log_path}")
        return result
    first = case.resume.start_rollout_id if case.resume else 0
    expect = checks.Expectation(SHAPE["rollout_batch_size"], SHAPE["n_samples_per_prompt"], SHAPE["num_rollout"],
                                weight_version=engine_version, has_rollout_id=has_rollout_id,
                                tool_response_id=tool_response_id(model_dir) if case.multi_turn_share else None,
                                multi_turn_share=case.multi_turn_share, first_rollout=first)
    dumps, converted = load_artifacts(case_dir, SHAPE["num_rollout"])
    result.problems += checks.problems(dumps, converted, checks.logged_metrics(text), expect)
    result.problems += startup_problems(case, case_dir, dumps, text)
    if case.verify_env is not None:
        result.problems += verify_dump(case_dir / "rollout_0.pt", case.verify_env)
    if case.router != "engine":
        result.failing_worker_calls = failing_worker_turns(failing_url)
        result.problems += router_problems(case.router, argv, result.failing_worker_calls)
    result.ok = not result.problems
    return result


def startup_problems(case: Case, case_dir: Path, dumps: dict[int, Any], log_text: str) -> list[str]:
    """#1845's order, judged: the rollout class saved its state after every rollout it trained; a
    resumed case drew exactly what the run it resumed drew, or, resumed from a checkpoint without
    the adapter's state, started with the warning naming the file."""
    if not case.pr1845:
        return []
    first = case.resume.start_rollout_id if case.resume else 0
    problems = [f"save({r}) wrote no rollout state at {path}" for r in range(first, SHAPE["num_rollout"])
                if not (path := save_dir(case_dir) / "rollout" / f"vf_sglang_state_{r}.json").is_file()]
    if case.resume is None:
        return problems
    if case.resume.load_from is None:
        missing = load_dir(case, case_dir) / "rollout" / f"vf_sglang_state_{first - 1}.json"
        if f"{START_WARNING} {missing}" not in log_text:
            problems.append(f"no warning naming {missing} in the driver log: the start from a checkpoint without "
                            "the adapter's state went unannounced")
        return problems
    straight, _ = load_artifacts(case_dir.parent / case.resume.load_from, SHAPE["num_rollout"])
    for rollout_id in range(first, SHAPE["num_rollout"]):
        if rollout_id not in straight or rollout_id not in dumps:
            problems.append(f"rollout {rollout_id}: no dump of {case.resume.load_from} or of this run to compare")
            continue
        problems += checks.resume_problems(rollout_id, straight[rollout_id], dumps[rollout_id])
    return problems


def tool_response_id(model_dir: Path) -> int:
    """`<tool_response>`'s id in the served model's own tokenizer (what the renderer writes)."""
    from transformers import AutoTokenizer

    return int(AutoTokenizer.from_pretrained(str(model_dir)).convert_tokens_to_ids("<tool_response>"))


def verify_dump(dump: Path, env_id: str) -> list[str]:
    """`python -m e2e.judges.verify --miles-dump` (the GPU plan's judge of Miles' own dump) on a dump real
    Miles wrote here: its rollout 0, whose groups are 0..rollout_batch_size-1 as the verifier expects."""
    argv = [sys.executable, "-m", "e2e.judges.verify", "--miles-dump", str(dump), "--env", env_id,
            "--groups", str(SHAPE["rollout_batch_size"]), "--n", str(SHAPE["n_samples_per_prompt"])]
    done = subprocess.run(argv, cwd=str(REPO), capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        return []
    output = (done.stdout + done.stderr).strip()[-1500:]
    return [f"e2e.judges.verify --miles-dump {dump} exited {done.returncode}: {output}"]


def load_artifacts(case_dir: Path, num_rollout: int) -> tuple[dict[int, Any], dict[int, Any]]:
    import torch

    dumps = {r: torch.load(case_dir / f"rollout_{r}.pt", weights_only=False)
             for r in range(num_rollout) if (case_dir / f"rollout_{r}.pt").is_file()}
    converted = {r: json.loads((case_dir / f"converted_{r}.json").read_text())
                 for r in range(num_rollout) if (case_dir / f"converted_{r}.json").is_file()}
    return dumps, converted


def summary(results: Sequence[CaseResult]) -> str:
    width = max((len(r.name) for r in results), default=0)
    rows = [f"{r.name:<{width}} {'ok' if r.ok else 'FAILED':<7} {r.seconds:>6.1f} s  {r.rollout_function_path}"
            + (f"  failing worker: {r.failing_worker_calls} calls per failing turn" if r.failing_worker_calls else "")
            for r in results]
    problems = [f"  {r.name}: {p}" for r in results for p in r.problems]
    return "\n".join(["miles lane:", *rows, *problems])


def write_results(run_dir: Path, results: Sequence[CaseResult], extra: dict[str, Any]) -> None:
    payload = {"cases": [asdict(r) for r in results], **extra}
    (run_dir / "results.json").write_text(json.dumps(payload, indent=1) + "\n")
    print(summary(results), file=sys.stderr)
