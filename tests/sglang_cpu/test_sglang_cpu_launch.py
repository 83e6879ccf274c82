"""How `e2e.sglang_cpu` pins, installs and launches real SGLang on CPU, without SGLang: the server's
argv and environment, the stand-in directory's layout, the requirement filter and the committed
pins, the venv key, and the process-group lifecycle against a stand-in HTTP server. Fast lane."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from e2e.sglang_cpu import server as server_module
from e2e.sglang_cpu.__main__ import main as cli_main
from e2e.sglang_cpu.errors import LockError, ServerStartError
from e2e.sglang_cpu.lock import TORCH_PINS, cpu_requirements, is_cuda_only
from e2e.sglang_cpu.paths import STANDIN_DIR, cache_root, locked_versions, requirements_in, requirements_txt
from e2e.sglang_cpu.server import CPU_FLAGS, HOST, launch_argv, launch_env, serving, stop
from e2e.sglang_cpu.venv import Venv, ensure_venv, venv_key, venv_path

SERVE = [sys.executable, "-m", "sglang.launch_server"]


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_argv_runs_launch_server_from_the_venv_with_the_cpu_flags(tmp_path: Path) -> None:
    argv = launch_argv(Path("/venv/bin/python"), tmp_path, 31234, deterministic=False)
    assert argv[:3] == ["/venv/bin/python", "-m", "sglang.launch_server"]
    assert _flag(argv, "--model-path") == str(tmp_path)
    assert _flag(argv, "--host") == "127.0.0.1" == HOST and _flag(argv, "--port") == "31234"
    for name, value in [("--device", "cpu"), ("--attention-backend", "torch_native"), ("--mem-fraction-static", "0.3"),
                        ("--max-total-tokens", "4096"), ("--tp", "1"), ("--dtype", "bfloat16")]:
        assert _flag(argv, name) == value
    for switch in ("--disable-cuda-graph", "--disable-overlap-schedule", "--sleep-on-idle"):
        assert switch in argv
    assert "--enable-deterministic-inference" not in argv
    assert set(CPU_FLAGS) <= set(argv)


def test_argv_asks_for_deterministic_inference_and_keeps_extra_args_last(tmp_path: Path) -> None:
    argv = launch_argv(Path("python"), tmp_path, 1, deterministic=True, extra_args=["--context-length", "2048"])
    assert "--enable-deterministic-inference" in argv
    assert argv[-2:] == ["--context-length", "2048"]


def test_env_puts_only_the_standin_on_pythonpath_and_selects_the_cpu_engine() -> None:
    env = launch_env({"PATH": "/bin", "PYTHONPATH": "/work/main", "VIRTUAL_ENV": "/work/main/.venv",
                      "PYTHONHOME": "/x", "CUDA_VISIBLE_DEVICES": "0", "HOME": "/root"})
    assert env["PYTHONPATH"] == str(STANDIN_DIR)
    assert "VIRTUAL_ENV" not in env and "PYTHONHOME" not in env
    assert env["SGLANG_USE_CPU_ENGINE"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # a CPU server even on a GPU machine
    assert env["HF_HUB_OFFLINE"] == "1" and env["PATH"] == "/bin" and env["HOME"] == "/root"
    assert "SGLANG_PLUGINS" not in env  # SGLang's own plugins load as in any install


def test_env_adds_our_plugin_to_a_callers_plugin_allow_list() -> None:
    assert launch_env({"SGLANG_PLUGINS": "smg-servicer"})["SGLANG_PLUGINS"] == "smg-servicer,vf_sglang_cpu"
    assert launch_env({"SGLANG_PLUGINS": "vf_sglang_cpu"})["SGLANG_PLUGINS"] == "vf_sglang_cpu"


def test_standin_dir_holds_only_sgl_kernel_and_the_plugin() -> None:
    entries = {p.name for p in STANDIN_DIR.iterdir() if p.name != "__pycache__"}
    assert entries == {"sgl_kernel", "vf_sglang_cpu_plugin.py", "vf_sglang_cpu_standin-0.dist-info"}


def test_plugin_is_discoverable_as_an_sglang_entry_point() -> None:
    (dist,) = importlib.metadata.distributions(path=[str(STANDIN_DIR)])
    assert dist.metadata["Name"] == "vf-sglang-cpu-standin"
    (entry,) = [ep for ep in dist.entry_points if ep.group == "sglang.srt.plugins"]
    assert (entry.name, entry.value) == (server_module.PLUGIN_NAME, "vf_sglang_cpu_plugin:register")
    assert (STANDIN_DIR / f"{entry.module}.py").is_file()


def test_the_project_environment_never_imports_the_standin() -> None:
    spec = importlib.util.find_spec("sgl_kernel")
    assert spec is None or Path(spec.origin or "").resolve() != (STANDIN_DIR / "sgl_kernel" / "__init__.py").resolve()


@pytest.mark.parametrize("requirement", [
    "flashinfer_python[cu13]==0.7.2", "nvidia-cutlass-dsl[cu13]==4.8.0", "nvidia-ml-py", "nvshmem4py-cu13",
    "torch==2.14.1", "torch_memory_saver>=0.0.9.post1", "torchao==0.17.0", "sglang-kernel==0.4.10",
    "kernels<0.15,>=0.14.1", "cuda-python>=13.0", "sgl_deep_gemm==0.2.3.post2", "timm==1.0.25", "Quack-Kernels==0.6.5",
])
def test_cuda_only_requirements_are_recognised(requirement: str) -> None:
    assert is_cuda_only(requirement)


def test_cpu_requirements_keep_the_rest_and_add_the_project_torch() -> None:
    requires = ["aiohttp", 'av; sys_platform == "linux" and platform_machine == "aarch64"', "smg-grpc-servicer>=0.9.0",
                "torch==2.14.1", "flashinfer_python[cu13]==0.7.2", 'pytest; extra == "test"', "xgrammar==0.2.7"]
    assert cpu_requirements(requires) == [
        "aiohttp", 'av; sys_platform == "linux" and platform_machine == "aarch64"', "smg-grpc-servicer>=0.9.0",
        "xgrammar==0.2.7", *TORCH_PINS]


@pytest.mark.parametrize("version", ["0.5.16", "0.5.23"])
def test_committed_pins_exist_and_hold_the_project_torch(version: str) -> None:
    assert version in locked_versions()
    listed = [line for line in requirements_in(version).read_text().splitlines() if line and not line.startswith("#")]
    assert listed[-len(TORCH_PINS):] == list(TORCH_PINS)
    assert not [r for r in listed[:-len(TORCH_PINS)] if is_cuda_only(r)]
    pinned = requirements_txt(version).read_text()
    assert f"python -m e2e.sglang_cpu lock --version {version}" in pinned
    names = set(re.findall(r"^([a-z0-9][a-z0-9._-]*)==", pinned, flags=re.MULTILINE))
    assert {"torch", "torchvision", "transformers", "triton"} <= names
    assert not names & {"sglang", "sglang-kernel", "sgl-kernel", "flashinfer-python", "tilelang", "flash-attn-4"}
    assert "torch==2.13.0\n" in pinned and "torchvision==0.28.0\n" in pinned


def test_cache_root_follows_the_projects_rule(tmp_path: Path) -> None:
    assert cache_root({"VF_SGLANG_CACHE": str(tmp_path)}) == tmp_path
    assert cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "vf-sglang"
    assert cache_root({}) == Path.home().absolute() / ".cache" / "vf-sglang"


def test_venv_key_changes_with_the_pins_and_the_version(tmp_path: Path) -> None:
    pins = tmp_path / "pins.txt"
    pins.write_text("torch==2.13.0\n")
    first = venv_key("0.5.23", pins)
    assert venv_key("0.5.16", pins) != first
    pins.write_text("torch==2.13.1\n")
    assert venv_key("0.5.23", pins) != first


def test_venv_lives_under_the_cache_named_by_version_and_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VF_SGLANG_CACHE", str(tmp_path))
    path, key = venv_path("0.5.23")
    assert path == tmp_path / "sglang-cpu" / "venvs" / f"sglang-0.5.23-{key}"
    assert key == venv_key("0.5.23", requirements_txt("0.5.23"))


def test_a_version_without_pins_names_the_lock_command(tmp_path: Path) -> None:
    with pytest.raises(LockError, match=r"python -m e2e\.sglang_cpu lock --version 9\.9\.9"):
        ensure_venv("9.9.9", root=tmp_path)
    assert not list(tmp_path.iterdir())


def test_cli_reports_a_missing_version_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["serve", "--version", "9.9.9", "--", "--context-length", "64"]) == 1
    assert "lock --version 9.9.9" in capsys.readouterr().err


# --- the lifecycle, against a stand-in HTTP server with a child process (like SGLang's) -------------

FAKE_SERVER = """
import http.server, signal, subprocess, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print("child", child.pid, flush=True)
def on_term(signum, frame):
    child.terminate(); child.wait(); sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404); self.end_headers()
    def log_message(self, *args): pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def fake_sglang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`serving` runs FAKE_SERVER instead of SGLang, from a fake venv; returns the log path."""
    monkeypatch.setattr(server_module, "ensure_venv", lambda version: Venv(version, tmp_path, "k", False, 0.0))
    monkeypatch.setattr(server_module, "launch_argv",
                        lambda python, model, port, **_: [sys.executable, "-c", FAKE_SERVER, "--port", str(port)])
    return tmp_path / "logs" / "server.log"


def test_serving_waits_for_health_then_ends_the_whole_group(fake_sglang: Path, tmp_path: Path) -> None:
    with serving("0.5.23", model_dir=tmp_path, log_path=fake_sglang) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.version == "0.5.23"
        assert server.log_path == fake_sglang and server.process.pid == server.pid
        assert httpx.get(f"{server.url}/health", trust_env=False).status_code == 200
        assert os.getpgid(server.pid) == server.pid  # a session of its own
        pgid = server.pid
    assert server.process.returncode is not None
    assert _group_gone(pgid)
    assert fake_sglang.read_text().startswith("# e2e.sglang_cpu: ")


def test_serving_ends_the_group_when_the_block_raises(fake_sglang: Path, tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), serving("0.5.23", model_dir=tmp_path, log_path=fake_sglang) as server:
        raise KeyboardInterrupt
    assert _group_gone(server.pid)


def test_a_server_that_exits_early_is_reported_with_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "ensure_venv", lambda version: Venv(version, tmp_path, "k", False, 0.0))
    monkeypatch.setattr(server_module, "launch_argv", lambda *_, **__: [
        sys.executable, "-c", "import sys; print('boom: no such model'); sys.exit(3)"])
    log = tmp_path / "early.log"
    with (pytest.raises(ServerStartError, match=r"(?s)exited with status 3.*boom: no such model"),
          serving("0.5.23", model_dir=tmp_path, log_path=log)):
        pytest.fail("the server never came up")


def test_stop_kills_a_group_that_ignores_sigterm(tmp_path: Path) -> None:
    stubborn = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); print('ready', flush=True); "
                "time.sleep(300)")
    process = subprocess.Popen([sys.executable, "-c", stubborn], start_new_session=True, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"  # SIGTERM is ignored by now
        stop(process, grace_s=0.5)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        process.stdout.close()
    assert process.returncode == -signal.SIGKILL
    assert _group_gone(process.pid)
