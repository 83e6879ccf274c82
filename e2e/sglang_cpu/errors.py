"""Typed errors of `e2e.sglang_cpu`: one hierarchy; every message says what to do next.

    SGLangCPUError
    ├── LockError         the pinned requirements of an sglang version are missing or cannot be made
    ├── InstallError      the version's venv could not be built (uv failed, cache unwritable)
    └── ServerStartError  the server exited or did not answer /health 200 in time (log path included)
"""

from __future__ import annotations


class SGLangCPUError(RuntimeError):
    """Base of every error `e2e.sglang_cpu` raises on purpose."""


class LockError(SGLangCPUError):
    """No committed requirements for the version, or resolving them failed."""


class InstallError(SGLangCPUError):
    """Building the dedicated venv failed."""


class ServerStartError(SGLangCPUError):
    """The SGLang server did not come up."""
