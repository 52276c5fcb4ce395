"""The judge stops a CPU runner's whole sandbox before it reads outputs (sandbox/judge/session.py's
`_freeze`), and the stop holds even where the sandbox's own processes undo it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import suppress

import pytest

from sandbox.judge import procs
from sandbox.judge.session import RunnerBroke, RunnerSession

# A helper in a session of its own that sends SIGCONT to a pid as fast as it can (red-team round 30).
_CONTINUER = """
import os, signal, sys
target = int(sys.argv[1])
while True:
    try:
        os.kill(target, signal.SIGCONT)
    except ProcessLookupError:
        break
"""


@pytest.fixture
def continued() -> Iterator[list[subprocess.Popen[bytes]]]:
    """A busy process (its own process group) and four helpers that keep continuing it."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        started.append(subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True))
        for _ in range(4):
            started.append(subprocess.Popen([sys.executable, "-c", _CONTINUER, str(started[0].pid)],
                                            start_new_session=True))
        time.sleep(0.3)  # the helpers are running
        yield started
    finally:
        for proc in reversed(started):  # the helpers first: they exit once the busy process is gone
            with suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def _session_over(pids: list[int]) -> RunnerSession:
    """A runner session whose sandbox is these processes (the first one's group the runner's)."""
    session = RunnerSession.__new__(RunnerSession)
    session.host_pid, session._frozen = pids[0], []
    session._sandbox_pids = lambda: list(pids)  # type: ignore[method-assign]
    return session


def test_a_stop_holds_while_the_sandboxs_own_helpers_keep_sending_sigcont(continued) -> None:
    pids = [proc.pid for proc in continued]
    session = _session_over(pids)
    stopped = session._stop_all()
    assert sorted(stopped) == sorted(pids)
    assert procs.all_stopped(pids)
    time.sleep(0.05)  # nothing is left running to continue another
    assert procs.all_stopped(pids)
    assert sorted(session._frozen) == sorted(pids)


def _scripted(monkeypatch: pytest.MonkeyPatch, readings: Iterator[dict[int, tuple[str, int]]]) -> RunnerSession:
    """A session over a process of this test's own (signals to it are ignored) whose readings are scripted."""
    monkeypatch.setattr(procs, "threads", lambda pids: next(readings))
    monkeypatch.setattr(os, "killpg", lambda pid, sig: None)
    monkeypatch.setattr(os, "kill", lambda pid, sig: None)
    return _session_over([12345])


def test_a_thread_that_ran_between_two_still_readings_means_another_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    # Read one after another, a helper read as stopped may have continued the runner just before it stopped
    # itself: the runner, read stopped earlier, has run since, and its run time says so.
    readings = iter([{1: ("T", 100), 2: ("T", 7)}, {1: ("T", 150), 2: ("T", 7)},  # ran in between: not still
                     {1: ("T", 150), 2: ("T", 7)}, {1: ("T", 150), 2: ("T", 7)}])
    session = _scripted(monkeypatch, readings)
    assert session._stop_all() == [12345]
    with pytest.raises(StopIteration):
        next(readings)  # all four readings were needed


def test_threads_seen_stopped_and_running_again_until_the_deadline_broke_the_protocol(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def flapping() -> Iterator[dict[int, tuple[str, int]]]:
        while True:
            yield {1: ("T", 100)}
            yield {1: ("R", 200)}

    session = _scripted(monkeypatch, flapping())
    with pytest.raises(RunnerBroke, match="continuing each other"):
        session._stop_all(wait_s=0.05)


def test_a_thread_that_never_stops_without_being_continued_is_no_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    # A thread caught in the kernel (a wait no signal breaks, reclaim near the memory cap) may not show stopped
    # for a while; nothing continued it, so the stop stands as it is once the wait is over.
    def stuck() -> Iterator[dict[int, tuple[str, int]]]:
        while True:
            yield {1: ("S", 100)}

    session = _scripted(monkeypatch, stuck())
    assert session._stop_all(wait_s=0.05) == [12345]
