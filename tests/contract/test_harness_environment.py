"""The harness environment holds this environment's versions (`adapter.episodes.harness_pins`), in
every matrix cell: the installed release's null harness program, held as the shims hold it, is
built by the real uv as Verifiers builds it (`uv sync --script P -q --no-config`), and the
environment uv made is compared with this one. It fails whenever the two resolve differently, as
they did on every fresh machine once httpx2 2.17.0 was out (and on no warm one: uv reuses a
script's environment while it satisfies the program).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from adapter.episodes import harness_pins
from adapter.episodes.harness_pins import compatible, held, host_pins, pins_for, unheld

pytestmark = pytest.mark.contract


def _environment_of(program: str, tmp_path: Path) -> dict[str, str]:
    """The distributions of the environment `uv sync --script` builds for `program`, as Verifiers runs it."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    script = tmp_path / "program.py"
    script.write_text(program)
    sync = subprocess.run([uv, "sync", "--script", str(script), "-q", "--no-config"], capture_output=True,
                          text=True, timeout=300, check=False)
    assert sync.returncode == 0, sync.stderr
    python = subprocess.run([uv, "python", "find", "--script", str(script), "--no-config"], capture_output=True,
                            text=True, timeout=60, check=True).stdout.strip()
    listing = subprocess.run(
        [python, "-c", "import importlib.metadata as m, json; "
                       "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"],
        capture_output=True, text=True, timeout=60, check=True)
    return {canonicalize_name(name): version for name, version in json.loads(listing.stdout).items()}


def test_the_harness_environment_holds_the_host_versions(tmp_path, monkeypatch) -> None:
    harness = pytest.importorskip("verifiers.v1.harnesses.null.harness")
    monkeypatch.delenv("UV_EXCLUDE_NEWER", raising=False)
    found = harness_pins.program_attribute(harness.NullHarness)
    assert found is not None
    release = unheld(getattr(*found))
    pins = compatible(pins_for({}), release)
    built = _environment_of(held(release, pins), tmp_path)
    host = dict(pin.split("==", 1) for pin in host_pins())
    own = set(host) - {pin.split("==", 1)[0] for pin in pins}  # what the program pins itself (compatible)
    differ = {name: (version, host[name]) for name, version in built.items()
              if name in host and name not in own and host[name] != version}
    assert differ == {}, f"the harness environment differs from this one (harness, host): {differ}"
    assert built["openai"] == host["openai"]
    if not own:
        assert set(built) - set(host) == set(), "the harness needs packages this environment lacks: not held"
