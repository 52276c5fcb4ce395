"""The OS sandbox around the runner: bubblewrap where the host allows it.

Inside, the runner sees the whole system read-only (project, interpreter, site-packages and
the build cache included), a private /tmp, its own PID namespace (every process it starts
dies with it), no network, no System V IPC, no capabilities, and, where user namespaces
work, an unprivileged user. The problem's reference.py is hidden behind an empty file.
On a host without bubblewrap or namespaces the runner still runs, and the verdict says
`not isolated`.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Devices a GPU runner needs: NVIDIA's control and UVM nodes, AMD's KFD and render nodes.
_GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/kfd", "/dev/dri")
# Where a host keeps what is nobody else's: home folders (keys, tokens, LLM configurations) and
# the password hashes. The runner's user maps to the judge's outside the namespace (often root),
# so a read-only view of the system would show it all: these are emptied, and what the runner
# needs from under them (the project, the interpreter, the cache) is bound back in.
_PRIVATE_FOLDERS = ("/root", "/home")
_PRIVATE_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")


@dataclass(frozen=True)
class Isolation:
    """How runners start on this host: the bubblewrap prefix and what it gives."""

    available: bool
    unprivileged_user: bool
    reason: str

    def describe(self) -> str:
        if not self.available:
            return f"not isolated ({self.reason})"
        user = "unprivileged user" if self.unprivileged_user else "same user (no user namespace)"
        return f"bubblewrap: read-only system, private /tmp, own PID namespace, no network, {user}"


def _works(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.lru_cache(maxsize=1)
def probe() -> Isolation:
    """What this host allows; asked once per process."""
    if os.environ.get("KS_ISOLATION") == "off":
        return Isolation(False, False, "turned off by KS_ISOLATION=off")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Isolation(False, False, "bubblewrap is not installed")
    base = [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-pid", "--unshare-net", "--"]
    if not _works([*base, "true"]):
        return Isolation(False, False, "bubblewrap cannot create namespaces here")
    user = _works([bwrap, "--unshare-user", "--uid", "65534", "--gid", "65534", *base[1:], "true"])
    return Isolation(True, user, "")


def command(
    inner: list[str],
    *,
    env: dict[str, str],
    readable: list[Path],
    hidden: list[Path],
    gpu: bool,
) -> list[str]:
    """The runner's command line: `inner` inside bubblewrap, or as it is where none works."""
    found = probe()
    if not found.available:
        return inner
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--tmpfs", "/dev/shm", "--tmpfs", "/var/tmp", "--unshare-pid", "--unshare-net",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--chdir", "/tmp", "--clearenv"]
    if found.unprivileged_user:
        args += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
    if gpu:
        for pattern in _GPU_DEVICES:
            for node in sorted(glob.glob(pattern)):
                args += ["--dev-bind", node, node]
    args += _private_hidden()
    # What lives under the host's /tmp (a project cloned there, a test's build cache) or a home
    # folder would vanish behind the private ones: bound back in, read-only.
    for folder in readable:
        if folder.exists() and str(folder).startswith(("/tmp/", "/var/tmp/", "/dev/shm/", *(f"{p}/" for p in _PRIVATE_FOLDERS))):
            args += ["--ro-bind", str(folder), str(folder)]
    for secret in hidden:
        if secret.exists():
            args += ["--ro-bind", "/dev/null", str(secret)]
    for name, value in sorted(env.items()):
        args += ["--setenv", name, value]
    return [*args, "--", *inner]


def _private_hidden() -> list[str]:
    """bubblewrap options that empty the host's private folders and hide its private files."""
    args: list[str] = []
    for folder in _PRIVATE_FOLDERS:
        if os.path.isdir(folder):
            args += ["--tmpfs", folder]
    for secret in _PRIVATE_FILES:
        if os.path.exists(secret):
            args += ["--ro-bind", "/dev/null", secret]
    return args


def compiler_command(command: list[str], work: Path) -> list[str]:
    """A compiler of candidate source inside bubblewrap: the system read-only, a private /tmp, only
    its work folder writable, no network, its own PID namespace, an unprivileged user where
    possible. The flags are already allow-listed (sandbox/native.py); this holds where a compiler
    option or a bug in one would still run or write what the candidate chose. As it is where no
    sandbox works (the verdict then says `not isolated`)."""
    found = probe()
    bwrap = shutil.which("bwrap")
    if not found.available or bwrap is None:
        return command
    args = [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm",
            "--tmpfs", "/var/tmp", "--bind", str(work), str(work), "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--chdir", str(work)]
    args[args.index("--bind"):args.index("--bind")] = _private_hidden()  # before the work folder is bound in
    if found.unprivileged_user:
        args += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
    return [*args, "--", *command]
