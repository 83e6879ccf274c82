"""The GPU plan's Miles variant (docs/miles.md, "The GPU plan") rehearsed on CPU: every step that needs
neither a GPU nor Miles' real image runs for real through `e2e.runner` against a stand-in image, and each step's
`produces` is checked by the runner.

The stand-in image is a non-venv interpreter (tests/gpu_fakes.py) whose system site holds stand-ins
for Miles main (`miles.utils.environ.use_legacy_rollout_v1`, `model_args_utils.load_model_args`),
SGLang 0.5.16, ray and pip, and — through a `.pth` line — this project's own environment for the real
torch, transformers and openai (so Miles' dump is loaded by the real `torch.load`). Left for the GPU
box: check-gpus, install-adapter (pip from PyPI into Miles' image), download-model, convert-checkpoint,
start-ray/wait-ray/stop-ray (Ray is not installed here) and miles-train; the train step's `produces`
are rehearsed by a stand-in that writes Miles' dump (a good and a bad one) and one that writes none.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from e2e.plans.gpu import gpu_plan
from e2e.plans.miles_gpu import MILES_MODEL_ARGS
from e2e.plans.steps import PlanOptions, Step
from e2e.runner import Runner
from tests.e2e.test_gpu_prechecks import TAG, _local_verifiers_repo
from tests.e2e.test_verify import _group_of_three, miles_samples, save_miles_dump
from tests.gpu_fakes import fake_system_python

# The stand-in image's torch is this environment's: the e2e lane's (the demo group), not the fast lane's.
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                                  reason="needs torch (the demo group: uv sync, tox -e e2e)")]

MODEL_ARGS = " ".join(MILES_MODEL_ARGS["qwen3-0.6B"])
ENVIRON_MAIN = "def use_legacy_rollout_v1():\n    return False\n"
ENVIRON_002 = "def enable_experimental_rollout_refactor():\n    return False\n"


def write_miles_stand_ins(site: Path, *, sglang: str = "0.5.16", environ: str = ENVIRON_MAIN,
                          model_args: str = MODEL_ARGS) -> None:
    """Miles main, SGLang, ray and pip as the image's site holds them (only what the checks read)."""
    files = {
        "sglang/__init__.py": f"__version__ = {sglang!r}\n",
        "ray.py": "__version__ = '2.49.0'\n",
        "pip.py": "__version__ = '25.0'\n",
        "miles/__init__.py": "",
        "miles/utils/__init__.py": "",
        "miles/utils/environ.py": environ,
        "miles/utils/external_utils/__init__.py": "",
        "miles/utils/external_utils/model_args_utils.py":
            f"def load_model_args(model_type):\n    assert model_type == 'qwen3-0.6B', model_type\n"
            f"    return {model_args + ' '!r}\n",
    }
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)


def miles_checkout(root: Path) -> tuple[Path, Path]:
    miles, megatron = root / "miles", root / "Megatron-LM"
    for path in (miles / "train.py", miles / "tools" / "convert_hf_to_torch_dist.py", megatron / "megatron" / "core"
                 / "__init__.py"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    return miles, megatron


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(python, miles root, megatron path) of the stand-in image."""
    root = tmp_path_factory.mktemp("miles-image")
    python = fake_system_python(root / "python", "fake_system_marker")
    site = Path(subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                               capture_output=True, text=True).stdout.strip())
    write_miles_stand_ins(site)
    # The image's torch, transformers and openai: this project's own (real, CPU) ones.
    (site / "image-stack.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    miles, megatron = miles_checkout(root)
    return python, miles, megatron


def options(tmp_path: Path, image: tuple[Path, Path, Path], **changes) -> PlanOptions:
    python, miles, megatron = image
    return PlanOptions(run_dir=str(tmp_path / "run"), base_python=str(python), python_tag=TAG, variant="miles",
                       miles_root=str(miles), megatron_path=str(megatron), **changes)


def run(steps: list[Step], log_dir: Path) -> tuple[int, str]:
    out = io.StringIO()
    return Runner(log_dir=log_dir, out=out).run(steps), out.getvalue()


REHEARSED = ["check-miles-image", "venv", "check-system-site", "check-image-kept", "init-verifiers",
             "fetch-verifiers", "checkout-verifiers", "environments-dir", "copy-env", "reset-outputs"]


def test_the_cpu_testable_miles_steps_pass_twice_and_produce_what_they_declare(tmp_path: Path, image) -> None:
    opts = options(tmp_path, image, verifiers_repo=_local_verifiers_repo(tmp_path / "verifiers-src"))
    steps = {s.name: s for s in gpu_plan(opts)}
    assert not any(steps[name].gpu for name in REHEARSED)
    for attempt in (1, 2):
        code, text = run([steps[name] for name in REHEARSED], tmp_path / f"attempt-{attempt}")
        assert code == 0, f"attempt {attempt}:\n{text[-4000:]}"
        assert "sglang 0.5.16" in text and "model arguments for qwen3-0.6B match the plan's" in text
        assert "torch " in text and "imports from the system site" in text
    for name in REHEARSED:
        for path in steps[name].produces:
            assert Path(path).exists(), (name, path)
    assert (tmp_path / "run" / "environments" / "code_golf_v1" / "pyproject.toml").is_file()


def test_the_verify_step_reads_what_the_train_step_produces(tmp_path: Path, image) -> None:
    """The train step's stand-in writes Miles' dump where `miles-train` declares it; the plan's own
    verify step (run by the stand-in image's venv, real torch) passes it, fails a bad one naming the
    breakage, and a train step that writes nothing fails itself, naming the missing dump."""
    opts = options(tmp_path, image)
    steps = {s.name: s for s in gpu_plan(opts)}
    assert run([steps["venv"]], tmp_path / "logs-venv")[0] == 0
    train = steps["miles-train"]
    dump, train_data = (Path(p) for p in train.produces)

    def stand_in(samples: list[dict] | None) -> Step:
        if samples is not None:
            save_miles_dump(tmp_path / "staged.pt", samples)
        write = ("import pathlib, shutil, sys; [pathlib.Path(p).parent.mkdir(parents=True, exist_ok=True) "
                 "for p in sys.argv[2:]]; [shutil.copy(sys.argv[1], p) for p in sys.argv[2:]]")
        argv = (sys.executable, "-c", write, str(tmp_path / "staged.pt"), str(dump), str(train_data)) \
            if samples is not None else (sys.executable, "-c", "pass")
        return dataclasses.replace(train, argv=argv, env=(), path_prepend=(), gpu=False)

    cases = [(miles_samples(), 0, "verified 12 samples of code-golf-v1 (3 groups × 4) in Miles' dump"),
             (_bad(), 1, "group_index counts {0: 4, 1: 3, 2: 5}, expected {0: 4, 1: 4, 2: 4}")]
    for samples, expected, message in cases:
        code, text = run([steps["reset-outputs"], stand_in(samples), steps["verify-miles-dump"]],
                         tmp_path / f"logs-{expected}")
        assert code == expected and message in text, text[-3000:]
    code, text = run([steps["reset-outputs"], stand_in(None), steps["verify-miles-dump"]], tmp_path / "logs-none")
    assert code == 1 and f"step 'miles-train' failed: succeeded but did not produce {dump}, {train_data}" in text
    assert "FAILED at step 'miles-train'" in text


def _bad() -> list[dict]:
    samples = miles_samples()
    _group_of_three(samples)
    return samples


IMAGE_BREAKAGES = {
    "other_sglang": ({"sglang": "0.5.23"}, "sglang is '0.5.23'"),
    "miles_0_0_2": ({"environ": ENVIRON_002}, "does not read MILES_USE_LEGACY_ROLLOUT_V1"),
    "other_model_args": ({"model_args": MODEL_ARGS.replace("28", "36")},
                         "Miles declares other model arguments for 'qwen3-0.6B' than the plan passes"),
}


@pytest.mark.parametrize("case", IMAGE_BREAKAGES)
def test_the_image_check_names_what_is_not_miles_image(case: str, tmp_path: Path) -> None:
    changes, message = IMAGE_BREAKAGES[case]
    site = tmp_path / "site"
    write_miles_stand_ins(site, **changes)
    miles, megatron = miles_checkout(tmp_path)
    argv = [sys.executable, "-m", "e2e.gpu.miles_image", "--miles-root", str(miles), "--megatron-path", str(megatron),
            "--sglang-version", "0.5.16", "--model-type", "qwen3-0.6B", f"--model-args={MODEL_ARGS}"]
    result = subprocess.run(argv, capture_output=True, text=True, env={"PYTHONPATH": str(site), "PATH": "/usr/bin"},
                            cwd=Path(__file__).resolve().parents[2], timeout=120)
    assert result.returncode == 1 and message in result.stderr, result.stderr


def test_the_image_check_names_a_missing_checkout_and_the_gpu_check_its_count(tmp_path: Path) -> None:
    site = tmp_path / "site"
    write_miles_stand_ins(site)
    repo = Path(__file__).resolve().parents[2]
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin"}
    argv = [sys.executable, "-m", "e2e.gpu.miles_image", "--miles-root", str(tmp_path / "nowhere"), "--megatron-path",
            str(tmp_path / "nowhere"), "--sglang-version", "0.5.16"]
    result = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=repo, timeout=120)
    assert result.returncode == 1
    for missing in ("nowhere/train.py is missing", "nowhere/tools/convert_hf_to_torch_dist.py is missing",
                    "nowhere/megatron is missing"):
        assert missing in result.stderr
    gpus = subprocess.run([sys.executable, "-m", "e2e.gpu.miles_image", "--min-gpus", "2"], capture_output=True,
                          text=True, env=env, cwd=repo, timeout=120)
    assert gpus.returncode == 1 and "torch sees 0 CUDA device(s); the Miles variant needs 2" in gpus.stderr


def test_a_shadowed_image_package_is_named_by_check_image_kept(tmp_path: Path, image) -> None:
    """What check-image-kept exists for: a package the install put into the venv in front of the
    image's fails the step, by name, before Miles (and its Ray workers) would import it."""
    opts = options(tmp_path, image)
    steps = {s.name: s for s in gpu_plan(opts)}
    assert run([steps["venv"]], tmp_path / "logs-venv")[0] == 0
    shadow = tmp_path / "run" / "venv" / "lib" / TAG / "site-packages" / "sglang"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("__version__ = '0.5.23'\n")
    code, text = run([steps["check-image-kept"]], tmp_path / "logs-kept")
    assert code == 1 and "sglang was found inside the venv" in text and "step 'check-image-kept' failed" in text
