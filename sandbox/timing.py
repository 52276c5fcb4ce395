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
from dataclasses import asdict, dataclass
from typing import Any, Callable

import torch

FLUSH_BYTES = 256 * 1024 * 1024  # larger than any L2 we target (H200: 60 MB)

# Bound at import, before any candidate is loaded: a submission that patches
# torch.cuda.Event or the host clock does not change what the harness uses.
_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize
_perf_counter = time.perf_counter
_perf_counter_ns = time.perf_counter_ns


@dataclass
class TimingPolicy:
    warmup_s: float = 0.05  # at least this long (and at least 3 calls) before timing
    min_reps: int = 10
    max_reps: int = 2000
    budget_s: float = 2.0  # wall clock for the timed repetitions of one shape
    rel_stderr: float = 0.001  # stop once stderr/mean falls under this

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "TimingPolicy":
        return cls(**(data or {}))


@dataclass
class TimingStats:
    reps: int
    median_us: float
    mean_us: float
    std_us: float
    stderr_us: float
    min_us: float
    max_us: float
    p25_us: float
    p75_us: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise(samples_us: list[float]) -> TimingStats:
    ordered = sorted(samples_us)
    n = len(ordered)
    mean = statistics.fmean(ordered)
    std = statistics.stdev(ordered) if n > 1 else 0.0
    quartiles = statistics.quantiles(ordered, n=4) if n > 1 else [ordered[0]] * 3
    return TimingStats(
        reps=n,
        median_us=statistics.median(ordered),
        mean_us=mean,
        std_us=std,
        stderr_us=std / math.sqrt(n) if n > 1 else 0.0,
        min_us=ordered[0],
        max_us=ordered[-1],
        p25_us=quartiles[0],
        p75_us=quartiles[2],
    )


def _converged(samples: list[float], policy: TimingPolicy) -> bool:
    n = len(samples)
    if n < max(2, policy.min_reps):
        return False
    mean = statistics.fmean(samples)
    if mean <= 0:
        return False
    stderr = statistics.stdev(samples) / math.sqrt(n)
    return stderr / mean < policy.rel_stderr


class Timer:
    """Times calls of `fn(args)` for one argument set chosen per repetition."""

    def __init__(self, device: str, policy: TimingPolicy) -> None:
        self.device = device
        self.policy = policy
        self.cuda = device.startswith("cuda")
        self._flush: torch.Tensor | None = None
        if self.cuda:
            self._flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=device)

    def flush_l2(self) -> None:
        if self._flush is not None:
            self._flush.zero_()

    def sync(self) -> None:
        if self.cuda:
            _synchronize(self.device)

    def run(self, fn: Callable[[Any], Any], arg_sets: list[Any]) -> tuple[TimingStats, list[Any]]:
        """Time fn over the argument sets in turn; returns stats and the last outputs."""
        last_outputs: list[Any] = [None] * len(arg_sets)
        # Warm-up: module loading, JIT compilation and allocator growth stay out.
        # Each warm-up call is waited for: launches return at once, and counting
        # them against the clock would queue hundreds of calls on a slow kernel.
        start = _perf_counter()
        calls = 0
        while calls < 3 or _perf_counter() - start < self.policy.warmup_s:
            fn(arg_sets[calls % len(arg_sets)])
            self.sync()
            calls += 1
            if calls >= 3 and self.policy.warmup_s <= 0:
                break
        samples = self._gpu(fn, arg_sets, last_outputs) if self.cuda else self._cpu(
            fn, arg_sets, last_outputs
        )
        return summarise(samples), last_outputs

    def _cpu(self, fn: Callable[[Any], Any], arg_sets: list[Any], outs: list[Any]) -> list[float]:
        samples: list[float] = []
        deadline = _perf_counter() + self.policy.budget_s
        while len(samples) < self.policy.max_reps:
            i = len(samples) % len(arg_sets)
            t0 = _perf_counter_ns()
            outs[i] = fn(arg_sets[i])
            samples.append((_perf_counter_ns() - t0) / 1e3)
            if _converged(samples, self.policy) or (
                _perf_counter() > deadline and len(samples) >= 2
            ):
                break
        return samples

    def _gpu(self, fn: Callable[[Any], Any], arg_sets: list[Any], outs: list[Any]) -> list[float]:
        samples: list[float] = []
        deadline = _perf_counter() + self.policy.budget_s
        batch = 10  # events are read back once per batch, not after every call
        while len(samples) < self.policy.max_reps:
            pairs = []
            for _ in range(batch):
                i = (len(samples) + len(pairs)) % len(arg_sets)
                self.flush_l2()
                begin = _Event(enable_timing=True)
                end = _Event(enable_timing=True)
                begin.record()
                outs[i] = fn(arg_sets[i])
                end.record()
                pairs.append((begin, end))
            _synchronize(self.device)
            samples.extend(b.elapsed_time(e) * 1e3 for b, e in pairs)
            if _converged(samples, self.policy) or (
                _perf_counter() > deadline and len(samples) >= 2
            ):
                break
        return samples
