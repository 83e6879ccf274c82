"""One small executor for E2E plans: streamed, timestamped logs; stops at the first failure
with the step's name and log tail; cleanup steps always run; background processes are
tracked by pid (their own process group) and stopped by this runner only.

    python -m e2e.runner --tier gpu --dry-run      # print the plan a GPU runner executes
    python -m e2e.runner --tier gpu --variant miles --dry-run   # Miles' train.py in Miles' image
    python -m e2e.runner --tier auto               # GPU tier with CUDA, CPU tier otherwise
    python -m e2e.runner --tier sglang-cpu         # the GPU tier's SGLang steps on real SGLang, on CPU

Arguments are argv lists (no shell). Two placeholders are resolved at run time, only when a
step uses them: `{uv_tool_bin}` (`uv tool dir --bin`) and `{tiny_model_dir}` (the cached
tiny model of the CPU tier). Env values are literal: `$VARS` are never expanded; a step puts
directories before PATH with `path_prepend`. Every step's environment gets the loopback hosts
in NO_PROXY/no_proxy (adapter/engine/proxies.py), and the runner's own health probes ignore proxy
variables. A foreground step's deadline holds whether or not it prints (e2e/common/process.py): on
expiry its whole process group is killed and the failure names the step.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import httpx

from adapter.engine.proxies import bypass_proxies_for_loopback
from e2e.common.ports import free_port
from e2e.common.process import ServerNotReady, StepTimeout, Watched, run_with_deadline, wait_ready
from e2e.gpu.interpreter import BaseInterpreterError
from e2e.plans.cpu import cpu_plan
from e2e.plans.gpu import gpu_plan, gpu_plan_notes
from e2e.plans.sglang_cpu import sglang_cpu_plan
from e2e.plans.steps import BUNDLED, REPO, PlanOptions, Step, base_interpreter


class StepFailed(RuntimeError):
    def __init__(self, step: Step, reason: str, tail: str = "", *, timed_out: bool = False) -> None:
        super().__init__(f"step {step.name!r} failed: {reason}" + (f"\n--- log tail ---\n{tail}" if tail else ""))
        self.step, self.timed_out = step, timed_out


def _uv_tool_bin() -> str:
    return subprocess.run(["uv", "tool", "dir", "--bin"], check=True, capture_output=True, text=True).stdout.strip()


def _tiny_model_dir() -> str:
    from adapter.reference import build_tiny_model

    return str(build_tiny_model())


TIMED = ("run", "wait_http")  # the kinds whose `timeout_s` the runner enforces
PLACEHOLDERS: dict[str, Callable[[], str]] = {"{uv_tool_bin}": _uv_tool_bin, "{tiny_model_dir}": _tiny_model_dir}


def _show(text: str) -> str:
    return text.replace(str(REPO), "<repo>")


def describe(steps: Sequence[Step]) -> list[dict[str, object]]:
    """The plan as plain data, with the repository path shown as `<repo>`."""
    return [{"name": s.name, "kind": s.kind, "argv": [_show(a) for a in s.argv],
             "env": {k: _show(v) for k, v in s.env}, "path_prepend": [_show(p) for p in s.path_prepend],
             "cwd": _show(s.cwd) if s.cwd else None, "produces": [_show(p) for p in s.produces],
             "timeout_s": s.timeout_s, "always": s.always, "gpu": s.gpu} for s in steps]


@dataclass
class Runner:
    log_dir: Path
    out: TextIO = sys.stdout
    resolved: dict[str, str] = field(default_factory=dict)
    background: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    failure: StepFailed | None = None  # the step that failed (and why), after `run`

    def log(self, step: str, line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')} {step}] {line}", file=self.out, flush=True)

    def _argv(self, step: Step) -> list[str]:
        argv = []
        for arg in step.argv:
            for token, resolve in PLACEHOLDERS.items():
                if token in arg:
                    if token not in self.resolved:
                        self.resolved[token] = resolve()
                    arg = arg.replace(token, self.resolved[token])
            argv.append(arg)
        return argv

    def _env(self, step: Step) -> dict[str, str]:
        env = dict(os.environ)
        env.update(step.env)  # literal values: nothing is expanded
        if step.path_prepend:
            env["PATH"] = os.pathsep.join([*step.path_prepend, *filter(None, [os.environ.get("PATH")])])
        bypass_proxies_for_loopback(env)
        return env

    def _run(self, step: Step) -> None:
        tail: list[str] = []
        with (self.log_dir / f"{step.name}.log").open("w") as log:
            def on_line(line: str) -> None:
                if log.closed:  # output of a process that escaped the step's group, after the step
                    return
                log.write(line + "\n")
                tail[:] = [*tail[-39:], line]
                self.log(step.name, line)

            try:
                code = run_with_deadline(self._argv(step), env=self._env(step), cwd=step.cwd,
                                         timeout_s=step.timeout_s, on_line=on_line)
            except StepTimeout as exc:
                raise StepFailed(step, str(exc), "\n".join(tail), timed_out=True) from exc
            except OSError as exc:  # the program is missing or not executable
                raise StepFailed(step, f"could not start {step.argv[0]!r}: {exc}") from exc
        if code not in step.ok_exit:
            raise StepFailed(step, f"exit status {code}", "\n".join(tail))
        self._check_produces(step, tail)

    def _check_produces(self, step: Step, tail: Sequence[str] = ()) -> None:
        """A step that succeeded without writing what it declares fails here, by name, rather than
        at a later step that reads it."""
        missing = [path for path in self._argv(dataclasses.replace(step, argv=step.produces))
                   if not Path(path).exists()]
        if missing:
            raise StepFailed(step, f"succeeded but did not produce {', '.join(missing)}", "\n".join(tail))

    def _background(self, step: Step) -> None:
        log_path = self.log_dir / f"{step.name}.log"
        with log_path.open("wb") as log:
            try:
                self.background[step.name] = subprocess.Popen(
                    self._argv(step), env=self._env(step), cwd=step.cwd, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)
            except OSError as exc:
                raise StepFailed(step, f"could not start {step.argv[0]!r}: {exc}") from exc
        self.log(step.name, f"started pid {self.background[step.name].pid}, log {log_path}")

    def _wait_http(self, step: Step) -> None:
        """GET the step's URL until it answers 200 (`wait_ready`): fails at once, with the log's
        tail, when a background process exits or logs that the URL's port is taken."""
        url = step.argv[0]
        port = httpx.URL(url).port
        watched = [Watched(proc, self.log_dir / f"{name}.log", name, port=port)
                   for name, proc in self.background.items()]

        def answers() -> bool:
            try:
                return httpx.get(url, timeout=5.0, trust_env=False).status_code == 200
            except httpx.TransportError:
                return False

        try:
            wait_ready(answers, watched, timeout_s=step.timeout_s, poll_s=1.0)
        except ServerNotReady as exc:
            raise StepFailed(step, f"{url}: {exc}") from None
        self.log(step.name, f"{url} is up")

    def stop(self, name: str) -> None:
        proc = self.background.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self.log("stop", f"stopped {name} (pid {proc.pid})")

    def execute(self, step: Step) -> None:
        if step.kind == "write":
            path = Path(step.argv[0])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(step.content)
            self._check_produces(step)
        elif step.kind == "background":
            self._background(step)
        elif step.kind == "wait_http":
            self._wait_http(step)
        elif step.kind == "stop":
            self.stop(step.argv[0])
        else:
            self._run(step)

    def run(self, steps: Sequence[Step]) -> int:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        failure: StepFailed | None = None
        try:
            for step in steps:
                if failure is not None and not step.always:
                    continue
                self.log(step.name, "start")
                try:
                    self.execute(step)
                except StepFailed as exc:
                    failure = failure or exc
                    self.log(step.name, str(exc))
        finally:
            for name in list(self.background):
                self.stop(name)
        self.failure = failure
        if failure is not None:
            self.log("runner", f"FAILED at step {failure.step.name!r}" + (" (timed out)" if failure.timed_out else ""))
        return 1 if failure else 0


def cuda_available() -> bool:
    return shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0


def print_plan(steps: Sequence[Step], notes: Sequence[str], out: TextIO | None = None) -> None:
    """The dry run: the plan's notes, then every step with its environment and deadline."""
    out = out or sys.stdout
    for note in notes:
        print(_show(note), file=out)
    for i, step in enumerate(steps, 1):
        env = [f"{k}={v}" for k, v in step.env]
        if step.path_prepend:
            env.append("PATH=" + os.pathsep.join([*step.path_prepend, "<runner's PATH>"]))
        flags = ", ".join(filter(None, [step.kind, "gpu" if step.gpu else "", "always" if step.always else "",
                                        f"timeout {step.timeout_s:g}s" if step.kind in TIMED else ""]))
        print(f"{i:>2}. {step.name} [{flags}]" + (f" cwd={_show(step.cwd)}" if step.cwd else ""), file=out)
        print(_show(f"      {' '.join([*env, *step.argv])}"), file=out)


def _gpu_options(args: argparse.Namespace, run_dir: Path) -> PlanOptions:
    options = PlanOptions(run_dir=str(run_dir), sglang_attention_backend=args.attention_backend,
                          sglang_port=args.sglang_port or free_port(), system_package=args.system_package,
                          variant=args.variant, miles_root=args.miles_root, megatron_path=args.megatron_path,
                          miles_gpus=args.miles_gpus, miles_abi=args.miles_abi)
    base = base_interpreter(PlanOptions(base_python=args.base_python))
    return PlanOptions(**{**options.__dict__, "base_python": base.executable, "python_tag": base.lib_tag,
                          "base_python_how": base.how})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.runner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tier", choices=["gpu", "cpu", "sglang-cpu", "auto"], default="auto",
                        help="sglang-cpu: the GPU tier's SGLang steps rehearsed against real SGLang on CPU")
    parser.add_argument("--sglang-version", default="0.5.23", help="sglang-cpu tier: the SGLang release to serve")
    parser.add_argument("--generation-b", action=argparse.BooleanOptionalAction, default=True,
                        help="sglang-cpu tier: also record and verify generation B's rollouts (a verifiers 0.4.0 "
                             "venv); --no-generation-b where only the SGLang version differs from a lane that has")
    parser.add_argument("--tasksets", default=",".join(BUNDLED), metavar="IDS",
                        help="sglang-cpu tier: the bundled tasksets whose rollouts are recorded and verified, "
                             f"comma-separated (default: all, {','.join(BUNDLED)})")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("--base-python", default=None, metavar="PATH",
                        help="GPU tier: the runner image's system Python the venvs are built on "
                             "(default: the first python3 on PATH outside any virtual environment)")
    parser.add_argument("--attention-backend", default=PlanOptions.sglang_attention_backend,
                        help="GPU tier: SGLang's --attention-backend (fa3 on H100/H200; flashinfer on Ampere/Ada)")
    parser.add_argument("--sglang-port", type=int, default=0, help="GPU tier: SGLang's port (default: a free one)")
    parser.add_argument("--system-package", default=PlanOptions.system_package,
                        help="GPU tier: a package of the base Python's site the new venv must import")
    parser.add_argument("--variant", choices=["direct", "miles"], default=PlanOptions.variant,
                        help="GPU tier: direct (the adapter's rollout against SGLang it starts) or miles (Miles' "
                             "train.py in Miles' image, as Miles' own verifiers E2E)")
    parser.add_argument("--miles-root", default=PlanOptions.miles_root, help="GPU tier, miles: Miles' checkout")
    parser.add_argument("--megatron-path", default=PlanOptions.megatron_path,
                        help="GPU tier, miles: Megatron-LM's checkout")
    parser.add_argument("--miles-gpus", type=int, default=PlanOptions.miles_gpus,
                        help="GPU tier, miles: GPUs for colocated training and SGLang engines (Miles' E2E: 2)")
    parser.add_argument("--miles-abi", choices=["class", "legacy"], default=PlanOptions.miles_abi,
                        help="GPU tier, miles: the adapter's rollout ABI (class: VerifiersRolloutFn, as Miles' E2E "
                             "from #2695; legacy: generate_rollout with MILES_USE_LEGACY_ROLLOUT_V1=1)")
    args = parser.parse_args(argv)
    tier = args.tier
    if tier == "auto":
        tier = "gpu" if cuda_available() else "cpu"
        print(f"e2e: {tier.upper()} tier ({'CUDA found' if tier == 'gpu' else 'no CUDA: nvidia-smi absent'})")
    miles = tier == "gpu" and args.variant == "miles"
    default_dir = f"e2e-{tier}" + (("-miles" + ("-legacy" if args.miles_abi == "legacy" else "")) if miles else "")
    run_dir = Path(args.run_dir or REPO / "runs" / default_dir).absolute()
    notes: list[str] = []
    if tier == "gpu":
        try:
            options = _gpu_options(args, run_dir)
        except BaseInterpreterError as exc:
            print(f"e2e.runner: error: {exc}", file=sys.stderr)
            return 2
        steps, notes = gpu_plan(options), gpu_plan_notes(options)
    elif tier == "sglang-cpu":
        tasksets = tuple(t.strip() for t in args.tasksets.split(",") if t.strip())
        unknown = [t for t in tasksets if t not in BUNDLED]
        if unknown or not tasksets:
            print(f"e2e.runner: error: --tasksets {args.tasksets!r}: choose from {', '.join(BUNDLED)}",
                  file=sys.stderr)
            return 2
        steps = sglang_cpu_plan(str(run_dir), version=args.sglang_version, port=free_port(),
                                generation_b=args.generation_b, tasksets=tasksets)
        notes = [f"sglang {args.sglang_version} on CPU (e2e.sglang_cpu), deterministic mode, the tiny model"
                 + ("" if args.generation_b else "; generation A only (--no-generation-b)")
                 + ("" if tasksets == BUNDLED else f"; tasksets {', '.join(tasksets)} (--tasksets)")]
    else:
        from adapter.episodes.generations import installed

        steps = cpu_plan(str(run_dir), port=free_port(), envs_dir=str(installed().bundled_envs()))
    if args.dry_run:
        print_plan(steps, notes)
        return 0
    for note in notes:  # the run's log states the choices it depends on, too
        print(f"e2e: {note}", flush=True)
    return Runner(log_dir=run_dir / "logs").run(steps)


if __name__ == "__main__":
    sys.exit(main())
