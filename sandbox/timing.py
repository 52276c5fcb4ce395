"""Time one call: warm-up, then repetitions until the standard error is small.

On a GPU each repetition is bracketed by device events on the current stream,
with the L2 cache flushed (a write of a buffer larger than L2) before it, so a
candidate never benefits from inputs left in cache by the previous call. On
the CPU the host clock brackets the call. Statistics are over repetitions:
median (the figure that counts), mean, spread and standard error.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from sandbox import roctx
from sandbox.shared.clock import timed_on_device
from sandbox.summary import TimingStats, summarise

FLUSH_BYTES = 256 * 1024 * 1024  # larger than any L2 we target (H200: 60 MB)

# Bound at import, before any candidate is loaded: a submission that patches
# torch.cuda.Event or the host clock does not change what the harness uses.
_Event = torch.cuda.Event
_elapsed_time = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_synchronize = torch.cuda.synchronize
_perf_counter = time.perf_counter
_perf_counter_ns = time.perf_counter_ns
# Likewise the ROCTx ranges (live only in a worker started under rocprofv3).
_RANGES = roctx.ranges()


@dataclass
class TimingPolicy:
    warmup_s: float = 0.05  # at least this long (and at least 3 calls) before timing
    min_reps: int = 10
    max_reps: int = 2000
    budget_s: float = 2.0  # wall clock for the timed repetitions of one shape (min_reps always run)
    rel_stderr: float = 0.001  # stop once stderr/mean falls under this

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> TimingPolicy:
        return cls(**(data or {}))


def _converged(samples: list[float], policy: TimingPolicy) -> bool:
    n = len(samples)
    if n < max(2, policy.min_reps):
        return False
    mean = statistics.fmean(samples)
    if mean <= 0:
        return False
    stderr = statistics.stdev(samples) / math.sqrt(n)
    return stderr / mean < policy.rel_stderr


class HostSynced(NamedTuple):
    """One whole-device-sync cross-check (microseconds, medians over `calls`)."""

    returned_us: float
    synced_us: float
    evented_us: float
    unexplained_us: float
    calls: int

    def suspicious(self) -> bool:
        """More device time than the call's own return and its events explain."""
        return self.unexplained_us > max(30.0, 0.1 * self.synced_us)

    def describe(self) -> str:
        return (
            f"a call takes {self.synced_us:.1f} µs until the whole device is idle, but returns after "
            f"{self.returned_us:.1f} µs and the timing events see {self.evented_us:.1f} µs in the same calls "
            f"(median of {self.calls})"
        )


class Timer:
    """Times calls of `fn(args)` for one argument set chosen per repetition."""

    def __init__(self, device: str, policy: TimingPolicy, marker: str | None = None) -> None:
        """`marker`: the ROCTx range name for each timed call, when a profiler is listening."""
        self.device = device
        self.policy = policy
        self.cuda = device.startswith("cuda")
        self.marker = marker
        self._flush: torch.Tensor | None = None
        if self.cuda:
            self._flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=device)

    def flush_l2(self) -> None:
        if self._flush is not None:
            self._flush.zero_()

    def sync(self) -> None:
        if self.cuda:
            _synchronize(self.device)

    def once(self, fn: Callable[[Any], Any], args: Any) -> float:
        """One call of fn(args) in microseconds (device events after an L2 flush on a GPU): a paired
        round's reference call, warm already from the rounds before."""
        if not self.cuda:
            t0 = _perf_counter_ns()
            fn(args)
            return (_perf_counter_ns() - t0) / 1e3
        assert self._flush is not None
        return timed_on_device(fn, args, self._flush)[0]

    def run(
        self,
        fn: Callable[[Any], Any],
        prepare: Callable[[int], Any],
        verify: Callable[[int, Any], None] | None = None,
        verify_every: int = 10,
    ) -> TimingStats:
        """Time fn(prepare(i)) for repetitions i = 0, 1, ...

        `prepare(i)` runs outside the timed region (it may refresh input
        contents); `verify(i, output)` checks an output outside it too, every
        `verify_every` repetitions and after the last one.
        """
        # Warm-up: module loading, JIT compilation and allocator growth stay out.
        # Each warm-up call is waited for: launches return at once, and counting
        # them against the clock would queue hundreds of calls on a slow kernel.
        start = _perf_counter()
        calls = 0
        while calls < 3 or _perf_counter() - start < self.policy.warmup_s:
            fn(prepare(calls))
            self.sync()
            calls += 1
            if calls >= 3 and self.policy.warmup_s <= 0:
                break
        run = self._gpu if self.cuda else self._cpu
        if self.cuda and self.marker is not None and _RANGES.active:
            run = self._gpu_profiled
        return summarise(run(fn, prepare, verify, max(1, verify_every)))

    def _cpu(self, fn: Callable[[Any], Any], prepare: Callable[[int], Any],
             verify: Callable[[int, Any], None] | None, every: int) -> list[float]:
        def timed(args: Any) -> tuple[float, Any]:
            t0 = _perf_counter_ns()
            out = fn(args)
            return (_perf_counter_ns() - t0) / 1e3, out

        return self._one_at_a_time(timed, prepare, verify, every)

    def _one_at_a_time(self, timed: Callable[[Any], tuple[float, Any]], prepare: Callable[[int], Any],
                       verify: Callable[[int, Any], None] | None, every: int) -> list[float]:
        """Repetitions of `timed(prepare(i))` -> (microseconds, output) until converged or out of budget."""
        samples: list[float] = []
        deadline = _perf_counter() + self.policy.budget_s
        while len(samples) < self.policy.max_reps:
            i = len(samples)
            sample, out = timed(prepare(i))
            samples.append(sample)
            done = _converged(samples, self.policy) or (_perf_counter() > deadline and len(samples) >= self.policy.min_reps) \
                or len(samples) >= self.policy.max_reps
            if verify is not None and (i % every == 0 or done):
                verify(i, out)
            if done:
                break
        return samples

    def _gpu(self, fn: Callable[[Any], Any], prepare: Callable[[int], Any],
             verify: Callable[[int, Any], None] | None, every: int) -> list[float]:
        """One call at a time, as a runner times a kernel (sandbox/shared/clock.py): the reference's
        figure then carries its launches the way a kernel's does."""
        flush = self._flush
        assert flush is not None
        return self._one_at_a_time(lambda args: timed_on_device(fn, args, flush), prepare, verify, every)

    def _gpu_profiled(self, fn: Callable[[Any], Any], prepare: Callable[[int], Any],
                      verify: Callable[[int, Any], None] | None, every: int) -> list[float]:
        """As `_gpu`, with each call alone in a named ROCTx range: the device is idle when the
        range opens (flush and input refresh done) and again before it closes, so every kernel
        the profiler sees inside the range is the candidate's, on any stream."""
        marker = self.marker
        assert marker is not None

        def timed(args: Any) -> tuple[float, Any]:
            self.flush_l2()
            _synchronize(self.device)
            begin = _Event(enable_timing=True)
            end = _Event(enable_timing=True)
            _RANGES.push(marker)
            _record(begin)
            out = fn(args)
            _record(end)
            _synchronize(self.device)
            _RANGES.pop()
            return _elapsed_time(begin, end) * 1e3, out

        return self._one_at_a_time(timed, prepare, verify, every)

    def host_synced_median_us(
        self, fn: Callable[[Any], Any], prepare: Callable[[int], Any], calls: int = 5
    ) -> HostSynced:
        """Medians of the time until the call returns, the time until the whole device is idle and
        the time the current stream's events see, all taken in the same calls, and the median of
        what each call's device-idle time leaves unexplained by the other two.

        Work a candidate sends to another stream escapes the events on the
        current stream, but not a whole-device sync. The return time is the
        host's own share (Python and launch overhead), which events on a busy
        stream do not see either. Measuring the events in the same calls keeps
        run-to-run variation of a slow kernel out of the comparison.
        """
        returned, synced, evented = [], [], []
        for i in range(calls):
            args = prepare(i)
            self.flush_l2()
            self.sync()
            begin = _Event(enable_timing=True)
            end = _Event(enable_timing=True)
            t0 = _perf_counter_ns()
            _record(begin)
            fn(args)
            _record(end)
            t1 = _perf_counter_ns()
            self.sync()
            t2 = _perf_counter_ns()
            returned.append((t1 - t0) / 1e3)
            synced.append((t2 - t0) / 1e3)
            evented.append(_elapsed_time(begin, end) * 1e3)
        unexplained = [s - r - e for s, r, e in zip(synced, returned, evented, strict=True)]
        return HostSynced(
            statistics.median(returned), statistics.median(synced), statistics.median(evented),
            statistics.median(unexplained), calls,
        )
