"""One request, judged: build, check and time a candidate that runs in the runner process.

The result dictionary has the verdict's fields (sandbox/verdict.py); every figure and every
decision in it is the judge's. Deadlines are the judge's own too: each phase has its limit,
and a runner that does not answer in time is killed and the phase named.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from sandbox import native
from sandbox.integrity import IntegrityViolation
from sandbox.judge import bound, isolation, shapes, timed
from sandbox.judge.checks import CandidateFailure, Judge, problem_dir
from sandbox.judge.footprint import Footprint
from sandbox.judge.libwatch import LibraryWatch, identifiers, patterns_for
from sandbox.judge.session import TASK_LIMIT, RunnerBroke, RunnerGone, RunnerLate, RunnerSession

_DEFAULT_LIMITS = {"build": 600.0, "check": 300.0, "time": 600.0}
# Said in the verdict where the runner builds the inputs on the CPU (the GPU's protocol, run so that tests
# without a GPU exercise it). Its blend and digest, several times a small kernel's time per call, are work
# the candidate's process does and the judge's clock must subtract: a runner that under-reported 400x was
# accepted in 2 of 3 evaluations there, one that shaved the digest in 1 of 4. The CPU's own protocol writes
# every call's inputs from the judge and reads every output from the runner's memory (judge/remote.py).
RECIPE_ON_CPU = ("not bounded: inputs built by the runner on the CPU (the GPU's protocol, for tests); the judge's "
                 "clock cannot tell the runner's figures from its own work there")


class Stop(Exception):
    """Ends the evaluation with the result as it stands."""


def _static_report(submission: Path, target: str, result: dict[str, Any]) -> None:
    """Resource usage of the kernels (compiled here for the target's ISA, nothing runs) and the timing method."""
    if target == "cpu":
        result["timing_method"] = {"method": "host_clock", "note": "the runner's clock around each call, bounded by the judge's"}
        return
    from sandbox.static_analysis import analyze_submission

    result["static"] = analyze_submission(submission, target).to_dict()
    result["timing_method"] = {"method": "device_events",
                               "note": "CUDA events around each call in the runner, L2 flushed, bounded by the judge's clock"}


class Evaluation:
    def __init__(self, request: dict[str, Any], events: Any, warm: dict[str, Any], environment: dict[str, Any],
                 start_runner: Callable[[Path, bool], RunnerSession]) -> None:
        self.request = request
        self.events = events
        self.warm = warm
        self.environment = environment
        self.start_runner = start_runner
        self.target = str(request["target"])
        self.mode = str(request.get("mode", "full"))
        self.limits = dict(_DEFAULT_LIMITS, **(request.get("limits") or {}))
        self.result: dict[str, Any] = {"status": "harness_error", "message": "", "tests": [], "benchmarks": [],
                                       "errors": [], "phases": {}, "integrity": {"findings": [], "violation": None}}
        self.phase_name = ""
        self.phase_started = time.perf_counter()
        self.shape: str | None = None
        self.session: RunnerSession | None = None
        self.judge: Judge | None = None
        # With `paired_with`: the base kernel, in a runner (and a sandbox) of its own, timed beside the candidate.
        self.base_judge: Judge | None = None
        self._base_calibrations: dict[str, Any] = {}
        # What samples the candidate's runner and reads its page tables (`_watch`, `_sampled`); both follow
        # a runner that replaces it (`_renewed`).
        self.watch: LibraryWatch | None = None
        self.footprint: Footprint | None = None
        self._read: tuple[LibraryWatch, Any] | None = None  # the last watch stopped, and what it sampled
        # The CPU the candidate's runners used while they had no call to run, over the timing phase: the
        # runners replaced so far, and the current one's count when the phase (or its timing) began.
        self._idle_retired_s = 0.0
        self._idle_from_s = 0.0
        self._renewals = 0  # candidate's runners replaced so far (`_renewed`)
        self._base_renewals = 0  # the base's (`_renewed_base`)
        self.base_watch: LibraryWatch | None = None  # what samples the base's runner, a fresh one's where replaced

    # -- bookkeeping -------------------------------------------------------------------------

    def phase(self, name: str) -> None:
        now = time.perf_counter()
        if self.phase_name:
            self.result["phases"][self.phase_name] = round(now - self.phase_started, 4)
        self.phase_name, self.phase_started = name, now
        self.result["phases"][name] = 0.0
        for judge in (self.judge, self.base_judge):
            if judge is not None:
                judge.deadline = time.monotonic() + float(self.limits.get(name, 300.0))
        self.events.send(phase=name)

    def _starting(self, shape: str) -> None:
        """The shape now under way: named in the verdict if the runner dies or runs out of time on it."""
        self.shape = shape
        self.events.send(shape_started=shape)

    def finish(self, status: str, message: str) -> None:
        self.result.update(status=status, message=message)
        raise Stop

    def reject(self, rule: str, reason: str, shape: str | None = None, detail: dict[str, Any] | None = None) -> None:
        self.result["integrity"]["violation"] = {"rule": rule, "reason": reason, "shape": shape, "detail": detail}
        self.finish("rejected", f"{shape}: {reason}" if shape else reason)

    # -- the evaluation ------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        try:
            self._run()
        except Stop:
            pass
        except RunnerLate:
            limit = self.limits.get(self.phase_name, 0)
            self.result.update(status="timeout", message=f"the {self.phase_name} phase{self._on_shape()} exceeded its "
                                                         f"{limit:g} s limit; the candidate was stopped")
        except RunnerGone as exc:
            self.result.update(status="crash", message=f"the candidate's process {exc.how} during the "
                                                       f"{self.phase_name} phase{self._on_shape()}")
        except RunnerBroke as exc:
            self.result["integrity"]["violation"] = {"rule": exc.rule, "reason": str(exc)[:500], "shape": self.shape}
            what = "the runner broke the protocol" if exc.rule == "protocol" else "the runner's figures cannot be true"
            self.result.update(status="rejected", message=f"{what}: {str(exc)[:300]}")
        finally:
            self._limit_verdict()
            self._close()
        now = time.perf_counter()
        if self.phase_name:
            self.result["phases"][self.phase_name] = round(now - self.phase_started, 4)
        self.result["build"] = {"records": self.session.build_records if self.session else []}
        if self.judge is not None and isinstance(self.result.get("timing_method"), dict):
            self.result["timing_method"]["data"] = self.judge.describe_arena()
        if self.session is not None and "protections" in self.result["integrity"]:
            self.result["integrity"]["protections"]["system_calls"] = self.session.system_calls
        return self.result

    def _limit_verdict(self) -> None:
        """A runner its control groups stopped (the kernel killed a task at the memory cap, or refused a
        process or thread past the task cap): for the candidate's runner, the verdict is the limit,
        whatever its end looked like from here (a crash, a closed channel, a failed call, or an answer
        it went on to give). A base's runner that reached a limit is no yardstick: the candidate's
        verdict stands, without paired figures."""
        where = f"during the {self.phase_name} phase{self._on_shape()}"
        if self.session is not None and (reason := _limit_reached(self.session)):
            self.result.update(status="resource_limit", message=f"{reason} {where}; the candidate was stopped")
            return
        base = self.base_judge.session if self.base_judge is not None else None
        if base is not None and (reason := _limit_reached(base)):
            self.result["errors"].append(f"the base kernel's runner: {reason} {where}, so nothing was paired")
            for benchmark in self.result["benchmarks"]:
                benchmark.pop("paired", None)
            if isinstance(self.result.get("summary"), dict):
                self.result["summary"].pop("paired", None)

    def _on_shape(self) -> str:
        return f" (shape {self.shape})" if self.shape and self.phase_name in ("check", "time") else ""

    def _close(self) -> None:
        if self.session is not None:
            self.session.close()
        for judge in (self.judge, self.base_judge):
            if judge is not None and judge is not self.judge:
                judge.session.close()
            if judge is not None and judge.arena is not None:
                judge.arena.close()

    def _run(self) -> None:
        from sandbox import integrity
        from sandbox.problem import load_problem

        self.phase("build")
        spec = self.request["problem"]
        warm = self.warm.get("spec") == spec and self.warm.get("target") == self.target
        problem = self.warm["problem"] if warm else load_problem(spec, self.target)
        if not warm:
            problem.bind()
        self.result["problem"] = {"name": problem.name, "kind": problem.kind, "path": str(problem.path),
                                  "ranking_by": problem.ranking_by,
                                  "tolerance": list(problem.tolerance) if problem.tolerance else None}
        device = self._device()
        threads = self.request.get("threads")
        if threads:
            import torch

            torch.set_num_threads(int(threads))
        policy = integrity.Policy.from_dict(problem.integrity)
        submission = Path(self.request["submission"])
        source = submission.read_text(errors="replace")
        findings = integrity.scan_source(source, policy)
        self.result["integrity"]["findings"] = [f.to_dict() for f in findings]
        self.result["integrity"]["protections"] = {"runner": isolation.probe().describe()}
        if self.target != "cpu" and isolation.probe().available:
            self.result["integrity"]["protections"]["devices"] = isolation.gpu_nodes(
                os.environ.get("CUDA_VISIBLE_DEVICES")).said
        syntax = [f for f in findings if f.rule == "syntax"]
        if syntax:
            self.finish("runtime_error", f"importing the submission failed: line {syntax[0].line}: {syntax[0].reason}")
        if self.mode != "build":
            _static_report(submission, self.target, self.result)
        runner = self.warm.pop("runner", None) if warm else None
        if runner is None or runner.proc.poll() is not None or runner.gpu != (device != "cpu"):
            if runner is not None:
                runner.close()
            runner = self.start_runner(problem_dir(problem), device != "cpu")
        self.session = runner
        memory = self.request.get("memory_limit_mb")
        self.result["integrity"]["protections"]["memory"] = (
            f"the runner's memory group, capped at {memory} MB: every page it faults in counts, files in memory too"
            if runner.cap_memory(memory) else "resident pages of the worker's processes only (no memory group here)")
        self.result["integrity"]["protections"]["tasks"] = (
            f"at most {TASK_LIMIT} processes and threads (the runner's task group)" if runner.tasks is not None
            else "not capped (no task group here)")
        ahead = self.warm.pop("ahead", None) if warm else None
        if ahead is not None and ahead.serves(runner, device, threads, self.request.get("resident_inputs")):
            self.judge = ahead.judge  # its runner calibrated by the standby, before any candidate (`ahead`)
        else:
            if ahead is not None:
                ahead.discard()
                ahead = None
            self.judge = Judge(problem=problem, device=device, session=runner, policy=policy, threads=threads,
                               resident_inputs=self.request.get("resident_inputs"))
        self.judge.deadline = time.monotonic() + float(self.limits["build"])
        self.judge._ensure(1 << 20)
        if device == "cpu" and self.judge.resident_inputs:
            self.result["integrity"]["protections"]["timing"] = RECIPE_ON_CPU
        elif device == "cpu":
            self.result["integrity"]["protections"]["outputs"] = runner.outputs_note or "not known"
        if self.mode == "full" and self.request.get("paired_with"):
            self.base_judge = Judge(problem=problem, device=device, policy=policy, threads=threads,
                                    session=self.start_runner(problem_dir(problem), device != "cpu"),
                                    resident_inputs=self.request.get("resident_inputs"))
            self.base_judge.session.cap_memory(memory)
            self.base_judge.deadline = self.judge.deadline
            self.base_judge._ensure(1 << 20)
        # Sampling starts before the candidate's import: perf follows the processes and threads the
        # runner starts after it attached, never one started before (a red-team kernel ran its library
        # calls in a helper it started at import, and not one of its samples was taken). It starts
        # before the calibration too: sampling makes each of the runner's context switches dearer, and
        # on an H100 host a no-op batch calibrated without perf took 10-15% less than one beside it,
        # which the bound then saw as time the candidate's calls had hidden.
        watch = self._watch(LibraryWatch(Path.cwd(), own_code=[str(native.buildcache.cache_root())],
                                         own_names=identifiers(source)))
        # The base is sampled too, though nothing is judged from it: sampling costs its runner what
        # it costs the candidate's, so the pair is timed under the same conditions.
        self.base_watch = base_watch = LibraryWatch(Path.cwd() / "base", own_code=[])
        if self.base_judge is not None and self.base_judge.session.host_pid is not None:
            base_watch.data.parent.mkdir(exist_ok=True)
            base_watch.start(self.base_judge.session.host_pid)
            self.base_judge.sampler = base_watch
        footprint = Footprint.of(policy.forbidden_libraries)  # forbidden libraries' pages the runner maps
        self.footprint = footprint
        try:
            done = ahead.calibrations if ahead is not None else {}
            calibrations = self._calibrate(problem, self.judge, done) if self.mode == "full" else {}
            if done and self.mode == "full" and isinstance(self.result.get("timing_method"), dict):
                self.result["timing_method"]["calibration"] = (
                    f"{len(done)} of {len(calibrations)} shapes calibrated by the standby before the request, "
                    "with no candidate in its runner yet")
            self._base_calibrations = self._calibrate(problem, self.base_judge) if self.base_judge else {}
            if footprint is not None:  # what the runner's own paths mapped, once they all ran
                footprint.start(runner.proc.pid)
            if self.base_judge is not None:
                self._load_base(problem, Path(self.request["paired_with"]))
            self._load(problem, submission)
        except BaseException:
            watch.discard()
            base_watch.discard()
            raise
        watch.resume()
        try:
            self._check(problem)
            if footprint is not None:
                footprint.read(runner.proc.pid)
            self._check_base(problem)
            if self.mode == "full":
                self._time(problem, calibrations, device)
        finally:
            (self.base_watch or base_watch).discard()  # the one sampling the base's runner now (a fresh one's)
            sampled = self._sampled(policy)
        self._judge_sampled(sampled, policy)
        if self.mode == "check":
            self.finish("ok", "all tests passed (timing skipped)")
        from sandbox.summary import num, summarise_benchmarks

        self.result["summary"] = summarise_benchmarks(self.result["benchmarks"])
        if self.result["summary"].get("paired"):
            self.result["summary"]["paired"]["base"] = str(self.request.get("paired_with"))
        geo = self.result["summary"]["geomean_us"]
        self.finish("ok", f"all {len(problem.tests)} tests passed; geomean {num(geo)} µs" if geo else "ok")

    def _watch(self, watch: LibraryWatch) -> LibraryWatch:
        """Sampling of the candidate's runner from now on (before the candidate's import: see `_run`)."""
        assert self.session is not None and self.judge is not None
        if self.session.host_pid is not None:
            watch.start(self.session.host_pid)
        self.watch = self.judge.sampler = watch
        return watch

    def _sampled(self, policy: Any) -> Any:
        """Sampling of the candidate's runner stopped, and its page tables read: what its code ran (once per
        runner: a rejection of the runner being replaced reaches `_run`'s own reading)."""
        assert self.session is not None and self.watch is not None
        if self._read is not None and self._read[0] is self.watch:
            return self._read[1]
        runner, protections = self.session, self.result["integrity"]["protections"]
        sampled = self.watch.stop(patterns_for(policy.forbidden_ops, policy.forbidden_symbols), runner.glimpses)
        protections["library_use"] = (
            f"sampled from outside the runner (perf, {sampled.samples} samples); {runner.glimpses.describe()}"
            if sampled.error is None else f"not sampled: {sampled.error}")
        if self.footprint is not None:
            self.footprint.read(runner.proc.pid)
            protections["library_use"] += "; the forbidden libraries' code pages read from the runner's page tables"
        self._read = (self.watch, sampled)
        return sampled

    def _judge_sampled(self, sampled: Any, policy: Any) -> None:
        """The library code the candidate's runner ran, against what the problem forbids."""
        if sampled.forbidden:
            self.reject("forbidden-op", f"ran library code this problem forbids: {sampled.describe()}: write the kernel")
        if self.footprint is not None and self.footprint.run():
            self.reject("forbidden-op", f"ran a library this problem forbids: {self.footprint.describe()}: write the kernel")
        forbids = bool(policy.forbidden_ops or policy.forbidden_symbols)
        if sampled.lost and forbids:
            self.reject("hidden-code", f"perf's buffers overflowed and {sampled.lost} records of the runner were lost "
                        "(which code was mapped where among them): what ran cannot be checked against the library code "
                        "this problem forbids; a kernel that maps or starts very much at once overflows them")
        if sampled.hides_code() and forbids:
            self.reject("hidden-code", f"{sampled.hidden} of {sampled.samples} samples of the runner were in code no one "
                        "can read back (a memfd, a deleted file, anonymous memory, a file changed after it was mapped): what ran cannot be checked against "
                        f"the library code this problem forbids; mapped from {sampled.describe_hidden()}")

    def _device(self) -> str:
        from sandbox.judge.main import _device_for

        device = _device_for(self.target, self.mode)
        if self.mode != "build":
            from sandbox import envinfo

            self.result["environment"] = dict(self.environment) or envinfo.collect(device)
        return device

    def _calibrate(self, problem: Any, judge: Judge, done: dict[str, Any] | None = None) -> dict[str, Any]:
        """Before any candidate code exists in the runner: its no-op path is still the trusted one. Shapes
        in `done` were calibrated ahead, by the standby (`ahead`)."""
        calibrations = dict(done or {})
        for params in problem.benchmarks:
            if problem.shape_label(params) not in calibrations:
                calibrations[problem.shape_label(params)] = timed.calibrated(judge, params)
        return calibrations

    def _load_base(self, problem: Any, base: Path) -> None:
        """The base kernel in its own runner; where it cannot load, the candidate is timed alone."""
        assert self.base_judge is not None
        reply = self.base_judge.session.load(str(problem.path), problem.kind, base, self.base_judge.deadline)
        if reply.get("op") != "loaded":
            self.result["errors"].append(f"the base kernel {base.name} did not load, so nothing was paired: "
                                         f"{str(reply.get('message', reply))[:500]}")
            self.base_judge.session.close()
            self.base_judge = None

    def _load(self, problem: Any, submission: Path) -> None:
        assert self.session is not None and self.judge is not None
        reply = self.session.load(str(problem.path), problem.kind, submission, self.judge.deadline)
        failed_builds = [r for r in self.session.build_records if not r.get("ok")]
        if failed_builds:
            log = failed_builds[-1].get("log", "")
            self.result["diagnostics"] = [d.__dict__ for d in native.parse_diagnostics(log)]
            self.finish("build_error", str(native.BuildError(failed_builds[-1]["name"], log)))
        if reply.get("op") == "loaded":
            if self.mode == "build":
                self.finish("built", "built")
            return
        if reply.get("op") != "failed":
            raise RunnerBroke(f"the answer to load was {str(reply)[:200]}")
        message = str(reply.get("message", ""))[:2000]
        if self.mode == "build":
            # Module-level code may need the GPU a builder lacks; what compiled is in the cache.
            self.finish("built", f"import stopped early: {message}")
        if reply.get("trace"):
            self.result["errors"].append(str(reply["trace"])[-4000:])
        self.finish("runtime_error", f"importing the submission failed: {message}")

    def _check(self, problem: Any) -> None:
        assert self.judge is not None
        self.phase("check")
        cases = self._check_cases(problem)
        failed = []
        for params, case in cases:
            label = problem.shape_label(params) + (f" [{case.get('name', 'adversarial values')}]" if case else "")
            self._starting(label)
            started = time.perf_counter()
            try:
                outcome = self.judge.check(params, case)
            except IntegrityViolation as exc:
                self.reject(exc.rule, exc.reason, label, exc.detail)
            except CandidateFailure as exc:
                first = str(exc).splitlines()[0] if str(exc) else "failed"
                self.result["tests"].append({"params": params, "shape": label, "passed": False, "message": first})
                self.result["errors"].append(str(exc)[-4000:])
                self.finish("runtime_error", f"{label}: {first}")
            if not self.result["tests"] and self.session is not None:
                # The runner's code as the first call left it (`glimpse`), in check mode too: a file it
                # writes again after this, while its code runs from it, is code no one can vouch for.
                self.session.look()
            entry = {"params": params, "shape": label, "passed": outcome.passed, "message": outcome.message,
                     "max_abs_error": _finite(outcome.max_abs_error), "max_rel_error": _finite(outcome.max_rel_error),
                     "worst_index": outcome.worst_index, "seconds": time.perf_counter() - started}
            self.result["tests"].append(entry)
            self.events.send(progress="check", shape=label, passed=outcome.passed)
            if not outcome.passed:
                failed.append(entry)
        if failed:
            self.finish("wrong_output", f"{len(failed)} of {len(cases)} tests failed; first: {failed[0]['shape']}: "
                        f"{failed[0]['message']}")

    def _check_cases(self, problem: Any) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        """Every test shape as generated and under each of the problem's adversarial values; when the
        kernel is to be timed, every benchmark shape as generated and under them too: a kernel that
        takes another path on the ranked shapes must handle the same values there. Timed calls see
        only blends of two generated sets, whose spread is narrower than one set's (a red-team kernel
        was wrong on any softmax row as wide as the generator's, on the benchmark shapes only)."""
        benchmarks = problem.benchmarks if self.mode == "full" else []
        cases: list[tuple[dict[str, Any], dict[str, Any] | None]] = [(p, None) for p in problem.tests + benchmarks]
        return cases + [(p, case) for case in problem.adversarial for p in problem.tests + benchmarks]

    def _check_base(self, problem: Any) -> None:
        """The base kernel goes through the candidate's checks too, so that both runners come to the
        timing with the same history (calls, memory, caches), and a base that does not pass here is
        no yardstick: the candidate is then timed alone, and the verdict says why."""
        if self.base_judge is None:
            return
        for params, case in self._check_cases(problem):
            try:
                passed = self.base_judge.check(params, case).passed
                reason = "" if passed else f"wrong output on {problem.shape_label(params)}"
            except Exception as exc:  # noqa: BLE001 - whatever the base did, the candidate's verdict stands
                passed, reason = False, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if not passed:
                reason = _limit_reached(self.base_judge.session) or reason  # what stopped it, where a limit did
                self.result["errors"].append(f"the base kernel failed its check here, so nothing was paired: {reason[:500]}")
                self.base_judge.session.close()
                self.base_judge = None
                return

    def _timed_or_renewed(self, problem: Any, params: dict[str, Any], shape: Any, policy: Any, calibration: Any,
                          base_calibration: Any = None) -> tuple[dict[str, Any], Any]:
        """The shape's timing (`_timed_shape`), and where the judge's clock contradicted every attempt, once more in
        a fresh runner calibrated on this shape before the candidate is loaded into it again (`_renewed`); the
        stats and the shape they were timed on.

        On the lent GPU hosts a runner's own host work (inputs, launches, digests) was seen 1.2 to 2.9 times
        dearer, attempt after attempt, than in the calibration in force, which was taken before the candidate
        loaded, seconds earlier, in that process; another process taking turns with it did not slow with it
        (docs/BENCHMARKS.md, fifteenth and eighteenth sessions). In the fresh runner the cheaper of its two
        calibrations is in force, as in the first; the one taken before the candidate loaded is trusted as the
        first runner's was: no candidate code had run in it. Work hidden from the runner's clock is hidden in
        every runner, and is refused there too."""
        assert self.judge is not None
        kind = bound.kind_of(self.judge.device)
        began = time.monotonic()
        try:
            return self._timed_shape(shape, policy, calibration, base_calibration), shape
        except IntegrityViolation as exc:
            took = time.monotonic() - began
            room = self.judge.deadline - time.monotonic() > 2 * took + RENEWAL_ROOM_S
            if exc.rule not in _MEASURED_AGAIN or self._renewals >= RUNNER_RENEWALS[kind] or not room:
                raise
            first, attempts = exc.reason.removesuffix(_measured(exc.attempts)), exc.attempts
        calibration = self._renewed(problem, params)
        shape = shapes.prepare(self.judge, params, batch=calibration.batch)
        try:
            stats = self._timed_shape(shape, policy, calibration, base_calibration, RENEWED_ATTEMPTS[kind])
        except IntegrityViolation as exc:
            if exc.rule in _MEASURED_AGAIN:
                exc.reason += (f"; so in a fresh runner, calibrated before the candidate loaded into it, after "
                               f"{attempts} contradicted attempt{'s' if attempts > 1 else ''} in the first")
            raise
        stats["judge"]["renewed"] = (f"contradicted {_times(attempts)} in the first runner ({first}); agreed in a "
                                     "fresh runner, calibrated on this shape before the candidate loaded into it")
        return stats, shape

    def _renewed(self, problem: Any, params: dict[str, Any]) -> Any:
        """The candidate's runner replaced by a fresh one, and the shape's calibration there, taken before the
        candidate is loaded into it. What the old runner ran is judged first (its samples and page tables,
        which go with it), the idle CPU it used is kept for the phase's bound, and the new one gets the same
        caps, sampling and arena; the candidate's source is loaded again from the same file."""
        assert self.judge is not None and self.session is not None and self.watch is not None
        policy = self.judge.policy
        old = self.session
        self._renewals += 1
        self._judge_sampled(self._sampled(policy), policy)
        self._idle_retired_s += old.idle_cpu_now() - self._idle_from_s
        old.close()
        runner = self.start_runner(problem_dir(problem), self.judge.device != "cpu")
        runner.cap_memory(self.request.get("memory_limit_mb"))
        self.session = self.judge.session = runner
        self.judge._setup()
        # Stopped and read by `_run` as the first one would be, whatever happens from here.
        watch = self._watch(LibraryWatch(self.watch.data.parent, self.watch.own_code, self.watch.own_names))
        calibration = timed.calibrated(self.judge, params)
        if self.footprint is not None:
            self.footprint.start(runner.proc.pid)
        self._load(problem, Path(self.request["submission"]))
        watch.resume()
        self._idle_from_s = runner.idle_cpu_now()
        return calibration

    def _timed_shape(self, shape: Any, policy: Any, calibration: Any, base_calibration: Any = None,
                     attempts: int | None = None) -> dict[str, Any]:
        assert self.judge is not None
        judge, base_judge = self.judge, self.base_judge
        kind = bound.kind_of(judge.device)
        if base_judge is None or base_calibration is None:
            return _retried(lambda: timed.run(judge, shape, policy, calibration), kind, judge.deadline, attempts)
        base_shape = self._base_shape(shape)
        began = time.monotonic()
        try:
            try:
                stats = _retried(self._pair(shape, base_shape, policy, calibration, base_calibration), kind,
                                 judge.deadline, attempts)
            except _BaseContradicted as exc:
                stats = self._with_fresh_base(exc, shape, policy, calibration, time.monotonic() - began)
        except _BaseLost as exc:
            alone = _retried(lambda: timed.run(judge, shape, policy, calibration), kind, judge.deadline, attempts)
            stats = dict(alone, paired=timed.unpaired(str(exc)))
        except IntegrityViolation:
            self._release_base(base_shape)  # the shape may be timed again, on new sets (released by its key)
            raise
        if stats["paired"].get("error"):  # its runner goes, and its sets with it
            self._drop_base(stats["paired"]["error"])
            return stats
        self._release_base(base_shape)
        return stats

    def _base_shape(self, shape: Any) -> Any:
        """The candidate's shape as the base's runner gets it: the same sets and buffers, so both kernels get the
        same inputs (a runner that builds its inputs itself holds its own copy)."""
        assert self.base_judge is not None
        base_shape = replace(shape)
        if self.base_judge.resident_inputs:
            shapes.hand_over(self.base_judge, base_shape)
        return base_shape

    def _pair(self, shape: Any, base_shape: Any, policy: Any, calibration: Any,
              base_calibration: Any) -> Callable[[], dict[str, Any]]:
        """One attempt at the shape's paired timing, as `_retried` calls it."""
        judge, base_judge = self.judge, self.base_judge
        assert judge is not None and base_judge is not None

        def paired() -> dict[str, Any]:
            candidate = timed.Track.start(judge, shape, calibration)
            try:
                base = timed.Track.start(base_judge, base_shape, base_calibration)
            except timed.BASE_FAILURES as exc:
                raise _BaseLost(f"the base failed as its timing started: {exc}") from exc
            out = timed.run_paired([candidate, base], policy)
            stats = dict(out["candidate"], paired=out["paired"])
            if out["base_contradicted"]:
                raise _BaseContradicted(stats)
            return stats

        return paired

    def _with_fresh_base(self, exc: _BaseContradicted, shape: Any, policy: Any, calibration: Any,
                         took: float) -> dict[str, Any]:
        """The pair measured again with the base in a fresh runner, calibrated on the shape before the base
        loaded into it, where the judge's clock contradicted the base's own figures in every attempt; else the
        candidate's figures, unpaired, saying why. A base is a candidate of an earlier generation: an honest
        one caught in a slow spell of its runner's own host work is what a fresh runner rescued for
        candidates (`_timed_or_renewed`); without one, 2 of 14 pairs on a lent H200 went unmeasured
        (docs/BENCHMARKS.md, eighteenth session)."""
        assert self.judge is not None
        kind = bound.kind_of(self.judge.device)
        stats = exc.stats
        stats["paired"]["error"] += _measured(exc.attempts)
        room = self.judge.deadline - time.monotonic() > 2 * took + RENEWAL_ROOM_S
        if self._base_renewals >= RUNNER_RENEWALS[kind] or not room:
            return stats
        try:
            base_calibration = self._renewed_base(shape.params)
        except timed.BASE_FAILURES as failure:
            stats["paired"]["error"] += f"; a fresh runner for the base failed: {str(failure)[:300]}"
            return stats
        if self.base_judge is None:  # it did not load again (`_load_base` said why)
            return stats
        base_shape = self._base_shape(shape)
        try:
            stats = _retried(self._pair(shape, base_shape, policy, calibration, base_calibration), kind,
                             self.judge.deadline, RENEWED_ATTEMPTS[kind])
        except _BaseContradicted as again:
            stats = again.stats
            stats["paired"]["error"] += (f"{_measured(again.attempts)}; so in a fresh runner, calibrated before the "
                                         f"base loaded into it, after {exc.attempts} contradicted attempt"
                                         f"{'s' if exc.attempts > 1 else ''} in the first")
            return stats
        if not stats["paired"].get("error"):
            stats["paired"]["renewed"] = (f"the base's own timing was contradicted {_times(exc.attempts)} in its first "
                                          "runner; the pair agreed with the base in a fresh runner, calibrated on this "
                                          "shape before the base loaded into it")
        return stats

    def _renewed_base(self, params: dict[str, Any]) -> Any:
        """The base's runner replaced by a fresh one with the same caps and sampling, and the shape's calibration
        there, taken before the base is loaded into it again (nothing is judged of a base: it only has to be a
        yardstick the judge's clock believes)."""
        assert self.base_judge is not None
        base_judge = self.base_judge
        problem = base_judge.problem
        self._base_renewals += 1
        base_judge.session.close()
        runner = self.start_runner(problem_dir(problem), base_judge.device != "cpu")
        runner.cap_memory(self.request.get("memory_limit_mb"))
        base_judge.session = runner
        base_judge._setup()
        if self.base_watch is not None:  # sampled as the candidate's runner is: the same conditions for both
            self.base_watch.discard()
            self.base_watch = LibraryWatch(self.base_watch.data.parent, own_code=[])
            if runner.host_pid is not None:
                self.base_watch.start(runner.host_pid)
                base_judge.sampler = self.base_watch
        calibration = timed.calibrated(base_judge, params)
        self._load_base(problem, Path(self.request["paired_with"]))
        return calibration

    def _release_base(self, base_shape: Any) -> None:
        if self.base_judge is None:
            return
        try:
            shapes.release(self.base_judge, base_shape)
        except timed.BASE_FAILURES as exc:
            self._drop_base(f"its sets could not be released: {exc}")

    def _drop_base(self, why: str) -> None:
        """A base that failed on one shape is no yardstick on the next: they are timed alone (the verdict says why)."""
        assert self.base_judge is not None
        self.result["errors"].append(f"the base kernel failed while timed, so the shapes after this one were timed "
                                     f"alone: {why}")
        self.base_judge.session.close()
        if self.base_judge.arena is not None:
            self.base_judge.arena.close()
        self.base_judge = None

    def _time(self, problem: Any, calibrations: dict[str, Any], device: str) -> None:
        from sandbox import targets
        from sandbox.timing import TimingPolicy

        assert self.judge is not None
        self.phase("time")
        policy = TimingPolicy.from_dict(self.request.get("timing"))
        profile = targets.cpu_profile() if self.target == "cpu" else _gpu_profile()
        self.result["target_profile"] = profile.to_dict() if profile else None
        margin = self.judge.policy.sol_margin
        from sandbox.envinfo import host_state

        # This judge and its runners, and a standby judge with its runner waiting for the next request.
        own = 2 + (1 if self.base_judge is not None else 0) + 2
        self.result["host"] = {"before": host_state(device, own)}
        try:
            self._time_shapes(problem, calibrations, device, policy, profile, margin)
        finally:
            after = host_state(device, own)
            self.result["host"].update(after=after, noisy=bool(after["contended"] or self.result["host"]["before"]["contended"]))

    def _time_shapes(self, problem: Any, calibrations: dict[str, Any], device: str, policy: Any, profile: Any,
                     margin: float) -> None:
        from sandbox.summary import num

        assert self.judge is not None
        self._idle_from_s = self.judge.session.idle_cpu_now()
        for params in problem.benchmarks:
            label = problem.shape_label(params)
            self._starting(label)
            calibration = calibrations[label]
            shape = shapes.prepare(self.judge, params, batch=calibration.batch)  # fresh secret seeds
            try:
                stats, shape = self._timed_or_renewed(problem, params, shape, policy, calibration,
                                                      self._base_calibrations.get(label))
            except IntegrityViolation as exc:
                self.reject(exc.rule, exc.reason, label, exc.detail)
            except CandidateFailure as exc:
                self.result["errors"].append(str(exc)[-4000:])
                self.finish("runtime_error", f"{label}: {str(exc).splitlines()[0] if str(exc) else 'failed'}")
            shapes.release(self.judge, shape)
            paired = stats.get("paired") or {}
            if paired.get("reference_median_us"):  # timed in the same rounds as the two kernels
                reference = {"median_us": paired["reference_median_us"]}
            elif self.request.get("time_reference", True):
                stopped = self.session.stopped_cpu_seconds() if self.target == "cpu" and self.session else None
                reference = timed.time_reference(self.judge, shape, policy)
                if self.session is not None:
                    try:
                        bound.stayed_still(self.session, stopped, "while the reference was timed")
                    except IntegrityViolation as exc:
                        self.reject(exc.rule, exc.reason, label)
            else:
                reference = None
            shape.bases = []
            shapes.free_device_memory(device)
            flops, nbytes = problem.roofline.at(params)
            sol = profile.sol_seconds(flops, nbytes, problem.roofline.compute) if profile else None
            sol_us = sol * 1e6 if sol else None
            median = stats["median_us"]
            entry = {"params": params, "shape": label, **stats,
                     "reference_median_us": reference["median_us"] if reference else None,
                     "flops": flops, "bytes": nbytes, "sol_us": sol_us}
            entry["speedup"] = entry["reference_median_us"] / median if entry["reference_median_us"] and median else None
            entry["pct_sol"] = 100.0 * sol_us / median if sol_us and median else None
            self.result["benchmarks"].append(entry)
            self.events.send(progress="time", shape=label, median_us=median)
            # Datasheet peaks bound every GPU kernel; the CPU's ceilings are estimates caches can beat.
            if self.target != "cpu" and sol_us and median * margin < sol_us:
                self.reject("faster-than-light", f"{num(median)} µs is under the speed of light ({num(sol_us)} µs): "
                            "the result cannot be real", label)
        # Each shape bounds the idle CPU of its own batches; work that ran on while the judge timed the
        # references, or after the last batch, is on no shape's books: the whole phase is bounded too.
        calls_s = sum(float((b.get("judge") or {}).get("calls_ms") or 0.0) for b in self.result["benchmarks"]) / 1e3
        try:
            idle = self._idle_retired_s + self.judge.session.idle_cpu_now() - self._idle_from_s
            bound.idle_bound(idle, calls_s, " over the whole timing phase")
        except IntegrityViolation as exc:
            self.reject(exc.rule, exc.reason, None)


class _BaseLost(Exception):
    """The paired base failed before its first round: the shape is timed alone."""


class _BaseContradicted(Exception):
    """The judge's clock contradicted the paired base's own figures (`stats`: the candidate's, which stand, and
    the pair's, unpaired): the pair is measured again as a contradicted candidate is (`_retried`)."""

    def __init__(self, stats: dict[str, Any]) -> None:
        super().__init__(stats["paired"].get("error"))
        self.stats = stats
        self.attempts = 1  # the pair's attempts, each one contradicting the base, once `_retried` gives up


# How many times a shape's timing is measured before the judge's contradiction stands, and the pause
# before each measurement again. A burst of load on the host can delay a round trip; work hidden from
# the runner's clock delays every attempt. On the lent GPU hosts the runner's own host work (inputs,
# launches, waits) was seen 18-44% dearer for seconds at a time, whole evaluations long, beside the
# candidate than seconds before it loaded (docs/BENCHMARKS.md, seventeenth session), and one immediate
# attempt more met the same slow spell; each attempt draws new sets (shapes.SetRenewal).
TIMING_ATTEMPTS = {"cpu": 2, "gpu": 4}
RETRY_PAUSE_S = {"cpu": 0.0, "gpu": 1.0}
_MEASURED_AGAIN = ("timing-contradicted", "overhead-shortened")
# Where every attempt was contradicted: the attempts in a fresh runner (`Evaluation._timed_or_renewed`), at
# most so many runners replaced in one evaluation, each while the phase leaves this much room beyond twice
# the first runner's attempts (a runner's start, a calibration and the candidate's import again: 3-10 s on
# the hosts here).
RENEWED_ATTEMPTS = {"cpu": 1, "gpu": 2}
RUNNER_RENEWALS = {"cpu": 1, "gpu": 2}
RENEWAL_ROOM_S = 30.0


def _retried(run: Callable[[], dict[str, Any]], kind: str, deadline: float | None = None,
             attempts: int | None = None) -> dict[str, Any]:
    """The shape's timing (`run`), measured again after the judge's clock contradicted it, up to
    `attempts` (TIMING_ATTEMPTS by default) in all while the phase's deadline leaves room for four more
    attempts as long as the last (the shapes after this one need theirs); the first that agrees stands,
    and says how often it was contradicted before. A refusal stands only if every attempt was contradicted.
    A paired base's own figures, contradicted (`_BaseContradicted`), are measured again the same way, up to
    as many times, counted apart: a noisy base never costs the candidate an attempt of its own (before,
    the pair ended at the base's first contradiction). After the base's last the candidate's figures stand,
    unpaired, or a fresh runner for the base is tried (`_BaseContradicted` raised with its count of attempts)."""
    reasons: list[str] = []
    base_contradicted = 0  # attempts whose paired base the judge's clock contradicted (the candidate's stood)
    attempts = attempts or TIMING_ATTEMPTS[kind]
    while True:
        began = time.monotonic()
        try:
            stats = run()
        except IntegrityViolation as exc:
            if exc.rule not in _MEASURED_AGAIN:
                raise
            reasons.append(exc.reason)
            exc.attempts = len(reasons)
            if len(reasons) >= attempts or not _room(began, deadline, kind):
                exc.reason += _measured(len(reasons))
                raise
            time.sleep(RETRY_PAUSE_S[kind])
            continue
        except _BaseContradicted as exc:
            base_contradicted += 1
            if base_contradicted >= attempts or not _room(began, deadline, kind):
                exc.attempts = base_contradicted
                raise
            time.sleep(RETRY_PAUSE_S[kind])
            continue
        if base_contradicted:
            stats["paired"]["measured_again"] = (f"the base's own timing was contradicted {_times(base_contradicted)} "
                                                 "before the pair agreed")
        break
    if reasons:
        stats["judge"]["retried"] = f"contradicted {_times(len(reasons))}, agreed when measured again ({reasons[0]})"
    return stats


def _room(began: float, deadline: float | None, kind: str) -> bool:
    """Whether the phase leaves room for four more attempts as long as the one begun at `began`."""
    took = time.monotonic() - began
    return deadline is None or deadline - time.monotonic() > 4 * took + RETRY_PAUSE_S[kind]


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _measured(attempts: int) -> str:
    """What a refusal adds when its timing was measured more than once."""
    return f" (measured {attempts} times, contradicted each time)" if attempts > 1 else ""


def _limit_reached(session: RunnerSession) -> str:
    """What limit of its control groups a runner reached, in words; empty where none."""
    if session.memory_exceeded():
        return (f"memory use reached the {session.memory_limit_mb} MB limit (the runner's memory group: its "
                "compilers and the pages it keeps in files in memory count too)")
    if session.tasks_exceeded():
        return f"the runner tried to have more than {TASK_LIMIT} processes and threads at once (the ones past it were refused)"
    return ""


def _gpu_profile() -> Any:
    import torch

    from sandbox import targets

    return targets.profile_for_device_name(torch.cuda.get_device_name(0))


def _finite(x: float | None) -> float | None:
    import math

    return x if x is None or math.isfinite(x) else None


def evaluate_request(request: dict[str, Any], events: Any, warm: dict[str, Any], environment: dict[str, Any],
                     start_runner: Callable[[Path, bool], RunnerSession]) -> dict[str, Any]:
    return Evaluation(request, events, warm, environment, start_runner).run()

