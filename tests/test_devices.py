"""Device slots of the local pool."""

from __future__ import annotations

import pytest

from sandbox.devices import evaluation_slots, visible_gpus


def test_cpu_slots_and_requested_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    assert evaluation_slots("cpu") == [0]
    assert evaluation_slots("cpu", cpu_slots=3) == [0, 1, 2]
    assert evaluation_slots("cuda", requested=[2, 3]) == [2, 3]
    assert visible_gpus("cpu") == []


def test_visibility_variables_narrow_the_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sandbox.devices._nvidia_indices", lambda: [0, 1, 2, 3])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_gpus("cuda") == [0, 1, 2, 3]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    assert visible_gpus("cuda") == [1, 3] and evaluation_slots("cuda") == [1, 3]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5d2f")  # a UUID: the runtime decides
    assert visible_gpus("cuda") == [0, 1, 2, 3]
    monkeypatch.setattr("sandbox.devices._nvidia_indices", lambda: [])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert evaluation_slots("cuda") == [0]  # none found: one slot, the runtime's default GPU
