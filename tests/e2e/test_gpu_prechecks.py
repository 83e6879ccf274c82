"""The GPU tier's CPU-testable parts, run for real: the base interpreter is the
system one, the new venv sees a package of its site, the driver pre-check fails with the
requirement, the CPU-testable steps pass twice on one run dir, and the fast lane never
selects GPU work even where CUDA is reported present."""

from __future__ import annotations

import configparser
import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.gpu.driver import parse_nvidia_smi, problems
from e2e.gpu.interpreter import BaseInterpreterError, resolve_base_python
from e2e.plans.gpu import gpu_plan
from e2e.plans.steps import REPO, PlanOptions
from e2e.runner import Runner, cuda_available
from tests.gpu_fakes import fake_nvidia_smi, fake_system_python

TAG = f"python{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture(scope="module")
def system_python(tmp_path_factory) -> Path:
    return fake_system_python(tmp_path_factory.mktemp("system") / "python", "fake_system_torch")


def options(tmp_path: Path, base: Path | str, **changes) -> PlanOptions:
    return PlanOptions(run_dir=str(tmp_path / "run"), base_python=str(base), python_tag=TAG,
                       system_package="fake_system_torch", **changes)


def run_steps(opts: PlanOptions, names: list[str], tmp_path: Path) -> tuple[int, str]:
    steps = {s.name: s for s in gpu_plan(opts)}
    out = io.StringIO()
    return Runner(log_dir=tmp_path / "logs", out=out).run([steps[name] for name in names]), out.getvalue()


def test_default_base_is_the_first_python3_on_path_outside_any_venv(tmp_path: Path, system_python: Path) -> None:
    venv = tmp_path / "tox-venv"
    subprocess.run(["uv", "venv", "--quiet", "--python", str(system_python), str(venv)], check=True)
    path = os.pathsep.join([str(venv / "bin"), str(system_python.parent)])
    base = resolve_base_python(None, path=path)
    assert base.executable == str(system_python) and base.version == TAG.removeprefix("python")
    assert base.how.startswith("the first python3 on PATH outside any venv")


def test_a_venv_interpreter_is_refused_as_base_python(tmp_path: Path, system_python: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run(["uv", "venv", "--quiet", "--python", str(system_python), str(venv)], check=True)
    with pytest.raises(BaseInterpreterError, match="virtual environment's interpreter"):
        resolve_base_python(str(venv / "bin" / "python"))


def test_a_base_older_than_the_adapter_needs_is_refused_by_name(tmp_path: Path) -> None:
    old = tmp_path / "bin" / "python3"
    old.parent.mkdir()
    old.write_text("#!/bin/sh\nprintf '3.10\\nFalse\\n/usr/bin/python3.10\\n'\n")
    old.chmod(0o755)
    with pytest.raises(BaseInterpreterError, match=r"Python 3.10; the adapter needs Python >= 3.11.*--base-python"):
        resolve_base_python(None, path=str(old.parent))
    with pytest.raises(BaseInterpreterError, match="no python3 on PATH outside a virtual environment"):
        resolve_base_python(None, path=str(tmp_path / "empty"))


def test_the_new_venv_imports_a_package_of_the_system_site(tmp_path: Path, system_python: Path) -> None:
    code, text = run_steps(options(tmp_path, system_python), ["venv", "check-system-site"], tmp_path)
    assert code == 0, text
    assert f"fake_system_torch  imports from the system site: {system_python.parent.parent}" in text


def test_a_venv_on_another_base_fails_the_system_site_step_with_the_fix(tmp_path: Path) -> None:
    code, text = run_steps(options(tmp_path, sys.executable), ["venv", "check-system-site"], tmp_path)
    assert code == 1
    assert "step 'check-system-site' failed" in text and "fake_system_torch is not importable" in text
    assert "pass --base-python" in text


@pytest.mark.parametrize(("cuda", "ok"), [("13.0", True), ("12.4", False)])
def test_the_driver_step_needs_the_cuda_version_of_the_sglang_pin(cuda, ok, tmp_path: Path, monkeypatch) -> None:
    fake_nvidia_smi(tmp_path / "bin", cuda=cuda)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    code, text = run_steps(options(tmp_path, sys.executable), ["check-driver"], tmp_path)
    assert (code == 0) is ok, text
    if ok:
        assert "driver 580.65.06, CUDA 13.0" in text
    else:
        assert "sglang 0.5.15 wheels need a driver supporting CUDA >= 13.0; this driver (580.65.06) supports " \
               "CUDA 12.4" in text


def test_driver_problems_name_requirement_finding_and_fix() -> None:
    assert parse_nvidia_smi("| NVIDIA-SMI 550.54  Driver Version: 550.54.15   CUDA Version: 12.4 |") == (
        "550.54.15", "12.4")
    missing = problems(smi_output=None, glibc="2.36", sglang="0.5.15", min_cuda="13.0", min_glibc="2.34")
    assert missing == ["nvidia-smi is not on PATH or failed: sglang 0.5.15 needs an NVIDIA driver supporting "
                       "CUDA >= 13.0"]
    old_glibc = problems(smi_output="Driver Version: 580.1 CUDA Version: 13.0", glibc="2.31", sglang="0.5.15",
                         min_cuda="13.0", min_glibc="2.34")
    assert old_glibc == ["sglang 0.5.15 wheels need glibc >= 2.34; found 2.31: use a newer runner image"]
    assert problems(smi_output="no header", glibc="2.36", sglang="0.5.15", min_cuda="13.0", min_glibc="2.34")


def _local_verifiers_repo(root: Path) -> str:
    """A repository with the tag the plan fetches and code_golf_v1 in it (offline stand-in)."""
    env_dir = root / "environments" / "code_golf_v1"
    env_dir.mkdir(parents=True)
    (env_dir / "pyproject.toml").write_text('[project]\nname = "code-golf-v1"\nversion = "0.1.0"\n')
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "--quiet"], ["add", "."], ["commit", "--quiet", "-m", "env"], ["tag", "v0.2.0"]):
        subprocess.run([*git, *args], check=True)
    return f"file://{root}"


CPU_TESTABLE = ["venv", "check-system-site", "export-lock", "install-locked", "install-adapter", "init-verifiers",
                "fetch-verifiers", "checkout-verifiers", "environments-dir", "copy-env", "repin-locked",
                "write-config", "reset-outputs"]


def test_the_cpu_testable_steps_pass_twice_on_one_run_dir(tmp_path: Path, system_python: Path, monkeypatch) -> None:
    """Twice in full on one run dir (a rerun after a failure). Without compiling bytecode: uv's
    compile of the locked venv is 35-45 s a time on 2 cores and is not what a rerun puts in
    question; the default plan's flag is locked by the plan's snapshot and
    `test_every_install_compiles_bytecode_unless_told_not_to`."""
    opts = options(tmp_path, system_python, verifiers_repo=_local_verifiers_repo(tmp_path / "verifiers-src"),
                   compile_bytecode=False)
    monkeypatch.delenv("UV_COMPILE_BYTECODE", raising=False)  # the lanes set it; the steps inherit the environment
    for attempt in (1, 2):
        code, text = run_steps(opts, CPU_TESTABLE, tmp_path / f"attempt-{attempt}")
        assert code == 0, f"attempt {attempt}:\n{text[-3000:]}"
    env_src = tmp_path / "run" / "environments" / "code_golf_v1"
    assert sorted(p.name for p in env_src.iterdir()) == ["pyproject.toml"]  # not nested by the second copy
    probe = "import importlib.metadata as m, adapter, fake_system_torch; print(m.version('verifiers'))"
    venv_python = tmp_path / "run" / "venv" / "bin" / "python"
    assert subprocess.run([str(venv_python), "-c", probe], capture_output=True, text=True, check=True,
                          cwd=tmp_path).stdout.strip() == "0.2.0"
    assert "--hash=sha256:" in (tmp_path / "run" / "requirements.txt").read_text()


def test_every_install_compiles_bytecode_unless_told_not_to(tmp_path: Path, system_python: Path) -> None:
    def installs(**changes: object) -> list[tuple[str, ...]]:
        plan = gpu_plan(options(tmp_path, system_python, **changes))
        return [s.argv for s in plan if s.argv[:3] == ("uv", "pip", "install")]

    compiled, plain = installs(), installs(compile_bytecode=False)
    assert len(compiled) >= 3 and all(argv[3] == "--compile-bytecode" for argv in compiled)
    assert [tuple(a for a in argv if a != "--compile-bytecode") for argv in compiled] == plain


def fast_lane_marker_expression() -> str:
    """The `-m` expression of `tox -e fast`, read from tox.ini (the lane as CI runs it)."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(REPO / "tox.ini")
    for line in config["testenv:fast"]["commands"].splitlines():
        argv = shlex.split(line)
        if argv[:1] == ["pytest"]:
            return argv[argv.index("-m") + 1]
    raise AssertionError("tox.ini's fast lane runs no pytest command")


def test_the_fast_lane_selects_no_gpu_test_even_where_cuda_is_reported(tmp_path: Path, monkeypatch) -> None:
    fake_nvidia_smi(tmp_path / "bin")
    path = f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    assert cuda_available()  # the faked detector reports a GPU: GPU tests would not skip
    gpu_modules = sorted(str(p) for p in (REPO / "tests").rglob("test_*.py") if "mark.gpu" in p.read_text())

    def selected(expression: str) -> list[str]:
        result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                                 "-m", expression, *gpu_modules], capture_output=True, text=True, cwd=REPO,
                                env={**os.environ, "PATH": path}, timeout=300)
        assert result.returncode in (0, 5), result.stdout[-2000:] + result.stderr[-2000:]  # 5: none selected
        return [line for line in result.stdout.splitlines() if "::" in line]

    assert selected(f"({fast_lane_marker_expression()}) and gpu") == []
    assert "tests/e2e/test_gpu_e2e.py::test_gpu_tier_runs_grouped_rollouts_and_verifies" in selected("gpu")
