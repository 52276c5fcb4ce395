"""A runner's CPU time from its control group: work no process inherits is still on the books."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from sandbox.judge import procs
from sandbox.judge.cgroups import CpuAccount

# A parent that lets the kernel reap its children (their CPU time then goes nowhere), and a child that
# burns 0.4 s of CPU and is gone before anyone looks.
_AUTOREAPED = """
import os, signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
if os.fork() == 0:
    end = time.process_time() + 0.4
    while time.process_time() < end:
        pass
    os._exit(0)
time.sleep(0.8)
print(os.getpid(), flush=True)
time.sleep(30)
"""


@pytest.fixture
def account() -> Iterator[CpuAccount]:
    made = CpuAccount.create()
    if made is None:
        pytest.skip("no control group can be made here (not root, or no writable cgroup file system)")
    yield made
    made.remove()


def test_a_child_the_kernel_reaped_is_on_the_groups_books(account: CpuAccount) -> None:
    runner = subprocess.Popen(account.enter([sys.executable, "-c", _AUTOREAPED]), stdout=subprocess.PIPE, text=True)
    try:
        assert runner.stdout is not None
        pid = int(runner.stdout.readline())
        per_process = procs.cpu_seconds([pid])  # what reading /proc finds: the parent's own time only
        grouped = account.used_s()
        assert grouped is not None and grouped >= 0.35, grouped
        assert per_process < 0.3, per_process
    finally:
        runner.kill()
        runner.wait()


def test_an_account_starts_empty_and_goes_when_its_tasks_have(account: CpuAccount) -> None:
    assert account.used_s() == 0.0
    subprocess.run(account.enter(["true"]), check=True)
    assert account.used_s() is not None
    account.remove()
    assert not account.path.exists()
