"""The verdict: a typed, versioned record of one evaluation."""

from __future__ import annotations

from datetime import datetime, timezone
from enum import Enum
from typing import Any

from pydantic import BaseModel, Field

from sandbox import SCHEMA_VERSION


class Status(str, Enum):
    ok = "ok"  # built, every test passed, timed
    build_error = "build_error"  # the compiler rejected it
    wrong_output = "wrong_output"  # ran, but some output was out of tolerance
    runtime_error = "runtime_error"  # raised, or failed to import
    crash = "crash"  # the worker died (signal, abort, out of memory)
    timeout = "timeout"  # a phase ran past its wall-clock limit
    rejected = "rejected"  # caught doing something the harness forbids (see integrity)
    resource_limit = "resource_limit"  # exceeded its memory limit
    harness_error = "harness_error"  # our fault or the problem's, not the candidate's
    built = "built"  # build-only evaluation finished


class Diagnostic(BaseModel):
    file: str
    line: int
    column: int | None = None
    severity: str
    message: str


class BuildRecord(BaseModel):
    name: str
    lang: str
    key: str
    cached: bool
    ok: bool
    seconds: float
    command: list[str] = Field(default_factory=list)
    log: str = ""


class BuildInfo(BaseModel):
    records: list[BuildRecord] = Field(default_factory=list)

    @property
    def cached(self) -> bool:
        return bool(self.records) and all(r.cached for r in self.records)


class TestResult(BaseModel):
    params: dict[str, Any]
    shape: str
    passed: bool
    message: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    worst_index: list[int] | None = None
    seconds: float = 0.0


class IntegrityFinding(BaseModel):
    rule: str
    severity: str
    line: int
    reason: str


class Violation(BaseModel):
    rule: str
    reason: str
    shape: str | None = None
    # What the rule was applied to (for `timing-contradicted`: both clocks per batch, the calibration).
    detail: dict[str, Any] | None = None


class IntegrityInfo(BaseModel):
    findings: list[IntegrityFinding] = Field(default_factory=list)
    violation: Violation | None = None
    protections: dict[str, Any] = Field(default_factory=dict)


class PairedShape(BaseModel):
    base_median_us: float | None = None
    base_ci_us: tuple[float, float] | None = None
    ratio: float | None = None  # base time / candidate time: above 1, the candidate is faster
    ratio_ci: tuple[float, float] | None = None
    ratios: int = 0  # rounds in which both were timed
    difference: str = "not measured"  # faster, slower, no measurable difference
    reference_median_us: float | None = None  # the reference, timed in the same rounds
    rounds: int = 0
    error: str | None = None  # why the base could not be measured (the candidate's verdict stands)
    measured_again: str | None = None  # how often the base's own timing was contradicted before the pair agreed
    renewed: str | None = None  # the pair agreed only with the base in a fresh runner, after how many contradictions
    round_ratios: list[float] = Field(default_factory=list)  # each round's base / candidate, in order
    busy_host: bool = False  # other work took a fifth of the host's cores or more: the interval is wider
    other_load: float | None = None  # that work's share of the host's cores while the pair was timed
    undecided: str | None = None  # why the interval was widened past the noise floor (busy host, too few rounds)


class PairedSummary(BaseModel):
    ratio: float | None = None
    ratio_ci: tuple[float, float] | None = None
    difference: str = "not measured"
    base: str | None = None  # the base kernel's file and sha256


class BenchmarkResult(BaseModel):
    params: dict[str, Any]
    shape: str
    reps: int
    median_us: float
    mean_us: float
    std_us: float
    stderr_us: float
    min_us: float
    max_us: float
    p25_us: float
    p75_us: float
    # 95% interval of the median (sandbox/summary.py's median_interval); absent in verdicts older than it.
    ci_us: tuple[float, float] | None = None
    reference_median_us: float | None = None
    speedup: float | None = None
    flops: float | None = None
    bytes: float | None = None
    sol_us: float | None = None
    pct_sol: float | None = None
    host_synced_us: float | None = None
    # The judge's own clock around the same calls, less the overhead calibrated before the candidate
    # loaded: the bound the runner's figure (median_us) must agree with (sandbox/judge/checks.py).
    judge_median_us: float | None = None
    # How the bound was drawn: the calibrated overhead and its spread, and per call what the judge saw.
    judge: dict[str, Any] | None = None
    # Where a profiler timed the calls (sandbox/profiled.py): its tool and the events' figures.
    profiler: dict[str, Any] | None = None
    # Timed side by side with a base kernel (sandbox/judge/timed.py's run_paired): the base's median,
    # the speed-up base/candidate with its interval, and what it means.
    paired: PairedShape | None = None


class Summary(BaseModel):
    geomean_us: float | None = None
    geomean_ci_us: tuple[float, float] | None = None
    reference_geomean_us: float | None = None
    speedup: float | None = None
    pct_sol_geomean: float | None = None
    paired: PairedSummary | None = None


class ProblemInfo(BaseModel):
    name: str
    kind: str
    path: str
    ranking_by: str = "geom"
    tolerance: list[float] | None = None


class SubmissionInfo(BaseModel):
    path: str
    sha256: str


class Verdict(BaseModel):
    schema_version: int = SCHEMA_VERSION
    status: Status
    message: str = ""
    target: str
    problem: ProblemInfo | None = None
    submission: SubmissionInfo
    tests: list[TestResult] = Field(default_factory=list)
    benchmarks: list[BenchmarkResult] = Field(default_factory=list)
    summary: Summary | None = None
    build: BuildInfo = Field(default_factory=BuildInfo)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    integrity: IntegrityInfo = Field(default_factory=IntegrityInfo)
    errors: list[str] = Field(default_factory=list)
    phases: dict[str, float] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    # The host while the calls were timed (sandbox/envinfo.py's host_state, before and after), and
    # whether it was contended: more runnable work than cores, a GPU throttling or shared.
    host: dict[str, Any] | None = None
    target_profile: dict[str, Any] | None = None
    static: dict[str, Any] | None = None  # registers, shared memory, spills, occupancy, instruction counts
    timing_method: dict[str, Any] | None = None
    log_tail: str = ""
    wall_seconds: float = 0.0
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))

    @property
    def passed(self) -> bool:
        return self.status == Status.ok

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        return cls.model_validate_json(text)
