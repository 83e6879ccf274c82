"""Start and stop real SGLang on CPU: `serving(version, ...) -> Server`, and the argv/env it uses.

    with serving("0.5.23", deterministic=True) as server:   # builds the venv when missing
        httpx.post(f"{server.url}/generate", json=...)       # server.log_path: SGLang's log

`python -m sglang.launch_server` runs from the version's venv (`e2e.sglang_cpu.venv`) with the
measured CPU flags (CPU_FLAGS; `--enable-deterministic-inference` when asked), serving the tiny
model (`adapter.reference.tiny_model.build_tiny_model`) unless told otherwise, on 127.0.0.1 only, on a
free port. Its environment (`launch_env`) puts ONLY standin/ on PYTHONPATH (the `sgl_kernel`
stand-in and the deterministic-mode plugin), sets SGLANG_USE_CPU_ENGINE=1, hides any GPU and
keeps the HuggingFace libraries offline; SGLang's other plugins load as in any install.

The server runs in its own session, so its process group (main, scheduler and detokenizer
processes) is ours to end: leaving `serving` (normally, by an exception or KeyboardInterrupt)
SIGTERMs the leader, ends what is left of the group after STOP_GRACE_S (SIGTERM, SIGKILL), and
waits until the group is gone. Only that group is ever signalled. stdout and stderr go to one
log file whose path `Server.log_path` reports. Start-up takes 36–130 s (imports dominate;
slower on a busy machine): STARTUP_TIMEOUT_S is generous, and only a server that is alive and
still starting waits for it. A port already in use fails before the launch; a server that exits,
or logs that its port is taken (it stays alive then), fails the wait at once, with its log's tail.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from e2e.common.ports import PortInUseError, ensure_port_free, free_port
from e2e.common.process import Watched, end_group, wait_ready
from e2e.sglang_cpu.errors import ServerStartError
from e2e.sglang_cpu.paths import STANDIN_DIR, logs_dir
from e2e.sglang_cpu.venv import ensure_venv

DEFAULT_VERSION = "0.5.23"
HOST = "127.0.0.1"
STARTUP_TIMEOUT_S = 420.0
STOP_GRACE_S = 15.0
PLUGIN_NAME = "vf_sglang_cpu"  # the entry-point name in standin/vf_sglang_cpu_standin-0.dist-info
# --mem-fraction-static: the share of the memory free before the weights load that SGLang keeps
# for itself. SGLang refuses to start when less is free after the load than (1 - share) × before
# (its `_profile_available_bytes`), so anything else on the machine allocating during those
# seconds (a lane beside this one, a Ray head) fails the start at a small share: 0.05 did, in CI,
# once the router lane's engines loaded beside 0.5.16. 0.3 tolerates 30 % going elsewhere; the
# pool itself stays 4096 tokens (--max-total-tokens caps what the profile allows).
CPU_FLAGS = (
    "--device", "cpu", "--attention-backend", "torch_native", "--disable-cuda-graph",
    "--disable-overlap-schedule", "--mem-fraction-static", "0.3", "--max-total-tokens", "4096",
    "--tp", "1", "--dtype", "bfloat16", "--sleep-on-idle",  # sleep: an idle scheduler spins a core otherwise
)
SERVER_ENV = {
    "SGLANG_USE_CPU_ENGINE": "1",  # SGLang's CPU platform; without it "No accelerator ... available"
    "CUDA_VISIBLE_DEVICES": "",  # a CPU server even on a GPU machine (the stand-in refuses CUDA)
    "HF_HUB_OFFLINE": "1",  # the model is a local directory; never wait on the hub
    "TRANSFORMERS_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",  # the log is readable while the server runs
}
_DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONSTARTUP")


@dataclass(frozen=True)
class Server:
    url: str
    version: str
    pid: int  # also the process group id: the server is a session leader
    log_path: Path
    deterministic: bool
    model_dir: Path
    startup_s: float  # spawn to the first /health 200
    process: subprocess.Popen[bytes] = field(repr=False, compare=False)

    def describe(self) -> dict[str, Any]:
        """The ready line's fields (JSON-able)."""
        return {"url": self.url, "pid": self.pid, "version": self.version, "log": str(self.log_path),
                "deterministic": self.deterministic, "model": str(self.model_dir),
                "startup_s": round(self.startup_s, 1)}


def launch_argv(python: Path, model_dir: Path, port: int, *, deterministic: bool,
                extra_args: Sequence[str] = ()) -> list[str]:
    """The server's command line (no shell)."""
    argv = [str(python), "-m", "sglang.launch_server", "--model-path", str(model_dir), *CPU_FLAGS,
            "--host", HOST, "--port", str(port)]
    if deterministic:
        argv.append("--enable-deterministic-inference")
    return [*argv, *extra_args]


def launch_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: the caller's, minus what selects another Python environment,
    plus SERVER_ENV and PYTHONPATH = standin/ alone. SGLang's own plugins (smg-grpc-servicer's)
    load as in any install; a caller's SGLANG_PLUGINS allow-list gets our plugin added."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in _DROPPED_ENV}
    env.update(SERVER_ENV, PYTHONPATH=str(STANDIN_DIR))
    allowed = [name.strip() for name in env.get("SGLANG_PLUGINS", "").split(",") if name.strip()]
    if allowed and PLUGIN_NAME not in allowed:
        env["SGLANG_PLUGINS"] = ",".join([*allowed, PLUGIN_NAME])
    return env


def default_log_path(version: str, port: int) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return logs_dir() / f"sglang-{version}-{stamp}-{port}-{os.getpid()}.log"


def _spawn(argv: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        log.write(f"# e2e.sglang_cpu: {' '.join(argv)}\n".encode())
        log.flush()
        return subprocess.Popen(argv, env=env, cwd=str(log_path.parent), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _healthy(client: httpx.Client, url: str) -> bool:
    try:
        return client.get(f"{url}/health").status_code == 200
    except httpx.TransportError:
        return False


def wait_healthy(url: str, process: subprocess.Popen[bytes], log_path: Path, timeout_s: float) -> float:
    """Seconds until GET /health answered 200; ServerStartError (with the log's tail) as soon as
    the server exits, or logs that it cannot bind its port, or once `timeout_s` has passed
    (`e2e.common.process.wait_ready`)."""
    with httpx.Client(timeout=5.0, trust_env=False) as client:  # loopback: never through a proxy
        return wait_ready(lambda: _healthy(client, url),
                          Watched(process, log_path, f"SGLang (answering {url}/health)", port=httpx.URL(url).port),
                          timeout_s=timeout_s, poll_s=1.0, error=ServerStartError)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of the group exists but is not ours to signal: alive
        return True
    return True


def _wait_group_gone(process: subprocess.Popen[bytes], timeout_s: float) -> bool:
    pause = threading.Event()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        process.poll()  # a reaped leader stops counting as a member
        if not _group_alive(process.pid):
            return True
        pause.wait(0.1)
    return False


def stop(process: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """End the server's whole process group and reap it.

    SIGTERM goes to the leader first: SGLang's main process then shuts its scheduler and
    detokenizer down itself (signalling the whole group at once makes it see a crashed child and
    wait 5 s for crash diagnostics). What is left after `grace_s` gets SIGTERM, then SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    if not _wait_group_gone(process, grace_s):
        end_group(process.pid, grace_s=2.0, reap=process.poll)
        _wait_group_gone(process, 5.0)  # children exit shortly after their SIGKILL
    process.wait()


@contextlib.contextmanager
def serving(version: str = DEFAULT_VERSION, *, deterministic: bool = False, model_dir: Path | None = None,
            port: int = 0, log_path: Path | None = None, startup_timeout_s: float = STARTUP_TIMEOUT_S,
            extra_args: Sequence[str] = ()) -> Iterator[Server]:
    """A running SGLang `version` on CPU until the block ends (then its process group is ended).

    Builds the venv (`ensure_venv`) and the tiny model when missing. Raises LockError or
    InstallError (no venv), ServerStartError (did not come up; the log's tail is in the message)."""
    venv = ensure_venv(version)
    if model_dir is None:
        from adapter.reference.tiny_model import build_tiny_model

        model_dir = build_tiny_model()
    port = port or free_port()
    log = log_path or default_log_path(version, port)
    argv = launch_argv(venv.python, model_dir, port, deterministic=deterministic, extra_args=extra_args)
    try:  # SGLang binds its port only after loading the model: a taken one would cost that long
        ensure_port_free(port, HOST, what=f"SGLang {version}")
    except PortInUseError as exc:
        raise ServerStartError(str(exc)) from None
    process = _spawn(argv, launch_env(), log)
    url = f"http://{HOST}:{port}"
    try:
        startup_s = wait_healthy(url, process, log, startup_timeout_s)
        yield Server(url, version, process.pid, log, deterministic, model_dir, startup_s, process)
    finally:
        stop(process)
