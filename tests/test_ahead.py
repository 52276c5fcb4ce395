"""Calibration made ahead by a standby judge (sandbox/judge/ahead.py): when it serves a request, and
that it uses the device only while the device is idle."""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace
from typing import Any

from sandbox.judge import ahead
from sandbox.judge.checks import Judge


def _judge(runner: Any, device: str = "cuda:0", threads: int | None = None) -> Judge:
    return Judge(problem=SimpleNamespace(benchmarks=[{"size": 1}, {"size": 2}]), device=device,  # type: ignore[arg-type]
                 session=runner, policy=None, threads=threads)  # type: ignore[arg-type]


def test_a_calibration_serves_only_the_runner_and_settings_it_was_made_with() -> None:
    runner, other = object(), object()
    made = ahead.Ahead(_judge(runner))
    assert made.serves(runner, "cuda:0", None, None)
    assert made.serves(runner, "cuda:0", None, True)
    assert not made.serves(other, "cuda:0", None, None)  # the standby's runner died and another started
    assert not made.serves(runner, "cuda:0", 4, None)  # other threads
    assert not made.serves(runner, "cuda:0", None, False)  # inputs written by the judge, not built by the runner
    assert not made.serves(runner, "cpu", None, None)


def test_nothing_is_calibrated_while_the_device_is_not_idle() -> None:
    # A busy device (or the standby's own request arriving) refuses the first shape: the runner is not
    # asked for anything, and the request calibrates every shape itself.
    class Runner:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the runner was asked for {name} while the device was busy")

    problem = SimpleNamespace(benchmarks=[{"size": 1}, {"size": 2}], integrity={})
    made = ahead.calibrate(problem, "cuda:0", Runner(), None, 0.0, lambda: nullcontext(False))  # type: ignore[arg-type]
    assert made.calibrations == {} and made.judge.arena is None
