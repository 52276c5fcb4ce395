"""Evaluating candidates for a run: the sandbox's pool behind the archive's memo.

A source text is evaluated once per run: its verdict is stored under its SHA-256 before the
kernel is recorded, so a resumed run, or two experiments that wrote the same file, reuse it.
"""

from __future__ import annotations

import ast
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graph.archive import Archive, KernelRecord, sha256_text
from graph.config import SandboxSettings
from sandbox.devices import evaluation_slots
from sandbox.envinfo import parse_cores
from sandbox.evaluator import EvalOptions, PhaseLimits
from sandbox.pool import EvaluationPool
from sandbox.verdict import Status, Verdict

log = logging.getLogger(__name__)


def shape_times(verdict: Verdict) -> dict[str, float]:
    return {b.shape: b.median_us for b in verdict.benchmarks}


_NATIVE_SUFFIXES = (".cpp", ".cc", ".cxx", ".c", ".cu", ".hip")


def embedded_source_line(source: str | None) -> int | None:
    """The line of a Python submission where its embedded C++/CUDA source (the longest multi-line
    string holding code) starts: line N of the compiled file is line start + N - 1 of the file the
    Coder wrote. None when the submission has no such string, or is not Python."""
    if not source:
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    strings = [(len(n.value), n.lineno) for n in ast.walk(tree) if isinstance(n, ast.Constant)
               and isinstance(n.value, str) and "\n" in n.value and ("{" in n.value or "#include" in n.value)]
    return max(strings)[1] if strings else None


# Lines the judge writes to its log about its own start-up (sandbox/judge/main.py's standby warm-up),
# which say nothing about the candidate: a failing seed's message once ended with one.
_JUDGE_STARTUP_LINES = ("standby: ",)


def candidate_log_tail(log_tail: str) -> str:
    """The log's tail as the kernel's author and the Coder should read it: the judge's start-up lines
    left out, and nothing at all when nothing else is there."""
    lines = [line for line in log_tail.splitlines() if not line.startswith(_JUDGE_STARTUP_LINES)]
    text = "\n".join(lines)
    return text if text.strip() else ""


def verdict_message(verdict: Verdict, limit: int = 2000, source: str | None = None) -> str:
    """The failure as the Coder should read it: status, message, diagnostics, failed tests. A
    compiler's diagnostics are listed once (the message's own copy of the first is dropped), each
    with the line of the file the Coder wrote when `source` embeds the compiled code."""
    if verdict.status == Status.ok:
        return ""
    message = verdict.message
    if verdict.diagnostics and " failed: " in message:
        message = message.split(" failed: ", 1)[0] + " failed:"
    parts = [f"{verdict.status.value}: {message}".strip()]
    start = embedded_source_line(source)
    for d in verdict.diagnostics[:10]:
        where = f"{d.file}:{d.line}"
        if start is not None and "/" not in d.file and d.file.endswith(_NATIVE_SUFFIXES):
            where += f" (line {start + d.line - 1} of your file)"
        parts.append(f"{where}: {d.severity}: {d.message}")
    for t in verdict.tests:
        if not t.passed:
            parts.append(f"test {t.shape}: {t.message}")
            break
    if verdict.integrity.violation is not None:
        v = verdict.integrity.violation
        parts.append(f"integrity: {v.rule}: {v.reason}")
    for f in verdict.integrity.findings:
        if f.severity == "error":
            parts.append(f"integrity scan, line {f.line}: {f.reason}")
    log_tail = candidate_log_tail(verdict.log_tail)
    if verdict.status in (Status.runtime_error, Status.crash, Status.harness_error) and log_tail:
        parts.append("log tail:\n" + log_tail[-1200:])
    return "\n".join(parts)[:limit]


class RunEvaluator:
    def __init__(self, archive: Archive, run_dir: Path, problem_path: Path, pool: Any) -> None:
        self.archive = archive
        self.kernels_dir = run_dir / "kernels"
        self.kernels_dir.mkdir(parents=True, exist_ok=True)
        self.problem_path = problem_path
        self.pool = pool  # EvaluationPool, or RayEvaluationPool: submit() -> Future[Verdict]
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.sandbox_seconds = 0.0  # time spent waiting on the sandbox, for the overhead benchmark
        self.evaluations = 0

    @classmethod
    def for_run(
        cls, archive: Archive, run_dir: Path, problem_path: Path, target: str, settings: SandboxSettings
    ) -> RunEvaluator:
        """The local pool (one worker per visible GPU, builds in parallel), or Ray tasks when the
        settings name a cluster."""
        options = EvalOptions(
            target=target,
            limits=PhaseLimits(build=settings.build_limit_s, check=settings.check_limit_s, time=settings.time_limit_s),
            timing={"budget_s": settings.timing_budget_s},
            profiler=settings.profiler,
            cores=parse_cores(settings.cores) if settings.cores else None,
        )
        if settings.cluster:
            from sandbox.ray_pool import RayEvaluationPool

            pool: Any = RayEvaluationPool(
                options, address=settings.cluster, resources=settings.cluster_resources or None
            )
        else:
            devices = evaluation_slots(target, settings.devices, settings.cpu_slots)
            log.info("local pool on %s: slots %s", target, devices)
            pool = EvaluationPool(options, devices=devices, build_workers=settings.build_workers)
        return cls(archive, run_dir, problem_path, pool)

    def prewarm(self) -> None:
        self.pool.prewarm(self.problem_path)

    def _lock_for(self, sha: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(sha, threading.Lock())

    def verdict_for(self, source: str, on_event: Callable[[dict[str, Any]], None] | None = None) -> Verdict:
        sha = sha256_text(source)
        with self._lock_for(sha):
            stored = self.archive.get_evaluation(sha)
            if stored is not None:
                return Verdict.from_json(stored)
            path = self.kernels_dir / f"{sha[:16]}.py"
            path.write_text(source)
            started = time.perf_counter()
            verdict = self.pool.submit(self.problem_path, path, on_event).result()
            seconds = time.perf_counter() - started
            self.sandbox_seconds += seconds
            self.evaluations += 1
            self.archive.put_evaluation(sha, verdict.to_json(), verdict.status.value, seconds)
            return verdict

    def evaluate(
        self, source: str, record: KernelRecord, on_event: Callable[[dict[str, Any]], None] | None = None
    ) -> KernelRecord:
        """Evaluate `source` (or reuse its verdict) and store it as a kernel built from `record`'s
        lineage fields; returns the stored record with its id."""
        verdict = self.verdict_for(source, on_event)
        summary = verdict.summary
        filled = record.model_copy(
            update={
                "source": source,
                "sha256": sha256_text(source),
                "status": verdict.status.value,
                "message": verdict_message(verdict, source=source),
                "geomean_us": summary.geomean_us if summary and verdict.passed else None,
                "geomean_ci_us": summary.geomean_ci_us if summary and verdict.passed else None,
                "noisy": bool(verdict.host and verdict.host.get("noisy")),
                "speedup": summary.speedup if summary and verdict.passed else None,
                "benchmarks": shape_times(verdict) if verdict.passed else {},
            }
        )
        return self.archive.add_kernel(filled, verdict_json=verdict.to_json(), static=verdict.static)

    def verify(self, candidate: KernelRecord, base: KernelRecord | None = None) -> Verdict:
        """The candidate evaluated afresh with `base` timed beside it (graph/verify.py): a new judge,
        fresh inputs, each kernel in a runner of its own, alternating rounds. Without a base, the
        candidate alone in a fresh judge, whatever its stored verdict said."""
        from dataclasses import replace

        from sandbox.evaluator import evaluate

        paths = []
        for kernel in (candidate, base):
            if kernel is None:
                continue
            path = self.kernels_dir / f"{kernel.sha256[:16]}.py"
            if not path.exists():
                path.write_text(kernel.source)
            paths.append(path)
        options = replace(self.pool.options, paired_with=str(paths[1]) if base else None, keep_warm=False, mode="full")
        started = time.perf_counter()
        verdict = evaluate(self.problem_path, paths[0], options)
        self.sandbox_seconds += time.perf_counter() - started
        return verdict

    def close(self) -> None:
        self.pool.close()
