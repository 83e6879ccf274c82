"""One small executor for E2E plans: streamed, timestamped logs; stops at the first failure
with the step's name and log tail; cleanup steps always run; background processes are
tracked by pid (their own process group) and stopped by this runner only.

    python -m e2e.runner --tier gpu --dry-run      # print the plan a GPU runner executes
    python -m e2e.runner --tier auto               # GPU tier with CUDA, CPU tier otherwise

Arguments are argv lists (no shell). Two placeholders are resolved at run time, only when a
step uses them: `{uv_tool_bin}` (`uv tool dir --bin`) and `{tiny_model_dir}` (the cached
tiny model of the CPU tier). Env values may refer to `$VARS` of the runner's environment.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import httpx

from e2e.plan import REPO, PlanOptions, Step, cpu_plan, gpu_plan


class StepFailed(RuntimeError):
    def __init__(self, step: Step, reason: str, tail: str = "") -> None:
        super().__init__(f"step {step.name!r} failed: {reason}" + (f"\n--- log tail ---\n{tail}" if tail else ""))
        self.step = step


def _uv_tool_bin() -> str:
    return subprocess.run(["uv", "tool", "dir", "--bin"], check=True, capture_output=True, text=True).stdout.strip()


def _tiny_model_dir() -> str:
    from e2e.engine import build_tiny_model

    return str(build_tiny_model())


PLACEHOLDERS: dict[str, Callable[[], str]] = {"{uv_tool_bin}": _uv_tool_bin, "{tiny_model_dir}": _tiny_model_dir}


def describe(steps: Sequence[Step]) -> list[dict[str, object]]:
    """The plan as plain data, with the repository path shown as `<repo>`."""
    def show(text: str) -> str:
        return text.replace(str(REPO), "<repo>")

    return [{"name": s.name, "kind": s.kind, "argv": [show(a) for a in s.argv],
             "env": {k: show(v) for k, v in s.env}, "cwd": show(s.cwd) if s.cwd else None,
             "produces": [show(p) for p in s.produces],
             "always": s.always, "gpu": s.gpu} for s in steps]


@dataclass
class Runner:
    log_dir: Path
    out: TextIO = sys.stdout
    resolved: dict[str, str] = field(default_factory=dict)
    background: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

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
        env.update({k: os.path.expandvars(v) for k, v in step.env})
        return env

    def _run(self, step: Step) -> None:
        log_path = self.log_dir / f"{step.name}.log"
        tail: list[str] = []
        with log_path.open("w") as log, subprocess.Popen(
            self._argv(step), env=self._env(step), cwd=step.cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        ) as proc:
            deadline = time.monotonic() + step.timeout_s
            for raw in proc.stdout:  # type: ignore[union-attr]
                line = raw.decode(errors="replace").rstrip()
                log.write(line + "\n")
                tail = [*tail[-39:], line]
                self.log(step.name, line)
                if time.monotonic() > deadline:
                    proc.kill()
                    raise StepFailed(step, f"timed out after {step.timeout_s:.0f}s", "\n".join(tail))
            code = proc.wait()
        if code != 0:
            raise StepFailed(step, f"exit status {code}", "\n".join(tail))

    def _background(self, step: Step) -> None:
        log_path = self.log_dir / f"{step.name}.log"
        with log_path.open("wb") as log:
            self.background[step.name] = subprocess.Popen(
                self._argv(step), env=self._env(step), cwd=step.cwd, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        self.log(step.name, f"started pid {self.background[step.name].pid}, log {log_path}")

    def _wait_http(self, step: Step) -> None:
        url, deadline = step.argv[0], time.monotonic() + step.timeout_s
        while time.monotonic() < deadline:
            for name, proc in self.background.items():
                if proc.poll() is not None:
                    tail = (self.log_dir / f"{name}.log").read_text(errors="replace")[-4000:]
                    raise StepFailed(step, f"{name} exited with status {proc.returncode}", tail)
            try:
                if httpx.get(url, timeout=5.0).status_code == 200:
                    self.log(step.name, f"{url} is up")
                    return
            except httpx.TransportError:
                pass
            time.sleep(1.0)
        raise StepFailed(step, f"{url} did not answer within {step.timeout_s:.0f}s")

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
                    failure = exc
                    self.log(step.name, str(exc))
        finally:
            for name in list(self.background):
                self.stop(name)
        return 1 if failure else 0


def free_port() -> int:
    """A loopback port free right now, for the CPU tier's reference engine."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cuda_available() -> bool:
    return shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.runner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tier", choices=["gpu", "cpu", "auto"], default="auto")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("--trainer", choices=["none", "miles"], default="none")
    args = parser.parse_args(argv)
    tier = args.tier
    if tier == "auto":
        tier = "gpu" if cuda_available() else "cpu"
        print(f"e2e: {tier.upper()} tier ({'CUDA found' if tier == 'gpu' else 'no CUDA: nvidia-smi absent'})")
    run_dir = Path(args.run_dir or REPO / "runs" / f"e2e-{tier}").absolute()
    if tier == "gpu":
        steps = gpu_plan(PlanOptions(run_dir=str(run_dir), trainer=args.trainer))
    else:
        from adapter.generations import installed

        steps = cpu_plan(str(run_dir), port=free_port(), envs_dir=str(installed().bundled_envs()))
    if args.dry_run:
        for i, step in enumerate(describe(steps), 1):
            env = " ".join(f"{k}={v}" for k, v in step["env"].items())  # type: ignore[union-attr]
            print(f"{i:>2}. {step['name']} [{step['kind']}{', gpu' if step['gpu'] else ''}"
                  f"{', always' if step['always'] else ''}]" + (f" cwd={step['cwd']}" if step["cwd"] else ""))
            print(f"      {env + ' ' if env else ''}{' '.join(step['argv'])}")  # type: ignore[arg-type]
        return 0
    return Runner(log_dir=run_dir / "logs").run(steps)


if __name__ == "__main__":
    sys.exit(main())
