"""HIP timing through rocprofv3: which workers run under it, and how its trace becomes figures.

rocprofv3 cannot run here (no ROCm, no AMD GPU). The trace files below have the columns of
rocprofv3's CSV output (the kernel trace header is the real file's in ../shared/fixtures) and the
layout the harness produces: the device idle at both ends of each named call, the harness's
input refresh and L2 flush outside the ranges.
"""

from __future__ import annotations

import copy
import csv
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sandbox import profiled, rocprof, roctx
from sandbox.summary import summarise_benchmarks
from sandbox.verdict import Verdict

ROOT = Path(__file__).resolve().parent.parent
KERNEL_HEADER = [
    "Kind", "Agent_Id", "Queue_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name", "Correlation_Id",
    "Start_Timestamp", "End_Timestamp", "Private_Segment_Size", "Group_Segment_Size", "Workgroup_Size_X",
    "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z",
]
MARKER_HEADER = ["Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id", "Start_Timestamp", "End_Timestamp"]
FIXTURE_HEADER = ROOT.parent / "shared" / "fixtures" / "rocprof" / "kernel_trace.csv"


class TraceWriter:
    """Writes a profiler output folder as rocprofv3 --kernel-trace --marker-trace lays it out."""

    def __init__(self) -> None:
        self.clock = 1_000_000
        self.kernels: list[list[object]] = []
        self.markers: list[list[object]] = []

    def kernel(self, name: str, duration_ns: int, gap_ns: int = 2_000) -> None:
        self.clock += gap_ns
        n = len(self.kernels) + 1
        self.kernels.append(
            ["KERNEL_DISPATCH", 1, 1, 7, n, 3, name, n, self.clock, self.clock + duration_ns, 0, 0, 256, 1, 1, 1024, 1, 1]
        )
        self.clock += duration_ns

    def harness_refresh(self) -> None:
        self.kernel("void at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)", 3_000)
        self.kernel("void at::native::FillFunctor<float>(...)", 1_000)  # poisons the output
        self.kernel("void at::native::FillFunctor<int>(...)", 40_000)  # the L2 flush

    def call(self, marker: str, kernels: list[tuple[str, int]]) -> None:
        start = self.clock + 500
        self.clock = start
        for name, duration in kernels:
            self.kernel(name, duration)
        self.clock += 5_000  # the harness syncs the device before closing the range
        self.markers.append(["MARKER_CORE_RANGE_API", marker, 11, 7, 900 + len(self.markers), start, self.clock])

    def write(self, folder: Path) -> Path:
        out = folder / "profile" / "host" / "4242"
        out.mkdir(parents=True)
        if FIXTURE_HEADER.is_file():  # the real file's header: the columns rocprofv3 writes
            assert next(csv.reader(FIXTURE_HEADER.open())) == KERNEL_HEADER
        for name, header, rows in (
            ("ks_kernel_trace.csv", KERNEL_HEADER, self.kernels),
            ("ks_marker_api_trace.csv", MARKER_HEADER, self.markers),
        ):
            with (out / name).open("w", newline="") as f:
                writer = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
                writer.writerow(header)
                writer.writerows(rows)
        return folder / "profile"


def worker_result(shapes: dict[str, tuple[float, float]], reps: int = 3) -> dict:
    """A worker's result: per shape (events median, reference events median), timed `reps` times."""
    benchmarks = []
    for shape, (median, reference) in shapes.items():
        benchmarks.append(
            {
                "params": {"m": shape}, "shape": shape, "reps": reps, "median_us": median, "mean_us": median,
                "std_us": 1.0, "stderr_us": 0.5, "min_us": median - 1, "max_us": median + 1,
                "p25_us": median - 0.5, "p75_us": median + 0.5, "reference_median_us": reference,
                "speedup": reference / median, "sol_us": 10.0, "pct_sol": 1000.0 / median,
            }
        )
    return {"status": "ok", "benchmarks": benchmarks, "summary": summarise_benchmarks(benchmarks)}


def trace_for(shapes: dict[str, tuple[list[list[tuple[str, int]]], list[int]]]) -> TraceWriter:
    """Candidate calls (a list of kernels each) then reference calls, per shape, as the harness runs them."""
    trace = TraceWriter()
    for shape, (calls, reference) in shapes.items():
        trace.kernel("void at::native::vectorized_elementwise_kernel(...)", 90_000)  # the check: outside ranges
        for kernels in calls:
            trace.harness_refresh()
            trace.call(roctx.call_marker(shape), kernels)
        for duration in reference:
            trace.harness_refresh()
            trace.call(roctx.reference_marker(shape), [("Cijk_Alik_Bljk_HHS_BH_MT128x128x32", duration)])
    return trace


PROFILER = ("rocprofv3", "/opt/rocm/bin/rocprofv3")
GEMM = "_Z8fp8_gemmPKhS0_PKfS2_P6__half"
SCALE = "_Z9apply_scalePfPKf"


def test_trace_figures_replace_the_events(tmp_path: Path) -> None:
    shapes = {
        "m=1024": ([[(GEMM, 100_000), (SCALE, 8_000)], [(GEMM, 102_000), (SCALE, 8_000)], [(GEMM, 98_000), (SCALE, 9_000)]],
                   [300_000, 310_000, 305_000]),
        "m=4096": ([[(GEMM, 800_000)], [(GEMM, 790_000)], [(GEMM, 810_000)]], [2_400_000, 2_500_000, 2_450_000]),
    }
    folder = trace_for(shapes).write(tmp_path)
    result = worker_result({"m=1024": (115.0, 320.0), "m=4096": (805.0, 2470.0)})
    profiled.apply_trace(result, folder, PROFILER)

    small, large = result["benchmarks"]
    # Per call: the sum of its own kernels; the median over calls. Launch gaps are not counted.
    assert small["median_us"] == pytest.approx(108.0) and large["median_us"] == pytest.approx(800.0)
    assert small["profiler"]["events"]["median_us"] == 115.0 and small["reps"] == 3
    assert small["min_us"] == pytest.approx(107.0) and small["max_us"] == pytest.approx(110.0)
    assert small["reference_median_us"] == pytest.approx(305.0)
    assert small["speedup"] == pytest.approx(305.0 / 108.0)
    assert large["pct_sol"] == pytest.approx(100.0 * 10.0 / 800.0)
    assert result["summary"]["geomean_us"] == pytest.approx((108.0 * 800.0) ** 0.5)
    method = result["timing_method"]
    assert method["method"] == "rocprofv3" and "every shape" in method["note"] and not method["problems"]
    # The verdict keeps the trace's figures and the events' beside them.
    verdict = Verdict.model_validate(dict(result, target="hip", submission={"path": "s.py", "sha256": "0"}))
    assert verdict.benchmarks[0].profiler["events"]["median_us"] == 115.0


def test_a_trace_that_does_not_match_the_calls_leaves_the_events(tmp_path: Path) -> None:
    calls = [[(GEMM, 100_000)]] * 3
    writer = trace_for({"m=1024": (calls, [300_000] * 3), "m=4096": (calls, [300_000] * 3)})
    # The candidate opened a range of the harness's name itself: four "calls" for three timings.
    writer.call(roctx.call_marker("m=4096"), [(GEMM, 1_000)])
    folder = writer.write(tmp_path)
    result = worker_result({"m=1024": (105.0, 310.0), "m=4096": (105.0, 310.0)})
    before = copy.deepcopy(result)
    profiled.apply_trace(result, folder, PROFILER)
    # One shape does not match: every shape stays on events, so the geomean mixes no methods.
    assert result["benchmarks"] == before["benchmarks"] and result["summary"] == before["summary"]
    assert result["timing_method"]["method"] == "device_events"
    assert result["timing_method"]["problems"] == ["m=4096: 4 named calls in the trace, 3 timed"]


def test_kernels_far_under_the_events_are_not_believed(tmp_path: Path) -> None:
    # The events saw 500 µs per call, the trace 100 µs of kernels: work escaped the ranges.
    folder = trace_for({"m=1024": ([[(GEMM, 100_000)]] * 3, [300_000] * 3)}).write(tmp_path)
    result = worker_result({"m=1024": (500.0, 310.0)})
    profiled.apply_trace(result, folder, PROFILER)
    assert result["benchmarks"][0]["median_us"] == 500.0 and "profiler" not in result["benchmarks"][0]
    assert result["timing_method"]["method"] == "device_events"
    assert "under half the events" in result["timing_method"]["problems"][0]


def test_the_reference_outside_the_trace_keeps_both_on_events(tmp_path: Path) -> None:
    folder = trace_for({"m=1024": ([[(GEMM, 100_000)]] * 3, [])}).write(tmp_path)
    result = worker_result({"m=1024": (105.0, 310.0)})
    profiled.apply_trace(result, folder, PROFILER)
    entry = result["benchmarks"][0]
    assert entry["median_us"] == 105.0 and entry["speedup"] == pytest.approx(310.0 / 105.0)
    assert "reference's calls are not in the trace" in result["timing_method"]["problems"][0]


def test_no_trace_at_all_says_so(tmp_path: Path) -> None:
    result = worker_result({"m=1024": (105.0, 310.0)})
    profiled.apply_trace(result, tmp_path / "profile", PROFILER)
    assert result["benchmarks"][0]["median_us"] == 105.0
    assert result["timing_method"]["method"] == "device_events"
    assert "left no usable trace" in result["timing_method"]["note"]


def test_which_workers_run_under_the_profiler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rocprof, "find_profiler", lambda: PROFILER)
    assert profiled.profiler_for("hip", "full", "auto") == PROFILER
    assert profiled.profiler_for("hip", "check", "auto") is None  # nothing is timed
    assert profiled.profiler_for("hip", "full", "off") is None
    assert profiled.profiler_for("cuda", "full", "auto") is None
    command = profiled.wrap_command(["python", "-m", "sandbox.judge", "--standby"], Path("/w/profile"), PROFILER)
    assert command[0] == "/opt/rocm/bin/rocprofv3"
    assert {"--kernel-trace", "--marker-trace"} <= set(command)
    assert command[command.index("--output-format") + 1] == "csv" and command[command.index("-d") + 1] == "/w/profile"
    assert command[-5:] == ["--", "python", "-m", "sandbox.judge", "--standby"]
    # The legacy rocprof cannot name calls: device events, and the verdict says so.
    monkeypatch.setattr(rocprof, "find_profiler", lambda: ("rocprof", "/opt/rocm/bin/rocprof"))
    assert profiled.profiler_for("hip", "full", "auto") is None
    assert rocprof.timing_method()["method"] == "device_events"
    assert "legacy rocprof" in rocprof.timing_method()["note"]


def test_evaluation_env_marks_profiled_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.evaluator import EvalOptions, _worker_env_extra

    monkeypatch.setattr(rocprof, "find_profiler", lambda: PROFILER)
    assert _worker_env_extra("p", EvalOptions(target="hip", gpu=0))["KS_PROFILED"] == "1"
    assert "KS_PROFILED" not in _worker_env_extra("p", EvalOptions(target="hip", gpu=0, profiler="off"))
    monkeypatch.setattr(rocprof, "find_profiler", lambda: None)
    assert "KS_PROFILED" not in _worker_env_extra("p", EvalOptions(target="hip", gpu=0))


def test_ranges_are_inert_outside_the_profiler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(roctx.PROFILED_ENV, raising=False)
    monkeypatch.setattr(roctx, "_RANGES", None)
    marks = roctx.ranges()
    assert not marks.active
    marks.push("ks_call:x")
    marks.pop()
    # A library without the ROCTx functions is not taken for one.
    assert roctx.load_library(("c",)) is None


EXITING_WORKER = textwrap.dedent(
    """
    import ctypes, sys, threading, time
    from sandbox.judge.main import exit_now

    # Registered as a C++ library's std::atexit and static destructors are (the profiler's trace writer).
    handler = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: open(sys.argv[1], "w").write("exit handlers ran"))
    ctypes.CDLL("libc.so.6").__cxa_atexit(handler, None, None)
    threading.Thread(target=time.sleep, args=(60,)).start()  # a thread a candidate left running
    exit_now()
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("profiled_worker", [True, False])
def test_a_profiled_worker_exits_through_the_c_library(tmp_path: Path, profiled_worker: bool) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("KS_PROFILED", None)
    if profiled_worker:
        env["KS_PROFILED"] = "1"
    marker = tmp_path / "handlers"
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", EXITING_WORKER, str(marker)], env=env, check=True, timeout=30)
    assert time.monotonic() - start < 20  # did not wait for the thread
    assert marker.exists() == profiled_worker  # os._exit skips them; a profiler would write nothing
