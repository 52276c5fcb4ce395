"""Timing one benchmark shape from the judge: batches of calls, every call on fresh inputs,
the runner's figures bounded by the judge's own clock.

The runner times each call (its clock on the CPU, device events after an L2 flush on a GPU),
because only the process that launches a kernel can. Its figures stand only where the judge's
clock agrees: the judge times each batch from request to answer, subtracts the overhead of the
same batch run with the trusted no-op before any candidate code existed in the runner
(`calibrate`), and compares the rest, per call, with what the runner reported. A batch shares
one round trip's noise among its calls, so the bound tightens with the batch.

Inputs: on the CPU the judge writes each call's inputs into the arena and reads each output where
it lies in the runner's memory (sandbox/judge/remote.py); on a GPU the runner builds them on its
device from two sets it holds, by the judge's secret recipe, and commits to each output with a
digest (sandbox/shared/blend.py). The two sets are drawn anew between batches
(sandbox/judge/shapes.py), so no kernel can learn them in one batch and answer the next ones from products
it cached for them. Which calls are checked is drawn after the batch
answered: half of the timed calls, every call faster than the median so far, and the first timed
call. A checked call's inputs, as the call left them (in the arena, or handed back by a GPU
runner), are compared with the judge's own, and its output with the reference's on them.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from sandbox.integrity import IntegrityViolation
from sandbox.judge import procs, shapes
from sandbox.judge.bound import (Calibration, batch_figure, bound_by_judge, cores, idle_bound, overhead_floor,
                                 kind_of, runner_steps, stayed_still, step_medians)
from sandbox.judge.checks import CandidateFailure, Judge
from sandbox.judge.session import Call, RunnerBroke, RunnerGone
from sandbox.judge.shapes import SetRenewal, Shape, hand_over
from sandbox.shared.arena import align
from sandbox.summary import summarise
from sandbox.timing import Timer, TimingPolicy

# A median moves only when over half of the timed calls are fast, so a candidate returning garbage
# fast enough to matter is missed with a probability of at most 0.5 ** (n / 2) over n timed calls
# (3% at the minimum of 10); calls faster than the median so far are always checked.
CHECKED_SHARE = 0.5
# A paired shape runs at least this many rounds (budget allowing up to PAIRED_BUDGET_CAP times the
# shape's budget): on a busy 2-core host one round's ratio varies by about 12%, and with fewer rounds
# a 10% difference hides inside its own interval (bench/paired_accuracy.py).
MIN_PAIRED_ROUNDS = 16
PAIRED_BUDGET_CAP = 4.0
CALIBRATION_BATCHES = 5
# A shape whose timing the judge's clock contradicts is timed on more batches, up to this many, before the
# contradiction stands: the round trip's noise (a GPU batch carries milliseconds of it) evens out over
# batches, work hidden from the runner's clock does not.
BOUND_MAX_BATCHES = 12
# A kept output's copy, allowed for on the judge's clock where the runner copies outputs: bytes read and
# written at 1 TB/s on a GPU (every GPU here is faster), 2 GB/s on a CPU (runners there keep outputs only
# when they build inputs from recipes, as tests do), and a launch.
COPY_BYTES_PER_US = {"cpu": 2e3, "gpu": 1e6}
COPY_LAUNCH_US = 20.0


# -- one batch --------------------------------------------------------------------------------


@dataclass
class Batch:
    items: list[dict[str, Any]]
    recipes: list[dict[str, Any]]
    trees: list[Any]  # CPU: where the judge wrote each call's inputs in the arena


def _batch(judge: Judge, shape: Shape, size: int, given: list[dict[str, Any]] | None = None) -> Batch:
    """The next `size` calls: recipes (new ones, or those `given`), and on the CPU their inputs
    blended into arena slots."""
    slot = align(shape.in_bytes + shape.out_bytes + 8192)
    items, recipes, trees = [], [], []
    shape.seen = True
    if not judge.resident_inputs:
        judge._ensure(slot * size)
    for j in range(size):
        judge.calls += 1
        recipe = given[j] if given is not None else dict(judge.recipe(shape.bases[0], shape.buffers), key=shape.key, slot=j)
        recipes.append(recipe)
        if judge.resident_inputs:
            items.append({"i": judge.calls, "recipe": recipe})
            continue
        tree, region = judge.place_recipe(shape.bases, shape.buffers, recipe, shape.out_bytes, start=j * slot)
        items.append({"i": judge.calls, "data": tree, "out": None if judge.reads_outputs else region})
        trees.append(tree)
    return Batch(items, recipes, trees)


def _verify(judge: Judge, shape: Shape, batch: Batch, j: int, call: Call, timed: int) -> None:
    """Compare call j's output with the reference on exactly the inputs it was given (blended again
    from the judge's sets: the arena's copy is the runner's to read, never the judge's to trust)."""
    pristine = judge.blend(shape.bases, shape.buffers, batch.recipes[j])
    if judge.resident_inputs:
        output = judge.delivered(call, batch.items[j]["i"], shape.out_bytes, pristine, shape.buffers, shape.in_bytes)
    else:
        judge.inputs_unchanged(batch.trees[j], pristine, shape.buffers)
        output = judge.output_of(call, shape.out_bytes)
    expected, _ = judge.expected(pristine, consume=True)
    verdict = judge.verdict_of(pristine, output, expected)
    if not verdict.passed:
        raise IntegrityViolation(
            "timed-output-wrong",
            f"output wrong at a timed call on fresh inputs ({timed} timed so far): {verdict.message}",
        )


# -- the shape ----------------------------------------------------------------------------------


def calibrate(judge: Judge, shape: Shape, when: str = "before any candidate loaded") -> Calibration:
    """Batches of the trusted no-op on this shape's data: the judge's clock, less what the no-op reports."""
    overheads: list[float] = []
    cpu_overheads: list[float] = []
    said: list[Any] = []
    batches: list[Any] = []
    for attempt in range(CALIBRATION_BATCHES + 1):
        batch = _batch(judge, shape, shape.batch)
        calls, rtt = judge.session.batch(batch.items, judge.deadline, noop=True, out_bytes=shape.out_bytes,
                                         out_path=shape.buffers[0] if shape.buffers else None)
        if len(calls) < len(batch.items) or not all(c.ok for c in calls):
            raise CandidateFailure(f"the runner's no-op failed {when}: {calls[-1].message}")
        if attempt:  # the first batch pays first-use costs (allocations, module loads): not the overhead
            reported = sum(c.reported_us for c in calls)
            overheads.append(max(0.0, rtt - reported))
            said.extend(calls)
            batches.append(judge.session.batch_said)
            if judge.session.batch_cpu_us is not None:
                cpu_overheads.append(max(0.0, judge.session.batch_cpu_us - reported))
        # On a GPU, the same motions as between timed batches (a check, the switch back), so that
        # what they leave behind (cold clocks, the other context) is in the overhead too.
        if judge.device != "cpu":
            _exercise(judge, shape, batch, calls[0])
    calibration = Calibration(shape.batch, statistics.median(overheads), _spread(overheads), overheads,
                              steps_us=step_medians(said), batch_us=batches)
    if len(cpu_overheads) == len(overheads):
        calibration.cpu_overhead_us, calibration.cpu_spread_us = statistics.median(cpu_overheads), _spread(cpu_overheads)
    return calibration


def calibrated(judge: Judge, params: dict[str, Any]) -> Calibration:
    """One shape's calibration on fresh sets, which the runner then drops (before any candidate code exists
    in it: the evaluation's first runner, a fresh one replacing it, the standby's)."""
    shape = shapes.prepare(judge, params)
    calibration = calibrate(judge, shape)
    shapes.release(judge, shape)
    del shape
    shapes.free_device_memory(judge.device)
    return calibration


def recalibrated(judge: Judge, shape: Shape, calibration: Calibration) -> Calibration:
    """The no-op timed again as the shape's timing starts; each of its four figures (the overhead and
    its spread, on the wall clock and in CPU time) is the smaller of the two calibrations'. The first
    ran before the candidate loaded, seconds earlier: a burst of host load then inflates the overhead,
    which widens the allowance and subtracts the candidate's own time from the judge's clock (seen:
    13 ms per no-op batch against 1.4 ms, and a 5x under-reporting runner accepted with its own
    figure). This one runs beside the candidate's code, which can shape it: taken figure by figure,
    it can only tighten the bound. Kept whole for its smaller overhead, a calibration whose runner
    over-reported some no-op batches (overhead 0) and burned the CPU in others (a spread of 300 ms)
    was seen to let a 50x under-reporting runner pass; over-reporting itself is refused by the
    session (its figures must fit in the round trip). A no-op that fails now fails the kernel's timing:
    the trusted no-op breaks only where the candidate's code broke its runner, and leaving the first
    calibration in force would let a candidate keep a burst's overhead, which subtracts its own time from
    the judge's clock. On a GPU as on the CPU: there the late no-op's steps (what its runner says each
    took) are the ones shown beside the kernel's, both taken with the candidate's code loaded."""
    return tightest(calibration, calibrate(judge, shape, "beside the candidate's code"))


def tightest(first: Calibration, later: Calibration) -> Calibration:
    """Figure by figure, the smaller of two calibrations: a smaller overhead or spread only tightens the
    bound, so a calibration the candidate could shape can move it one way alone."""
    wall = min((first, later), key=lambda c: c.overhead_us)
    tightened = Calibration(first.batch, wall.overhead_us, min(first.spread_us, later.spread_us), wall.samples_us,
                            steps_us=later.steps_us or first.steps_us,  # the no-op's steps beside the candidate
                            batch_us=later.batch_us or first.batch_us,
                            steps_before_us=first.steps_us, batch_before_us=first.batch_us)
    cpu = [c for c in (first, later) if c.cpu_overhead_us is not None]
    if cpu:
        tightened.cpu_overhead_us = min(c.cpu_overhead_us or 0.0 for c in cpu)
        tightened.cpu_spread_us = min(c.cpu_spread_us for c in cpu)
    return tightened


def _spread(samples: list[float]) -> float:
    """A clock's own noise: the range of the middle of the no-op batches (the two extremes left out)."""
    ordered = sorted(samples)
    return ordered[-2] - ordered[1] if len(ordered) > 4 else ordered[-1] - ordered[0]


def _exercise(judge: Judge, shape: Shape, batch: Batch, call: Call) -> None:
    """A check's work on a no-op's output, its result ignored (the no-op's output is no answer)."""
    if judge.resident_inputs:
        output = judge.delivered(call, batch.items[0]["i"], shape.out_bytes)
        pristine = judge.blend(shape.bases, shape.buffers, batch.recipes[0])
        expected, _ = judge.expected(pristine, consume=True)
    else:
        output = judge.output_of(call, shape.out_bytes)
        pristine = judge.blend(shape.bases, shape.buffers, batch.recipes[0])
        expected, _ = judge.expected(pristine)
    judge.verdict_of(pristine, expected, expected)  # a passing comparison's cost
    del output
    if judge.device != "cpu":
        judge.session.settle(judge.deadline)


@dataclass
class Track:
    """One kernel's timed calls on one shape: its runner (through its judge), and what was measured."""

    judge: Judge
    shape: Shape
    calibration: Calibration
    warmup: int
    samples: list[float] = field(default_factory=list)  # per batch of timed calls: the mean per call
    reported: list[float] = field(default_factory=list)  # per batch: the runner's sum
    # per batch: the judge's round trip less the overhead (below zero: the runner's path was shortened)
    beyond: list[float] = field(default_factory=list)
    # per batch: CPU time the runner's sandbox used, less the no-op's (CPU target; empty: unreadable)
    cpu_judged: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    done: int = 0
    idle_cpu_start: float = 0.0
    copied: int = 0  # calls whose output the runner copied as it returned (`runner.main`'s `_keep`)
    said: list[Any] = field(default_factory=list)  # the timed calls, for the steps their runner said it took
    batch_said: list[Any] = field(default_factory=list)  # per timed batch, what its runner said of it (shown only)
    shortest_rtt_us: float | None = None  # the shortest batch so far, on the judge's clock
    glimpsed: bool = False  # whether the runner's code was read in the middle of one of its batches

    @classmethod
    def start(cls, judge: Judge, shape: Shape, calibration: Calibration) -> Track:
        idle = judge.session.idle_cpu_now()  # before the second calibration: its idle spans count too
        calibration = recalibrated(judge, shape, calibration)
        return cls(judge, shape, calibration, judge.secret.between(3, 6), idle_cpu_start=idle)

    def step(self, recipes: list[dict[str, Any]] | None = None) -> bool:
        """One batch (on these recipes, when another kernel gets the same inputs); True when it was timed."""
        judge, shape = self.judge, self.shape
        batch = _batch(judge, shape, shape.batch, recipes)
        # Once per shape the runner's code is read at a secret point of a batch (`glimpse`), within the
        # shortest batch so far on the judge's clock: a batch it makes longer than the rest is not one
        # it can hide in. That batch's time does not count: the judge's reading is in it.
        look = judge.secret.fraction() * self.shortest_rtt_us / 1e6 \
            if not self.glimpsed and self.shortest_rtt_us is not None else None
        calls, rtt = judge.session.batch(batch.items, judge.deadline, glimpse_after_s=look)
        glimpsed = look is not None and judge.session.glimpsed
        self.glimpsed = self.glimpsed or glimpsed
        self.shortest_rtt_us = rtt if self.shortest_rtt_us is None else min(self.shortest_rtt_us, rtt)
        failed = next((c for c in calls if not c.ok), None)
        if failed is not None:
            raise CandidateFailure(failed.message, fatal=failed.fatal)
        checked = False
        was_timed = self.done >= self.warmup  # a batch with no warm-up call in it
        for j, call in enumerate(calls):
            if call.overwritten:
                # One buffer returned by every call is met in the first batch, never timed; met later, a
                # timed call's output is gone before it could be checked.
                if was_timed:
                    raise IntegrityViolation("output-changed-after-return", "a timed call's output was overwritten "
                                             "by a later call of its batch: outputs must stay as they were returned")
                continue
            timed = self.done + j - self.warmup + 1
            fast = len(self.samples) >= 3 and call.reported_us < statistics.median(self.samples)
            # The first call after the warm-up, and the first call of the first batch whose time counts
            # (a batch holding any warm-up call is not timed at all).
            first = timed == 1 or (was_timed and not self.samples and j == 0)
            if first or fast or judge.secret.chance(CHECKED_SHARE):
                _verify(judge, shape, batch, j, call, max(timed, 0))
                checked = True
        self.copied += sum(1 for c in calls if c.copied)
        was_timed = was_timed and not glimpsed
        if was_timed:
            # The sample is the batch's mean per call: a call's own figure could be moved onto
            # another call of its batch, the batch's total is what the judge's clock bounds.
            reported = sum(c.reported_us for c in calls)
            judged = max(0.0, rtt - self.calibration.overhead_us)
            cpu, cpu_overhead = judge.session.batch_cpu_us, self.calibration.cpu_overhead_us
            cpu_judged = max(0.0, cpu - cpu_overhead) if cpu is not None and cpu_overhead is not None else None
            self.samples.append(batch_figure(reported, judged, self.calibration, self.judge.device, cpu_judged) / len(calls))
            self.reported.append(reported)
            self.beyond.append(rtt - self.calibration.overhead_us)
            self.sizes.append(len(calls))
            self.said.extend(calls)
            self.batch_said.append(judge.session.batch_said)
            if cpu_judged is not None:
                self.cpu_judged.append(cpu_judged)
        self.done += len(calls)
        if checked and judge.device != "cpu":
            # Two processes on one GPU take turns: the switch back from the judge's work belongs
            # to no call, so it is paid here, outside the next batch's round trip.
            judge.session.settle(judge.deadline)
        return was_timed

    @property
    def kind(self) -> str:
        return kind_of(self.judge.device)

    def copy_us(self) -> float:
        """What copying one output costs, at a bandwidth any GPU here exceeds, where the runner copies
        each output as it returns: outside the runner's figure, inside the judge's clock."""
        if not self.copied:
            return 0.0
        return 2 * self.shape.out_bytes / COPY_BYTES_PER_US[self.kind] + COPY_LAUNCH_US

    def settled(self) -> bool:
        """Done as far as the bound goes: the judge's clock agrees, or it was asked enough times."""
        if len(self.sizes) >= BOUND_MAX_BATCHES:
            return True
        try:
            self._bound()
        except IntegrityViolation:
            return False
        return True

    @property
    def judged(self) -> list[float]:
        """Per batch: what the judge's clock saw beyond the overhead, never below zero."""
        return [max(0.0, b) for b in self.beyond]

    def _bound(self) -> dict[str, Any]:
        cpu = self.cpu_judged if self.kind == "cpu" and len(self.cpu_judged) == len(self.beyond) else None
        path = overhead_floor(self.reported, self.beyond, self.sizes, self.calibration, self.kind)
        bound = bound_by_judge(self.reported, self.judged, self.sizes, self.calibration, self.kind, self.copy_us(),
                               cpu_judged=cpu, cores=cores())
        bound["judge"] |= path
        return bound

    def result(self) -> dict[str, Any]:
        """The runner's per-call times, bounded by the judge's clock (sandbox/judge/timed.py's module note),
        with the steps the runner says it took beside the no-op's, in the bound and in a refusal."""
        steps = runner_steps(self.calibration, self.said, self.sizes, self.batch_said)
        try:
            bound = self._bound()
        except IntegrityViolation as exc:
            if exc.detail is not None and isinstance(exc.detail.get("judge"), dict):
                exc.detail["judge"] |= steps
            raise
        bound["judge"] |= steps
        idle = self.judge.session.idle_cpu_now() - self.idle_cpu_start
        calls_s = sum(self.reported) / 1e6
        bound["judge"] |= {"idle_cpu_ms": round(idle * 1e3, 1), "calls_ms": round(calls_s * 1e3, 1)}
        idle_bound(idle, calls_s)
        return summarise(self.samples).to_dict() | bound | {"reps": sum(self.sizes)}


def run(judge: Judge, shape: Shape, policy: TimingPolicy, calibration: Calibration) -> dict[str, Any]:
    """Per-call times of one shape (the runner's figures, bounded by the judge's clock), and the bound."""
    track = Track.start(judge, shape, calibration)
    started = time.perf_counter()
    renewal = SetRenewal([(judge, shape)])
    while True:
        track.step()
        if track.samples and _enough(track.samples, sum(track.sizes), policy, time.perf_counter() - started) \
                and track.settled():
            break
        if renewal.after_batch() and track.kind == "gpu":
            # The judge drew the sets on the GPU: the switch back to the runner belongs to no call.
            judge.session.settle(judge.deadline)
    return renewal.noted(track.result())


# A paired timing is on a busy host when work other than the evaluation's own took more than this
# share of the host's cores while it ran (sandbox/summary.py's paired_summary then widens its
# interval). Measured on this project's 2-core VM: idle 0-3%; beside one busy process per core, 40-50%.
BUSY_HOST_SHARE = 0.2


@dataclass
class HostLoad:
    """The host's busy CPU time and the evaluation's own (the judge and the runners' sandboxes) from
    one moment; `other_share` later: the rest, as a share of every core over the time between. The
    evaluation's own freezing and thawing wakes processes too, so counting runnable threads would
    blame the evaluation's own work on the host."""

    tracks: list[Track]
    started: float = field(default_factory=time.perf_counter)
    host: float | None = None
    own: float | None = None

    def __post_init__(self) -> None:
        self.host, self.own = procs.host_busy_seconds(), self._own()

    def _own(self) -> float | None:
        sandboxes = [t.judge.session.cpu_seconds() for t in self.tracks]
        if any(s is None for s in sandboxes):
            return None
        return time.process_time() + sum(s for s in sandboxes if s is not None)

    def other_share(self) -> float | None:
        host, own, wall = procs.host_busy_seconds(), self._own(), time.perf_counter() - self.started
        if host is None or own is None or self.host is None or self.own is None or wall <= 0:
            return None
        other = (host - self.host) - (own - self.own)
        return max(0.0, other) / (wall * (os.cpu_count() or 1))


# What a paired base may do wrong while timed without its failure becoming the candidate's: fail a check or a bound,
# raise, break the protocol (its sandbox continuing itself while its outputs were read), or die.
BASE_FAILURES = (IntegrityViolation, CandidateFailure, RunnerBroke, RunnerGone)


def unpaired(why: str, rounds: int = 0) -> dict[str, Any]:
    """A shape's paired figures where its base failed (before any round, or after `rounds` of them)."""
    return {"rounds": rounds, "ratio": None, "ratio_ci": None, "difference": "not measured", "error": why[:500]}


def run_paired(tracks: list[Track], policy: TimingPolicy, reference: bool = True) -> dict[str, Any]:
    """Two kernels (and the reference, in the judge) timed side by side on one shape: in each round
    every kernel runs a batch on the same inputs, in an order that alternates (AB, BA, ...) so that
    a drift of the host weighs on both; the rounds' ratios give the speed-up and its interval.

    The first track is the candidate, the second its base. Ratios are base / candidate (above 1:
    the candidate is faster), one per round in which both batches were timed."""
    first, second = tracks
    if first.shape.batch != second.shape.batch:
        raise ValueError("paired kernels must run batches of one size")
    from sandbox.summary import paired_summary

    started = time.perf_counter()
    load = HostLoad(tracks)
    ratios: list[float] = []
    reference_us: list[float] = []
    rounds = 0
    base_failed: str | None = None  # the base's failure ends the pairing, never the candidate's verdict
    contradicted = False
    timer = Timer(first.judge.device, TimingPolicy(warmup_s=0.0, min_reps=1, max_reps=1))
    renewal = SetRenewal([(t.judge, t.shape) for t in tracks])
    while True:
        # The kernel that goes first in a round also draws its inputs and times the reference on them:
        # every role alternates, so no position favours either kernel.
        order = tracks if rounds % 2 == 0 else tracks[::-1]
        lead = order[0]
        recipes = [dict(lead.judge.recipe(lead.shape.bases[0], lead.shape.buffers), key=lead.shape.key, slot=j)
                   for j in range(lead.shape.batch)]
        timed = []
        for track in order:
            if track is second and base_failed:
                continue
            stopped = _stopped_now([t for t in tracks if t is not track])
            try:
                if track.kind == "gpu":
                    # The other runner's context had the GPU last: the switch back belongs to no call of
                    # this batch (calibration's no-op batches were each followed by one, `_exercise`).
                    # Paid inside the round trip it put 150-270 µs a call on honest pairs' clocks (H100).
                    track.judge.session.settle(track.judge.deadline)
                timed.append(track.step(recipes))
            except BASE_FAILURES as exc:
                if track is first:
                    raise
                base_failed = f"the base failed while timed: {exc}"
            base_failed = _still_while_stopped(stopped, first, "while the other kernel was timed") or base_failed
        if len(timed) == 2 and all(timed):
            ratios.append(second.samples[-1] / first.samples[-1] if first.samples[-1] > 0 else math.inf)
            if reference:
                stopped = _stopped_now(tracks)
                with first.judge.own_timing(), second.judge.own_timing():
                    reference_us.append(_reference_once(lead.judge, lead.shape, recipes[0], timer))
                base_failed = _still_while_stopped(stopped, first, "while the reference was timed") or base_failed
        rounds += 1
        live = [first] if base_failed else tracks
        calls = min(sum(t.sizes) for t in live)
        series = first.samples if base_failed else ratios
        elapsed = time.perf_counter() - started
        rounds_enough = base_failed or len(ratios) >= MIN_PAIRED_ROUNDS or elapsed > PAIRED_BUDGET_CAP * policy.budget_s
        if series and rounds_enough and _enough(series, calls, policy, elapsed) and all(t.settled() for t in live):
            break
        renewal.after_batch()
    other = load.other_share()
    busy = other is not None and other > BUSY_HOST_SHARE
    paired: dict[str, Any] = {"rounds": rounds, **paired_summary([] if base_failed else ratios, busy=busy,
                                                                 busy_rounds=MIN_PAIRED_ROUNDS)}
    if other is not None:
        paired["other_load"] = round(other, 3)
    if not base_failed:
        try:
            base = second.result()
            paired |= {"base_median_us": base["median_us"], "base_ci_us": base["ci_us"]}
        except IntegrityViolation as exc:
            base_failed = f"the base's own timing was not believed: {exc.reason}"
            contradicted = exc.rule in ("timing-contradicted", "overhead-shortened")
    if reference_us:
        paired["reference_median_us"] = statistics.median(reference_us)
    if base_failed:
        paired |= unpaired(base_failed, rounds)
    # `base_contradicted`: the judge's clock contradicted the base's figures, which a measurement again may not
    # (sandbox/judge/evaluation.py's `_retried`); any other failure of the base ends the pairing.
    return {"candidate": renewal.noted(first.result()), "paired": paired, "base_contradicted": contradicted}


def _stopped_now(tracks: list[Track]) -> list[tuple[Track, float | None]]:
    """The CPU time so far of each CPU runner's sandbox, stopped since its last answer (`_freeze`)."""
    return [(t, t.judge.session.stopped_cpu_seconds()) for t in tracks if t.kind == "cpu"]


def _still_while_stopped(stopped: list[tuple[Track, float | None]], candidate: Track, during: str) -> str | None:
    """Each stopped sandbox used no more than `bound.STOPPED_CPU_S` since `stopped` was read. The candidate's
    doing more is rejected; the base's ends the pairing (its reason returned)."""
    for track, before in stopped:
        try:
            stayed_still(track.judge.session, before, during)
        except IntegrityViolation as exc:
            if track is candidate:
                raise
            return f"the base worked while it was stopped: {exc.reason}"
    return None


def _reference_once(judge: Judge, shape: Shape, recipe: dict[str, Any], timer: Timer) -> float:
    """One reference call on a round's inputs, on the judge's clock (microseconds)."""
    data = judge.blend(shape.bases, shape.buffers, recipe)
    if judge.device != "cpu":
        import torch

        torch.cuda.synchronize()
    return timer.once(judge.problem.reference, data)


def _enough(samples: list[float], calls: int, policy: TimingPolicy, elapsed: float) -> bool:
    """Enough timed calls (`min_reps`, and at least 3 batches) for the spread, or out of budget."""
    n = len(samples)
    if calls >= policy.max_reps:
        return True
    if calls < max(2, policy.min_reps) or n < 3:
        return False
    if elapsed > policy.budget_s:
        return True
    mean = statistics.fmean(samples)
    return mean > 0 and statistics.stdev(samples) / math.sqrt(n) / mean < policy.rel_stderr


def time_reference(judge: Judge, shape: Shape, policy: TimingPolicy) -> dict[str, Any]:
    """The reference, timed here in the judge (the candidate never touches it), on the shape's two sets."""
    ref_policy = TimingPolicy(warmup_s=policy.warmup_s, min_reps=min(policy.min_reps, 5), max_reps=policy.max_reps,
                              budget_s=policy.budget_s / 2, rel_stderr=policy.rel_stderr * 5)
    sets = shape.bases  # no longer needed by anything else: the reference may write its outputs into them
    with judge.own_timing():
        return Timer(judge.device, ref_policy).run(judge.problem.reference, lambda i: sets[i % 2]).to_dict()
