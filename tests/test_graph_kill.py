"""Kill a real headless run (SIGKILL, mid-generation) and resume it from the command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graph.archive import Archive
from tests.scientist_script import FIXTURES

pytestmark = pytest.mark.slow  # every test here starts runs, workers or a server

TUNABLE_SEED = FIXTURES / "softmax_tunable.py"
CLI = [sys.executable, "-c", "from graph.cli import app; app()"]


def cli_env(runs: Path) -> dict[str, str]:
    env = dict(os.environ, KS_RUNS_DIR=str(runs))
    for name in ("KS_LLM_MODEL", "KS_LLM_BASE_URL"):
        env.pop(name, None)  # the Tuner-only mode: no LLM
    return env


def wait_for(predicate, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before the kill point:\n{proc.stdout.read()}")
        time.sleep(0.2)
    raise AssertionError("the kill point was never reached")


def test_sigkill_mid_generation_then_resume_loses_and_repeats_nothing(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    args = ["run", "softmax", "--seed", str(TUNABLE_SEED), "-g", "2", "-k", "2", "--budget", "0.2", "--plain"]
    proc = subprocess.Popen(
        CLI + args,
        env=cli_env(runs),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    archive_path: list[Path] = []

    def one_experiment_done_and_generation_unfinished() -> bool:
        found = list(runs.glob("*/archive.sqlite"))
        if not found:
            return False
        archive_path[:] = found
        archive = Archive(found[0])
        try:
            done = [e for e in archive.experiments() if e.status == "done"]
            return len(done) >= 1 and not archive.generations()
        finally:
            archive.close()

    try:
        wait_for(one_experiment_done_and_generation_unfinished, 240, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    archive = Archive(archive_path[0])
    before_done = {e.id: e.kernel_id for e in archive.experiments() if e.status == "done"}
    before_kernels = {k.id: k.sha256 for k in archive.kernels()}
    assert archive.get_meta("status") == "running"  # it never got to say otherwise
    run_id = archive_path[0].parent.name

    resumed = subprocess.run(
        CLI + ["run", "--resume", run_id, "--plain"], env=cli_env(runs), capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "generation budget reached (2)" in resumed.stdout
    after_done = {e.id: e.kernel_id for e in archive.experiments() if e.status == "done"}
    assert all(after_done[eid] == kid for eid, kid in before_done.items())  # no finished experiment lost
    assert {k.id: k.sha256 for k in archive.kernels() if k.id in before_kernels} == before_kernels
    log = archive.evaluation_log()
    assert len({row["sha256"] for row in log}) == len(log)  # no evaluation repeated
    assert {row["pid"] for row in log} == {log[0]["pid"], log[-1]["pid"]} and log[0]["pid"] != log[-1]["pid"]
    assert sorted(after_done) == ["g1e0", "g1e1", "g2e0", "g2e1"]
    assert archive.get_meta("status") == "finished"
    # The Tuner's variants found a faster chunking than the seed's (64 rows in one chunk: one thread).
    assert archive.best().origin == "tune"

    export = subprocess.run(CLI + ["export", run_id], env=cli_env(runs), capture_output=True, text=True)
    assert export.returncode == 0, export.stderr
    assert (runs / run_id / "submission.py").read_text().startswith("#!POPCORN leaderboard softmax\n")
