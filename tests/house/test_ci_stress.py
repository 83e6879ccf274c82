"""`python3 -m tools.ci stress LANE` (tools/ci/stress.py, tools/ci/stress_doc.py): a lane run again
and again beside a hog (one busy process per core, killed whatever happens) or beside the lanes its
CI stage pairs it with; every run counted, exit 1 on any failure; its row merged into docs/ci.md's
Stress section, which `tools.ci run --write` keeps.

The lanes here are tiny fakes: the runner's own `run_lane` runs, its tox call replaced by a short
`python -c` (as tests/house/test_ci_lanes.py does); the hog's busy loop is replaced by a sleeper
that names its pid (and its child's) in a folder, except where the hog's burning is the claim."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tools.ci import lanes, runner, stress
from tools.ci.__main__ import main
from tools.ci.lanes import STAGES, lane_order, partners
from tools.ci.report import document
from tools.ci.runner import Result
from tools.ci.stress import Load, StressRun
from tools.ci.stress_doc import BEGIN, END, carry, merge, row, rows, run_table

WHEN = datetime(2026, 12, 6, tzinfo=UTC)
FRESH: dict[str, int] = {}  # lane → how many of its runs had its envs dropped first


def _lane_exits(counter: Path, failing_run: int | None = None) -> str:
    """A fake lane that counts its runs in `counter` and fails on run `failing_run`."""
    return (f"import pathlib; p = pathlib.Path({str(counter)!r}); n = int(p.read_text()) + 1 if p.exists() else 1; "
            f"p.write_text(str(n)); print('run', n); raise SystemExit(int(n == {failing_run!r}))")


def _waits_for_hogs(folder: Path, count: int, code: int) -> str:
    """A fake lane that waits (≤ 30 s) until `count` hogs have named themselves, then exits `code`."""
    return (f"import pathlib, sys, time; d = pathlib.Path({str(folder)!r}); end = time.monotonic() + 30\n"
            f"while len(list(d.iterdir())) < {count}:\n"
            f"    sys.exit(3) if time.monotonic() > end else time.sleep(0.05)\n"
            f"print('hogs', sorted(p.name for p in d.iterdir())); raise SystemExit({code})")


@pytest.fixture
def hogs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each hog sleeps instead of burning, with a child of its own, and names both pids in the folder
    (any still alive after the test, where it failed, are killed then)."""
    folder = tmp_path / "hogs"
    folder.mkdir()
    program = ("import os, pathlib, subprocess, sys, time\n"
               "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
               f"pathlib.Path({str(folder)!r}, f'{{os.getpid()}}-{{child.pid}}').touch()\n"
               "time.sleep(600)\n")
    monkeypatch.setattr(stress, "hog_argv", lambda: [sys.executable, "-c", program])
    yield folder
    for pid in (int(pid) for name in os.listdir(folder) for pid in name.split("-")):
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _fake_lanes(monkeypatch: pytest.MonkeyPatch, programs: dict[str, str]) -> None:
    def argv(lane: str) -> list[str]:
        return [sys.executable, "-c", programs.get(lane, "print(1)")]

    def dropped(lane: str) -> list[Path]:
        FRESH[lane] = FRESH.get(lane, 0) + 1
        return []

    FRESH.clear()
    monkeypatch.setattr(runner, "tox_argv", argv)
    monkeypatch.setattr(runner, "drop_envs", dropped)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _all_dead(folder: Path) -> list[int]:
    """The hogs' and their children's pids still alive after 10 s (a SIGKILL lands at once; an orphan
    is reaped by init a moment later)."""
    pids = [int(pid) for name in os.listdir(folder) for pid in name.split("-")]
    assert pids, "no hog ever started"
    end = time.monotonic() + 10
    while (alive := [pid for pid in pids if _alive(pid)]) and time.monotonic() < end:
        time.sleep(0.05)
    return alive


def test_every_run_is_made_and_all_passing_exits_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hogs: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    _fake_lanes(monkeypatch, {"fast": _lane_exits(tmp_path / "count")})
    assert main(["stress", "fast", "--logs", str(tmp_path / "logs")]) == 0
    assert (tmp_path / "count").read_text() == "3"
    assert FRESH == {"fast": 3}  # every run builds the lane's env anew, as CI's clean checkout does
    printed = capsys.readouterr().out
    assert "fast: 3/3 runs passed" in printed and "===== fast: run 3 of 3, beside hog ×" in printed
    assert (tmp_path / "logs" / "run-2" / "fast.log").read_text() == "run 2\n"


def test_a_failed_run_is_counted_and_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hogs: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _fake_lanes(monkeypatch, {"lint": _lane_exits(tmp_path / "count", failing_run=2)})
    doc = tmp_path / "ci.md"
    assert main(["stress", "lint", "--runs", "3", "--logs", str(tmp_path / "logs"), "--write", str(doc)]) == 1
    assert (tmp_path / "count").read_text() == "3", "the runs after a failed one are still made"
    printed = capsys.readouterr().out
    assert "lint: 2/3 runs passed" in printed
    assert [line.split()[3] for line in printed.splitlines() if line.lstrip()[:1] in "123" and " s  " in line] == [
        "passed", "failed", "passed"]
    (lint,) = rows(doc.read_text()).values()
    assert lint.startswith("| lint | hog ×") and "| 2/3 | " in lint and " (failed), " in lint


def test_the_hog_is_one_process_per_core_started_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 hogs: Path) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    _fake_lanes(monkeypatch, {"wheel": _waits_for_hogs(hogs, 3, 0)})
    (run,) = stress.stress("wheel", runs=1, logs=tmp_path / "logs", stream=io.StringIO())
    assert run.result.ok, (tmp_path / "logs" / "run-1" / "wheel.log").read_text()
    assert run.load == Load("hog", hogs=3) and len(os.listdir(hogs)) == 3


def test_the_hog_is_killed_when_the_lane_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hogs: Path) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    _fake_lanes(monkeypatch, {"fast": _waits_for_hogs(hogs, 2, 1)})
    (run,) = stress.stress("fast", runs=1, logs=tmp_path / "logs", stream=io.StringIO())
    assert run.result.status == "failed (exit 1)", (tmp_path / "logs" / "run-1" / "fast.log").read_text()
    assert _all_dead(hogs) == []


def test_the_hog_is_killed_when_the_run_is_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       hogs: Path) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)

    def interrupted(lane: str, logs: Path, *, stream: object, fresh: bool) -> Result:
        subprocess.run([sys.executable, "-c", _waits_for_hogs(hogs, 2, 0)], check=True, capture_output=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(stress, "run_lane", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stress.stress("fast", runs=2, logs=tmp_path / "logs", stream=io.StringIO())
    assert len(os.listdir(hogs)) == 2, "the second run never started"
    assert _all_dead(hogs) == []


def test_the_real_hog_burns_a_core_until_killed() -> None:
    """Its CPU time climbs while the test only waits (a sleeping 'hog' never gets there)."""
    ticks = os.sysconf("SC_CLK_TCK")
    with stress.hog(1) as (proc,):
        end = time.monotonic() + 20
        burnt = 0.0
        while burnt < 0.3 and time.monotonic() < end:
            time.sleep(0.1)
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            burnt = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    assert burnt >= 0.3
    assert proc.returncode is not None and proc.returncode < 0, "killed by a signal"


def test_a_hog_outlives_no_stress_run_however_it_ends() -> None:
    """A stress run killed by a signal runs no `finally`: its hogs must end by themselves."""
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time\n"
                               "from tools.ci import stress\n"
                               "print(subprocess.Popen(stress.hog_argv()).pid, flush=True)\n"
                               "time.sleep(600)"],
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
    assert parent.stdout is not None
    hog = int(parent.stdout.readline())
    try:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _alive(hog):
            time.sleep(0.05)
        assert not _alive(hog), "the hog kept burning after its stress run was killed"
    finally:
        parent.stdout.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(hog, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """A running process (a zombie is reaped by init, so its /proc state says Z until then)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_lanes_ci_partners_are_the_other_tracks_of_its_stage() -> None:
    assert partners("lint") == (("fast",),) and partners("fast") == (("lint", "lane-isolation"),)
    assert partners("canary") == (("matrix",),) and partners("rl-cpu") == (("miles",),)
    for stage in STAGES:
        for track in stage:
            for lane in track:
                assert {lane for other in partners(lane) for lane in other} == {
                    lane for other in stage if other != track for lane in other}


def test_pair_runs_the_lane_beside_its_ci_partners_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each fake lane marks its start and passes only once it has seen the other's mark."""
    def meets(me: str, other: str) -> str:
        return (f"import pathlib, sys, time; d = pathlib.Path({str(tmp_path)!r}); (d / 'up-{me}').touch()\n"
                f"end = time.monotonic() + 30\n"
                f"while not (d / 'up-{other}').exists():\n"
                f"    sys.exit(1) if time.monotonic() > end else time.sleep(0.05)\n")

    monkeypatch.setattr(stress, "hog", None)  # no hog in pair mode
    _fake_lanes(monkeypatch, {"matrix": meets("matrix", "canary"), "canary": meets("canary", "matrix"),
                              "e2e": "print('e2e')"})
    out = io.StringIO()
    runs = stress.stress("canary", runs=2, against="pair", logs=tmp_path / "logs", stream=out)
    assert [run.result.status for run in runs] == ["passed", "passed"]
    assert [[(r.lane, r.status) for r in run.beside] for run in runs] == [[("matrix", "passed")]] * 2
    assert FRESH == {"canary": 2, "matrix": 2}
    assert runs[0].load.label == "pair: matrix" and "----- matrix (run beside canary) -----" in out.getvalue()


def test_pair_falls_back_to_the_hog_for_a_lane_ci_runs_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              hogs: Path) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    alone = (*((tuple(tuple(lane for lane in track if lane != "rl-cpu") for track in stage)) for stage in STAGES),
             (("rl-cpu",),))
    monkeypatch.setattr(lanes, "STAGES", alone)
    _fake_lanes(monkeypatch, {"rl-cpu": _waits_for_hogs(hogs, 2, 0)})
    out = io.StringIO()
    (run,) = stress.stress("rl-cpu", runs=1, against="pair", logs=tmp_path / "logs", stream=out)
    assert run.result.ok and run.load.label == "hog ×2 (no CI partner)"
    assert "rl-cpu runs alone in CI's stages: no partner to pair it with, so the hog instead" in out.getvalue()


def _run(lane: str, *statuses: str, load: Load | None = None) -> list[StressRun]:
    return [StressRun(load or Load("hog", hogs=2), Result(lane, 10.0 + i, status, None))
            for i, status in enumerate(statuses)]


def test_the_run_table_shows_each_runs_wall_status_and_load() -> None:
    load = Load("pair", beside=(("e2e", "canary"),))
    runs = [StressRun(load, Result("matrix", 61.04, "failed (exit 1)", None),
                      (Result("e2e", 30.0, "passed", None), Result("canary", 20.0, "passed", None)))]
    assert run_table("matrix", runs).splitlines()[2:] == [
        "  1    61.0 s  failed (exit 1)   pair: e2e + canary; e2e passed; canary passed",
        "matrix: 0/1 runs passed"]


def test_a_stress_row_replaces_its_lanes_row_and_keeps_the_others_in_ci_order() -> None:
    doc = merge(None, row("rl-cpu", _run("rl-cpu", "passed"), WHEN))
    doc = merge(doc, row("fast", _run("fast", "passed", "failed (exit 1)"), WHEN))
    doc = merge(doc, row("fast", _run("fast", "passed", "passed", "passed"), WHEN))
    assert list(rows(doc).values()) == [
        "| fast | hog ×2 | 3/3 | 10, 11, 12 | 2026-12-06 |",
        "| rl-cpu | hog ×2 | 1/1 | 10 | 2026-12-06 |",
    ]
    assert doc.count(BEGIN) == doc.count(END) == doc.count("## Stress") == 1


def test_stress_adds_its_section_at_the_end_and_leaves_the_rest_alone() -> None:
    written = document([Result(lane, 1.0, "passed", None) for lane in lane_order()], machine="2 cores",
                       fast_log=None, when=WHEN)
    assert BEGIN not in written
    doc = merge(written, row("e2e", _run("e2e", "passed"), WHEN))
    assert doc.startswith(written.rstrip("\n") + "\n\n" + BEGIN) and doc.endswith(END + "\n")
    again = merge(doc, row("lint", _run("lint", "passed"), WHEN))
    assert again.startswith(written.rstrip("\n") + "\n\n" + BEGIN) and list(rows(again)) == ["lint", "e2e"]


def test_ci_run_keeps_the_stress_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tools.ci run --write` over a docs/ci.md holding a Stress section: the run's table is new,
    the Stress rows are the old ones (document() itself, and the command end to end)."""
    stressed = merge("# old ci.md\n\n| fast | `fast` | 999 s |\n", row("router", _run("router", "passed"), WHEN))
    kept = document([Result(lane, 2.0, "passed", None) for lane in lane_order()], machine="2 cores", fast_log=None,
                    when=WHEN, previous=stressed)
    assert rows(kept) == rows(stressed) and "999 s" not in kept and "| fast | `fast` | 2 s |" in kept
    assert carry(None, "x\n") == carry("no section\n", "x\n") == "x\n"

    _fake_lanes(monkeypatch, {})
    doc = tmp_path / "ci.md"
    doc.write_text(stressed)
    assert main(["run", "--write", str(doc), "--logs", str(tmp_path / "logs")]) == 0
    assert rows(doc.read_text()) == rows(stressed) and "999 s" not in doc.read_text()


def test_stress_write_keeps_what_ci_run_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hogs: Path) -> None:
    _fake_lanes(monkeypatch, {})
    doc = tmp_path / "ci.md"
    assert main(["run", "--write", str(doc), "--logs", str(tmp_path / "logs")]) == 0
    written = doc.read_text()
    days = {f"{datetime.now(UTC):%Y-%m-%d}"}
    assert main(["stress", "sglang-schema", "--runs", "1", "--write", str(doc), "--logs", str(tmp_path / "s")]) == 0
    days.add(f"{datetime.now(UTC):%Y-%m-%d}")
    after = doc.read_text()
    assert after.startswith(written.rstrip("\n")) and list(rows(after)) == ["sglang-schema"]
    cells = [cell.strip() for cell in rows(after)["sglang-schema"].split("|")[1:-1]]
    assert cells[0] == "sglang-schema" and cells[1].startswith("hog ×") and cells[2] == "1/1"
    assert cells[3].isdigit() and cells[4] in days


def test_a_pair_run_writes_a_row_for_each_partner_beside_the_stressed_lane(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Stage 1 stressed from the fast lane: its partner track (lint + lane-isolation) ran beside it
    each time, so each partner gets its own row; lint fails its second run, so lane-isolation after
    it is not run then, and not counted."""
    counter = tmp_path / "lint-count"
    _fake_lanes(monkeypatch, {"lint": _lane_exits(counter, failing_run=2)})
    doc = tmp_path / "ci.md"
    code = main(["stress", "fast", "--against", "pair", "--runs", "2", "--write", str(doc),
                 "--logs", str(tmp_path / "logs")])
    assert code == 1  # a partner's failed run fails the stress run too
    table = rows(doc.read_text())
    assert list(table) == ["fast", "lint", "lane-isolation"]
    cells = {lane: [cell.strip() for cell in line.split("|")[1:-1]] for lane, line in table.items()}
    assert cells["fast"][1:3] == ["pair: lint + lane-isolation", "2/2"]
    assert cells["lint"][1:3] == ["pair: fast", "1/2"] and cells["lint"][3].endswith("(failed)")
    assert cells["lane-isolation"][1:3] == ["pair: fast", "1/1"]
    assert "lint: 1/2 runs passed" in capsys.readouterr().out


def test_runs_must_be_one_or_more(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["stress", "fast", "--runs", "0", "--logs", str(tmp_path)])
    assert refused.value.code == 2 and not (tmp_path / "run-1").exists()


def test_dropping_lints_envs_removes_the_caches_it_left_in_the_checkout(tmp_path: Path) -> None:
    workdir = tmp_path / ".tox"
    for path in (workdir / "lint", tmp_path / ".mypy_cache", tmp_path / ".ruff_cache", tmp_path / "adapter"):
        path.mkdir(parents=True)
    dropped = runner.drop_envs("lint", workdir)
    assert sorted(p.name for p in dropped) == [".mypy_cache", ".ruff_cache", "lint"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tox", "adapter"]


def test_dropping_a_lanes_envs_removes_its_tox_env_dirs_and_no_other(tmp_path: Path) -> None:
    for env in ("contract-vf020", "contract-vf040", "fast"):
        (tmp_path / env / "bin").mkdir(parents=True)
    dropped = runner.drop_envs("matrix", tmp_path)
    assert sorted(p.name for p in dropped) == ["contract-vf020", "contract-vf040"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fast"]
