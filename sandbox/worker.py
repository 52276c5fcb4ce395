"""The process that builds, checks and times one candidate.

    python -m sandbox.worker REQUEST.json

It reports on the file descriptor named by $KS_EVENT_FD, one JSON object per
line: {"phase": ...} when a phase starts (the parent enforces each phase's
wall-clock limit), then {"result": {...}} with the verdict's fields. The
candidate's own prints go to this process's stdout and stderr, which the
parent keeps as the run log. Standard library, torch and PyYAML only.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

# The worker is started as `python -m sandbox.worker` with the project on PYTHONPATH.


class Events:
    def __init__(self) -> None:
        fd = os.environ.get("KS_EVENT_FD")
        self._out = os.fdopen(int(fd), "w", buffering=1) if fd else None

    def send(self, **event: Any) -> None:
        if self._out is not None:
            self._out.write(json.dumps(event, default=str) + "\n")
            self._out.flush()


def _device_for(target: str) -> str:
    if target == "cpu":
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(f"target {target!r} needs a GPU, and torch sees none")
    return "cuda:0"


def _profile(target: str, device: str) -> Any:
    from sandbox import targets

    if target == "cpu":
        return targets.cpu_profile()
    import torch

    return targets.profile_for_device_name(torch.cuda.get_device_name(0))


def _static_report(submission: Path, target: str, result: dict[str, Any]) -> None:
    """Resource usage and instruction counts of the kernels, for the Critic and the Coder.

    Compiled for the target's ISA without running anything (cached by source);
    the timing method says how this host will time the kernels.
    """
    if target == "cpu":
        result["timing_method"] = {"method": "host_clock", "note": "host clock around each call"}
        return
    from sandbox import rocprof
    from sandbox.static_analysis import analyze_submission

    result["static"] = analyze_submission(submission, target).to_dict()
    if target == "hip":
        from sandbox.roctx import ranges

        result["timing_method"] = rocprof.timing_method()
        if ranges().active:
            result["timing_method"]["note"] += "; calls named with ROCTx, durations read after the worker exits"
        elif result["timing_method"]["method"] != "device_events":
            result["timing_method"] = {
                "method": "device_events",
                "note": f"{result['timing_method']['method']} is installed but this worker was not started "
                "under it (profiling off, or not a timing run): timed with device events",
            }
    else:
        result["timing_method"] = {"method": "device_events", "note": "CUDA events around each call, L2 flushed"}


def run(request: dict[str, Any], events: Events) -> dict[str, Any]:
    from sandbox import native
    from sandbox.problem import load_problem

    target = request["target"]
    mode = request.get("mode", "full")
    result: dict[str, Any] = {
        "status": "harness_error",
        "message": "",
        "tests": [],
        "benchmarks": [],
        "errors": [],
        "phases": {},
    }
    clock = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        if result["phases"]:
            last = list(result["phases"])[-1]
            result["phases"][last] = round(now - clock, 4)
        result["phases"][name] = 0.0
        clock = now
        events.send(phase=name)

    def reject(exc: Any, shape: str) -> dict[str, Any]:
        result["integrity"]["violation"] = {"rule": exc.rule, "reason": exc.reason, "shape": shape}
        result.update(status="rejected", message=f"{shape}: {exc.reason}")
        return finish()

    def finish() -> dict[str, Any]:
        if result["phases"]:
            last = list(result["phases"])[-1]
            result["phases"][last] = round(time.perf_counter() - clock, 4)
        result["build"] = {"records": native.BUILD_RECORDS}
        return result

    phase("build")
    warm = _WARM.get("spec") == request["problem"] and _WARM.get("target") == target
    problem = _WARM["problem"] if warm else load_problem(request["problem"], target)
    result["problem"] = {
        "name": problem.name,
        "kind": problem.kind,
        "path": str(problem.path),
        "ranking_by": problem.ranking_by,
        "tolerance": list(problem.tolerance) if problem.tolerance else None,
    }
    if request.get("threads"):
        import torch

        torch.set_num_threads(int(request["threads"]))
    device = "cpu" if mode == "build" else _device_for(target)
    from sandbox import envinfo, harness
    from sandbox.timing import TimingPolicy

    if mode != "build":
        result["environment"] = dict(_ENVIRONMENT) or envinfo.collect(device)
    if not warm:
        problem.bind()
    from sandbox import integrity

    policy = integrity.Policy.from_dict(problem.integrity)
    submission_path = Path(request["submission"])
    findings = integrity.scan_source(submission_path.read_text(errors="replace"), policy)
    result["integrity"] = {"findings": [f.to_dict() for f in findings], "violation": None}
    errors = [f for f in findings if f.severity == integrity.ERROR]
    if errors:
        first = errors[0]
        result["integrity"]["violation"] = {"rule": first.rule, "reason": f"line {first.line}: {first.reason}"}
        result.update(status="rejected", message=f"static check: line {first.line}: {first.reason}")
        return finish()
    harness.guard_reference(problem)
    # Before the import: a report is useful even when the build or import fails.
    _static_report(submission_path, target, result)
    try:
        kernel = problem.load_submission(submission_path)
    except native.BuildError as exc:
        result.update(status="build_error", message=str(exc))
        result["diagnostics"] = [d.__dict__ for d in exc.diagnostics]
        return finish()
    except Exception as exc:  # noqa: BLE001 - the candidate's import failed
        if mode == "build":
            # Module-level code may need the GPU the builder cannot see;
            # whatever compiled is cached, the GPU worker does the rest.
            result.update(status="built", message=f"import stopped early: {type(exc).__name__}: {exc}")
            return finish()
        result.update(status="runtime_error", message=f"importing the submission failed: {type(exc).__name__}: {exc}")
        result["errors"].append(traceback.format_exc()[-4000:])
        return finish()
    if mode == "build":
        result.update(status="built", message="built")
        return finish()

    phase("check")
    all_passed = True
    for params in problem.tests:
        try:
            check = harness.check_shape(problem, kernel, params, device, policy)
        except integrity.IntegrityViolation as exc:
            return reject(exc, problem.shape_label(params))
        except harness.CandidateFailure as exc:
            result["tests"].append(
                {"params": params, "shape": problem.shape_label(params), "passed": False, "message": str(exc).splitlines()[0]}
            )
            result.update(status="runtime_error", message=f"{problem.shape_label(params)}: {str(exc).splitlines()[0]}")
            result["errors"].append(str(exc)[-4000:])
            return finish()
        entry = dict(check.__dict__, shape=problem.shape_label(params))
        result["tests"].append(entry)
        events.send(progress="check", shape=entry["shape"], passed=check.passed)
        if not check.passed:
            all_passed = False
    if not all_passed:
        failed = [t for t in result["tests"] if not t["passed"]]
        result.update(
            status="wrong_output",
            message=f"{len(failed)} of {len(result['tests'])} tests failed; first: {failed[0]['shape']}: {failed[0]['message']}",
        )
        return finish()
    if mode == "check":
        result.update(status="ok", message="all tests passed (timing skipped)")
        return finish()

    phase("time")
    timing_policy = TimingPolicy.from_dict(request.get("timing"))
    profile = _profile(target, device)
    result["target_profile"] = profile.to_dict() if profile else None
    for params in problem.benchmarks:
        try:
            timing = harness.time_shape(
                problem, kernel, params, device, timing_policy, profile,
                time_reference=bool(request.get("time_reference", True)),
                input_sets=int(request.get("input_sets", 3)),
            )
        except integrity.IntegrityViolation as exc:
            return reject(exc, problem.shape_label(params))
        except harness.CandidateFailure as exc:
            result.update(status="runtime_error", message=f"{problem.shape_label(params)}: {str(exc).splitlines()[0]}")
            result["errors"].append(str(exc)[-4000:])
            return finish()
        median = timing.stats["median_us"]
        entry = {
            "params": params,
            "shape": problem.shape_label(params),
            **{k: v for k, v in timing.stats.items()},
            "reference_median_us": timing.reference["median_us"] if timing.reference else None,
            "flops": timing.flops,
            "bytes": timing.bytes,
            "sol_us": timing.sol_us,
        }
        entry["speedup"] = entry["reference_median_us"] / median if entry["reference_median_us"] and median else None
        entry["pct_sol"] = 100.0 * timing.sol_us / median if timing.sol_us and median else None
        result["benchmarks"].append(entry)
        events.send(progress="time", shape=entry["shape"], median_us=median)
        entry["host_synced_us"] = timing.host_synced_us
        # Datasheet peaks bound every GPU kernel; on the CPU the measured ceilings
        # are estimates that caches can beat, so the floor applies to GPUs only.
        if target != "cpu" and timing.sol_us and median * policy.sol_margin < timing.sol_us:
            violation = integrity.IntegrityViolation(
                "faster-than-light",
                f"{median:.2f} µs is under the speed of light ({timing.sol_us:.2f} µs): "
                "the result cannot be real (partial work, cached or stale output, or a timing escape)",
            )
            return reject(violation, entry["shape"])
    from sandbox.summary import summarise_benchmarks

    result["summary"] = summarise_benchmarks(result["benchmarks"])
    geo = result["summary"]["geomean_us"]
    result.update(status="ok", message=f"all {len(problem.tests)} tests passed; geomean {geo:.2f} µs" if geo else "ok")
    return finish()


_ENVIRONMENT: dict[str, Any] = {}  # filled during warm-up: the device does not change
_WARM: dict[str, Any] = {}  # the problem loaded and bound during warm-up


def _warm_host() -> None:
    """Pay the host's share of start-up before the request arrives: torch, the harness, the
    problem's reference code. No kernel runs: another worker may be timing on this GPU."""
    import torch  # noqa: F401

    from sandbox import envinfo, harness, native, problem, timing  # noqa: F401

    spec, target = os.environ.get("KS_WARM_PROBLEM"), os.environ.get("KS_WARM_TARGET", "cpu")
    if spec:
        bound = problem.load_problem(spec, target)
        bound.bind()
        _WARM.update(spec=spec, target=target, problem=bound)


def _has_gpu() -> bool:
    import torch

    return os.environ.get("CUDA_VISIBLE_DEVICES") != "" and torch.cuda.is_available()


def _create_context() -> None:
    """The device context and the BLAS library's handle: no kernel runs."""
    import torch

    if _has_gpu():
        torch.cuda.init()
        torch.cuda.set_device(0)
        torch.cuda.current_blas_handle()  # loads cuBLAS (or hipBLAS) without a launch


def _describe_device() -> None:
    """The verdict's environment (device properties, driver, toolkit): host-side queries."""
    from sandbox import envinfo

    _ENVIRONMENT.update(envinfo.collect("cuda:0" if _has_gpu() else "cpu"))


def _request_waiting() -> bool:
    import select

    return bool(select.select([sys.stdin], [], [], 0)[0])


def _stand_by() -> None:
    """Warm up while waiting for a request; the device step only while the device is idle."""
    from sandbox.devicelock import device_idle, device_key

    try:
        start = time.perf_counter()
        _warm_host()
        host_s = time.perf_counter() - start
        # Creating the context and querying the driver touch the GPU: only while it is idle.
        with device_idle(give_up=_request_waiting) as idle:
            waited_s = time.perf_counter() - start - host_s
            if idle:
                _create_context()
                _describe_device()
            context_s = time.perf_counter() - start - host_s - waited_s
        if device_key() is None:
            _describe_device()
        # For the verdict's log tail: what start-up the request found already paid.
        if device_key() is None:
            device = "no device"
        elif idle:
            device = f"device step done in {context_s:.2f} s after waiting {waited_s:.2f} s for an idle device"
        else:
            device = "device busy until the request came: its device step is the request's"
        print(f"standby: host warm-up {host_s:.2f} s; {device}", file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - the request will meet the same error and report it
        traceback.print_exc()


def _limit_open_files() -> None:
    limit = os.environ.get("KS_OPEN_FILES")
    if limit:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = int(limit) if hard == resource.RLIM_INFINITY else min(int(limit), hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, wanted))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m sandbox.worker (REQUEST.json | --standby)", file=sys.stderr)
        return 2
    _limit_open_files()
    if argv[1] == "--standby":
        # Started ahead of time: warm up, then wait for the request's path on stdin.
        _stand_by()
        line = sys.stdin.readline().strip()
        if not line:
            return 0  # the orchestrator went away without a request
        argv = [argv[0], line]
    events = Events()
    request_path = Path(argv[1])
    request = json.loads(request_path.read_text())
    request_path.unlink(missing_ok=True)  # nothing of the harness's is left for the candidate to read
    try:
        from sandbox.devicelock import device_key, device_lock

        with device_lock() as exclusive:  # no standby worker warms up on this GPU meanwhile
            result = run(request, events)
        if not exclusive and device_key() is not None:
            result.setdefault("errors", []).append("the device lock was not free: timed beside another worker")
    except Exception as exc:  # noqa: BLE001 - report, never die silently
        result = {
            "status": "harness_error",
            "message": f"{type(exc).__name__}: {exc}",
            "errors": [traceback.format_exc()[-4000:]],
        }
    events.send(result=result)
    exit_now()


def exit_now() -> None:
    """Leave at once: candidates may leave threads or device state behind; do not wait on them.

    Under the profiler, through the C library's exit: it runs the profiler's exit handlers (the
    trace is written then), still without waiting for Python threads.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    if os.environ.get("KS_PROFILED") == "1":
        import ctypes

        ctypes.CDLL(None).exit(0)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
