"""Processes below a process, from /proc: for the memory limit, for killing everything a runner
left (its own session, a daemon that double-forked), and for the CPU time of everything a runner's
sandbox holds. Standard library only."""

from __future__ import annotations

import glob
import os
import time

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The judge's own children that are not a runner's doing (a runner's top process, perf): every
# other child of the judge is an orphan a runner left behind, adopted by the judge as subreaper.
_OWN: set[int] = set()


def own(pid: int) -> None:
    """Record a child the judge started itself (see `strays`)."""
    _OWN.add(pid)


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3 onwards), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _parents() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat_fields(int(entry))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def _children(pid: int) -> list[int] | None:
    """Direct children from /proc/PID/task/*/children (each thread lists the ones it started);
    None where the kernel has no such file."""
    files = glob.glob(f"/proc/{pid}/task/*/children")
    if not files:
        return None if os.path.isdir(f"/proc/{pid}/task") else []  # a kernel without them, or a process gone
    found: list[int] = []
    for path in files:
        try:
            with open(path) as listing:
                found += [int(p) for p in listing.read().split()]
        except (OSError, ValueError):
            continue
    return found


def descendants(root: int) -> list[int]:
    """Every process below `root` (children, theirs, ...), parents before their children."""
    scanned: dict[int, list[int]] | None = None
    found, queue = [], [root]
    while queue:
        pid = queue.pop(0)
        below = _children(pid)
        if below is None:  # no children files on this kernel: one scan of /proc for the whole walk
            scanned = scanned if scanned is not None else _parents()
            below = scanned.get(pid, [])
        found += below
        queue += below
    return found


def strays() -> list[int]:
    """The judge's children it did not start: orphans of a runner without a PID namespace of its own
    (the judge is their subreaper), and everything below them."""
    mine = os.getpid()
    children = _children(mine)
    if children is None:  # a kernel without children files
        children = _parents().get(mine, [])
    adopted = [pid for pid in children if pid not in _OWN]
    return [p for pid in adopted for p in (pid, *descendants(pid))]


def _process_clock(pid: int) -> int:
    """The clock id of a process's CPU time, all its threads together (Linux: CPUCLOCK_SCHED of the
    process, as glibc's clock_getcpuclockid builds it)."""
    return ((~pid) << 3) | 2


def cpu_seconds(pids: list[int]) -> float:
    """CPU time of these processes: each one's threads, live or exited, to the nanosecond (its CPU clock;
    its tick counts where the clock cannot be read), and the children each has waited for (ticks).
    Read in the order given, parents first: a child reaped between two reads is then missed once,
    never counted twice (a process's time moves to its parent when reaped). Nanoseconds matter: a
    batch of calls lasts a few ticks, and the judge compares what the runner's processes used in it
    with what the runner reported (sandbox/judge/timed.py)."""
    seconds = 0.0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is None:
            continue
        try:
            own, waited = sum(int(f) for f in fields[11:13]), sum(int(f) for f in fields[13:15])
        except ValueError:
            continue
        try:
            seconds += time.clock_gettime_ns(_process_clock(pid)) / 1e9
        except OSError:
            seconds += own / _CLOCK_TICKS
        seconds += waited / _CLOCK_TICKS
    return seconds


# Thread states that run no code of the process: stopped (by a signal, by a tracer), gone, or inside the kernel in a
# wait no signal breaks (a vfork's parent waits there for its child), out of which the stop still pending lands.
_STILL = frozenset("TtZXD")


def threads(pids: list[int]) -> dict[int, tuple[str, int]]:
    """Every thread of these processes, by thread id: its state letter and the nanoseconds it has run
    (/proc/PID/task/TID/schedstat; -1 where unreadable). A thread that ran at all between two readings has
    a larger second figure."""
    found: dict[int, tuple[str, int]] = {}
    for pid in pids:
        for task in glob.glob(f"/proc/{pid}/task/*"):
            try:
                with open(f"{task}/stat") as stat:
                    state = stat.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            try:
                with open(f"{task}/schedstat") as sched:
                    ran = int(sched.read().split()[0])
            except (OSError, IndexError, ValueError):
                ran = -1
            found[int(task.rsplit("/", 1)[1])] = (state, ran)
    return found


def still(found: dict[int, tuple[str, int]]) -> bool:
    """Whether no thread of a `threads` reading can run code of its own."""
    return all(state in _STILL for state, _ in found.values())


def all_stopped(pids: list[int]) -> bool:
    """Whether every thread of these processes has stopped (or exited): a stop signal lands on each
    thread asynchronously, and a thread inside a system call that does not look for signals runs on."""
    for pid in pids:
        for stat_path in glob.glob(f"/proc/{pid}/task/*/stat"):
            try:
                with open(stat_path) as stat:
                    state = stat.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in ("T", "t", "Z", "X"):
                return False
    return True


def host_busy_seconds(stat: str = "/proc/stat") -> float | None:
    """CPU time the whole host has spent busy since boot, every core together (user, nice, system,
    interrupts, and time a hypervisor gave this machine's cores to others), in seconds; None where
    /proc/stat is unreadable. Less what the evaluation's own processes used, it is other work."""
    try:
        with open(stat) as f:
            fields = f.readline().split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    except (OSError, ValueError):
        return None
    return (user + nice + system + irq + softirq + steal) / _CLOCK_TICKS
