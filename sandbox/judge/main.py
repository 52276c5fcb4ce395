"""The judge process: one evaluation, from the request to the verdict.

    python -m sandbox.judge --standby      (the request's path arrives on stdin)

Started by the orchestrator (sandbox/evaluator.py) with an event pipe ($KS_EVENT_FD): a line
per phase (the orchestrator's backstop limits) and one result, the verdict's fields. While it
waits for a request it warms up: torch, the problem's reference, and a runner process with
torch imported, inside the OS sandbox. The candidate is imported by the runner only; the judge
decides everything (sandbox/judge/checks.py). Standard library, torch and PyYAML only.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

PR_SET_CHILD_SUBREAPER = 36


class Events:
    def __init__(self) -> None:
        fd = os.environ.pop("KS_EVENT_FD", None)
        self._out = os.fdopen(int(fd), "w", buffering=1) if fd else None

    def send(self, **event: Any) -> None:
        if self._out is not None:
            self._out.write(json.dumps(event, default=str) + "\n")
            self._out.flush()


_WARM: dict[str, Any] = {}  # the problem bound during warm-up, and the runner started then
_ENVIRONMENT: dict[str, Any] = {}  # the device's description, filled once


def _device_for(target: str, mode: str) -> str:
    if target == "cpu" or mode == "build":
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(f"target {target!r} needs a GPU, and torch sees none")
    return "cuda:0"


def _has_gpu() -> bool:
    import torch

    return os.environ.get("CUDA_VISIBLE_DEVICES") != "" and torch.cuda.is_available()


def _start_runner(problem_dir: Path, gpu: bool) -> Any:
    from sandbox.judge.session import RunnerSession

    return RunnerSession(gpu=gpu, problem_dir=problem_dir, log_path=Path("runner.log").resolve(), readable=[])


def _warm_host() -> None:
    """Host start-up before the request: a runner first (it imports torch while this process does),
    then torch and the problem's reference here. No kernel runs."""
    from sandbox import problem

    spec, target = os.environ.get("KS_WARM_PROBLEM"), os.environ.get("KS_WARM_TARGET", "cpu")
    loaded = problem.load_problem(spec, target) if spec else None
    if loaded is not None:
        folder = loaded.path if loaded.path.is_dir() else loaded.path.parent
        _WARM["runner"] = _start_runner(folder, os.environ.get("CUDA_VISIBLE_DEVICES") != "")
    import torch  # noqa: F401

    from sandbox import envinfo, native  # noqa: F401
    from sandbox.judge import checks  # noqa: F401

    if loaded is not None:
        loaded.bind()
        _WARM.update(spec=spec, target=target, problem=loaded)
    from sandbox.judge import libcode, libwatch

    libwatch.preload_tables()
    libcode.preload(libwatch.index_folder())
    if loaded is not None:  # the index of the problem's forbidden library code: built once per host, read here
        libwatch.prepare_index(loaded.integrity)


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
            if idle and _has_gpu():
                import torch

                torch.cuda.init()
                torch.cuda.set_device(0)
                torch.cuda.current_blas_handle()  # loads cuBLAS (or hipBLAS) without a launch
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
        _calibrate_ahead()
    except Exception:  # noqa: BLE001 - the request meets the same error and reports it
        traceback.print_exc()


def _calibrate_ahead() -> None:
    """The warm problem's shapes calibrated with the warm runner, before any candidate exists (`ahead`):
    on a GPU, where nothing samples the runner, shape by shape while the device is idle."""
    from sandbox import integrity
    from sandbox.devicelock import device_idle
    from sandbox.judge import ahead, libwatch

    runner, problem = _WARM.get("runner"), _WARM.get("problem")
    if runner is None or problem is None or not _has_gpu() or libwatch.available():
        return
    start = time.perf_counter()
    made = ahead.calibrate(problem, _device_for(str(_WARM.get("target")), "full"), runner,
                           integrity.Policy.from_dict(problem.integrity), time.monotonic() + 300.0,
                           lambda: device_idle(give_up=_request_waiting))
    _WARM["ahead"] = made
    print(f"standby: {len(made.calibrations)} of {len(problem.benchmarks)} shapes calibrated ahead in "
          f"{time.perf_counter() - start:.2f} s", file=sys.stderr, flush=True)


def _describe_device() -> None:
    from sandbox import envinfo

    _ENVIRONMENT.update(envinfo.collect("cuda:0" if _has_gpu() else "cpu"))


def _request_waiting() -> bool:
    import select

    return bool(select.select([sys.stdin], [], [], 0)[0])


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m sandbox.judge (REQUEST.json | --standby)", file=sys.stderr)
        return 2
    # A blocked signal stays blocked across fork and exec: a Ray worker blocks SIGINT, and perf, which
    # the judge stops with SIGINT, then ran on for its 30 s grace after every evaluation started there.
    # What the judge starts begins with no signal blocked.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    # Orphans of the runner (a daemon that double-forked) become the judge's children, and die with it.
    try:
        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    events = Events()
    from sandbox.judge.session import use_judge_kernel_cache

    use_judge_kernel_cache()  # before anything here builds a Triton kernel
    if os.environ.get("KS_CORES"):
        from sandbox.envinfo import parse_cores, pin_to_cores

        pin_to_cores(parse_cores(os.environ["KS_CORES"]))  # before any runner starts: they inherit it
    if argv[1] == "--standby":
        _stand_by()
        line = sys.stdin.readline().strip()
        if not line:
            return 0
        argv = [argv[0], line]
    request_path = Path(argv[1])
    request = json.loads(request_path.read_text())
    request_path.unlink(missing_ok=True)
    from sandbox.judge.evaluation import evaluate_request

    try:
        from sandbox.devicelock import device_key, device_lock

        with device_lock() as exclusive:
            result = evaluate_request(request, events, _WARM, _ENVIRONMENT, _start_runner)
        if not exclusive and device_key() is not None:
            result.setdefault("errors", []).append("the device lock was not free: timed beside another worker")
    except Exception as exc:  # noqa: BLE001 - report, never die silently
        result = {"status": "harness_error", "message": f"{type(exc).__name__}: {exc}",
                  "errors": [traceback.format_exc()[-4000:]]}
    events.send(result=result)
    exit_now()
    return 0


def exit_now() -> None:
    """Leave at once: do not wait on device teardown; the runner's namespace dies with us."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.environ.get("KS_PROFILED") == "1":
        ctypes.CDLL(None).exit(0)
    os._exit(0)
