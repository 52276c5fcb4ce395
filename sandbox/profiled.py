"""Time HIP candidates with rocprofv3: which workers run under it, and what its trace changes.

A worker for the hip target (full evaluation, rocprofv3 installed, profiling not turned off) is
started under `rocprofv3 --kernel-trace --marker-trace`, with `KS_PROFILED=1`. Its harness names
each timed call with a ROCTx range (`sandbox/roctx.py`) and leaves the device idle at both ends
of the range, so every kernel inside is the call's own. rocprofv3 writes its trace when the
process exits; the orchestrator then reads it (`apply_trace`) and replaces each shape's
events-based figures with the median over calls of the sum of that call's kernel durations,
keeping the events' figures beside them. A trace that cannot be read, or that does not match the
calls the harness made, leaves the events' figures in place and the verdict says why.

Orchestrator side; standard library only.
"""

from __future__ import annotations

import logging
import sqlite3
import statistics
from pathlib import Path
from typing import Any

from sandbox import rocprof, roctx
from sandbox.summary import num, summarise, summarise_benchmarks

log = logging.getLogger(__name__)

# The trace's kernels exclude launch gaps, which events include: a call whose kernels sum to
# less than this share of its events' time lost kernels to something, so the events stay.
MIN_SHARE_OF_EVENTS = 0.5


def profiler_for(target: str, mode: str, setting: str) -> tuple[str, str] | None:
    """('rocprofv3', path) when this evaluation's worker should run under the profiler."""
    if target != "hip" or mode != "full" or setting == "off":
        return None
    found = rocprof.find_profiler()
    if found is None or found[0] != "rocprofv3":
        return None  # the legacy rocprof cannot name calls: device events, and the verdict says so
    return found


def wrap_command(argv: list[str], out_dir: Path, profiler: tuple[str, str]) -> list[str]:
    command = rocprof.profile_command(argv, out_dir, profiler[0])
    command[0] = profiler[1]
    return command


def _calls_us(trace: rocprof.Trace, marker: str) -> tuple[list[float], str]:
    calls = rocprof.per_call_durations(trace, marker_name=marker, exclude=())
    if calls.method not in ("markers", "regions"):
        return [], f"no '{marker}' ranges in the trace"
    return calls.durations_us, calls.method


def _measured(durations: list[float], reps: int | None, events_median: float | None, label: str) -> str | None:
    """Why these per-call durations cannot stand in for the events' figure, or None."""
    if not durations:
        return f"{label}: no calls"
    if reps is not None and len(durations) != reps:
        return f"{label}: {len(durations)} named calls in the trace, {reps} timed"
    if any(d <= 0 for d in durations):
        return f"{label}: a named call has no kernel"
    median = statistics.median(durations)
    if events_median and median < MIN_SHARE_OF_EVENTS * events_median:
        return f"{label}: kernels sum to {num(median)} µs, under half the events' {num(events_median)} µs"
    return None


def apply_trace(result: dict[str, Any], trace_dir: Path, profiler: tuple[str, str]) -> None:
    """Replace the events' figures of `result` (a worker's result) with the trace's, in place."""
    tool, path = profiler
    benchmarks = result.get("benchmarks") or []
    if result.get("status") != "ok" or not benchmarks:
        return
    try:
        trace = rocprof.load_trace(trace_dir)
    except (FileNotFoundError, ValueError, sqlite3.Error, OSError) as exc:
        result["timing_method"] = {
            "method": "device_events",
            "note": f"{tool} ({path}) left no usable trace ({exc}): timed with device events",
        }
        return
    problems: list[str] = []
    updates: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for entry in benchmarks:
        shape = entry["shape"]
        calls, method = _calls_us(trace, roctx.call_marker(shape))
        why = _measured(calls, entry.get("reps"), entry.get("median_us"), shape) if calls else f"{shape}: {method}"
        if why:
            problems.append(why)
            continue
        median = statistics.median(calls)
        if entry.get("sol_us") and median < entry["sol_us"]:
            problems.append(f"{shape}: the trace's {num(median)} µs is under the speed of light")
            continue
        stats = summarise(calls).to_dict()
        update: dict[str, Any] = dict(stats)
        update["profiler"] = {
            "tool": tool,
            "method": method,
            "events": {key: entry[key] for key in stats if key in entry},  # the same calls, by events
            "reference_events_median_us": entry.get("reference_median_us"),
        }
        if entry.get("reference_median_us"):
            # A speed-up compares like with like: both from the trace, or both from events.
            ref_calls, _ = _calls_us(trace, roctx.reference_marker(shape))
            if not ref_calls or any(d <= 0 for d in ref_calls):
                problems.append(f"{shape}: the reference's calls are not in the trace")
                continue
            update["reference_median_us"] = statistics.median(ref_calls)
            update["speedup"] = update["reference_median_us"] / median
        if entry.get("sol_us"):
            update["pct_sol"] = 100.0 * entry["sol_us"] / median
        updates.append((entry, update))
    if problems:
        # All shapes from one method: a geomean of trace and event figures would favour nobody fairly.
        result["timing_method"] = {
            "method": "device_events",
            "note": f"{tool}'s trace did not match the timed calls: every shape timed with device events",
            "problems": problems,
        }
        log.warning("profiler trace: %s", "; ".join(problems))
        return
    for entry, update in updates:
        entry.update(update)
    result["summary"] = summarise_benchmarks(benchmarks)
    result["timing_method"] = {
        "method": tool,
        "path": path,
        "note": f"kernel durations from {tool} ({path}), summed per named call, on every shape",
        "problems": [],
    }
