"""The harness program's uv environment before the first episode (`adapter.episodes.harness_uv`):
offline from a filled uv cache, fetched once when the cache lacks it, refused fast (naming
UV_OFFLINE=1 and the command that fills the cache) when neither works; every uv call bounded.

Two kinds of test: a scripted `uv` on PATH (records each call, answers as told) for the
decisions, and the real uv with no network at all (`unshare --net`, skipped where this user may
not create a network namespace) for the defect itself: offline, Verifiers' own preparation of
the null harness used to wait on the index silently, with no output.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from adapter.episodes import harness_uv
from adapter.episodes.caches import harness_uv_cache, user_cache_dir
from adapter.episodes.generations import installed
from adapter.episodes.harness_pins import program_attribute
from adapter.episodes.harness_uv import offline_env, prepared_env
from adapter.errors import ConfigurationError, HarnessEnvironmentError

REPO = Path(__file__).resolve().parents[2]


def _verifiers() -> str:
    return importlib.metadata.version("verifiers")


SCRIPT = textwrap.dedent("""\
    # /// script
    # requires-python = ">=3.10"
    # dependencies = ["openai", "mcp"]
    # ///
    print("hello")
""")
# A scripted uv: logs argv and the UV_* it saw, then answers by whether `--offline` was passed.
FAKE_UV = textwrap.dedent(f"""\
    #!{sys.executable}
    import json, os, subprocess, sys, time
    with open(os.environ["FAKE_UV_LOG"], "a") as log:
        log.write(json.dumps({{"argv": sys.argv[1:],
                              "env": {{k: v for k, v in os.environ.items() if k.startswith("UV_")}}}}) + "\\n")
    mode = "OFFLINE" if "--offline" in sys.argv else "ONLINE"
    answer = os.environ.get("FAKE_UV_" + mode, "0")
    if answer == "hang":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open(os.environ["FAKE_UV_LOG"] + ".child", "w").write(str(child.pid))
        time.sleep(60)
    print("uv says: " + mode.lower() + " answer " + answer, file=sys.stderr)
    sys.exit(int(answer))
""")

B_040 = pytest.mark.skipif(installed().name != "B" or _verifiers() != "0.4.0",
                           reason="verifiers 0.4.0 (generation B) forces UV_OFFLINE=false on its preparation")
A_ONLY = pytest.mark.skipif(installed().name != "A", reason="generation A (verifiers 0.2.x) prepares the harness "
                            "with the harness env; generation B's cells check their own release")


@pytest.fixture
def fake_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`uv` scripted by FAKE_UV_OFFLINE / FAKE_UV_ONLINE (an exit status or "hang"); `calls()`
    lists what it was asked. HOME and the user cache are the test's own (no ~/.local/bin uv)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    uv = bin_dir / "uv"
    uv.write_text(FAKE_UV)
    uv.chmod(0o755)
    log = tmp_path / "uv.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_UV_LOG", str(log))
    monkeypatch.delenv("UV_OFFLINE", raising=False)
    monkeypatch.setattr(harness_uv, "_ready", {})

    class Fake:
        path = uv

        @staticmethod
        def calls() -> list[dict[str, Any]]:
            return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return Fake


HARNESS_ENV = {"UV_CACHE_DIR": "/caches/harness", "UV_EXCLUDE_NEWER": "2026-07-28T13:44:00Z"}


@pytest.mark.parametrize(("user_env", "harness_env", "expected"), [
    pytest.param({}, {}, "1", id="decided-by-the-adapter"),
    pytest.param({"UV_COMPILE_BYTECODE": "0"}, {}, None, id="the-users-choice-is-kept"),
    pytest.param({}, {"UV_COMPILE_BYTECODE": "0"}, None, id="the-harness-envs-choice-is-kept"),
])
def test_the_prepared_harness_compiles_its_bytecode_unless_someone_decided(
        fake_uv, monkeypatch, user_env, harness_env, expected) -> None:
    monkeypatch.setenv("FAKE_UV_OFFLINE", "0")
    monkeypatch.delenv("UV_COMPILE_BYTECODE", raising=False)
    for name, value in user_env.items():
        monkeypatch.setenv(name, value)
    added = prepared_env(SCRIPT, {**HARNESS_ENV, **harness_env})
    assert added.get("UV_COMPILE_BYTECODE") == expected and added["UV_OFFLINE"] == "1"


def test_a_program_in_the_cache_runs_offline_without_asking_the_index(fake_uv, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_UV_OFFLINE", "0")
    assert offline_env(SCRIPT, HARNESS_ENV) == {"UV_OFFLINE": "1"}
    (call,) = fake_uv.calls()
    assert call["argv"][:2] == ["sync", "--script"] and call["argv"][-1] == "--offline"
    assert "--no-config" in call["argv"] and Path(call["argv"][2]).read_text() == SCRIPT
    assert call["env"]["UV_CACHE_DIR"] == "/caches/harness"  # the harness env reaches uv, as in Verifiers


def test_a_program_missing_from_the_cache_is_fetched_once_then_runs_offline(fake_uv, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_UV_OFFLINE", "1")
    monkeypatch.setenv("FAKE_UV_ONLINE", "0")
    assert offline_env(SCRIPT, HARNESS_ENV) == {"UV_OFFLINE": "1"}
    offline, online = fake_uv.calls()
    assert "--offline" in offline["argv"] and "--offline" not in online["argv"]
    assert offline_env(SCRIPT, HARNESS_ENV) == {"UV_OFFLINE": "1"}
    assert len(fake_uv.calls()) == 2  # decided once per process for the same script and environment


def test_offline_harness_with_an_empty_cache_fails_fast_naming_uv_offline(fake_uv, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_UV_OFFLINE", "1")
    monkeypatch.setenv("FAKE_UV_ONLINE", "2")
    with pytest.raises(HarnessEnvironmentError) as caught:
        offline_env(SCRIPT, HARNESS_ENV)
    message = str(caught.value)
    assert isinstance(caught.value, ConfigurationError)  # the CLI's exit 2, before any episode
    assert "UV_OFFLINE=1" in message and "dependencies openai, mcp" in message
    assert "UV_CACHE_DIR=/caches/harness does not hold its environment" in message
    assert "offline: exit status 1: uv says: offline answer 1" in message  # uv's own words, quoted
    assert "exit status 2: uv says: online answer 2" in message
    script = fake_uv.calls()[0]["argv"][2]
    assert (f"`UV_CACHE_DIR=/caches/harness UV_EXCLUDE_NEWER=2026-07-28T13:44:00Z {fake_uv.path} sync --script "
            f"{script}`") in message  # the command that fills the cache, on this machine's copy


def test_a_release_that_forces_uv_offline_is_checked_under_its_own_value(fake_uv, monkeypatch) -> None:
    forced = {"UV_OFFLINE": "false"}  # verifiers 0.4.0's preparation
    monkeypatch.setenv("FAKE_UV_OFFLINE", "0")  # the cache holds it, but 0.4.0 never looks there alone
    monkeypatch.setenv("FAKE_UV_ONLINE", "0")
    assert offline_env(SCRIPT, HARNESS_ENV, forced=forced) == {}
    (call,) = fake_uv.calls()
    assert "--offline" not in call["argv"] and call["env"]["UV_OFFLINE"] == "false"
    monkeypatch.setenv("FAKE_UV_ONLINE", "2")
    monkeypatch.setattr(harness_uv, "_ready", {})
    with pytest.raises(HarnessEnvironmentError, match="UV_OFFLINE=false, so UV_OFFLINE=1 cannot help"):
        offline_env(SCRIPT, HARNESS_ENV, forced=forced)


@pytest.mark.parametrize("where", ["harness env", "process env"])
def test_uv_offline_set_by_the_user_is_kept(fake_uv, monkeypatch, where: str) -> None:
    harness_env = dict(HARNESS_ENV)
    if where == "harness env":
        harness_env["UV_OFFLINE"] = "1"
    else:
        monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("FAKE_UV_ONLINE", "0")
    assert offline_env(SCRIPT, harness_env) == {}
    (call,) = fake_uv.calls()
    assert "--offline" not in call["argv"] and call["env"]["UV_OFFLINE"] == "1"
    monkeypatch.setenv("FAKE_UV_ONLINE", "1")
    monkeypatch.setattr(harness_uv, "_ready", {})
    with pytest.raises(HarnessEnvironmentError, match="sets UV_OFFLINE=1 and uv sync --script failed under it"):
        offline_env(SCRIPT, harness_env)


def test_a_uv_that_never_answers_is_killed_at_the_deadline(fake_uv, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("FAKE_UV_OFFLINE", "hang")
    monkeypatch.setenv("FAKE_UV_ONLINE", "hang")
    monkeypatch.setattr(harness_uv, "OFFLINE_DEADLINE_S", 1.0)
    monkeypatch.setattr(harness_uv, "FILL_DEADLINE_S", 1.0)
    started = time.monotonic()
    with pytest.raises(HarnessEnvironmentError, match="no answer within 1 s") as caught:
        offline_env(SCRIPT, HARNESS_ENV)
    assert time.monotonic() - started < 20, "each uv call must end at its deadline"
    assert "UV_OFFLINE=1" in str(caught.value)
    child = int((tmp_path / "uv.log.child").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "uv's own children die with it (its process group is killed)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split(") ", 1)[1].startswith("Z"))


def test_without_uv_on_path_nothing_is_decided(fake_uv, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert offline_env(SCRIPT, HARNESS_ENV) == {}
    assert fake_uv.calls() == []


@A_ONLY
def test_the_null_harness_program_is_found_and_a_harness_without_one_is_left_alone() -> None:
    from verifiers.v1.harnesses.null.harness import NullHarness

    found = program_attribute(NullHarness)
    assert found is not None and '"openai", "mcp"' in getattr(*found)
    assert program_attribute(type(object())) is None


@A_ONLY
def test_generation_a_runs_a_cached_harness_with_uv_offline(fake_uv, monkeypatch) -> None:
    from adapter.episodes.generations.a import GenerationA

    monkeypatch.setenv("FAKE_UV_OFFLINE", "0")
    data = tomllib.loads(installed().bundled_config("arith-v1").read_text())
    backend = GenerationA(data)
    env = backend.env.harness.config.resolved_env
    assert env["UV_OFFLINE"] == "1" and env["UV_CACHE_DIR"].endswith("2026-07-28T13-44-00Z")
    assert fake_uv.calls()[0]["env"]["UV_CACHE_DIR"] == env["UV_CACHE_DIR"]  # checked in the cache it will use


@A_ONLY
def test_generation_a_refuses_before_any_episode_when_the_harness_cannot_be_prepared(fake_uv, monkeypatch) -> None:
    from adapter.episodes.generations.a import GenerationA

    monkeypatch.setenv("FAKE_UV_OFFLINE", "1")
    monkeypatch.setenv("FAKE_UV_ONLINE", "2")
    with pytest.raises(HarnessEnvironmentError, match="UV_OFFLINE=1"):
        GenerationA(tomllib.loads(installed().bundled_config("arith-v1").read_text()))


@B_040
def test_generation_b_checks_the_harness_under_the_value_verifiers_forces(fake_uv, monkeypatch) -> None:
    from adapter.episodes.generations.b import GenerationB

    monkeypatch.setenv("FAKE_UV_OFFLINE", "0")  # a filled cache, which 0.4.0's preparation never uses alone
    monkeypatch.setenv("FAKE_UV_ONLINE", "2")
    with pytest.raises(HarnessEnvironmentError, match="UV_OFFLINE=false, so UV_OFFLINE=1 cannot help"):
        GenerationB(tomllib.loads(installed().bundled_config("arith-v1").read_text()))
    (call,) = fake_uv.calls()
    assert "--offline" not in call["argv"] and call["env"]["UV_OFFLINE"] == "false"


# --- the real uv, with no network at all ------------------------------------------------------

def _unshare_net() -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare (util-linux) to run without a network")
    probe = subprocess.run([unshare, "--net", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"this user may not create a network namespace (unshare --net: {probe.stderr.decode().strip()})")
    return [unshare, "--net"]


def _offline_python(code: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter inside a network namespace with no interface up."""
    argv = [*_unshare_net(), sys.executable, "-c", textwrap.dedent(code)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO)


def _base_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("UV_OFFLINE", "UV_CACHE_DIR")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return {**env, **values}


def _refused_offline(module: str, cls: str, env: dict[str, str]) -> Any:
    """Build generation `cls` on the bundled arith-v1 config with no network; the refusal it printed."""
    code = f"""
        import time, tomllib
        from adapter.errors import HarnessEnvironmentError
        from adapter.episodes.generations import installed
        from adapter.episodes.generations.{module} import {cls}
        started = time.monotonic()
        try:
            {cls}(tomllib.loads(installed().bundled_config("arith-v1").read_text()))
        except HarnessEnvironmentError as exc:
            print(f"REFUSED after {{time.monotonic() - started:.1f}} s: {{exc}}")
    """
    done = _offline_python(code, env, timeout=150)
    assert "REFUSED after" in done.stdout, done.stdout + done.stderr
    return done


def _refused_after(done: Any) -> float:
    return float(done.stdout.split("REFUSED after ", 1)[1].split(" s", 1)[0])


@A_ONLY
def test_offline_harness_fails_fast_naming_uv_offline(tmp_path) -> None:
    """No network and an empty harness cache: the refusal comes before any episode, in seconds."""
    env = _base_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = _refused_offline("a", "GenerationA", env)
    assert _refused_after(done) < 60, done.stdout  # was: silent until the episode's own timeouts (240 s and more)
    assert "UV_OFFLINE=1" in done.stdout and str(tmp_path / "cache") in done.stdout


@A_ONLY
def test_offline_harness_runs_from_a_filled_cache(monkeypatch) -> None:
    """No network, the harness cache filled: Verifiers' own preparation of the null harness (the
    step that waited on the index) completes, because the adapter gave the harness UV_OFFLINE=1."""
    pin = tomllib.loads(installed().bundled_config("arith-v1").read_text())["harness"]["env"]["UV_EXCLUDE_NEWER"]
    monkeypatch.delenv("UV_CACHE_DIR", raising=False)
    monkeypatch.delenv("UV_OFFLINE", raising=False)
    cache = harness_uv_cache(pin)  # the user's own harness cache, as the demo and the episodes use
    try:  # filled with network where it is empty (what the first online run does)
        from verifiers.v1.harnesses.null.harness import NullHarness

        offline_env(getattr(*program_attribute(NullHarness)), {"UV_EXCLUDE_NEWER": pin, "UV_CACHE_DIR": str(cache)})
    except HarnessEnvironmentError as exc:
        pytest.skip(f"needs the null harness' dependencies in uv's cache once (no network to fetch them): {exc}")
    env = _base_env(XDG_CACHE_HOME=str(user_cache_dir().parent))
    env.pop("UV_COMPILE_BYTECODE", None)  # the lanes set it; here the adapter must decide it
    code = """
        import asyncio, tomllib
        from adapter.episodes.generations import installed
        from adapter.episodes.generations.a import GenerationA
        from verifiers.v1.harnesses.null.harness import PROGRAM_SOURCE
        from verifiers.v1.runtimes.subprocess import SubprocessConfig, SubprocessRuntime
        harness = GenerationA(tomllib.loads(installed().bundled_config("arith-v1").read_text())).env.harness
        print("UV_OFFLINE", harness.config.resolved_env.get("UV_OFFLINE"))
        print("UV_COMPILE_BYTECODE", harness.config.resolved_env.get("UV_COMPILE_BYTECODE"))

        async def prepare():  # what the null harness' setup does, bounded
            runtime = SubprocessRuntime(SubprocessConfig())
            await runtime.start()
            try:
                env = harness.config.resolved_env
                return await asyncio.wait_for(runtime.prepare_uv_script(PROGRAM_SOURCE, env), 90)
            finally:
                runtime.cleanup()

        print("PREPARED", asyncio.run(prepare())[4])
    """
    done = _offline_python(code, env, timeout=150)
    assert "UV_OFFLINE 1" in done.stdout and "PREPARED" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "UV_COMPILE_BYTECODE 1" in done.stdout, done.stdout
    # the program's environment holds bytecode: a harness process reads it, never compiles openai again
    venv = Path(done.stdout.split("PREPARED ", 1)[1].split()[0])
    probe = "import os, openai, mcp; print(all(os.path.isfile(m.__cached__) for m in (openai, mcp)))"
    cached = subprocess.run([venv / "bin" / "python", "-c", probe], capture_output=True, text=True, timeout=60)
    assert cached.stdout.strip() == "True", cached.stdout + cached.stderr[-2000:]


@B_040
def test_offline_generation_b_040_fails_fast_saying_why_uv_offline_cannot_help(tmp_path) -> None:
    """verifiers 0.4.0 asks the index even with a filled cache: offline, the refusal comes first."""
    env = _base_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = _refused_offline("b", "GenerationB", env)
    assert _refused_after(done) < 60, done.stdout
    assert "UV_OFFLINE=false, so UV_OFFLINE=1 cannot help" in done.stdout
