"""Helpers shared by the benchmarks: machine description and result files."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()}
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )
        if out.returncode == 0:
            info["gpu"] = out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        pass
    return info


def save(name: str, results: dict[str, Any]) -> Path:
    """Write results as JSON under $OUT (device runs) or bench/results/."""
    folder = Path(os.environ.get("OUT") or Path(__file__).parent / "results")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    payload = {"benchmark": name, "date": datetime.now(timezone.utc).isoformat(), "machine": machine(), **results}
    path.write_text(json.dumps(payload, indent=2, default=str))
    return path


def median(values: list[float]) -> float:
    return statistics.median(values)
