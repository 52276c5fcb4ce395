"""The judge stops a CPU runner's whole sandbox before it reads outputs (sandbox/judge/session.py's
`_freeze`), and the stop holds even where the sandbox's own processes undo it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from sandbox.judge import procs
from sandbox.judge.session import RunnerSession

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
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    helpers = [subprocess.Popen([sys.executable, "-c", _CONTINUER, str(busy.pid)], start_new_session=True)
               for _ in range(4)]
    time.sleep(0.3)  # the helpers are running
    yield [busy, *helpers]
    for proc in (busy, *helpers):
        proc.kill()
        os.kill(proc.pid, signal.SIGCONT)
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
