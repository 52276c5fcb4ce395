"""A control group per runner, for its CPU time and its memory: every task that was ever in it counts.

Reading each process of a runner's sandbox from /proc misses work that ends before the next read
and whose time nobody inherits: a child the kernel reaps automatically (SIGCHLD ignored) takes its
CPU time with it, and a red-team kernel hid a child's memory population, which runs on through
SIGSTOP inside its system call, that way. A control group's CPU accounting is charged as the work
runs, whoever reaps whom, kernel time included. Where the judge may create one (root with a
writable cgroup file system: cgroup v1's cpuacct, or cgroup v2), each runner starts inside its
own; elsewhere the session reads /proc as before (sandbox/judge/procs.py).

Memory likewise: the evaluator's limit counts the resident pages of the worker's processes, and pages
a runner keeps in files in memory that it does not map (memfds, its private /tmp) belong to no
process; a red-team kernel parked 5 GB in memfds under a 2 GB limit. The kernel charges every page
to the group of the task that faulted it in, files in memory included, so a runner's memory group
(`LimitGroup` of `MEMORY`) holds its limit against them all; its task group (`TASKS`) caps how many
processes and threads it may have. Standard library only.
"""

from __future__ import annotations

import itertools
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

_ROOTS = {"v1": Path("/sys/fs/cgroup/cpuacct"), "v2": Path("/sys/fs/cgroup")}
_COUNTER = itertools.count()


@dataclass
class CpuAccount:
    """One runner's control group: where its tasks go and what they have used."""

    kind: str  # "v1" (cpuacct.usage, nanoseconds) or "v2" (cpu.stat's usage_usec)
    path: Path

    @classmethod
    def create(cls) -> CpuAccount | None:
        """A new, empty group below the judge's own, or None where none can be made here."""
        if os.environ.get("KS_CGROUPS") == "off":
            return None
        for kind, root in _ROOTS.items():
            usage = "cpuacct.usage" if kind == "v1" else "cpu.stat"
            parent = root / _own_group(kind, "cpuacct").lstrip("/")
            if not (parent / usage).is_file() and not (kind == "v2" and (parent / "cgroup.procs").is_file()):
                continue
            path = _new_group(parent)
            if path is None:
                continue
            account = cls(kind, path)
            if account.used_s() is None:
                account.remove()
                continue
            return account
        return None

    def enter(self, command: list[str]) -> list[str]:
        return enter([self], command)

    def used_s(self) -> float | None:
        """CPU seconds every task of the group has used since it was made, live or gone."""
        try:
            if self.kind == "v1":
                return int((self.path / "cpuacct.usage").read_text()) / 1e9
            for line in (self.path / "cpu.stat").read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError):
            return None
        return None

    def pids(self) -> list[int] | None:
        """The processes in the group now (`cgroup.procs`): one read, however many threads they run,
        where walking each thread's children took 22 ms for a process of 1,000 threads. None: unreadable."""
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return None

    def remove(self, wait_s: float = 2.0) -> None:
        _remove(self.path, wait_s)


@dataclass(frozen=True)
class Limit:
    """A controller's files: where its cap is written and where the kernel counts what the cap refused
    (v1 file, v2 file, and the key of the count in the events file)."""

    controller: str
    cap: tuple[str, str]
    events: tuple[str, str]
    key: str
    peak: tuple[str | None, str | None]  # the most the group held, where the kernel keeps it


# Memory: past the cap the kernel kills a task of the group. Tasks (processes and threads): past the
# cap fork and clone fail, so a candidate's fork bomb stays in its sandbox instead of taking the
# host's process table (and every other evaluation) with it.
MEMORY = Limit("memory", ("memory.limit_in_bytes", "memory.max"), ("memory.oom_control", "memory.events"), "oom_kill",
               ("memory.max_usage_in_bytes", "memory.peak"))
TASKS = Limit("pids", ("pids.max", "pids.max"), ("pids.events", "pids.events"), "max", (None, "pids.peak"))


@dataclass
class LimitGroup:
    """One runner's group for one limit (`MEMORY`, `TASKS`): a hard cap over every task of the runner
    and, for memory, every page charged to it, those of files it keeps in memory included. The
    judge reads back how often the cap refused (`hits`) and reports the limit, not a crash."""

    limit_of: Limit
    kind: str  # "v1" (the controller's own hierarchy) or "v2" (the CPU account's group)
    path: Path
    owned: bool = True  # False where the group is the CPU account's (v2), which removes it

    @classmethod
    def create(cls, limit_of: Limit, cpu: CpuAccount | None) -> LimitGroup | None:
        """A group for this limit, or None where the host lets the judge make none."""
        if os.environ.get("KS_CGROUPS") == "off":
            return None
        if cpu is not None and cpu.kind == "v2":
            found = (cpu.path / limit_of.cap[1]).is_file()
            return cls(limit_of, "v2", cpu.path, owned=False) if found else None
        parent = Path("/sys/fs/cgroup") / limit_of.controller / _own_group("v1", limit_of.controller).lstrip("/")
        path = _new_group(parent) if (parent / "cgroup.procs").is_file() else None
        if path is None:
            return None
        if not (path / limit_of.cap[0]).is_file():  # a hierarchy's root has no cap file; its groups do
            _remove(path, 0)
            return None
        return cls(limit_of, "v1", path)

    def _name(self, names: tuple[str, str] | tuple[str | None, str | None]) -> str | None:
        return names[0 if self.kind == "v1" else 1]

    def enter(self, command: list[str]) -> list[str]:
        return enter([self], command)

    def cap(self, value: int) -> bool:
        """Set the cap (bytes, or tasks); False where the host refuses."""
        try:
            (self.path / str(self._name(self.limit_of.cap))).write_text(str(int(value)))
        except OSError:
            return False
        return True

    def hits(self) -> int:
        """How often the cap refused: tasks killed for memory, forks refused (0 where unreadable)."""
        try:
            for line in (self.path / str(self._name(self.limit_of.events))).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == self.limit_of.key:
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def peak(self) -> int | None:
        """The most the group held at once (bytes, or tasks), where the host keeps that figure."""
        name = self._name(self.limit_of.peak)
        try:
            return int((self.path / name).read_text()) if name else None
        except (OSError, ValueError):
            return None

    def remove(self, wait_s: float = 2.0) -> None:
        if self.owned:
            _remove(self.path, wait_s)


def enter(groups: list[CpuAccount | LimitGroup], command: list[str]) -> list[str]:
    """`command`, started from inside each of `groups` (one shell puts itself in every one, then
    becomes the command), so that every process the command starts is born there (nothing runs
    outside them first). A group that is another's directory (v2's shared one) is entered once."""
    paths = list(dict.fromkeys(g.path for g in groups if not isinstance(g, LimitGroup) or g.owned))
    if not paths:
        return command
    moves = " && ".join(f"echo $$ > {shlex.quote(str(path / 'cgroup.procs'))}" for path in paths)
    return ["/bin/sh", "-c", f'{moves} && exec "$@"', "ks-runner", *command]


def _new_group(parent: Path) -> Path | None:
    """A new, empty group below `parent` (stale ones of gone judges cleared first), or None."""
    _remove_stale(parent)
    path = parent / f"ks-runner-{os.getpid()}-{next(_COUNTER)}"
    try:
        path.mkdir()
    except OSError:
        return None
    return path


def _remove(group: Path, wait_s: float) -> None:
    """The group goes once its tasks, killed by the caller, have left it (their exit is not instant);
    one still busy after `wait_s` is left for `_remove_stale` to take later."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)


def _remove_stale(parent: Path) -> None:
    """Groups left by judges that are gone (killed before they could remove them), if empty."""
    for path in parent.glob("ks-runner-*-*"):
        try:
            pid = int(path.name.split("-")[2])
            os.kill(pid, 0)
        except ProcessLookupError:
            try:
                path.rmdir()
            except OSError:
                pass
        except (ValueError, PermissionError):
            continue


def _own_group(kind: str, controller: str) -> str:
    """This process's group in the hierarchy of `controller` (v1) or the unified one (v2); `/` in a
    container that shows only its own."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return "/"
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (kind == "v2" and controllers == "") or (kind == "v1" and controller in controllers.split(",")):
            return path or "/"
    return "/"
