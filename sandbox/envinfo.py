"""What a verdict was measured on: device, driver, toolkit, torch, host."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_VERSION = re.compile(r"\d+\.\d+")


def _version_line(command: list[str]) -> str | None:
    """The line of `tool --version` that names the version: g++ ends with its licence and nvcc with
    its build id, so neither the first nor the last line is right for both."""
    if shutil.which(command[0]) is None:
        return None
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    versioned = [line for line in lines if _VERSION.search(line) and not line.startswith(("Copyright", "Built", "Build "))]
    return (versioned or lines)[0] if lines else None


def collect(device: str) -> dict[str, Any]:
    import torch

    from sandbox.native import _cpu_model

    info: dict[str, Any] = {
        "device": _cpu_model(),
        "device_kind": "cpu",
        "driver": None,
        "toolkit": None,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "compilers": {"cxx": _version_line([os.environ.get("CXX", "g++"), "--version"])},
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        index = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(index)
        info.update(
            device=props.name,
            device_kind="rocm" if torch.version.hip else "cuda",
            compute_capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
            memory_gb=round(props.total_memory / 2**30, 1),
        )
        if torch.version.hip:
            info["toolkit"] = f"ROCm/HIP {torch.version.hip}"
            info["gcn_arch"] = getattr(props, "gcnArchName", None)
        else:
            info["toolkit"] = f"CUDA {torch.version.cuda} (torch)"
            info["compilers"]["nvcc"] = _version_line(["nvcc", "--version"])
            # nvidia-smi ignores CUDA_VISIBLE_DEVICES: name this process's GPU by its UUID, so the
            # query never goes to a GPU another worker is timing on.
            uuid = getattr(props, "uuid", None)
            gpu_id = f"GPU-{uuid}" if uuid else str(index)
            info["driver"] = _version_line(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", f"--id={gpu_id}"]
            )
    return info


def parse_cores(text: str) -> tuple[int, ...]:
    """`0-3,6` as (0, 1, 2, 3, 6). ValueError, naming what is wrong, for a malformed list or a core
    this process may not run on."""
    cores: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        try:
            low, high = int(first), int(last or first)
        except ValueError:
            raise ValueError(f"cores {text!r}: {part!r} is neither a core number nor a range such as 0-3") from None
        if low < 0 or high < low:
            raise ValueError(f"cores {text!r}: {part!r} is not a range from low to high")
        cores.update(range(low, high + 1))
    if not cores:
        raise ValueError(f"cores {text!r}: no core named")
    allowed = os.sched_getaffinity(0)
    if not cores <= allowed:
        raise ValueError(f"cores {sorted(cores - allowed)} are not available here (this process may use {sorted(allowed)})")
    return tuple(sorted(cores))


def pin_to_cores(cores: tuple[int, ...]) -> None:
    """Pin this process, and every process it starts later, to `cores` (the judge does this before its
    runners start: the candidate, a base timed beside it and the reference then share the same cores,
    and the scheduler cannot hand one of them a faster or quieter core)."""
    os.sched_setaffinity(0, cores)


def quickest_cores(share: float = 0.5) -> set[int] | None:
    """The cores, of those this process may use, that ran a fixed loop fastest just now: the quickest
    `share` of them, at least two (None: fewer than four to choose from).

    On a virtual machine the cores are not equal: a GPU host lent here ran the same runner's host work
    (recipes, launches, digests) 1.6 to 2.2 times slower on some of its 16 cores than on others, for
    seconds at a time, and a runner's main thread moved between a quick and a slow one from one batch to
    the next. Its round trips then jumped between two levels, and the judge's bound, calibrated on one
    level, refused honest kernels timed on the other. Kept on the quicker half, a runner meets fewer
    levels; on one core alone its own threads (the driver's, the candidate's) took turns with the one
    that times, and its round trips grew up to fivefold."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 4:
        return None
    paces = {core: core_pace_ns(core) for core in allowed}
    return set(sorted(allowed, key=lambda c: paces[c])[:max(2, int(len(allowed) * share))])


def core_pace_ns(core: int, probes: int = 3) -> int:
    """How long a fixed piece of interpreter work takes on `core` now, in nanoseconds of this thread's
    CPU time (the fastest of `probes`). CPU time, not wall time: a thread of someone else's that shares
    the core delays the loop but adds nothing to it, while a slower core (a busy sibling on the host, a
    lower clock) makes the same loop cost more of it. This thread's cores are as they were after."""
    with pinned_for_now({core}):
        return min(_loop_cpu_ns() for _ in range(probes))


@contextmanager
def pinned_for_now(cores: set[int] | None) -> Iterator[None]:
    """This thread on `cores` for the block (None: left as it is), its cores as they were after. A
    process started inside inherits the mask, so this is also how a runner is started on chosen cores."""
    allowed = os.sched_getaffinity(0)
    try:
        if cores is not None:
            os.sched_setaffinity(0, cores)
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def _loop_cpu_ns() -> int:
    """A fixed piece of interpreter work (about 100 µs on a current core), in this thread's CPU time."""
    start = time.thread_time_ns()
    total = 0
    for k in range(3000):
        total += k * k
    return time.thread_time_ns() - start


# nvidia-smi's clocks_throttle_reasons bits that slow a timed kernel for reasons outside it: hardware
# slowdown, software and hardware thermal slowdown, power brake (a power cap under load is normal).
_GPU_SLOWDOWN_BITS = 0x8 | 0x20 | 0x40 | 0x80


def host_state(device: str, own_gpu_processes: int = 2) -> dict[str, Any]:
    """How busy the host is right now, for a timing's context: load averages, runnable threads
    against the cores (more runnable work than cores means timed calls waited for a core), the
    cores' current clock; on an NVIDIA GPU its clocks, temperature and the processes on it. It is
    `contended` with more runnable work than cores, a load above 1.5 per core, more processes on
    the GPU than the evaluation's own (`own_gpu_processes`: the judge and its runners), or a GPU
    slowed by heat or a hardware limit."""
    state: dict[str, Any] = {"cores": os.cpu_count(), "pinned_to": sorted(os.sched_getaffinity(0)),
                             "niceness": os.getpriority(os.PRIO_PROCESS, 0)}  # above 0: other work comes first
    try:
        one, five, _fifteen, running, _ = Path("/proc/loadavg").read_text().split(None, 4)
        state.update(load_1m=float(one), load_5m=float(five), runnable=int(running.split("/")[0]))
    except (OSError, ValueError):
        pass
    try:
        mhz = [float(line.split(":")[1]) for line in Path("/proc/cpuinfo").read_text().splitlines()
               if line.startswith("cpu MHz")]
        if mhz:
            state["cpu_mhz"] = round(sum(mhz) / len(mhz))
    except (OSError, ValueError, IndexError):
        pass
    if device.startswith("cuda") and shutil.which("nvidia-smi"):
        state.update(_nvidia_state())
    try:
        slowed = int(str(state.get("gpu_throttle", "0")), 16) & _GPU_SLOWDOWN_BITS
    except ValueError:
        slowed = 0
    state["gpu_contended"] = bool(state.get("gpu_processes", 0) > own_gpu_processes or slowed)
    state["contended"] = bool(state.get("runnable", 0) > (state["cores"] or 1) or
                              state.get("load_1m", 0.0) > 1.5 * (state["cores"] or 1) or state["gpu_contended"])
    return state


def _nvidia_state() -> dict[str, Any]:
    query = "clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu,clocks_throttle_reasons.active"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=5).stdout.strip().split(", ")
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader", "-i", "0"],
                              capture_output=True, text=True, timeout=5).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if len(out) != 5:
        return {}
    return {"gpu_sm_mhz": out[0], "gpu_sm_max_mhz": out[1], "gpu_temp_c": out[2], "gpu_util_pct": out[3],
            "gpu_throttle": out[4], "gpu_processes": len(apps)}
