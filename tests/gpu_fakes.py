"""Stand-ins for a GPU runner's machine, so its plan's steps run on CPU.

    fake_nvidia_smi(bin_dir, cuda="13.0")   an `nvidia-smi` that reports one H200 (`-L`) and a
                                            driver header; put bin_dir first on PATH
    fake_system_python(root, package)       a relocatable copy of this interpreter's base whose
                                            own site-packages holds `package` (the "system" site)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

HEADER = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI {driver}              Driver Version: {driver}      CUDA Version: {cuda}     |
|-----------------------------------------+------------------------+----------------------+
|   0  NVIDIA H200                    On  |   00000000:19:00.0 Off |                    0 |
+-----------------------------------------+------------------------+----------------------+
"""


def fake_nvidia_smi(bin_dir: Path, *, cuda: str = "13.0", driver: str = "580.65.06") -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\n"
                      'if [ "$1" = "-L" ]; then echo "GPU 0: NVIDIA H200 (UUID: GPU-fake)"; exit 0; fi\n'
                      f"cat <<'EOF'\n{HEADER.format(driver=driver, cuda=cuda)}EOF\n")
    script.chmod(0o755)
    return script


def fake_system_python(root: Path, package: str) -> Path:
    """`root/bin/python3`: a non-venv CPython whose prefix is `root` (the binary is copied, the
    standard library linked), with `package` (one module) in `root`'s own site-packages. A venv
    built on it with --system-site-packages sees `package`; one built on another base does not."""
    base = Path(sys.base_prefix)
    tag = f"python{sys.version_info.major}.{sys.version_info.minor}"
    executable = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    (root / "bin").mkdir(parents=True)
    shutil.copy2(executable, root / "bin" / executable.name)
    if executable.name != "python3":
        (root / "bin" / "python3").symlink_to(executable.name)
    stdlib = Path(sysconfig.get_paths(vars={"installed_base": str(base), "base": str(base)})["stdlib"])
    lib = root / "lib" / tag
    lib.mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name != "site-packages":
            (lib / entry.name).symlink_to(entry)
    for shared in (base / "lib").glob("libpython*"):  # builds that link libpython from $ORIGIN/../lib
        (root / "lib" / shared.name).symlink_to(shared)
    python = root / "bin" / "python3"
    # Its own site directory, as it reports it (Debian's Python names it dist-packages).
    site = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                          capture_output=True, text=True).stdout.strip()
    assert Path(site).is_relative_to(root), f"the copied interpreter's site {site} is outside {root}"
    Path(site).mkdir(parents=True, exist_ok=True)
    (Path(site) / f"{package}.py").write_text("MARK = 'from the fake system site'\n")
    return python
