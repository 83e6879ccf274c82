"""`python -m e2e.miles_cpu {install,lane,lock}`: the miles lane's command line (e2e.miles_cpu.lane).

    install   build (or reuse) the Miles venv, the real-SGLang venv and the tiny model
    lane      install, then run every case inside `unshare --net` (loopback only) and check them
    lock      recompile requirements/miles-rl-0.0.2.txt from the .in (needs the package index)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from e2e.miles_cpu import lane
from e2e.miles_cpu.venv import ensure_miles_venv, requirements_in, requirements_txt

SGLANG_VERSION = "0.5.23"
HF_ALIAS = ("models--Qwen--Qwen3-0.6B", "snapshots")  # an HF-cache path that names the model


def install() -> dict[str, Any]:
    from adapter.reference.tiny_model import build_tiny_model
    from e2e.sglang_cpu.venv import ensure_venv

    started = time.monotonic()
    miles, sglang = ensure_miles_venv(), ensure_venv(SGLANG_VERSION)
    model = build_tiny_model(progress=False)
    for config in lane.CONFIGS:
        ready_harness(config)
    return {"miles_venv": str(miles.path), "sglang_venv": str(sglang.path), "model": str(model),
            "install_s": round(time.monotonic() - started, 1)}


def ready_harness(config: Path) -> None:
    """Load the lane's EnvConfig once here, where a package index may be reachable: the adapter's
    harness check (`adapter.episodes.harness_uv`) fills uv's cache with the harness program, so in
    the namespace, with no network, the adapter finds it cached and runs it offline by itself."""
    from adapter.config.env_config import load_env_config
    from adapter.episodes.bundled import add_env_sources, tasksets_for_config
    from adapter.episodes.generations import installed

    tasksets = tasksets_for_config(str(config))
    add_env_sources([tasksets] if tasksets is not None else [])
    installed().load(load_env_config(str(config)).data)


def checkpoint_alias(run_dir: Path, model_dir: Path) -> Path:
    """The tiny model under an HF-cache path that names Qwen/Qwen3-0.6B, as a user's cache does, so
    the renderer identity comes from the checkpoint path (one flag less for the legacy ABI, whose
    0.0.2 parser has no --renderer-model-name)."""
    alias = run_dir.joinpath(*HF_ALIAS, model_dir.name)
    alias.parent.mkdir(parents=True, exist_ok=True)
    if not alias.exists():
        alias.symlink_to(model_dir, target_is_directory=True)
    return alias


def real_sample_fields(venv: Path) -> list[str]:
    code = "import dataclasses, json; from miles.utils.types import Sample; " \
           "print(json.dumps([f.name for f in dataclasses.fields(Sample)]))"
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True,
                         timeout=300).stdout
    return list(json.loads(out.strip().splitlines()[-1]))


def table_problems(names: list[str]) -> list[str]:
    from conformance.miles_table import SAMPLE_TABLE_002, load_table

    table = [row["name"] for row in load_table(SAMPLE_TABLE_002)["sample"]["fields"]]
    if names == table:
        return []
    return [f"miles-rl 0.0.2's Sample fields {names} differ from {SAMPLE_TABLE_002.name}: {table}"]


@contextlib.contextmanager
def peak_memory() -> Iterator[dict[str, float]]:
    """The machine's used memory (MemTotal - MemAvailable) above its level at the start, sampled each second."""
    def used() -> float:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        return (int(info["MemTotal"].split()[0]) - int(info["MemAvailable"].split()[0])) / 2**20

    base, peak, stop = used(), {"peak_gib": 0.0}, threading.Event()

    def sample() -> None:
        while not stop.wait(1.0):
            peak["peak_gib"] = max(peak["peak_gib"], round(used() - base, 2))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def engine(checkpoint: Path, run_dir: Path) -> Iterator[tuple[str, str]]:
    """(url, weight version) of real SGLang on CPU, serving deterministically: with the adapter's
    per-rollout seeds, every run samples alike."""
    import httpx

    from e2e.sglang_cpu.server import serving

    with serving(SGLANG_VERSION, deterministic=True, model_dir=checkpoint, log_path=run_dir / "sglang.log") as running:
        info = httpx.get(f"{running.url}/get_model_info", timeout=30.0).json()
        yield running.url, str(info.get("weight_version", "default"))


@contextlib.contextmanager
def failing_worker(run_dir: Path, *, needed: bool) -> Iterator[str]:
    """A worker whose every /generate answers 503 (`benchmarks.stub`, counting calls per prompt),
    for the cases that put Miles' own router before it and the engine; "" when none needs it."""
    if not needed:
        yield ""
        return
    from e2e.router.smg import started, stub_engine

    with started(stub_engine(run_dir / "failing-worker.log", status=503)) as stub:
        yield stub.url


def inside(run_dir: Path, names: list[str]) -> int:
    from e2e.miles_cpu.services import loopback_up, ray_head

    loopback_up()
    paths = install()  # all cached by now: no network needed
    venv, model = Path(paths["miles_venv"]), Path(paths["model"])
    checkpoint = checkpoint_alias(run_dir, model)
    fields = real_sample_fields(venv)
    problems = table_problems(fields)
    cases = [c for c in lane.CASES if not names or c.name in names]
    results: list[lane.CaseResult] = []
    started = time.monotonic()
    # the engine first: SGLang on CPU sizes its KV cache from the memory free while it loads, and a
    # Ray head starting beside it takes that memory away mid-measurement
    with (peak_memory() as memory, engine(checkpoint, run_dir) as (url, version),
          failing_worker(run_dir, needed=any(c.router != "engine" for c in cases)) as failing_url,
          ray_head(venv, run_dir / "ray.log", dashboard=any(c.submit for c in cases)) as ray):
        for case in cases:
            print(f"miles lane: {case.name} ...", file=sys.stderr, flush=True)
            address = ray.dashboard if case.submit and ray.dashboard else ray.address
            results.append(lane.run_case(case, venv=venv, ray_address=address, engine_url=url,
                                         engine_version=version, checkpoint=checkpoint, model_dir=model,
                                         run_dir=run_dir, has_rollout_id="rollout_id" in fields,
                                         failing_url=failing_url))
    extra = {"miles": "miles-rl 0.0.2", "sglang": SGLANG_VERSION, "sample_fields": fields,
             "table_problems": problems, "cases_s": round(time.monotonic() - started, 1), **memory}
    lane.write_results(run_dir, results, extra)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    return 0 if results and all(r.ok for r in results) and not problems else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.miles_cpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="build or reuse the venvs and the tiny model")
    for name in ("lane", "inside"):
        cmd = sub.add_parser(name, help="run the lane" if name == "lane" else argparse.SUPPRESS)
        cmd.add_argument("--run-dir", type=Path, default=Path("runs/miles"))
        cmd.add_argument("--case", action="append", default=[], choices=[c.name for c in lane.CASES])
    sub.add_parser("lock", help="recompile the pinned requirements")
    args = parser.parse_args(argv)
    if args.command == "install":
        print(json.dumps(install(), indent=1))
        return 0
    if args.command == "lock":
        from e2e.sglang_cpu.errors import LockError
        from e2e.sglang_cpu.lock import PLATFORM, PYTHON
        from e2e.sglang_cpu.uvcmd import run_uv

        run_uv(["pip", "compile", "--quiet", requirements_in().name, "--output-file", requirements_txt().name,
                "--python-version", PYTHON, "--python-platform", PLATFORM,
                "--custom-compile-command", "python -m e2e.miles_cpu lock"], cwd=requirements_in().parent,
               error=LockError)
        return 0
    run_dir = args.run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    if args.command == "inside":
        return inside(run_dir, args.case)
    started = time.monotonic()
    probe = subprocess.run(["unshare", "--net", "--", "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        print(f"miles lane: cannot make a network namespace (`unshare --net`: {probe.stderr.strip()}): run the "
              "lane as root, or where unprivileged user namespaces are allowed; Ray binds every interface "
              "outside one", file=sys.stderr)
        return 2
    print(json.dumps(install()), file=sys.stderr)
    cases = [a for name in args.case for a in ("--case", name)]
    code = subprocess.run(["unshare", "--net", "--", sys.executable, "-m", "e2e.miles_cpu", "inside",
                           "--run-dir", str(run_dir), *cases], check=False).returncode
    print(f"miles lane: {time.monotonic() - started:.0f} s in all, exit {code}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
