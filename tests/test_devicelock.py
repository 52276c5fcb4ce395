"""The per-GPU lock between a warming standby worker and a worker timing a candidate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.devicelock import device_lock

PROBE = (
    "from sandbox.devicelock import device_lock\n"
    "with device_lock(timeout_s=0.3) as got:\n"
    "    print('locked' if got else 'busy')\n"
)


def probe(env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_one_holder_per_device_across_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KS_LOCK_DIR", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    with device_lock() as held:
        assert held
        assert probe(env) == "busy"  # same GPU: waits, then gives up after its timeout
        assert probe(dict(env, CUDA_VISIBLE_DEVICES="4")) == "locked"  # another GPU: free
    assert probe(env) == "locked"  # released on exit


def test_no_device_no_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with device_lock() as held:
        assert held is False
