"""A runner's CPU time from its control group: work no process inherits is still on the books."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from sandbox.judge import procs
from sandbox.judge.cgroups import MEMORY, TASKS, CpuAccount, LimitGroup

# A parent that lets the kernel reap its children (their CPU time then goes nowhere), and a child that
# burns 0.4 s of CPU and is gone before anyone looks.
_AUTOREAPED = """
import os, signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
child = os.fork()
if child == 0:
    end = time.process_time() + 0.4
    while time.process_time() < end:
        pass
    os._exit(0)
while os.path.exists(f"/proc/{child}"):  # gone, however long a busy host made its 0.4 s take
    time.sleep(0.05)
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


_THREADS_AND_A_CHILD = """
import os, subprocess, sys, threading, time
stop = threading.Event()
for _ in range(300):
    threading.Thread(target=stop.wait, daemon=True).start()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
print(os.getpid(), child.pid, flush=True)
time.sleep(30)
"""


def test_the_groups_processes_are_listed_in_one_read_whatever_their_threads(account: CpuAccount) -> None:
    # The judge stops every process of a sandbox after each answer: walking each thread's children took
    # 22 ms for a process of 1,000 threads (red-team round 23), the group's list is one file.
    runner = subprocess.Popen(account.enter([sys.executable, "-c", _THREADS_AND_A_CHILD]), stdout=subprocess.PIPE,
                              text=True)
    try:
        assert runner.stdout is not None
        parent, child = (int(p) for p in runner.stdout.readline().split())
        listed = account.pids()
        assert listed is not None and {parent, child} <= set(listed), listed
        assert len(listed) <= 3, listed  # processes, not their threads (an `enter` wrapper may be one more)
    finally:
        for pid in (account.pids() or []):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        runner.wait()


# Pages in a memfd that no process maps: no resident set holds them, the group they were charged to does.
_PARKS = """
import os, sys
fds = []
for _ in range(int(sys.argv[1])):
    fd = os.memfd_create("park")
    os.posix_fallocate(fd, 0, 64 << 20)
    fds.append(fd)
print("parked", flush=True)
"""


def _group(limit_of: object) -> Iterator[LimitGroup]:
    made = LimitGroup.create(limit_of, None)  # type: ignore[arg-type]
    if made is None:
        pytest.skip("no such group can be made here (not root, or no writable cgroup file system)")
    yield made
    made.remove()


@pytest.fixture
def memory() -> Iterator[LimitGroup]:
    yield from _group(MEMORY)


@pytest.fixture
def tasks() -> Iterator[LimitGroup]:
    yield from _group(TASKS)


def test_pages_parked_in_memfds_count_against_the_groups_limit(memory: LimitGroup) -> None:
    assert memory.cap(128 << 20)
    within = subprocess.run(memory.enter([sys.executable, "-c", _PARKS, "1"]), capture_output=True, text=True, timeout=60)
    assert within.returncode == 0 and memory.hits() == 0, within.stderr
    past = subprocess.run(memory.enter([sys.executable, "-c", _PARKS, "4"]), capture_output=True, text=True, timeout=60)
    assert "parked" not in past.stdout and past.returncode != 0
    assert memory.hits() >= 1
    peak = memory.peak()
    assert peak is None or peak <= 129 << 20, peak


# Children that wait until their parent is gone: each holds a task of the group while the parent forks on.
_FORKS = """
import os, sys, time
started = 0
try:
    for _ in range(int(sys.argv[1])):
        if os.fork() == 0:
            time.sleep(1)
            os._exit(0)
        started += 1
except OSError as exc:
    print("refused after", started, type(exc).__name__, flush=True)
    sys.exit(3)
print("started", started, flush=True)
"""


def test_a_fork_bomb_stops_at_the_task_groups_cap(tasks: LimitGroup) -> None:
    assert tasks.cap(32)
    within = subprocess.run(tasks.enter([sys.executable, "-c", _FORKS, "8"]), capture_output=True, text=True, timeout=60)
    assert within.stdout.startswith("started 8") and tasks.hits() == 0, within.stdout + within.stderr
    past = subprocess.run(tasks.enter([sys.executable, "-c", _FORKS, "200"]), capture_output=True, text=True, timeout=60)
    assert past.returncode == 3 and "refused after" in past.stdout, past.stdout + past.stderr
    assert int(past.stdout.split()[2]) < 32 and tasks.hits() >= 1


def test_a_memory_group_goes_when_its_tasks_have(memory: LimitGroup) -> None:
    subprocess.run(memory.enter(["true"]), check=True)
    memory.remove()
    assert not memory.path.exists()
