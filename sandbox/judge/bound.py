"""The bound: how far the runner's figures may stand apart from what the judge's own clocks saw.

The judge times each batch of calls from request to answer and, on the CPU, reads the CPU time the
runner's sandbox used; `Calibration` holds the same for the trusted no-op. A batch's figure on the
CPU is never below the work the judge's clocks saw (`batch_figure`); beyond an allowance the runner's
figures are refused (`bound_by_judge`), as is a runner whose own work got cheaper than its no-op's
(`overhead_floor`) and one that worked while it had no call to run or was stopped (`idle_bound`,
`stayed_still`). sandbox/judge/timed.py drives the batches and calls these.
"""

from __future__ import annotations

import itertools
import os
import statistics
from dataclasses import dataclass, field
from typing import Any

from sandbox.integrity import IntegrityViolation

# How far the judge's clock may exceed the runner's figure, per call, before the runner is not
# believed: a factor (host work the events do not see, scheduling) and a floor in microseconds.
# On the CPU the figure is never below the judge's clock anyway (`batch_figure`), so the bound only names
# gross forgeries; its factor leaves room for a loaded host, which delays the runner's steps between
# calls (seen at 1.31 for an honest rmsnorm beside other work, twice in a row).
BOUND_FACTOR = {"cpu": 1.4, "gpu": 1.25}
BOUND_FLOOR_US = {"cpu": 150.0, "gpu": 30.0}
# How far the runner's own work around the calls (the calibrated overhead) may have slowed since it was
# calibrated, as a share of it. Where a CPU runner builds inputs from recipes that work (a blend and a
# digest per call) is memory-bound and five to six times a small kernel's time, and from one
# evaluation to the next it was seen 40-65% slower while timing than at calibration, on an idle host
# and beside another process streaming memory (an honest vector_add refused in CI, 1 run in 3 beside
# the copier; `tests/test_redteam.py`). On the CPU the figures never fall below the judge's clocks
# (`batch_figure`), so this widens only the rejection of gross forgeries. Nothing on a GPU, whose overhead
# is launches and events: there a share of it could hide a kernel.
OVERHEAD_DRIFT = {"cpu": 1.0, "gpu": 0.0}
# How far below its calibration the runner's own work around a call may fall, as a share of the
# calibrated overhead (CPU): that work is the no-op's path, which only the candidate's code can make
# cheaper for its own calls (red-team round 12 swapped the recipe path's digest, about half of that
# path's work, for an exact C++ copy and reported 1 µs a call, the judge's floors at zero). Honest
# kernels, idle and beside a busy and a memory-streaming process, put their batches' median at -0.06 to
# +6.5 of it (vector_add and softmax, arena and recipe paths, 12 evaluations; docs/BENCHMARKS.md, seventh
# session). A path shortened by less than this share goes unseen. On a GPU: not yet measured, so not applied.
OVERHEAD_FLOOR_SHARE = {"cpu": 0.25}


# CPU time the runner may use while it has no call to run (between a batch's answer and the next
# batch: the collector, a thread pool going to sleep), in seconds and as a share of its calls' time.
IDLE_CPU_FLOOR_S = 0.05
IDLE_CPU_SHARE = 0.2
# CPU a stopped sandbox may use while the judge times something else beside it (the other kernel of a
# pair, the reference): a stopped process runs no code of its own, but a system call it left running
# (populating memory, a large copy in the kernel) goes on through SIGSTOP and loads the host.
STOPPED_CPU_S = 0.002


def kind_of(device: str) -> str:
    """The kind of device a runner times on, as the bounds' tables name it: "cpu", else "gpu"."""
    return "cpu" if device == "cpu" else "gpu"


def step_medians(calls: list[Any]) -> list[float] | None:
    """The medians of the runner's own step times over calls that said them (session.Call.steps_us)."""
    said = [c.steps_us for c in calls if c.steps_us is not None]
    if not said:
        return None
    return [round(statistics.median(step), 1) for step in zip(*said, strict=True)]


# What a runner says of each batch (sandbox/runner/main.py's on_batch), in microseconds.
# The last two lie outside the batch's own span but inside the judge's round trip when they delay it: the
# request read and the last batch's outputs let go, and the runner's collection after its previous answer, which
# on a GPU (its runner is not stopped) may still run when the next request arrives.
BATCH_STEPS = ["inputs built before the first call", "the calls", "the longest call", "the whole batch",
               "from the request's arrival to the batch's start", "the collection after the previous answer"]


def runner_steps(calibration: Calibration, said: list[Any], sizes: list[int],
                 batches: list[Any] | None = None) -> dict[str, Any]:
    """For a verdict: the steps the runner says its timed calls took (`said`, batch after batch of
    `sizes` calls), overall and by batch, beside the no-op's, and what it says of each batch as a whole
    (`batches`). Shown, never believed: where an honest kernel's round trips went."""
    bounds = [0, *itertools.accumulate(sizes)]
    return {"runner_steps_us": {"steps": ["before the call", "the call, host clock", "after the call"],
                                "said_by": "the runner: shown, never believed",
                                "no-op": calibration.steps_us, "kernel": step_medians(said),
                                "kernel_by_batch": [step_medians(said[a:b]) for a, b in itertools.pairwise(bounds)],
                                "batch": BATCH_STEPS, "no-op_batches": calibration.batch_us,
                                "kernel_batches": batches or [],
                                # The first calibration's, before the candidate loaded: how far the runner's own
                                # work moved once it had (the bound uses the cheaper of the two).
                                "no-op_before_load": calibration.steps_before_us,
                                "no-op_batches_before_load": calibration.batch_before_us}}


@dataclass
class Calibration:
    """The judge's clock around batches of the trusted no-op, before any candidate loaded."""

    batch: int
    overhead_us: float  # median round trip of a no-op batch, less the no-op's own reported time
    spread_us: float  # how far that overhead moves from batch to batch (the range without its extremes)
    samples_us: list[float] = field(default_factory=list)
    # The same for the CPU time the runner's sandbox used in a no-op batch (None: unreadable here).
    cpu_overhead_us: float | None = None
    cpu_spread_us: float = 0.0
    # The no-op's steps as its runner said it timed them (session.Call.steps_us), medians: shown, never used.
    steps_us: list[float] | None = None
    batch_us: list[Any] = field(default_factory=list)  # what the no-op's runner said of each batch (BATCH_STEPS)
    # The same two, from the calibration before the candidate loaded where a later one stands beside them.
    steps_before_us: list[float] | None = None
    batch_before_us: list[Any] = field(default_factory=list)


def idle_bound(idle_s: float, calls_s: float, where: str = "") -> None:
    """CPU the runner's sandbox used while it had no call to run may be what a thread pool costs going to
    sleep, or the collector: at most a floor and a share of its calls' own time. Beyond, work went on
    after the calls returned (`work-after-return`)."""
    if idle_s > IDLE_CPU_FLOOR_S + IDLE_CPU_SHARE * calls_s:
        raise IntegrityViolation(
            "work-after-return",
            f"the runner used {idle_s * 1e3:.0f} ms of CPU while it had no call to run{where} (its calls took "
            f"{calls_s * 1e3:.0f} ms in all): work went on after the calls returned",
        )


def batch_figure(reported: float, judged: float, calibration: Calibration, device: str,
                 cpu_judged: float | None = None) -> float:
    """A batch's figure: the runner's, and on the CPU never less than the work the judge's own clocks
    saw in the batch. The bound below lets a runner's figure fall short by a factor and a floor before
    it rejects; inside that allowance an under-reporting runner would otherwise gain.

    That work is the CPU time the runner's processes used beyond the no-op's, spread over as many cores
    as the batch can have kept busy: its CPU time over its round trip beyond the calibrated overhead, at
    least one core and at most every core it may use (one thread's work stands whole; a kernel on several
    cores finishes in its wall time; a round trip that an overhead measured in a burst of load shortened
    to nothing leaves the CPU time shared by every core). Less 1.5 times the calibration's spread of the
    no-op's CPU time, which stays small on a loaded host, where waiting for a core costs no CPU time.
    The round trip's spread does not: with 1.6 ms allowed a batch on a noisy CI host, a paired base
    reporting a fifth of its time read 0.59 of its honest twin when the floor was the round trip less
    that allowance or the CPU time shared by every core. The round trip less its own spread stays a
    floor, for a kernel that waits without working; where the CPU time cannot be read, the round trip
    stands with no allowance. On a GPU the runner's figure is the device's (events), which the host's
    clocks cannot stand in for."""
    if device != "cpu":
        return reported
    if cpu_judged is None:
        return max(reported, judged)
    worked = max(min(cpu_judged, judged), cpu_judged / cores()) - 1.5 * calibration.cpu_spread_us
    return max(reported, judged - 1.5 * calibration.spread_us, worked)


def stayed_still(session: Any, before: float | None, during: str) -> None:
    """A stopped sandbox runs no code of its own; CPU it used anyway went on in system calls that a stop
    signal does not halt, beside whatever the judge timed meanwhile (`work-after-return`)."""
    after = session.cpu_seconds()
    if before is None or after is None or after - before <= STOPPED_CPU_S:
        return
    raise IntegrityViolation(
        "work-after-return",
        f"the runner's sandbox used {(after - before) * 1e3:.1f} ms of CPU while it was stopped, {during}: "
        "work went on in the kernel after the calls returned (a system call left running)",
    )


def bound_by_judge(reported: list[float], judged: list[float], sizes: list[int], calibration: Calibration,
                   kind: str, extra_us: float = 0.0, *, cpu_judged: list[float] | None = None,
                   cores: int = 1) -> dict[str, Any]:
    """The runner's times stand only where the judge's clock around the same batches agrees.

    Per call, the median over batches of what the judge saw beyond the calibrated overhead may
    exceed the runner's figure by the factor and the floor, plus the calibration's own spread
    shared by the batch's calls; beyond that the work ran where the runner's clock did not look.

    On the CPU target a round trip also grows when other work on the host delays the runner, and
    that is no forgery: there (`cpu_judged`) the contradiction stands only if the CPU time the
    runner's processes used in the batches, beyond the no-op's, exceeds the same allowance on each
    core the runner may use. Hidden work costs CPU time; waiting for a core costs none.
    """
    runner = statistics.median(r / n for r, n in zip(reported, sizes, strict=True))
    judge = statistics.median(j / n for j, n in zip(judged, sizes, strict=True))
    batch = statistics.median(sizes)
    allowance = BOUND_FACTOR[kind] * runner + BOUND_FLOOR_US[kind] + extra_us
    allowed = allowance + (1.5 * calibration.spread_us + OVERHEAD_DRIFT[kind] * calibration.overhead_us) / batch
    seen: dict[str, Any] = {
        "batch": calibration.batch, "overhead_us": round(calibration.overhead_us, 1),
        "spread_us": round(calibration.spread_us, 1), "allowed_us": round(allowed, 1),
        "calibration_us": [round(x, 1) for x in calibration.samples_us],
        "per_call_us": [round(j / n, 1) for j, n in zip(judged, sizes, strict=True)]}
    if cpu_judged:
        seen["cpu_per_call_us"] = [round(c / n, 1) for c, n in zip(cpu_judged, sizes, strict=True)]
        seen["cpu_spread_us"] = round(calibration.cpu_spread_us, 1)
    detail = {"judge_median_us": judge, "judge": seen}
    if judge <= allowed:
        return detail
    seen["reported_per_call_us"] = [round(r / n, 1) for r, n in zip(reported, sizes, strict=True)]
    reason = (f"the runner reported {runner:.1f} µs per call, but the judge's clock saw {judge:.1f} µs per call beyond "
              f"the calibrated overhead (at most {allowed:.1f} µs is explained)")
    if cpu_judged:
        cpu = statistics.median(c / n for c, n in zip(cpu_judged, sizes, strict=True))
        cpu_overhead = calibration.cpu_overhead_us or 0.0
        cpu_allowed = cores * allowance + (1.5 * calibration.cpu_spread_us + OVERHEAD_DRIFT[kind] * cpu_overhead) / batch
        seen["cpu_allowed_us"] = round(cpu_allowed, 1)
        if cpu <= cpu_allowed:
            seen["host_delay"] = "the round trips were longer than the runner's figures, its CPU time was not"
            return detail
        reason += f", and its processes used {cpu:.1f} µs of CPU per call beyond the no-op's (at most {cpu_allowed:.1f})"
    raise IntegrityViolation("timing-contradicted", reason + ": work done outside the measured region", detail)


def overhead_floor(reported: list[float], beyond: list[float], sizes: list[int], calibration: Calibration,
                   kind: str) -> dict[str, Any]:
    """The runner's own work around its calls (what the judge's clock saw beyond the runner's figures)
    may not fall far below the calibrated no-op's: per call, the median over batches of the round
    trip less the overhead and less the runner's figure must stay above a share of the overhead and
    the calibration's spread. Below, the candidate's code made the runner's path cheaper for its own
    calls than the path it was calibrated on, and a figure built on that subtraction means nothing
    (`overhead-shortened`). A faster kernel cannot get there: its time is in the runner's figure."""
    share = OVERHEAD_FLOOR_SHARE.get(kind)
    if share is None or not beyond:
        return {}
    per_call = statistics.median((b - r) / n for b, r, n in zip(beyond, reported, sizes, strict=True))
    batch = statistics.median(sizes)
    floor = -(share * calibration.overhead_us + 1.5 * calibration.spread_us) / batch
    seen = {"per_call_beyond_us": round(per_call, 1), "floor_us": round(floor, 1)}
    if per_call >= floor:
        return {"runner_path": seen}
    raise IntegrityViolation(
        "overhead-shortened",
        f"the runner's own work around each call took {-per_call:.1f} µs less than the calibrated no-op's "
        f"({calibration.overhead_us / batch:.1f} µs a call; at most {-floor:.1f} µs less is noise): the runner's "
        "path was changed for the candidate's calls, so the judge's clock cannot bound their figures",
        seen | {"overhead_per_call_us": round(calibration.overhead_us / batch, 1)},
    )


def cores() -> int:
    """Cores the runner may run on at once: those this process may use (the runner inherits them)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
