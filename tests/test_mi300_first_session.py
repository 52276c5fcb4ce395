"""The first MI300 session's one command (bench/mi300_first_session.py), as far as it runs without one:
the checks on the rocprofv3 probe's trace, read from a trace folder laid out as rocprofv3 writes it,
and the command on this machine (no AMD GPU: the doctor's findings, then it stops)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import mi300_first_session as first
from sandbox import rocprof
from tests.test_profiled import TraceWriter


def _probe_trace(folder: Path, calls: int, kernel_ns: int = 10_000) -> Path:
    trace = TraceWriter()
    trace.kernel("void at::native::vectorized_elementwise_kernel<mul>(...)", kernel_ns)  # warm-up, no range
    for _ in range(calls):
        trace.call(first.MARKER, [("void at::native::vectorized_elementwise_kernel<mul>(...)", kernel_ns)])
    return trace.write(folder)


def test_a_good_probe_trace_passes_every_check(tmp_path: Path) -> None:
    child = {"roctx_loaded": True, "events_us": [12.0] * first.CALLS}
    found = first.judge_trace(_probe_trace(tmp_path, first.CALLS), child, first.CALLS)
    assert found["ok"], found["checks"]
    assert found["method"] == "markers" and found["trace_median_us"] == pytest.approx(10.0)


def test_each_way_the_rocprofv3_path_can_break_is_named(tmp_path: Path) -> None:
    folder = _probe_trace(tmp_path, first.CALLS - 1)  # a range lost
    child = {"roctx_loaded": False, "events_us": [100.0] * first.CALLS}  # no library; events far above the kernels
    checks = first.judge_trace(folder, child, first.CALLS)["checks"]
    assert not any(checks.values()), checks


def test_without_rocprofv3_the_probe_says_how_it_would_be_timed() -> None:
    if rocprof.find_profiler() is not None:
        pytest.skip("a profiler is installed here")
    found = first.rocprofv3_probe(3)
    assert not found["ok"] and "no rocprofv3" in found["error"]


@pytest.mark.slow
def test_on_a_machine_without_an_amd_gpu_it_stops_after_the_doctor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.devices import gpu_found

    if gpu_found("hip"):
        pytest.skip("this machine has an AMD GPU")
    monkeypatch.setenv("OUT", str(tmp_path))
    assert first.main([]) == 1
    written = json.loads((tmp_path / "mi300_first_session.json").read_text())
    assert written["doctor"]["usable"] is False and "rocprofv3" not in written and "hip_seeds" not in written
    assert any(f["name"] == "MI300 static reports" for f in written["doctor"]["findings"])
