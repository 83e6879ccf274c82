"""The E2E plans as data (snapshot-locked) and what the GPU tier's plan must contain (issue 15).

Regenerate the plan snapshots with `uv run pytest tests/test_e2e_plan.py --snapshot-update`.
The steps themselves run on CPU in tests/test_e2e_runner.py and tests/e2e/test_gpu_prechecks.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from e2e.plan import REPO, PlanOptions, cpu_plan, gpu_plan, gpu_plan_notes, sglang_cpu_plan
from e2e.runner import describe, main

# Fixed interpreter, port and run dir so the snapshot does not depend on the machine.
OPTIONS = PlanOptions(run_dir=str(REPO / "runs" / "e2e-gpu"), base_python="/usr/bin/python3", python_tag="python3.11",
                      base_python_how="the first python3 on PATH outside any venv: /usr/bin/python3")


def steps_by_name(options: PlanOptions = OPTIONS):
    return {s.name: s for s in gpu_plan(options)}


def test_gpu_plan_is_snapshot_locked(snapshot) -> None:
    notes = [note.replace(str(REPO), "<repo>") for note in gpu_plan_notes(OPTIONS)]
    assert {"notes": notes, "steps": describe(gpu_plan(OPTIONS))} == snapshot


def test_cpu_plan_is_snapshot_locked(snapshot) -> None:
    assert describe(cpu_plan(str(REPO / "runs" / "e2e-cpu"), python="python3.11")) == snapshot


@pytest.mark.parametrize(
    ("change", "expected"),
    [({"groups": 5}, "--groups 5"), ({"n": 8}, "--n 8"), ({"sglang_port": 31000}, "--port 31000"),
     ({"verifiers_tag": "v0.2.1"}, "refs/tags/v0.2.1"), ({"prime_version": "9.9.9"}, "prime==9.9.9"),
     ({"model_id": "Qwen/Qwen3-1.7B"}, "download Qwen/Qwen3-1.7B"),
     ({"sglang_attention_backend": "flashinfer"}, "--attention-backend flashinfer"),
     ({"sglang_min_cuda": "12.8"}, "--min-cuda 12.8"), ({"system_package": "numpy"}, "--expect-system-package numpy"),
     ({"base_python": "/opt/conda/bin/python3"}, "--python /opt/conda/bin/python3")],
)
def test_option_changes_show_up_in_the_plan(change, expected) -> None:
    default = " ".join(" ".join(s.argv) for s in gpu_plan(OPTIONS))
    changed = " ".join(" ".join(s.argv) for s in gpu_plan(dataclasses.replace(OPTIONS, **change)))
    assert expected in changed and expected not in default


def test_both_venvs_are_built_on_the_base_interpreter_and_the_system_site_is_probed() -> None:
    steps = steps_by_name()
    for venv in ("venv", "sglang-venv"):
        argv = steps[venv].argv
        assert argv[argv.index("--python") + 1] == "/usr/bin/python3" and "--system-site-packages" in argv
    names = list(steps)
    assert names.index("venv") < names.index("check-system-site") < names.index("install-locked")
    assert steps["check-system-site"].argv[-2:] == ("--expect-system-package", "torch")
    assert "base interpreter: /usr/bin/python3 (Python 3.11), the first python3 on PATH outside any venv" in (
        gpu_plan_notes(OPTIONS)[0])


def test_installs_come_from_the_lock_with_hashes() -> None:
    steps = steps_by_name()
    export = steps["export-lock"].argv
    assert export[:3] == ("uv", "export", "--frozen") and "--no-emit-project" in export
    locked = export[export.index("--output-file") + 1]
    for name in ("install-locked", "repin-locked"):
        assert steps[name].argv[-3:] == ("--require-hashes", "-r", locked)
    assert "--no-deps" in steps["install-adapter"].argv  # the project itself adds no unlocked dependency
    unlocked = [s.name for s in steps.values() if s.argv[:3] == ("uv", "pip", "install")
                and "--require-hashes" not in s.argv and "--no-deps" not in s.argv]
    assert unlocked == ["install-sglang"]  # pinned by version, in its own venv


def test_no_step_clones_or_copies_into_an_existing_dir() -> None:
    argvs = [s.argv for s in gpu_plan(OPTIONS)]
    assert not any(argv[:2] == ("git", "clone") for argv in argvs)
    assert not any(argv[:2] == ("cp", "-r") for argv in argvs)  # `cp -r a b` nests a/ into b/ on a rerun
    assert all("--clear" in argv for argv in argvs if argv[:2] == ("uv", "venv"))


def test_no_plan_value_refers_to_a_shell_variable() -> None:
    """The runner never expands `$VARS`: a plan that relied on it would get them literally."""
    for step in [*gpu_plan(OPTIONS), *cpu_plan(), *sglang_cpu_plan()]:
        values = [*step.argv, *(v for _, v in step.env), *step.path_prepend, step.cwd or ""]
        assert not any("$" in value for value in values), step.name
    assert steps_by_name()["install-env"].path_prepend == (f"{REPO}/runs/e2e-gpu/venv/bin",)


def test_the_driver_is_checked_before_anything_is_installed() -> None:
    steps = gpu_plan(OPTIONS)
    assert steps[0].name == "check-driver" and steps[0].gpu
    assert steps[0].argv[1:] == ("-m", "e2e.driver", "--sglang-version", "0.5.15", "--min-cuda", "13.0",
                                 "--min-glibc", "2.34")


def test_sglang_is_checked_live_then_the_rollouts_are_recorded() -> None:
    steps = steps_by_name()
    names = list(steps)
    assert names.index("wait-sglang") < names.index("check-sglang") < names.index("rollouts")
    check = steps["check-sglang"].argv
    assert check[2:] == ("adapter.cli", "check", "--sglang-url", "http://127.0.0.1:30000", "--tokenizer",
                         f"{REPO}/runs/e2e-gpu/models/Qwen/Qwen3-0.6B")
    rollouts = steps["rollouts"].argv
    assert rollouts[rollouts.index("--record") + 1] == f"{REPO}/runs/e2e-gpu/cassette"
    assert names.index("reset-outputs") < names.index("rollouts")  # a rerun records afresh
    assert "--attention-backend" in steps["start-sglang"].argv


def test_gpu_only_steps_are_marked() -> None:
    gpu = {s.name for s in gpu_plan(OPTIONS) if s.gpu}
    assert {"check-driver", "install-sglang", "start-sglang", "wait-sglang", "check-sglang", "rollouts"} <= gpu
    assert not gpu & {"venv", "check-system-site", "install-locked", "copy-env", "verify"}


def test_dry_run_shows_interpreter_locks_idempotence_proxies_check_and_record(capsys) -> None:
    assert main(["--tier", "gpu", "--dry-run", "--sglang-port", "31234"]) == 0
    out = capsys.readouterr().out
    for expected in ("base interpreter: ", "outside any venv", "check-system-site", "uv export --frozen",
                     "--require-hashes", "re-runnable", "git init", "cp -rT", "NO_PROXY", "timeout",
                     "check-driver", "--attention-backend fa3", "adapter.cli check --sglang-url http://127.0.0.1:31234",
                     "--record <repo>/runs/e2e-gpu/cassette", "{uv_tool_bin}/prime --plain env install code-golf-v1"):
        assert expected in out, expected


@pytest.mark.parametrize("plan_of", [lambda: gpu_plan(OPTIONS), lambda: sglang_cpu_plan()], ids=["gpu", "sglang-cpu"])
def test_every_adapter_command_of_the_gpu_plan_parses_with_the_real_cli(plan_of) -> None:
    """A flag the CLI does not know would fail the GPU run after SGLang's install and start."""
    from adapter.cli.entry import build_parser

    plan = plan_of()
    commands = [s for s in plan if s.argv[1:3] == ("-m", "adapter.cli")]
    assert {s.name for s in commands} >= {"check-sglang"}
    for step in commands:
        args = build_parser().parse_args(list(step.argv[3:]))
        assert callable(args.run), step.name


def test_the_sglang_cpu_rehearsal_runs_the_gpu_tiers_sglang_steps_without_cuda() -> None:
    from e2e.plan import sglang_cpu_plan

    steps = sglang_cpu_plan("/tmp/rehearsal", version="0.5.16", port=31999)
    names = [s.name for s in steps]
    gpu_names = {s.name for s in gpu_plan(PlanOptions(base_python="/usr/bin/python3", python_tag="python3.11"))}
    # the GPU tier's server steps, in the GPU tier's order; only CUDA-specific ones are not rehearsed
    shared = [n for n in names if n in gpu_names]
    assert shared == ["install-sglang", "reset-outputs", "start-sglang", "wait-sglang", "check-sglang",
                      "stop-sglang"]
    assert not any(s.gpu for s in steps) and steps[-1].always
    start = steps[names.index("start-sglang")]
    assert start.argv[2:] == ("e2e.sglang_cpu", "serve", "--version", "0.5.16", "--deterministic", "--port",
                              "31999", "--log", "/tmp/rehearsal/logs/sglang-server.log")
    rollouts = [s for s in steps if s.name.startswith("rollouts-")]
    assert {s.name for s in rollouts} == {f"rollouts-{p}{t}" for p in ("", "b-")
                                          for t in ("arith-v1", "group-v1", "echo-tool-v1")}
    assert all("--record" in s.argv and "--seed" not in s.argv for s in rollouts)  # the adapter must seed
    assert all(f"verify-{s.name.removeprefix('rollouts-')}" in names for s in rollouts)
