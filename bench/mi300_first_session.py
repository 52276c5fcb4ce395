"""The first session on an MI300 host, in one command: `python -m bench.mi300_first_session`.

Nothing of the hip target has run on AMD hardware, so the first session must say at once what
works. In order, each step recorded whatever the others do:

1. the doctor's findings for the hip target (graph/doctor.py);
2. the rocprofv3 path outside the sandbox: a child process is started under rocprofv3 with the
   profiler's command as the judge's worker gets it (`sandbox.rocprof.profile_command`); it
   launches a small kernel inside N `ks_call` ROCTx ranges (`sandbox.roctx`, loaded as the worker
   loads it) and times the same calls with device events. The trace folder is read back with
   `load_trace` and `per_call_durations`, and the per-call figures are compared with the events;
3. every bundled problem's HIP seed through the judge (full evaluation, profiler auto): their
   first build and run anywhere.

Results go to bench/results/mi300_first_session.json (or $OUT). Exit code 0 when every step
passed. Without rocprofv3 or an AMD GPU it says so in step 1 and stops after it, unless --force.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import save

ROOT = Path(__file__).resolve().parent.parent
CALLS = 20
MARKER = "ks_call:probe"
# The trace's kernel time of a call excludes launch gaps the events include, so it may be lower,
# but not below half of them (sandbox/profiled.py's MIN_SHARE_OF_EVENTS), nor above the events
# by more than the two clocks' granularity.
MIN_SHARE = 0.5
MAX_OVER_US = 2.0


def probe_child(calls: int) -> dict[str, Any]:
    """Inside rocprofv3: `calls` timed calls of one small kernel, each in its ROCTx range."""
    os.environ["KS_PROFILED"] = "1"  # sandbox.roctx loads the library only under the profiler
    import torch

    from sandbox import roctx

    ranges = roctx.ranges()
    x = torch.ones(1 << 22, device="cuda")
    y = torch.empty_like(x)
    torch.mul(x, 2.0, out=y)  # warm-up outside any range
    torch.cuda.synchronize()
    events_us = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ranges.push(MARKER)
        start.record()
        torch.mul(x, 2.0, out=y)
        end.record()
        torch.cuda.synchronize()
        ranges.pop()
        events_us.append(start.elapsed_time(end) * 1000.0)
    return {"roctx_loaded": ranges.active, "events_us": events_us, "device": torch.cuda.get_device_name(0)}


def judge_trace(trace_dir: Path, child: dict[str, Any], calls: int) -> dict[str, Any]:
    """What the trace says about the probe's calls, against its events: the checks the first session must pass."""
    from sandbox import rocprof

    trace = rocprof.load_trace(trace_dir)
    found = rocprof.per_call_durations(trace, marker_name=MARKER, exclude=())
    trace_us = statistics.median(found.durations_us) if found.durations_us else 0.0
    events_us = statistics.median(child["events_us"]) if child.get("events_us") else 0.0
    checks = {
        "roctx library loaded in the child": bool(child.get("roctx_loaded")),
        f"{calls} '{MARKER}' ranges in the marker trace": sum(m.name == MARKER for m in trace.markers) == calls,
        "every call has a kernel": len(found.durations_ns) == calls and all(found.kernels_per_call),
        "trace per call within the events' bounds": events_us > 0 and MIN_SHARE * events_us <= trace_us <= events_us + MAX_OVER_US,
    }
    return {"source": trace.source, "dispatches": len(trace.dispatches), "markers": len(trace.markers),
            "method": found.method, "trace_median_us": trace_us, "events_median_us": events_us,
            "kernels_first_call": found.kernels_per_call[0] if found.kernels_per_call else [],
            "checks": checks, "ok": all(checks.values())}


def rocprofv3_probe(calls: int) -> dict[str, Any]:
    """Step 2: this script's probe child under rocprofv3, then its trace read back."""
    from sandbox import rocprof

    profiler = rocprof.find_profiler()
    if profiler is None or profiler[0] != "rocprofv3":
        return {"ok": False, "error": rocprof.timing_method()["note"]}
    with tempfile.TemporaryDirectory(prefix="ks-first-trace-") as folder:
        argv = [sys.executable, "-m", "bench.mi300_first_session", "--probe-child", str(calls)]
        command = rocprof.profile_command(argv, folder)
        command[0] = profiler[1]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not lines:
            return {"ok": False, "command": command, "error": (proc.stdout + proc.stderr)[-3000:]}
        try:
            return {"command": command, **judge_trace(Path(folder), json.loads(lines[-1]), calls)}
        except (OSError, ValueError) as exc:  # no trace, or one the readers do not understand
            return {"ok": False, "command": command, "error": f"{type(exc).__name__}: {exc}"}


def hip_seeds() -> list[dict[str, Any]]:
    """Step 3: every bundled HIP seed through the judge, full evaluation."""
    from sandbox.evaluator import EvalOptions, evaluate
    from sandbox.problem import bundled_problems, load_problem

    results = []
    for name, path in bundled_problems().items():
        spec = load_problem(path, "hip")
        if "hip" not in spec.seeds:
            continue
        verdict = evaluate(name, spec.seed_for("hip"), EvalOptions(target="hip"))
        results.append({"problem": name, "status": verdict.status.value, "message": verdict.message,
                        "timing_method": verdict.timing_method, "errors": verdict.errors[-3:]})
    return results


def doctor_step() -> dict[str, Any]:
    """Step 1: the doctor's hip findings, and whether the hip target can run here at all."""
    from graph.doctor import examine, usable

    findings = examine(["hip"])
    return {"usable": usable(findings, "hip"), "findings": [f.model_dump() for f in findings]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--probe-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=CALLS)
    parser.add_argument("--force", action="store_true", help="go on after a doctor that finds hip unusable")
    args = parser.parse_args(argv)
    if args.probe_child:
        print(json.dumps(probe_child(args.probe_child)))
        return 0
    results: dict[str, Any] = {"doctor": doctor_step()}
    for finding in results["doctor"]["findings"]:
        print(f"{'ok ' if finding['ok'] else 'NO '} {finding['target']:4} {finding['name']}: {finding['detail']}")
    if results["doctor"]["usable"] or args.force:
        results["rocprofv3"] = rocprofv3_probe(args.calls)
        print("rocprofv3 path:", json.dumps(results["rocprofv3"], indent=1, default=str))
        results["hip_seeds"] = hip_seeds()
        for seed in results["hip_seeds"]:
            print(f"{seed['problem']}: {seed['status']}: {seed['message']}")
    print(f"written to {save('mi300_first_session', results)}")
    passed = results["doctor"]["usable"] and results.get("rocprofv3", {}).get("ok") and all(
        s["status"] == "ok" for s in results.get("hip_seeds", []))
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
