"""The lanes, the claims each proves (one line each), the paths that touch each, and CI's stages.

    LANES     name → Lane(envs, claims, paths): a lane is one `tox -e ENV[,ENV…]` run
    STAGES    what `.ci/run` runs: each stage is tracks meant to overlap, each track lanes run one
              after another; CI joins the i-th tracks of every stage into its track i (`tracks_of`)
              and runs the tracks side by side; a failed lane ends every track at its next lane
    NOT_IN_CI tox envs CI does not run, each with why (a developer still can: `tox -e ENV`)
    MOVED     claims that moved between lanes, and where each now lives (docs/ci.md prints them)
    partners(lane)  the tracks CI runs beside a lane (what `tools.ci stress --against pair` runs)
    tracks_of(stages)  the stages as CI runs them: track i is the i-th track of every stage

A claim is proved in one lane only; a lane that repeats another's proof says so in its claims
and why (a different SGLang version, a different Verifiers generation). Paths are fnmatch
globs against repository-relative paths (`*` crosses `/`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MATRIX = ("contract-vf020", "contract-vf020-r018", "contract-vf020-sglang-openai", "contract-vf021",
          "contract-vf030", "contract-vf031", "contract-vf040", "contract-vf041dev")
PYTHON = ("adapter/*.py", "conformance/*.py", "e2e/*.py", "tests/*.py", "fixtures/*", "benchmarks/*.py",
          "tools/*.py")
PINS = ("uv.lock", "pyproject.toml", "tox.ini", "e2e/requirements-contract.txt", "e2e/pins/*")
ENGINE_LEG = ("adapter/engine/*", "adapter/wire/*", "adapter/bridge/*", "e2e/sglang_cpu/*", "e2e/plans/steps.py",
              "e2e/plans/sglang_cpu.py", "e2e/runner.py", "e2e/judges/*", "tests/real_sglang/*", "tests/sglang_cpu/*",
              "adapter/reference/tiny_*", "e2e/tiny/*", "fixtures/envs/*")


@dataclass(frozen=True)
class Lane:
    envs: tuple[str, ...]
    claims: tuple[str, ...]
    paths: tuple[str, ...]
    summary: str = ""  # one line: what the lane proves (README's and e2e/README.md's tables)
    harness: str = ""  # where its harness lives under e2e/ (e2e/README.md's table)


LANES: dict[str, Lane] = {
    "fast": Lane(("fast",), (
        "unit, wire snapshots, the fault suite on both bridge doors, contract checks on the locked verifiers 0.2.0 + "
        "renderers 0.1.10 and real episodes of the bundled tasksets on a scripted engine (the README's test command)",
        "a rollout function over 20 Miles train calls (generation A): one engine pool, one bridge client, flat RSS, "
        "file descriptors, threads and child processes",
        "one owner of a rollout function's lifetime: each engine session closed exactly once in one vf-sglang "
        "rollout and over one Miles run (counted), its zygotes ended with it; a closed rollout function stays "
        "closed, a second loop is refused while the first runs, a call in flight is cancelled before the close",
        "Miles' start-up order through the class ABI on real episodes: load(-1) is a fresh start, a resume from "
        "--load is exact, --load without the adapter's state starts with a warning, a corrupt state is a typed error",
        "the pre-forked harness runtime (generation A, the default): a program sees and reports what Verifiers' "
        "subprocess runtime gives it; a hang killed with its group, nothing left behind, a dead zygote restarted, "
        "200 runs flat (identical samples under both runtimes: the matrix, contract-vf020 holding this lane's pair)",
        "an interrupted run leaves no process behind under either harness runtime: vf-sglang rollout ended by "
        "SIGTERM or Ctrl-C exits within seconds (its episodes cancelled), by SIGKILL its reaper ends what it left; a "
        "Miles process (class and legacy ABIs) ended mid-call by SIGTERM or SIGINT likewise",
        "the GPU plans' steps as data (snapshots); their CPU-testable steps twice on one run dir (uv's bytecode "
        "compile left out there: the plan's --compile-bytecode is locked by its snapshot)",
    ), PYTHON + PINS + ("adapter/*",),
        summary=('unit, wire snapshots, fault suite, contract checks and real episodes on a scripted engine; the GPU '
                 'plans as data and their CPU-testable steps'),
        harness="`plans/`, `runner.py`, `gpu/` (the GPU plans' steps, rehearsed)"),
    "lint": Lane(("lint",), ("ruff on every code folder; mypy strict on adapter/",), (*PYTHON, "pyproject.toml"),
        summary='ruff; mypy strict on `adapter/`',
        harness='none (`tests/house/`)'),
    "lane-isolation": Lane(("lane-isolation",), (
        "a lane never takes over the checkout's .venv (tox lint, then uv run, twice, in a copy)",
    ), ("tox.ini", "pyproject.toml", "uv.lock", "tests/house/test_lane_isolation.py"),
        summary="a lane never takes over the checkout's `.venv`",
        harness='none (`tests/house/test_lane_isolation.py`)'),
    "wheel": Lane(("wheel",), (
        "the wheel ships the product alone (adapter, conformance; no e2e); installed with its demo extra in a "
        "clean venv outside the checkout: versions, compat, bundled data, miles-command, one demo group",
    ), ("pyproject.toml", "uv.lock", ".ci/wheel-check", "adapter/*"),
        summary=('the built wheel holds `adapter` and `conformance` alone, registers no pytest plugin; installed '
                 'outside the checkout, it runs the demo'),
        harness='none (`.ci/wheel-check`)'),
    "sglang-schema": Lane(("sglang-schema",), (
        "every /generate payload and engine output against sglang 0.5.15, 0.5.16 and 0.5.23's own classes",
    ), ("adapter/wire/*", "adapter/engine/*", "conformance/*", "adapter/reference/*", "tests/conformance/*"),
        summary="every payload against SGLang 0.5.15, 0.5.16 and 0.5.23's own classes",
        harness='none (`conformance/`)'),
    "e2e": Lane(("e2e",), (
        "the reference engine's tests; the CPU tier (reference engine, bundled tasksets) verified by "
        "e2e/judges/verify.py",
        "Miles main and each open Miles PR head's own files (fixtures/miles_next) accept a multi-turn tool sample "
        "(validate, to_dict/from_dict, the log-prob guard), its weight-version spans, and the adapter's class",
    ), ("e2e/*", "adapter/*", "tests/e2e/*", "tests/reference/*", "tests/miles/*", "conformance/miles_next.py",
        "fixtures/*", *PINS),
        summary="the reference engine; the CPU tier verified (the GPU tier on CUDA); Miles' open PRs' own files",
        harness=('`runner.py` + `plans/cpu.py` (`plans/gpu.py` on CUDA), `judges/verify.py`; the reference engine is '
                 '`adapter/reference/`')),
    "matrix": Lane(MATRIX, (
        "the contract suite and one real episode group inside each supported published verifiers/renderers pair",
        "the pre-forked harness runtime in each cell, plugged in as that release allows (make_runtime on 0.2.x-0.4.0, "
        "a custom runtime backend on 0.4.1.dev86): identical samples under both runtimes (arith-v1, echo-tool-v1 "
        "with its tool server forked too, group-v1)",
        "contract-vf040: a rollout function over 20 Miles train calls on generation B: one engine pool, one served "
        "bridge, flat RSS, file descriptors, threads and child processes",
        "each generation-B cell: a group-reward env asked for another n over 3 Miles calls is served and closed by "
        "the lifetime's holder task (no cross-task exit), leaving no server, thread or process and flat fds",
    ), ("adapter/*", "conformance/*", "tests/contract/*", "fixtures/*", *PINS),
        summary='the contract suite and one real episode group inside each supported verifiers/renderers pair',
        harness='`requirements-contract.txt`, `pins/`'),
    "canary": Lane(("canary",), (
        "the newest published verifiers, renderers, openai, transformers, sglang and smg judged (the newest 0.3.x "
        "too, with unbounded openai and the newest httpx2 below the gate's known break); a planted incompatible "
        "renderers must fail it; a cell whose newest set is exactly a matrix cell's pins is judged by that cell, "
        "beside it in the same run (the tests' own tools, hypothesis, held at those pins in every cell)",
    ), ("tools/canary/*", "tests/canary/*", "adapter/versions/*", *PINS),
        summary='the newest published releases judged the day they appear',
        harness='none here: `tools/canary/` (resolution, cells, report, `bump`, the gate rules)'),
    "sglang-cpu": Lane(("sglang-cpu",), (
        "real SGLang 0.5.23 on CPU: the GPU tier's SGLang steps (check, recorded rollouts of generation A's "
        "bundled tasksets and generation B's multi-turn tool taskset, tool turns verified against the recording), "
        "abort, radix cache, weight updates, seeds",
        "the lane's two servers behind smg: consistent hashing keeps a trace's turns on its worker and hits the "
        "prefix cache more",
    ), (*ENGINE_LEG, "e2e/router/cache.py", "tests/real_sglang/*", "uv.lock"),
        summary=("real SGLang 0.5.23 on CPU: rollouts, tool turns, abort, cache, weights, seeds; smg's routing and "
                 "prefix cache"),
        harness='`sglang_cpu/`, `plans/sglang_cpu.py`, `judges/`, `router/cache.py`'),
    "sglang-cpu-0516": Lane(("sglang-cpu-0516",), (
        "real SGLang 0.5.16 (Miles' image pin): what differs between SGLang versions — check's live conformance "
        "checks, generation A's recorded multi-turn tool rollouts, abort, radix cache, weight updates, seeds",
        "Verifiers' default harness (bash + edit) on real SGLang; serving's lifecycle (one lane suffices: the same "
        "on every SGLang version; here, beside the 0.5.23 lane's longer run)",
    ), ENGINE_LEG,
        summary='real SGLang 0.5.16 on CPU: what differs between SGLang versions',
        harness='`sglang_cpu/`, `plans/sglang_cpu.py`, `judges/`'),
    "router": Lane(("router",), (
        "the real router (smg) before two reference engines: check, routed multi-turn rollouts, a killed worker, "
        "the retry budget, abort, the Miles binding, load",
    ), ("adapter/engine/*", "adapter/bridge/*", "adapter/cli/*", "e2e/router/smg.py", "tests/router/*",
        "adapter/reference/*", "tox.ini"),
        summary='the real router (smg) before two engines: routing, a killed worker, retries, abort',
        harness='`router/smg.py` (smg and engines as processes)'),
    "rl-cpu": Lane(("rl-cpu",), (
        "the adapter's samples teach a tool call through real SGLang 0.5.23: reward ≤ 0.35 at step 0 → ≥ 0.8 at "
        "step 4, mismatch KL ≤ 1e-3 (tool turns too), one weight version per turn",
        "the lr-0 control on the same seeds stays flat (step 0 against step 4: it runs step 4 only)",
    ), ("e2e/rl_cpu/*", "tests/rl_cpu/*", "adapter/miles/*", "adapter/samples/conversion.py",
        "adapter/reference/tiny_*", "e2e/tiny/*", "e2e/sglang_cpu/*", "uv.lock"),
        summary="the adapter's samples teach a tool call through real SGLang",
        harness='`rl_cpu/` (the loop, trainer, checks, its tasksets), `tiny/`'),
    "miles": Lane(("miles",), (
        "the published Miles (miles-rl 0.0.2) runs the adapter as miles-command prints it, against real SGLang "
        "0.5.23, class and legacy ABIs, one case through the printed `ray job submit` against the lane's Ray "
        "dashboard; a planted short loss mask is refused by Miles",
        "multi-turn tool samples (echo-tool-v1 on real SGLang) through Miles' conversion, dump and logging: masked "
        "tool responses between model turns, log-probs on model tokens only, one weight version per model turn; "
        "e2e.judges.verify --miles-dump on real Miles' dump",
        "Miles' own router (sglang_router, as Miles launches it) before real SGLang and a failing worker: "
        "≤ 3 engine calls per failing model turn, counted at the worker",
        "Miles #1845's start-up order (load(start_rollout_id - 1) on every start, save at every checkpoint, "
        "passed on to the class): a fresh run with --save trains; a new process with --load at rollout 1 "
        "draws exactly what the uninterrupted run drew; --load without the adapter's state starts, with its warning",
    ), ("adapter/miles/*", "e2e/miles_cpu/*", "tests/miles_cpu/*",
        "adapter/samples/sample_type.py", "adapter/samples/conversion.py", "adapter/samples/weight_spans.py",
        "adapter/bridge/stats.py", "e2e/judges/verify.py", "e2e/sglang_cpu/*", "benchmarks/stub.py",
        "e2e/router/smg.py"),
        summary='the published Miles runs the printed command: tool samples, its router, `ray job submit`',
        harness='`miles_cpu/` (the Miles venv, driver, stand-in actor, services, checks), `judges/verify.py`'),
}

# Each stage: tracks meant to overlap; each track: lanes one after another. CI runs track i of every
# stage, in order, as one track (`tracks_of`): no lane waits for the other track to end its stage
# (with stage barriers, the run of 2026-12-06 left 105 s of stage 3 and 205 s of stage 4 to one
# lane, and rl-cpu ran alone for 410 s at 1.7 cores). The first track's output streams; the others'
# is printed at the end. Most lanes keep about one core busy (docs/ci.md's CPU column), so two
# tracks fill the machine's two; the tracks' sums are balanced on docs/ci.md's walls. SGLang lanes
# may overlap: the CPU servers start with --mem-fraction-static 0.3 (e2e/sglang_cpu/server.py says
# why). rl-cpu's claims are seeded and deterministic (a deterministic server, fixed seeds), so it
# runs beside the miles lane's tail instead of alone.
STAGES: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("fast",), ("lint", "lane-isolation")),
    (("e2e", "canary", "wheel", "sglang-schema"), ("matrix",)),
    (("sglang-cpu",), ("sglang-cpu-0516",)),
    (("miles",), ("router", "rl-cpu")),
)

NOT_IN_CI: dict[str, str] = {
    "e2e-gpu": "needs CUDA: the GPU tier runs on GPU runners (its plan's CPU-testable steps run in fast)",
    "e2e-vf040": "the CPU tier on verifiers 0.4.0 (generation B) proved less than what now runs: sglang-cpu "
                 "records and verifies generation B's rollouts on real SGLang 0.5.23 with the same "
                 "e2e/judges/verify.py, and contract-vf040 runs a real episode group on 0.4.0",
}

# What a CI run resolves against the package index, and how: each is pinned, or resolved fresh, so
# a green run on a machine with a warm uv cache is green on a fresh one (docs/ci.md prints this).
RESOLVED: tuple[tuple[str, str], ...] = (
    ("the default lanes (fast, lint, e2e, sglang-schema, router, rl-cpu, miles, sglang-cpu*)",
     "pinned: `uv.lock`, installed exactly (tox-uv's uv-venv-lock-runner)"),
    ("the matrix cells (`contract-vf*`)",
     "pinned: each installs under `e2e/pins/<cell>.txt`, every transitive package "
     "(`python -m tools.canary pins` writes them; a test keeps them equal to tox.ini's pairs and clear of "
     "the gate's known breaks)"),
    ("SGLang's and Miles' venvs on CPU", "pinned: `e2e/sglang_cpu/requirements/sglang-<V>.txt`, "
     "`e2e/miles_cpu/requirements/`; generation B's rollout venv under `e2e/pins/contract-vf040.txt`"),
    ("each harness program's uv script environment",
     "pinned: held to its lane's versions (`adapter.episodes.harness_pins`: the program carries "
     "`[tool.uv] constraint-dependencies`, and Verifiers keys its environment by the program's digest); a "
     "date-pinned harness (`UV_EXCLUDE_NEWER`) resolves as of its date"),
    ("the canary", "fresh: the newest releases on the index, on purpose (uv revalidates the index's "
     "answers: PyPI's simple pages may be cached 10 minutes)"),
)

MOVED: tuple[tuple[str, str], ...] = (
    ("the CPU tier on verifiers 0.4.0 (generation B), verified (e2e-vf040)",
     "sglang-cpu: generation B's recorded rollouts on real SGLang, verified by the same e2e/judges/verify.py; "
     "contract-vf040: a real episode group on 0.4.0 (e2e-vf040 stays a tox env, out of CI)"),
    ("generation B's recorded rollouts on SGLang 0.5.16",
     "sglang-cpu (0.5.23) only: generation B differs on the adapter's side, not the engine's; the engine "
     "wire both generations send is the one 0.5.16 is checked on (check, generation A's rollouts)"),
    ("generation B's recorded single-turn rollouts on real SGLang (arith-v1, group-v1)",
     "sglang-cpu records B's multi-turn tool taskset (echo-tool-v1), whose episodes make every kind of engine "
     "call the single-turn ones make and more; B's single-turn rewards and group rewards are judged in every B "
     "matrix cell (tests/contract); B differs from A before the bridge, which builds SGLang's /generate with the "
     "same code for both"),
    ("the single-turn tasksets' recorded rollouts on SGLang 0.5.16 (arith-v1, group-v1)",
     "sglang-cpu-0516 records the multi-turn tool taskset alone (a first turn is what a single-turn episode "
     "sends); 0.5.23's lane records all three"),
    ("the canary's cells whose newest set is exactly a matrix cell's pins (run twice before)",
     "matrix: the canary installs each cell, compares what it installed with the matrix cells' pins and leaves a "
     "cell with exactly one of them to that matrix cell, which runs the same tests/contract on the same packages "
     "in the same CI run (on 2026-12-06 all three: newest = contract-vf040, generation-b-0.3 = contract-vf031, "
     "generation-a = contract-vf021, 112-123 packages each); a release newer than the pins makes the canary run "
     "its cell itself, and `tox -e canary` alone runs every cell"),
    ("the lr-0 control's step 0 (run a second time before)",
     "rl-cpu: the learning run's step 0 is the control's step 0 (the same version-0 weights and seeds on a "
     "deterministic server: the same samples; the same rewards in all 8 runs docs/rl-cpu.md recorded, the KL "
     "apart only by the trainer's float noise, ≤ 1.3e-13), so the control runs its last step alone"),
    ("the lr-0 control's middle steps",
     "dropped: the control's claim is its first and last windows; KL and weight versions are judged on every "
     "learning step and on the control steps that run"),
    ("the reward checks' two-step windows (steps 0-1 against 4-5 of 6; the control's steps 1, 4, 5)",
     "rl-cpu: one-step windows, step 0 against step 4 of 5 (each step is every task 4 times; the run is "
     "deterministic, so a second step per window averaged no noise between runs: the 3 stress runs and the CI run of "
     "2026-12-06 had the same step rewards, 0.188, 0.250, 0.688, 0.875, 1.000, 1.000); the control runs step 4 "
     "alone"),
    ("tests/rl_cpu, tests/miles_cpu and tests/canary's pure checks (run twice before)",
     "fast only: rl-cpu runs just the tests that need torch or matplotlib, canary just the planted release "
     "(it needs the package index), miles none"),
    ("a tool's reward needs the tool to really run (proved twice in fast before)",
     "tests/contract only (fast and every matrix cell), which also checks the tool response is in the sample "
     "unmasked; the copy in tests/rollout/test_episodes.py is gone"),
    ("≤ 3 engine calls per failing model turn; real episodes pass Miles' checks in eval",
     "fast, on arith-mini-v1 (tests only: 2 of arith-v1's 12 tasks): one harness process per eval trace, "
     "so 12 → 2 traces (61 → 17 s of CPU); every trace is judged, as before"),
    ("the class ABI through real Miles on the reference engine (miles lane: reference-class)",
     "dropped as a Miles case: the class ABI through real Miles runs on real SGLang (sglang-class-echo-tool); the "
     "reference engine's /health_generate and the /get_server_info fields Miles compares are locked in e2e "
     "(tests/reference/test_reference_engine.py); its Miles binding runs in router "
     "(tests/router/test_miles_binding.py)"),
    ("the legacy function on real SGLang through real Miles, the driver run directly (sglang-legacy)",
     "miles: sglang-legacy-job-submit-miles-router (the same case, launched by the printed `ray job submit`, "
     "behind Miles' own router); the class case runs its driver directly"),
    ("the legacy function through `ray job submit` and behind Miles' router (two cases, two Miles drivers before)",
     "miles: one case, sglang-legacy-job-submit-miles-router: the job's printed form and the router Miles "
     "starts inside the job are each a property of the launch, judged on the same run (a Miles driver, its Ray "
     "workers and episodes cost the lane ~70 s)"),
    ("the GPU plan's installs compile bytecode (new), rehearsed on CPU",
     "sglang-cpu: its SGLang venv and generation B's venv-vf040 install with --compile-bytecode; the fast "
     "lane's rehearsal of the GPU steps installs without it (35-45 s a time) and the snapshot locks the flag"),
)


def lane_order() -> list[str]:
    """Every lane, in the order CI runs them."""
    return [lane for stage in STAGES for track in stage for lane in track]


def partners(lane: str) -> tuple[tuple[str, ...], ...]:
    """The tracks CI runs beside `lane`: the other tracks of its stage (none for a lane run alone)."""
    for stage in STAGES:
        for index, track in enumerate(stage):
            if lane in track:
                return stage[:index] + stage[index + 1:]
    raise KeyError(f"{lane} runs in no stage")


def tracks_of(stages: Sequence[Sequence[Sequence[str]]] = ()) -> list[list[str]]:
    """CI's stages as the tracks they run on: track i is the i-th track of every stage, in stage
    order. A stage says which lanes CI means to overlap (what `stress --against pair` runs); no lane
    waits for the other track's stage to end, so a core never idles behind a stage's longest lane."""
    stages = stages or STAGES
    width = max(len(stage) for stage in stages)
    return [[lane for stage in stages if i < len(stage) for lane in stage[i]] for i in range(width)]
