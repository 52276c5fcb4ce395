"""The OS sandbox around the runner: bubblewrap where the host allows it.

Inside, the runner sees the system read-only (its programs, libraries and configuration, with
what only their owner may read hidden), and of everything else on the host only what it needs,
read-only: its interpreter and site-packages, the project's `sandbox` package, the problem and
the build cache. A private /tmp, its own PID namespace (every process it starts dies with it),
no network, no System V IPC, no capabilities, and, where user namespaces work, an unprivileged
user. The problem's reference.py is hidden behind an empty file. On a host without bubblewrap
or namespaces the runner still runs, and the verdict says `not isolated`.
"""

from __future__ import annotations

import csv
import functools
import glob
import os
import re
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Devices a GPU runner needs: NVIDIA's control and UVM nodes, AMD's KFD and render nodes.
_DEV = Path("/dev")
_GPU_DEVICES = ("nvidia*", "nvidia-caps", "kfd", "dri")
# A GPU's own NVIDIA node is /dev/nvidiaN, N its minor number, which the driver lists per PCI
# address under `_NVIDIA_GPUS`; the other nodes (control, UVM, capabilities) serve every GPU.
_NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")
_NVIDIA_GPU_NODE = re.compile(r"nvidia\d+")
# Where a host keeps what is nobody else's: home folders (keys, tokens, LLM configurations) and
# the password hashes. The runner's user maps to the judge's outside the namespace (often root),
# so a read-only view of the system would show it all: these are emptied, and what the runner
# needs from under them (the project, the interpreter, the cache) is bound back in.
_PRIVATE_FOLDERS = ("/root", "/home")
_PRIVATE_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")
# Where a system keeps the rest of what only its owner may read (TLS and SSH keys, database and
# service configurations, logs of logins, secrets a container runtime mounts under /run): searched
# when the judge runs as root (`_owner_only`), up to this many entries in all.
_SYSTEM_FOLDERS = ("/etc", "/var", "/run", "/opt")
_SEARCH_LIMIT = 200_000
# The top-level folders that make up the system: programs, libraries, drivers (CUDA under /usr/local,
# ROCm under /opt), configuration, and the package stores some hosts run Python from. Every other
# top-level folder is the host's own (home folders, data and project trees, other mounts, lost+found)
# and is emptied in the runner's view: a list of what to hide would miss a folder nobody thought of
# (a red-team kernel read a root-only file under /work, outside the searched folders).
_SYSTEM_TOP = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", "var", "run", "sys", "proc",
               "dev", "tmp", "nix", "snap", "gnu")
# What the sandbox's own folders may hold, in MiB. Files there live in memory that no process maps,
# so the memory limit (resident pages of the tree) never sees them: a red-team kernel parked 3 GB in
# /tmp and /dev/shm and passed a 2 GB limit. /tmp takes compiler intermediates and JIT caches
# (torch.compile, Triton); an emptied folder needs only the mount points of what is bound back.
_TMPFS_MIB = {"/tmp": 1024, "/dev/shm": 256, "/var/tmp": 64}
_EMPTIED_MIB = 1


@dataclass(frozen=True)
class Isolation:
    """How runners start on this host: the bubblewrap prefix and what it gives."""

    available: bool
    unprivileged_user: bool
    reason: str
    sized_tmpfs: bool = False  # bubblewrap takes --size (0.5 and later): the sandbox's folders are capped

    def describe(self) -> str:
        if not self.available:
            return f"not isolated ({self.reason})"
        user = "unprivileged user" if self.unprivileged_user else "same user (no user namespace)"
        tmp = f"private /tmp of {_TMPFS_MIB['/tmp']} MiB" if self.sized_tmpfs else "private /tmp (uncapped)"
        return f"bubblewrap: read-only system, host's own folders hidden, {tmp}, own PID namespace, no network, {user}"


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
    sized = _works([bwrap, *base[1:-1], "--size", "1048576", "--tmpfs", "/tmp", "--", "true"])
    return Isolation(True, user, "", sized)


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
    args = [*_sandbox(found), "--unshare-cgroup-try", "--chdir", "/tmp", "--clearenv"]
    if gpu:
        view = gpu_nodes(env.get("CUDA_VISIBLE_DEVICES"))
        for node in view.nodes:
            args += ["--dev-bind", node, node]
        if view.visible:
            env = {**env, "CUDA_VISIBLE_DEVICES": view.visible}
    args += _bound_back(readable)
    folders, modules = (_seen(paths, readable) for paths in _unneeded_packages())
    absent = str(Path(__file__).resolve().parent.parent / "runner" / "absent.py")
    args += [arg for folder in folders for arg in (*_tmpfs(found, folder, _EMPTIED_MIB),
                                                   "--ro-bind", absent, f"{folder}/__init__.py")]
    args += [arg for module in modules for arg in ("--ro-bind", absent if module.endswith(".py") else "/dev/null", module)]
    for secret in hidden:
        if secret.exists():
            args += ["--ro-bind", "/dev/null", str(secret)]
    # The host's keys by name (root's keyrings among them when the runner maps to root): not the
    # runner's to read; the key system calls themselves are refused by its seccomp filter.
    for listing in _KEY_LISTINGS:
        args += ["--ro-bind-try", "/dev/null", listing]
    # /dev is a tmpfs bubblewrap makes, with no size bubblewrap can set: written to, it held 1.2 GB
    # beside the capped /tmp (pages of no process, out of the memory limit's sight). Read-only once its
    # nodes are in place; /dev/shm is a mount of its own, capped, and stays writable.
    args += ["--remount-ro", "/dev"]
    if not gpu:
        # /proc read-only: a process may write its own code pages through /proc/self/mem whatever their
        # protection, which would run bytes no file holds (library code is recognised by its file's
        # bytes). A GPU runner keeps it writable: CUDA's driver does not start without (H100, error 304).
        args += ["--remount-ro", "/proc"]
    for name, value in sorted(env.items()):
        args += ["--setenv", name, value]
    return [*args, "--", *inner]


_KEY_LISTINGS = ("/proc/keys", "/proc/key-users")
_CGROUPS = "/sys/fs/cgroup"


@dataclass(frozen=True)
class GpuView:
    """What of the host's GPUs a runner's sandbox shows: the device nodes bound in, how far that
    confines it (for the verdict), and the CUDA_VISIBLE_DEVICES it sees inside (None: as given)."""

    nodes: list[str]
    said: str
    visible: str | None = None


def gpu_nodes(visible: str | None) -> GpuView:
    """The device nodes a runner of the GPUs `visible` (CUDA_VISIBLE_DEVICES, indices in PCI order:
    the evaluator sets CUDA_DEVICE_ORDER) may open.

    A runner that saw every GPU's node could start a process of its own on another GPU and run
    work there, beside another candidate's timing. With only its GPU's node, the driver has no
    way to reach another: the sandbox's /dev is read-only and no capability is left to make a node.
    Inside, the driver counts only the GPUs whose nodes it can open, so an index would name another
    GPU or none (on two H100s, the runner of GPU 1 found no GPU): the runner names its GPUs by UUID.
    Where the GPUs cannot be told apart by their nodes (AMD's one KFD node, a GPU named by UUID or
    MIG instance, a driver that lists no PCI addresses), every node is bound and the answer says so."""
    every = sorted({node for pattern in _GPU_DEVICES for node in glob.glob(str(_DEV / pattern))})
    own = _nvidia_own(visible)
    if own is None or not {node for node, _ in own} <= set(every):
        return GpuView(every, "every GPU's device nodes")
    shared = [node for node in every if not _NVIDIA_GPU_NODE.fullmatch(Path(node).name)]
    nodes = [node for node, _ in own]
    return GpuView(sorted({*shared, *nodes}), f"its own GPU's device node only ({', '.join(nodes)})",
                   ",".join(uuid for _, uuid in own))


def _nvidia_own(visible: str | None) -> list[tuple[str, str]] | None:
    """(/dev/nvidiaN, UUID) for each index of `visible`, from the driver's list of GPUs in PCI
    order; None where that cannot be read or an entry is not a plain index."""
    if not visible or not all(part.strip().isdigit() for part in visible.split(",")):
        return None
    try:
        listed = sorted(_NVIDIA_GPUS.iterdir())
        own = []
        for index in (int(part) for part in visible.split(",")):
            text = (listed[index] / "information").read_text()
            minor = re.search(r"^Device Minor:\s*(\d+)", text, re.MULTILINE)
            uuid = re.search(r"^GPU UUID:\s*(\S+)", text, re.MULTILINE)
            if minor is None or uuid is None:
                return None
            own.append((str(_DEV / f"nvidia{minor.group(1)}"), uuid.group(1)))
    except (OSError, IndexError):
        return None
    return own


@functools.cache
def _owner_only() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Folders and files of the system that others may not read, found once per process: (folders,
    files). Where the judge runs as root the runner's user maps to root outside its namespace, and
    every such file would be readable to it; hidden, the runner sees what an unprivileged user
    would, while everything it needs (interpreter, libraries, drivers) is readable by all."""
    import stat

    folders: list[str] = []
    files: list[str] = []
    budget = [_SEARCH_LIMIT]

    def search(folder: str) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            budget[0] -= 1
            if budget[0] < 0:
                return
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                continue
            if not mode & stat.S_IROTH:
                (folders if stat.S_ISDIR(mode) else files).append(entry.path)
            elif stat.S_ISDIR(mode):
                search(entry.path)

    for folder in _SYSTEM_FOLDERS:
        if os.path.isdir(folder) and not os.path.islink(folder):
            search(folder)
    return tuple(folders), tuple(files)


def _host_top_level() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The host's own top-level folders (not the system's: `_SYSTEM_TOP`), and the top-level files
    others may not read: (folders, files). Links are left alone: they lead into what is kept or
    into what is emptied."""
    import stat

    folders: list[str] = []
    files: list[str] = []
    try:
        entries = sorted(os.scandir("/"), key=lambda e: e.name)
    except OSError:
        return (), ()
    for entry in entries:
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode) and entry.name not in _SYSTEM_TOP:
            folders.append(entry.path)
        elif stat.S_ISREG(mode) and not mode & stat.S_IROTH:
            files.append(entry.path)
    return tuple(folders), tuple(files)


def _emptied() -> tuple[str, ...]:
    """Every folder the sandbox replaces with an empty one."""
    return ("/tmp", "/var/tmp", "/dev/shm", *_PRIVATE_FOLDERS, *_host_top_level()[0], *_hidden_owner_only()[0])


# What a kernel may import from the interpreter's packages: these and what they need, nothing else of
# the environment (the project's own dependencies among them: a red-team kernel ran onnxruntime's
# matrix product, whose kernels no symbol names, so no sample of it could be told from honest code).
RUNNER_PACKAGES = ("torch", "numpy", "triton", "pyyaml")
RUNNER_PACKAGE_FAMILIES = ("cupy",)  # CuPy's wheels are named for their CUDA (cupy-cuda12x, cupy-cuda13x)


@functools.cache
def _unneeded_packages() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The folders and files of installed distributions a kernel does not need (`RUNNER_PACKAGES` and
    what they require, markers aside, extras left out), for the sandbox to empty: (folders, files).
    A top-level name that a needed distribution also uses (a namespace package) stays."""
    import importlib.metadata as metadata

    found: dict[str, tuple[metadata.Distribution, list[str]]] = {}  # by normalised name: the first found
    for dist in metadata.distributions():
        name, needs = _name_and_requirements(dist)
        if name:
            found.setdefault(_normal(name), (dist, needs))
    needed: set[str] = set()
    todo = [*RUNNER_PACKAGES, *(name for name in found if name.startswith(RUNNER_PACKAGE_FAMILIES))]
    while todo:
        name = _normal(todo.pop())
        if name in needed or name not in found:
            continue
        needed.add(name)
        todo += [re.split(r"[ ;<>=!~\[(]", r.strip())[0] for r in found[name][1] if "extra ==" not in r]
    kept = {top for name in needed for top in _top_level(found[name][0])}
    unneeded = {top for name, (dist, _) in found.items() if name not in needed for top in _top_level(dist)} - kept
    # Only what lies in the interpreter's package folders (an editable install names the project's own).
    homes = {Path(p) for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}}
    unneeded = {top for top in unneeded if top.is_absolute() and top.parent in homes}
    folders = tuple(sorted(str(p) for p in unneeded if p.is_dir() and not p.is_symlink()))
    files = tuple(sorted(str(p) for p in unneeded if p.is_file() and not p.is_symlink()))
    return folders, files


def _name_and_requirements(dist: Any) -> tuple[str | None, list[str]]:
    """A distribution's name and its `Requires-Dist` lines, read from the headers of its metadata file
    as text: `importlib.metadata` parses each file as an e-mail message, 0.5 s over this project's
    environment before every runner started."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    name: str | None = None
    needs: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first empty line; the description follows
        key, _, value = line.partition(":")
        if key == "Name" and name is None:
            name = value.strip()
        elif key == "Requires-Dist":
            needs.append(value.strip())
    return name, needs


def _seen(paths: tuple[str, ...], readable: list[Path]) -> list[str]:
    """Those of `paths` the sandbox shows: not under an emptied folder, or brought back (a mount on a
    path it does not show would make the folders on the way to it)."""
    emptied = _emptied()
    back = [str(folder) for folder in readable]
    return [p for p in paths if not any(p.startswith(f"{e}/") for e in emptied)
            or any(p.startswith(f"{b}/") for b in back)]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _top_level(dist: Any) -> set[Path]:
    """The top-level entries a distribution installed in its site-packages folder: the first part of each
    path of its RECORD where it has one, read as text (`dist.files` makes an object of every file: 60,000
    of them in this project's environment took 3 s before every runner started)."""
    base = Path(str(dist.locate_file("")))
    record = dist.read_text("RECORD")
    if record is not None:
        firsts = {_first_part(line) for line in record.splitlines() if line}
    else:
        firsts = {str(file).split("/", 1)[0] for file in dist.files or []}
    return {base / name for name in firsts if name and name not in ("..", "__pycache__")
            and not name.endswith((".pth", ".dist-info", ".egg-info"))}


def _first_part(row: str) -> str:
    """The first part of the path a RECORD row names: csv is read only for a quoted path (one with a comma
    in it); the rows of a large package (torch's 20,000) are otherwise split as plain text."""
    if row.startswith('"'):
        return next(csv.reader([row]))[0].split("/", 1)[0]
    return row.split(",", 1)[0].split("/", 1)[0]


def _bound_back(readable: list[Path]) -> list[str]:
    """bubblewrap options that bring back, read-only, what the sandbox needs from under an emptied
    folder (an interpreter under a home folder, a project cloned under /tmp or /work, the cache)."""
    emptied = _emptied()
    args: list[str] = []
    for folder in readable:
        path = str(folder)
        if folder.exists() and any(path == e or path.startswith(f"{e}/") for e in emptied):
            args += ["--ro-bind", path, path]
    return args


def _hidden_owner_only() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The owner-only folders and files the sandbox hides: where the judge runs as root (an
    unprivileged judge's runner cannot read them anyway)."""
    return _owner_only() if os.geteuid() == 0 else ((), ())


def _hide_owner_only() -> list[str]:
    """bubblewrap options that empty the owner-only folders and put an empty file over the
    owner-only files (sockets too: a root-only socket would otherwise take the runner's connection)."""
    folders, files = _hidden_owner_only()
    found = probe()
    return [*(a for f in folders for a in _tmpfs(found, f, _EMPTIED_MIB)),
            *(a for f in files if f not in _PRIVATE_FILES for a in ("--ro-bind", "/dev/null", f))]


def _sandbox(found: Isolation) -> list[str]:
    """bubblewrap and the options every sandbox here shares: the system read-only with the host's
    private folders emptied and its private files hidden, private temporary folders, its own PID,
    network, IPC and UTS namespaces, no capabilities, an unprivileged user where the host allows,
    and death with its parent. Binds that follow may bring paths back."""
    args = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    args += [arg for folder, mib in _TMPFS_MIB.items() for arg in _tmpfs(found, folder, mib)]
    top_folders, top_files = _host_top_level()
    private = sorted({*(f for f in _PRIVATE_FOLDERS if os.path.isdir(f)), *top_folders})
    args += [arg for folder in private for arg in _tmpfs(found, folder, _EMPTIED_MIB)]
    args += [arg for secret in (*_PRIVATE_FILES, *top_files) if os.path.exists(secret)
             for arg in ("--ro-bind", "/dev/null", secret)]
    args += _hide_owner_only()
    # The host's control groups, every runner's among them: readable, a group's peak memory (which only
    # ever rises and outlives each evaluation) carried a number from one candidate to the next, and
    # showed other runners' groups live. The runner's own limits hold from outside; it needs none of it.
    if os.path.isdir(_CGROUPS):
        args += [*_tmpfs(found, _CGROUPS, _EMPTIED_MIB), "--remount-ro", _CGROUPS]
    args += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session",
             "--cap-drop", "ALL"]
    if found.unprivileged_user:
        args += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
    return args


def _tmpfs(found: Isolation, folder: str, mib: int) -> list[str]:
    """An empty in-memory folder, capped at `mib` where bubblewrap can cap it."""
    size = ["--size", str(mib << 20)] if found.sized_tmpfs else []
    return [*size, "--tmpfs", folder]


def compiler_command(command: list[str], work: Path) -> list[str]:
    """A compiler of candidate source inside bubblewrap (`_sandbox`) with only its work folder
    writable. The flags are already allow-listed (sandbox/native.py); this holds where a compiler
    option or a bug in one would still run or write what the candidate chose. As it is where no
    sandbox works (the verdict then says `not isolated`)."""
    found = probe()
    if not found.available:
        return command
    import sys

    compiler = shutil.which(command[0]) if command else None
    # The compiler and the interpreter's prefix may live under an emptied folder (a toolchain in a
    # home folder or a virtual environment under /work): brought back read-only.
    tools = [Path(p) for p in (sys.prefix, sys.base_prefix) if p]
    if compiler:
        tools.append(Path(os.path.realpath(compiler)).parent.parent)
    return [*_sandbox(found), *_bound_back(tools), "--bind", str(work), str(work), "--chdir", str(work), "--", *command]
