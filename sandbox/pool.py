"""Evaluate many candidates: builds in parallel on the CPU, timing one at a time per device.

Each candidate first goes through a build-only worker that sees no GPU (its
compiled libraries land in the shared build cache), then waits for a free
device slot and is checked and timed there; the second import finds every
library in the cache. So compilers keep the host's cores busy while the GPU
times another candidate, and a candidate that fails to build never takes
device time.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from queue import Queue
from typing import Any

from sandbox.evaluator import EvalOptions, evaluate
from sandbox.verdict import Status, Verdict

log = logging.getLogger(__name__)


class EvaluationPool:
    """A pool of build slots and device slots.

    devices: GPU indices for the cuda target (one evaluation at a time on each);
    for the cpu target, the number of timing slots is len(devices) (default 1,
    since concurrent CPU timings disturb each other); there a candidate builds in
    its evaluation, since a build beside a CPU timing would disturb it too.
    """

    def __init__(
        self,
        options: EvalOptions,
        devices: list[int] | None = None,
        build_workers: int | None = None,
        keep_warm: bool = True,
        warm_workers: int = 2,
        separate_builds: bool | None = None,
    ) -> None:
        # Workers wait, warmed up, on each device (and for builds) for the next
        # candidate: start-up (importing torch, a device context) takes seconds.
        # Not on the CPU target: a standby worker warms up (imports torch, loads the reference)
        # while it waits, which would take the cores a CPU timing measures.
        keep_warm = keep_warm and options.target != "cpu"
        # Builds in their own workers, beside the timings: for GPUs. On the CPU target a build
        # may not overlap a timing, so the evaluation builds for itself (one worker start less).
        self.separate_builds = options.target != "cpu" if separate_builds is None else separate_builds
        self.options = replace(options, keep_warm=keep_warm, warm_workers=warm_workers)
        self.devices = list(devices) if devices else [0]
        self.build_workers = build_workers or max(1, min(8, (os.cpu_count() or 2) // 2))
        self._slots: Queue[int] = Queue()
        for device in self.devices:
            self._slots.put(device)
        self._builds = threading.Semaphore(self.build_workers)
        self._executor = ThreadPoolExecutor(
            max_workers=self.build_workers + len(self.devices), thread_name_prefix="ks-eval"
        )
        self.timeline: list[dict[str, Any]] = []  # (candidate, stage, start, end), for benchmarks
        self._lock = threading.Lock()

    def prewarm(self, problem: str | Path) -> None:
        """Start build and device workers now, before the first candidate arrives."""
        from sandbox.evaluator import prepare_workers

        if not self.options.keep_warm:
            return
        prepare_workers(problem, replace(self.options, mode="build"), self.build_workers)
        for device in self.devices:
            prepare_workers(problem, replace(self.options, gpu=device))

    def submit(
        self,
        problem: str | Path,
        submission: str | Path,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> Future[Verdict]:
        return self._executor.submit(self._evaluate, problem, submission, on_event)

    def map(self, problem: str | Path, submissions: list[str | Path]) -> list[Verdict]:
        futures = [self.submit(problem, s) for s in submissions]
        return [f.result() for f in futures]

    def _note(self, submission: Any, stage: str, start: float, end: float, device: int | None = None) -> None:
        with self._lock:
            self.timeline.append(
                {"submission": str(submission), "stage": stage, "start": start, "end": end, "device": device}
            )

    def _evaluate(
        self, problem: str | Path, submission: str | Path, on_event: Callable[[dict[str, Any]], None] | None
    ) -> Verdict:
        import time

        if self.options.mode != "build" and self.separate_builds:
            with self._builds:
                start = time.perf_counter()
                built = evaluate(
                    problem,
                    submission,
                    replace(self.options, mode="build", warm_workers=self.build_workers),
                    on_event,
                )
                self._note(submission, "build", start, time.perf_counter())
            if built.status != Status.built:
                return built  # build error, timeout or crash: no device time spent
        device = self._slots.get()
        try:
            start = time.perf_counter()
            verdict = evaluate(problem, submission, replace(self.options, gpu=device), on_event)
            self._note(submission, "evaluate", start, time.perf_counter(), device)
            return verdict
        finally:
            self._slots.put(device)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        if self.options.keep_warm:
            from sandbox.evaluator import shutdown_standby_workers

            shutdown_standby_workers()

    def __enter__(self) -> EvaluationPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
