"""Running `vf-sglang` as a user does, as a process with a deadline (its whole group ended on expiry)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from e2e.common.process import run_with_deadline

VF_SGLANG = str(Path(sys.executable).with_name("vf-sglang"))


@dataclass(frozen=True)
class Ran:
    code: int
    output: str  # stdout and stderr, merged

    def row(self, name: str) -> str:
        return next((line for line in self.output.splitlines() if line.startswith(name)), "")


def vf_sglang(*args: str, timeout: float = 600.0) -> Ran:
    lines: list[str] = []
    code = run_with_deadline([VF_SGLANG, *args], env=dict(os.environ), cwd=None, timeout_s=timeout,
                             on_line=lines.append)
    return Ran(code, "\n".join(lines))
