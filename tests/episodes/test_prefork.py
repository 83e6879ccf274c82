"""The pre-forked harness runtime gives a program exactly what Verifiers' subprocess runtime gives it.

Each case runs one small Python program twice, through Verifiers 0.2.0's own `SubprocessRuntime`
and through `PreforkRuntime` (its subclass, forking from a zygote), in the form Verifiers starts a
harness program (`prepare_uv_script`'s `sh -c ... uv-script VENV PYTHON SCRIPT ARGS`), and
compares what the program saw and what the runtime reported: argv, environment (API keys
stripped), cwd, its own session, stdin, stdout, stderr, exit code. Then the cases only the warm
runtime could get wrong: a hang killed with its group, a child left behind, a zygote that dies,
a zygote that cannot start, 200 runs with flat memory and process count, and what a zygote
learns from its children's lazy imports.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from verifiers.v1.runtimes import SubprocessConfig, SubprocessRuntime

from adapter.episodes import prefork, zygote_program
from adapter.episodes.generations import union_runtime
from adapter.episodes.zygotes import ZygotePool
from benchmarks.common import rss_mb
from tests.e2e.test_e2e_runner import alive

WRAPPER = next(iter(prefork.UV_SCRIPT_WRAPPERS))
SEES = textwrap.dedent('''
    import json, os, sys
    print(json.dumps({"argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd(), "path0": sys.path[0],
                      "own_session": os.getsid(0) == os.getpid() == os.getpgid(0), "stdin": sys.stdin.read(),
                      "executable": sys.executable, "name": __name__}))
    print("to stderr", file=sys.stderr)
    sys.exit(int(os.environ.get("EXIT", "0")))
''')


@pytest.fixture
def pool(monkeypatch, tmp_path) -> Any:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the zygotes' learned modules, per test
    pool = ZygotePool()
    union_runtime.install(pool)
    yield pool
    union_runtime.uninstall()
    pool.close()


def _script(tmp_path: Path, source: str, name: str = "program.py") -> Path:
    path = tmp_path / "scripts" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(source)
    return path


def _argv(script: Path, *args: str) -> list[str]:
    return ["sh", "-c", WRAPPER, "uv-script", str(Path(sys.executable).parent.parent), sys.executable, str(script),
            *args]


async def _run(runtime_class: type, argv: list[str], env: dict[str, str], name: str) -> Any:
    runtime = runtime_class(SubprocessConfig(), name)
    await runtime.start()
    try:
        return await runtime.run(argv, env), runtime.workdir
    finally:
        await runtime.stop()


async def _both(pool: ZygotePool, argv: list[str], env: dict[str, str], tag: str) -> tuple[Any, Any]:
    plain, plain_dir = await _run(SubprocessRuntime, argv, env, f"vf-plain-{tag}-{os.getpid()}")
    warm, warm_dir = await _run(union_runtime.PreforkRuntime, argv, env, f"vf-warm-{tag}-{os.getpid()}")
    assert pool.zygote_pids(), "the program did not run from a zygote"
    return (plain, str(plain_dir)), (warm, str(warm_dir))


def _seen(result: Any, workdir: str) -> dict[str, Any]:
    seen = json.loads(result.stdout)
    seen["cwd"] = seen["cwd"].replace(workdir, "<workdir>")  # each runtime has its own
    seen["env"] = {k: v.replace(workdir, "<workdir>") for k, v in seen["env"].items()}
    return seen


@pytest.mark.parametrize(("case", "env"), [
    ("exits 0", {}),
    ("exits non-zero", {"EXIT": "3"}),
    # what an episode sets for its proxies and certificates reaches the program, not the zygote's
    ("reads proxy and certificate variables", {"NO_PROXY": "127.0.0.1,localhost", "HTTP_PROXY": "http://proxy:3128",
                                               "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}),
    ("an API key handed in explicitly", {"MY_API_KEY": "given"}),
])
async def test_a_program_sees_and_reports_what_the_subprocess_runtime_gives_it(
        pool, tmp_path, monkeypatch, case, env) -> None:
    monkeypatch.setenv("HOST_API_KEY", "never-inherited")  # Verifiers strips host API keys
    script = _script(tmp_path, SEES)
    (plain, plain_dir), (warm, warm_dir) = await _both(pool, _argv(script, "--flag", "a b"), env, "sees")
    assert (warm.exit_code, warm.stderr) == (plain.exit_code, plain.stderr) == (int(env.get("EXIT", 0)), "to stderr\n")
    seen = _seen(warm, warm_dir)
    assert seen == _seen(plain, plain_dir), case
    assert seen["argv"] == [str(script), "--flag", "a b"] and seen["own_session"] and seen["stdin"] == ""
    assert "HOST_API_KEY" not in seen["env"] and all(seen["env"][k] == v for k, v in env.items())
    assert seen["name"] == "__main__" and seen["path0"] == str(script.parent)


@pytest.mark.parametrize("python", ["python3", sys.executable], ids=["on PATH", "absolute"])
async def test_a_program_given_with_dash_c_sees_what_the_subprocess_runtime_gives_it(
        pool, monkeypatch, python) -> None:
    """The tool servers' readiness probe: `python3 -c CODE URL` (0.2.x, 0.3.x), `sys.executable -c ...` (0.4.x)."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    argv = [python, "-c", SEES, "http://127.0.0.1:1/mcp"]
    (plain, plain_dir), (warm, warm_dir) = await _both(pool, argv, {"EXIT": "4"}, "dash-c")
    assert (warm.exit_code, warm.stderr) == (plain.exit_code, plain.stderr) == (4, "to stderr\n")
    seen = _seen(warm, warm_dir)
    assert seen == _seen(plain, plain_dir)
    assert seen["argv"] == ["-c", "http://127.0.0.1:1/mcp"] and seen["path0"] == "" and seen["name"] == "__main__"


async def test_a_program_that_hangs_past_its_timeout_is_killed_with_its_whole_group(pool, tmp_path) -> None:
    pids = tmp_path / "pids"
    script = _script(tmp_path, textwrap.dedent(f'''
        import os, subprocess, time
        child = subprocess.Popen(["sleep", "300"])
        open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(300)
    '''))
    runtime = union_runtime.PreforkRuntime(SubprocessConfig(), f"vf-hang-{os.getpid()}")
    await runtime.start()
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(runtime.run(_argv(script), {}), timeout=5)  # the rollout's harness timeout
    finally:
        await runtime.stop()
    await asyncio.sleep(0.5)
    assert pool.zygote_pids()
    for pid in map(int, pids.read_text().split()):
        assert not alive(pid), f"{pid} outlived the rollout"


async def test_a_child_the_program_leaves_behind_does_not_outlive_the_rollout(pool, tmp_path) -> None:
    script = _script(tmp_path, textwrap.dedent('''
        import subprocess
        print(subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL).pid)
    '''))
    runtime = union_runtime.PreforkRuntime(SubprocessConfig(), f"vf-left-{os.getpid()}")
    await runtime.start()
    try:
        result = await runtime.run(_argv(script), {})
    finally:
        await runtime.stop()
    assert result.exit_code == 0
    await asyncio.sleep(0.2)
    assert not alive(int(result.stdout))


async def test_a_background_server_runs_forked_and_its_group_ends_with_the_rollout(pool, tmp_path) -> None:
    """A tool server: `python -m module`, its output to a log in the workdir, SIGTERM at cleanup."""
    package = tmp_path / "srv"
    package.mkdir()
    (package / "toolserver.py").write_text(
        "import os, time\nprint('serving', os.getpid(), flush=True)\ntime.sleep(300)\n")
    runtime = union_runtime.PreforkRuntime(SubprocessConfig(), f"vf-bg-{os.getpid()}")
    await runtime.start()
    try:
        await runtime.run_background([sys.executable, "-m", "toolserver"], {"PYTHONPATH": str(package)}, "tool.log")
        log = runtime.workdir / "tool.log"
        for _ in range(100):
            if log.exists() and "serving" in log.read_text():
                break
            await asyncio.sleep(0.1)
        pid = int(log.read_text().split()[1])
        assert len(pool.zygote_pids()) == 1 and alive(pid)
    finally:
        await runtime.stop()
    await asyncio.sleep(0.3)
    assert not alive(pid)


async def test_a_dead_zygote_is_started_again(pool, tmp_path) -> None:
    script = _script(tmp_path, "print('ok')\n")
    first = await _run(union_runtime.PreforkRuntime, _argv(script), {}, f"vf-z1-{os.getpid()}")
    (zygote,) = pool.zygote_pids()
    os.kill(zygote, signal.SIGKILL)
    await asyncio.sleep(0.3)
    second = await _run(union_runtime.PreforkRuntime, _argv(script), {}, f"vf-z2-{os.getpid()}")
    assert first[0].stdout == second[0].stdout == "ok\n"
    assert pool.zygote_pids() and pool.zygote_pids() != [zygote]


LAZY = textwrap.dedent('''
    import importlib, sys
    name = sys.argv[1]
    print(name in sys.modules)  # imported before the program ran: by its zygote
    importlib.import_module(name)  # a lazy import: the zygote cannot see it in the source
''')


async def test_a_module_children_import_lazily_is_imported_by_the_zygote_and_by_its_successors(
        pool, tmp_path) -> None:
    script = _script(tmp_path, LAZY)
    runtime = union_runtime.PreforkRuntime(SubprocessConfig(), f"vf-lazy-{os.getpid()}")
    await runtime.start()
    try:
        seen = [(await runtime.run(_argv(script, "colorsys"), {})).stdout for _ in range(2)]
        assert seen == ["False\n", "True\n"]  # the first child's report taught its zygote
        (zygote,) = pool.zygote_pids()
        os.kill(zygote, signal.SIGKILL)
        await asyncio.sleep(0.3)
        successor = (await runtime.run(_argv(script, "colorsys"), {})).stdout
        assert successor == "True\n" and pool.zygote_pids() != [zygote]  # it read what the first one learned
    finally:
        await runtime.stop()


async def test_a_zygote_that_learns_nothing_more_asks_one_child_in_sixteen_and_still_learns(pool, tmp_path) -> None:
    """Listing a child's modules copies pages of the zygote's memory, so a quiet zygote samples."""
    assert (zygote_program.QUIET_AFTER, zygote_program.SAMPLE_EVERY) == (8, 16)
    script = _script(tmp_path, LAZY)
    runtime = union_runtime.PreforkRuntime(SubprocessConfig(), f"vf-quiet-{os.getpid()}")
    await runtime.start()
    try:
        for _ in range(1 + 8):  # fork 1 teaches colorsys; forks 2-9 teach nothing: the zygote is quiet
            await runtime.run(_argv(script, "colorsys"), {})
        seen = [(await runtime.run(_argv(script, "wave"), {})).stdout for _ in range(9)]  # forks 10-18
    finally:
        await runtime.stop()
    assert seen == ["False\n"] * 7 + ["True\n"] * 2  # fork 16 reported wave; forks 17 and 18 had it


async def test_episodes_cancelled_while_their_zygote_starts_leave_it_working_for_the_next(
        pool, tmp_path, monkeypatch) -> None:
    """An interrupted run, an episode's timeout, an over-sampled group cancelled: episodes
    cancelled while the zygote still imports (or while their child starts) cancel nobody else's
    wait, break no thread of the pool, and leave no child running."""
    import threading

    broken: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: broken.append(args.exc_value))
    (tmp_path / "slow_import.py").write_text("import time\ntime.sleep(1.0)\n")
    script = _script(tmp_path, "import slow_import, time\nprint('ran', flush=True)\ntime.sleep(300)\n")
    marker = tmp_path / "started"
    quick = _script(tmp_path, f"import slow_import\nopen({str(marker)!r}, 'w').close()\nprint('ok')\n",
                    name="quick.py")
    runtime = union_runtime.PreforkRuntime(SubprocessConfig(), f"vf-cancel-{os.getpid()}")
    await runtime.start()
    try:
        env = {"PYTHONPATH": str(tmp_path)}
        for delay in (0.2, 0.5, 1.5):  # while it imports, about when it is ready, once children run
            episodes = [asyncio.create_task(runtime.run(_argv(script), env)) for _ in range(3)]
            await asyncio.sleep(delay)
            for episode in episodes:
                episode.cancel()
            await asyncio.gather(*episodes, return_exceptions=True)
        result = await runtime.run(_argv(quick), env)
    finally:
        await runtime.stop()
    assert (result.exit_code, result.stdout) == (0, "ok\n") and marker.exists()
    assert broken == [], "a pool thread died"
    await asyncio.sleep(0.3)
    assert _children_of(pool.zygote_pids()) == [], "a cancelled episode's program still runs"


def _children_of(parents: list[int]) -> list[int]:
    """The live processes whose parent is one of `parents` (a forked child keeps its zygote's argv)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) in parents and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


async def test_a_zygote_that_cannot_start_runs_the_program_plainly_and_says_why(pool, tmp_path, caplog) -> None:
    """An interpreter the zygote cannot run: the episode still runs, as Verifiers runs it."""
    script = _script(tmp_path, "print('plain')\n")
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ncase \"$1\" in *zygote_program.py) exit 1;; esac\n"
                    f"exec {sys.executable} \"$@\"\n")
    fake.chmod(0o755)
    argv = ["sh", "-c", WRAPPER, "uv-script", str(tmp_path), str(fake), str(script)]
    with caplog.at_level("WARNING", logger="adapter.episodes.zygotes"):
        result, _ = await _run(union_runtime.PreforkRuntime, argv, {}, f"vf-nozygote-{os.getpid()}")
    assert (result.exit_code, result.stdout) == (0, "plain\n")
    assert any("no warm interpreter" in r.getMessage() and "zygote ended" in r.getMessage() for r in caplog.records)


async def test_two_hundred_runs_keep_the_zygotes_memory_and_the_process_count_flat(pool, tmp_path) -> None:
    script = _script(tmp_path, "import json, email.mime.text\nprint(json.dumps(list(range(100))))\n")
    runtime = union_runtime.PreforkRuntime(SubprocessConfig(), f"vf-flat-{os.getpid()}")
    await runtime.start()
    samples = []
    try:
        for _ in range(10):
            results = await asyncio.gather(*[runtime.run(_argv(script), {}) for _ in range(20)])
            assert all(r.exit_code == 0 for r in results)
            (zygote,) = pool.zygote_pids()
            samples.append((rss_mb(zygote), len(_children_of(zygote)), len(_children_of(os.getpid()))))
    finally:
        await runtime.stop()
    rss = [s[0] for s in samples]
    assert max(rss[2:]) - rss[2] < 4, rss  # MiB: after its first batches taught it their imports
    assert {s[1] for s in samples} == {0}, samples  # every child reaped
    assert len({s[2] for s in samples}) == 1, samples


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return found
