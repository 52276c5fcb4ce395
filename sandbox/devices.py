"""Which devices evaluations may use on this host, without importing a GPU runtime.

GPU indices are physical (what `CUDA_VISIBLE_DEVICES` takes), so a worker pinned to index i
sees exactly that GPU. A visibility variable already set for this process narrows the list.
Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

_VISIBILITY = {"cuda": ("CUDA_VISIBLE_DEVICES",), "hip": ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")}


def _restricted(target: str) -> list[int] | None:
    for name in _VISIBILITY.get(target, ()):
        value = os.environ.get(name)
        if value is None:
            continue
        ids = [v.strip() for v in value.split(",") if v.strip()]
        if all(v.isdigit() for v in ids):  # UUIDs and MIG names: leave the choice to the runtime
            return [int(v) for v in ids]
        return None
    return None


def _nvidia_indices() -> list[int]:
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [int(line) for line in out.stdout.split() if line.strip().isdigit()]


def _amd_indices() -> list[int]:
    """GPU nodes of the AMD kernel driver (nodes with a non-zero SIMD count are GPUs)."""
    nodes = Path("/sys/class/kfd/kfd/topology/nodes")
    gpus: list[int] = []
    for node in sorted(nodes.glob("*"), key=lambda p: int(p.name) if p.name.isdigit() else 0):
        try:
            props = dict(line.split(maxsplit=1) for line in (node / "properties").read_text().splitlines() if line)
        except (OSError, ValueError):
            continue
        if int(props.get("simd_count", "0")) > 0:
            gpus.append(len(gpus))
    return gpus


def visible_gpus(target: str) -> list[int]:
    """Physical GPU indices for `target` (cuda or hip) that evaluations may use; [] on the CPU."""
    if target not in _VISIBILITY:
        return []
    restricted = _restricted(target)
    found = _nvidia_indices() if target == "cuda" else _amd_indices()
    if restricted is None:
        return found
    return [i for i in restricted if not found or i in found]


def evaluation_slots(target: str, requested: list[int] | None = None, cpu_slots: int = 1) -> list[int]:
    """Device slots of a local pool: the requested GPUs, else every visible one (at least one
    slot, index 0, when none is found: the runtime then picks); on the CPU, `cpu_slots` slots
    (default 1, since CPU timings running side by side disturb each other)."""
    if requested:
        return list(requested)
    if target == "cpu":
        return list(range(max(1, cpu_slots)))
    return visible_gpus(target) or [0]


def gpu_found(target: str) -> bool:
    """Whether the driver reports any GPU of the target's vendor on this host: a run that cannot time
    a single candidate is refused before it starts. The CPU target always has its device."""
    if target == "cpu":
        return True
    return bool(_nvidia_indices() if target == "cuda" else _amd_indices())
