"""The E2E plans as data (snapshot-locked) and what the GPU tier's plan must contain (the mistakes
e2e/plans/gpu.py lists).

Regenerate the plan snapshots with `uv run pytest tests/e2e/test_e2e_plan.py --snapshot-update`.
The steps themselves run on CPU in tests/test_e2e_runner.py and tests/e2e/test_gpu_prechecks.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tomllib

import pytest

from e2e.plans.cpu import cpu_plan
from e2e.plans.gpu import gpu_plan, gpu_plan_notes
from e2e.plans.miles_gpu import MILES_CONFIG, MILES_CONSTRAINTS, MILES_IMAGE_PACKAGES
from e2e.plans.sglang_cpu import sglang_cpu_plan
from e2e.plans.steps import REPO, UV_TOOL_BIN, PlanOptions, base_interpreter
from e2e.runner import describe, main

# Fixed interpreter, port and run dir so the snapshot does not depend on the machine.
OPTIONS = PlanOptions(run_dir=str(REPO / "runs" / "e2e-gpu"), base_python="/usr/bin/python3", python_tag="python3.11",
                      base_python_how="the first python3 on PATH outside any venv: /usr/bin/python3")


# The Miles variant: Miles' own verifiers E2E in Miles' image, the adapter as its rollout function.
MILES = dataclasses.replace(OPTIONS, variant="miles", run_dir=str(REPO / "runs" / "e2e-gpu-miles"))
MILES_RUN = f"{REPO}/runs/e2e-gpu-miles"


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
    for step in [*gpu_plan(OPTIONS), *gpu_plan(MILES), *cpu_plan(), *sglang_cpu_plan()]:
        values = [*step.argv, *(v for _, v in step.env), *step.path_prepend, step.cwd or ""]
        assert not any("$" in value for value in values), step.name
    assert steps_by_name()["install-env"].path_prepend == (f"{REPO}/runs/e2e-gpu/venv/bin",)


def test_the_driver_is_checked_before_anything_is_installed() -> None:
    steps = gpu_plan(OPTIONS)
    assert steps[0].name == "check-driver" and steps[0].gpu
    assert steps[0].argv[1:] == ("-m", "e2e.gpu.driver", "--sglang-version", "0.5.15", "--min-cuda", "13.0",
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
    from e2e.plans.sglang_cpu import sglang_cpu_plan

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
    # generation A records every bundled taskset; B the multi-turn tool taskset (B_TASKSETS says why)
    assert {s.name for s in rollouts} == {*(f"rollouts-{t}" for t in ("arith-v1", "group-v1", "echo-tool-v1")),
                                          "rollouts-b-echo-tool-v1"}
    assert all("--record" in s.argv and "--seed" not in s.argv for s in rollouts)  # the adapter must seed
    assert all(f"verify-{s.name.removeprefix('rollouts-')}" in names for s in rollouts)


@pytest.mark.parametrize(("flags", "code", "rollouts"), [
    ([], 0, ["rollouts-arith-v1", "rollouts-group-v1", "rollouts-echo-tool-v1", "rollouts-b-echo-tool-v1"]),
    (["--no-generation-b", "--tasksets=echo-tool-v1"], 0, ["rollouts-echo-tool-v1"]),
    (["--tasksets", "arith-v1,nope-v1"], 2, []),
], ids=["all", "the-0516-lanes", "unknown-taskset"])
def test_the_rehearsal_records_the_tasksets_it_is_given_and_refuses_unknown_ones(flags, code, rollouts,
                                                                                 capsys) -> None:
    from e2e.runner import main as runner

    assert runner(["--tier", "sglang-cpu", "--dry-run", "--run-dir", "/tmp/rehearsal", *flags]) == code
    out, err = capsys.readouterr()
    assert [line.split()[1] for line in out.splitlines() if " rollouts-" in line] == rollouts
    assert ("--tasksets 'arith-v1,nope-v1': choose from arith-v1, group-v1, echo-tool-v1" in err) == (code == 2)


# ---- The Miles variant: Miles' own verifiers E2E, with the adapter as the rollout function.



def test_gpu_miles_plan_is_snapshot_locked(snapshot) -> None:
    notes = [note.replace(str(REPO), "<repo>") for note in gpu_plan_notes(MILES)]
    assert {"notes": notes, "steps": describe(gpu_plan(MILES))} == snapshot


def _train(steps=None):
    steps = steps or steps_by_name(MILES)
    argv = list(steps["miles-train"].argv)
    return argv, argv[argv.index("/root/miles/train.py") + 1:]


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_the_miles_train_step_is_the_launchers_command_and_environment(monkeypatch) -> None:
    """What `vf-sglang miles-command` prints for the same options is exactly the step (argv and env)."""
    import io
    import json
    import shlex
    from contextlib import redirect_stdout

    from adapter.cli.entry import main as cli
    from e2e.plans.miles_gpu import miles_launch

    step = steps_by_name(MILES)["miles-train"]
    launch = miles_launch(MILES, base=base_interpreter(MILES), run=MILES_RUN)
    assert list(step.argv) == launch.argv
    assert dict(step.env) == {**launch.env, "http_proxy": "", "https_proxy": "", "HTTP_PROXY": "", "HTTPS_PROXY": ""}
    (runtime,) = [a for a in launch.argv if a.startswith("--runtime-env-json=")]
    assert json.loads(runtime.split("=", 1)[1]) == {"env_vars": launch.workers_env}
    for name in ("MILES_USE_LEGACY_ROLLOUT_V1", "MILES_EXPERIMENTAL_ROLLOUT_REFACTOR", "VERIFIERS_CONFIG",
                 "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    _, miles_args = _train()
    miles_args = miles_args[miles_args.index("--router-disable-retries") + 1:]  # what the launcher adds itself
    extra = {k: v for k, v in launch.env.items() if k != "VERIFIERS_CONFIG"}
    extra["PYTHONPATH"] = os.pathsep.join(extra["PYTHONPATH"].split(os.pathsep)[:4])
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli(["miles-command", "--config", str(MILES_CONFIG), "--hf-checkpoint",
                    f"{MILES_RUN}/models/Qwen/Qwen3-0.6B", "--env-source-dir",
                    f"{MILES_RUN}/environments/code_golf_v1", "--extra-env-vars", json.dumps(extra),
                    "--miles-version", "main", "--train-script", "/root/miles/train.py", "--python", "python3",
                    "--ray-address", "http://127.0.0.1:8265", "--", *miles_args]) == 0
    printed = shlex.split(out.getvalue())
    start = printed.index("ray")
    assert dict(item.split("=", 1) for item in printed[:start]) == launch.env
    assert printed[start:] == launch.argv


@pytest.mark.parametrize(("abi", "entry", "selector"), [
    ("class", "adapter.miles.VerifiersRolloutFn", "0"),  # Miles' E2E from #2695 on (the default)
    ("legacy", "adapter.miles.generate_rollout", "1"),  # Miles' E2E before it
])
def test_the_miles_variant_runs_miles_e2e_flags_either_abi_and_taskset_only_config(abi, entry, selector) -> None:
    options = dataclasses.replace(MILES, miles_abi=abi)
    argv, args = _train(steps_by_name(options))
    assert argv[:4] == ["ray", "job", "submit", "--address=http://127.0.0.1:8265"]
    assert _flag(args, "--rollout-function-path") == entry
    assert "--disable-rollout-global-dataset" in args and "--colocate" in args
    for flag, value in {"--over-sampling-batch-size": "3", "--num-rollout": "1", "--global-batch-size": "12",
                        "--rollout-batch-size": "3", "--n-samples-per-prompt": "4", "--advantage-estimator": "grpo",
                        "--sglang-mem-fraction-static": "0.6", "--rollout-max-response-len": "512",
                        "--rollout-max-context-len": "2048", "--rollout-temperature": "0.8",
                        "--actor-num-gpus-per-node": "2", "--rollout-num-gpus-per-engine": "1",
                        "--sglang-tokenizer-path": "Qwen/Qwen3-0.6B", "--attention-backend": "flash",
                        "--dump-details": f"{MILES_RUN}/dump",
                        "--ref-load": f"{MILES_RUN}/models/Qwen/Qwen3-0.6B_torch_dist"}.items():
        assert _flag(args, flag) == value, flag
    # Miles-managed SGLang: Miles starts the engines and its router (no external engine, no router address)
    assert not any(a.startswith(("--sglang-router-ip", "--rollout-external", "--debug-rollout-only")) for a in args)
    env = dict(steps_by_name(options)["miles-train"].env)
    assert env["MILES_USE_LEGACY_ROLLOUT_V1"] == selector and env["VERIFIERS_CONFIG"] == str(MILES_CONFIG)
    assert env["PYTHONPATH"].split(os.pathsep) == [
        "/root/miles", "/root/Megatron-LM", f"{MILES_RUN}/venv/lib/python3.11/site-packages",
        f"{MILES_RUN}/environments/code_golf_v1", str(REPO)]
    assert tomllib.loads(MILES_CONFIG.read_text()) == {"taskset": {"id": "code-golf-v1"}}  # default harness
    assert not any("null" in a for s in gpu_plan(options) for a in s.argv)


def _namespace(args: list[str]) -> argparse.Namespace:
    """Miles' flags as its parser hands them over: `--disable-x` → x=False, a bare flag → True,
    numbers as numbers (only the adapter's fields matter: Settings.from_args reads only those)."""
    values: dict[str, object] = {}
    i = 0
    while i < len(args):
        name = args[i][2:].replace("-", "_")
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            raw = args[i + 1]
            try:
                values[name] = int(raw)
            except ValueError:
                try:
                    values[name] = float(raw)
                except ValueError:
                    values[name] = raw
            i += 2
        else:
            values[name.removeprefix("disable_")] = not name.startswith("disable_")
            i += 1
    return argparse.Namespace(**values)


def test_the_adapter_accepts_the_miles_variants_flags_before_any_gpu_runs() -> None:
    """Miles' E2E flags through the adapter's own settings and fail-fast rules, with code-golf's
    facts (3 tasks, group rewards): a refusal here would otherwise come after the checkpoint
    conversion and Miles' start on the GPU box."""
    from adapter.config.rules import EnvFacts, validate
    from adapter.config.settings import Settings

    _, args = _train()
    settings = Settings.from_args(_namespace(args))
    assert (settings.rollout_batch_size, settings.n_samples_per_prompt, settings.over_sampling_batch_size) == (3, 4, 3)
    assert settings.rollout_global_dataset is False and settings.sglang_tokenizer_path == "Qwen/Qwen3-0.6B"
    validate(settings, EnvFacts(task_count=3, has_group_reward=True))


def test_the_miles_variant_checks_the_image_then_installs_without_shadowing_it() -> None:
    steps = steps_by_name(MILES)
    names = list(steps)
    assert names[:2] == ["check-miles-image", "check-gpus"]
    image = steps["check-miles-image"].argv
    assert image[:3] == ("/usr/bin/python3", "-m", "e2e.gpu.miles_image") and "--sglang-version" in image
    assert _flag(list(image), "--sglang-version") == "0.5.16"
    assert names.index("venv") < names.index("check-system-site") < names.index("install-adapter") < names.index(
        "check-image-kept") < names.index("miles-train")
    install = steps["install-adapter"].argv
    assert install[1:4] == ("-m", "pip", "install") and _flag(list(install), "--constraint") == str(MILES_CONSTRAINTS)
    assert "uv" not in install and not any(s.argv[:3] == ("uv", "pip", "install") for s in steps.values())
    kept = steps["check-image-kept"].argv
    assert [kept[i + 1] for i, a in enumerate(kept) if a == "--expect-system-package"] == list(MILES_IMAGE_PACKAGES)
    assert "openai-agents<0.5" in MILES_CONSTRAINTS.read_text().splitlines()
    assert not any(s.argv[:1] == (f"{UV_TOOL_BIN}/prime",) for s in steps.values())  # prime would use uv


def test_the_miles_variant_dumps_what_its_verify_step_reads_and_stops_ray() -> None:
    steps = steps_by_name(MILES)
    dump = f"{MILES_RUN}/dump/rollout_data/0.pt"
    assert steps["miles-train"].produces == (dump, f"{MILES_RUN}/dump/train_data/0_0.pt")  # one training step ran
    verify = steps["verify-miles-dump"].argv
    assert verify[1:] == ("-m", "e2e.judges.verify", "--miles-dump", dump, "--env", "code-golf-v1", "--groups", "3",
                          "--n", "4")
    names = list(steps)
    assert names.index("reset-outputs") < names.index("miles-train")  # a rerun cannot verify an old dump
    assert steps["start-ray"].kind == "background" and "--block" in steps["start-ray"].argv
    assert steps["start-ray"].path_prepend == ("/usr/bin",)  # the job's `python3` is the image's
    assert steps["stop-ray"].kind == "stop" and steps["stop-ray"].always and names[-1] == "stop-ray"
    assert names.index("start-ray") < names.index("wait-ray") < names.index("miles-train")
    for name in ("start-ray", "miles-train"):
        assert {k: v for k, v in steps[name].env if "proxy" in k.lower() and k != "no_proxy"} == {
            "http_proxy": "", "https_proxy": "", "HTTP_PROXY": "", "HTTPS_PROXY": ""}


def test_the_miles_variants_gpu_steps_are_marked() -> None:
    gpu = {s.name for s in gpu_plan(MILES) if s.gpu}
    assert gpu == {"check-gpus", "convert-checkpoint", "miles-train"}


def test_dry_run_prints_the_miles_variant(capsys) -> None:
    assert main(["--tier", "gpu", "--variant", "miles", "--dry-run", "--base-python", "/usr/bin/python3"]) == 0
    out = capsys.readouterr().out
    for expected in ("variant: miles", "check-miles-image", "check-image-kept", "MILES_USE_LEGACY_ROLLOUT_V1=0",
                     "--rollout-function-path adapter.miles.VerifiersRolloutFn",
                     "ray job submit --address=http://127.0.0.1:8265", "--dump-details <repo>/runs/e2e-gpu-miles/dump",
                     "e2e.judges.verify --miles-dump <repo>/runs/e2e-gpu-miles/dump/rollout_data/0.pt"):
        assert expected in out, expected


def test_dry_run_prints_the_miles_variants_legacy_case_in_its_own_run_dir(capsys) -> None:
    assert main(["--tier", "gpu", "--variant", "miles", "--miles-abi", "legacy", "--dry-run",
                 "--base-python", "/usr/bin/python3"]) == 0
    out = capsys.readouterr().out
    for expected in ("MILES_USE_LEGACY_ROLLOUT_V1=1", "--rollout-function-path adapter.miles.generate_rollout",
                     "e2e.judges.verify --miles-dump <repo>/runs/e2e-gpu-miles-legacy/dump/rollout_data/0.pt"):
        assert expected in out, expected
