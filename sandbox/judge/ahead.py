"""Calibration made ahead: the trusted no-op timed on the problem's benchmark shapes by a standby judge,
while it waits for its request, with the runner it started for that request.

Calibration must run before any candidate code exists in the runner, and a standby's runner has run
none yet: the figures are the same ones the request would take first, taken earlier. On the H100 they
were 3.5 s of a vector_add verdict's 10.7 (bench/profile_eval.py, fourteenth session), all of it spent
holding the GPU. Here each shape is calibrated only while no timing holds or wants the device
(`devicelock.device_idle`), one shape at a time, and a request that arrives stops the rest: the
evaluation calibrates whatever is missing itself (`Evaluation._calibrate`). The figures still pass
through `timed.recalibrated` as each shape's timing starts, which can only tighten them.

Only where nothing samples the runner from outside (no perf: the GPU hosts here): sampling makes the
runner's context switches dearer, and a calibration made without it would be too tight for a timing
made with it (an honest kernel then reads as hiding work).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox.judge import timed
from sandbox.judge.checks import Judge
from sandbox.judge.session import RunnerSession


@dataclass
class Ahead:
    """The standby's judge (its runner, its arena) and the shapes it calibrated, by shape key."""

    judge: Judge
    calibrations: dict[str, Any] = field(default_factory=dict)

    def serves(self, runner: RunnerSession, device: str, threads: int | None, resident_inputs: bool | None) -> bool:
        """Whether a request with these settings is timed as this calibration was: the same runner, device and
        threads, and inputs crossing the same way."""
        resident = resident_inputs if resident_inputs is not None else device != "cpu"
        return (self.judge.session is runner and self.judge.device == device and self.judge.threads == threads
                and self.judge.resident_inputs == resident)

    def discard(self) -> None:
        if self.judge.arena is not None:
            self.judge.arena.close()
            self.judge.arena = None


def calibrate(problem: Any, device: str, runner: RunnerSession, policy: Any, deadline: float,
              idle: Callable[[], Any]) -> Ahead:
    """Each benchmark shape's calibration, each inside `idle()` (a context yielding whether the device may be
    used now); the first refusal ends the run, leaving the shapes done so far."""
    judge = Judge(problem=problem, device=device, session=runner, policy=policy)
    judge.deadline = deadline
    ahead = Ahead(judge)
    for params in problem.benchmarks:
        with idle() as free:
            if not free:
                break
            if judge.arena is None:
                judge._ensure(1 << 20)
            ahead.calibrations[problem.shape_label(params)] = timed.calibrated(judge, params)
    return ahead
