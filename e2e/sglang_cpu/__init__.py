"""Real, unmodified PyPI SGLang served on CPU for tests: pinned, installed, started, stopped.

What it owns (what runs against it and what it proves: docs/sglang.md, "Real SGLang on a CPU box"):

    lock.py      requirements/sglang-V.in/.txt: sglang's Requires-Dist minus CUDA-only packages,
                 plus the project's torch, compiled with uv (`python -m e2e.sglang_cpu lock`)
    venv.py      one cached uv venv per version, keyed by the pins' hash (`... install`)
    server.py    `serving(version, deterministic=...) -> Server(url, version, pid, log_path, ...)`:
                 `python -m sglang.launch_server` on 127.0.0.1 with the CPU flags, in its own
                 process group, ended on exit (`... serve`)
    standin/     `sgl_kernel` in plain torch and the deterministic-mode SGLang plugin: only ever
                 on the launched server's PYTHONPATH, never installed anywhere
    fixtures.py  the session-scoped pytest fixture `sglang_cpu_server`

It imports nothing from `adapter` (it speaks HTTP to SGLang like any client would); importing
this package is cheap (no torch, no sglang).
"""

from __future__ import annotations

from e2e.sglang_cpu.errors import InstallError, LockError, ServerStartError, SGLangCPUError
from e2e.sglang_cpu.server import DEFAULT_VERSION, Server, launch_argv, launch_env, serving
from e2e.sglang_cpu.venv import Venv, ensure_venv

__all__ = [
    "DEFAULT_VERSION",
    "InstallError",
    "LockError",
    "SGLangCPUError",
    "Server",
    "ServerStartError",
    "Venv",
    "ensure_venv",
    "launch_argv",
    "launch_env",
    "serving",
]
