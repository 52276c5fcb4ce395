"""Run one candidate in its own worker process and turn the outcome into a Verdict.

The orchestrator never imports a candidate. Each evaluation starts
`python -m sandbox.worker` in a new process group, in a temporary folder,
with a scrubbed environment (no keys or tokens), and enforces a wall-clock
limit per phase (build, check, time): past it, the whole group is killed.
A worker that dies without reporting (segfault, abort, out of memory) gives
a `crash` verdict with its signal and the tail of its log.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sandbox.problem import load_problem
from sandbox.verdict import Status, SubmissionInfo, Verdict

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("cpu", "cuda")

# Variables a worker may inherit; everything else, and anything that looks
# like a credential whatever its name, stays behind.
_ALLOWED_ENV = {
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME", "TMPDIR", "TERM",
    "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH", "HIP_PLATFORM",
    "CXX", "CC", "NVCC", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TRITON_CACHE_DIR",
    "TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST", "PYTORCH_ROCM_ARCH", "HSA_OVERRIDE_GFX_VERSION",
    "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
}
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)


@dataclass
class PhaseLimits:
    """Wall-clock seconds allowed for each phase of a worker."""

    build: float = 600.0
    check: float = 300.0
    time: float = 600.0

    def for_phase(self, phase: str) -> float:
        return float(getattr(self, phase, self.check))


@dataclass
class EvalOptions:
    target: str = "cpu"
    mode: str = "full"  # full, check (no timing), build (compile only, no GPU)
    limits: PhaseLimits = field(default_factory=PhaseLimits)
    timing: dict[str, Any] = field(default_factory=dict)  # TimingPolicy fields
    time_reference: bool = True
    input_sets: int = 2
    threads: int | None = None
    gpu: int | None = None  # physical GPU index; None: the first visible


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if (k in _ALLOWED_ENV or k.startswith("KS_")) and not _SECRET_NAME.search(k)
    }
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


def detect_cuda_arch() -> str | None:
    """The GPU's architecture (e.g. '90a') without importing CUDA torch here."""
    if os.environ.get("KS_CUDA_ARCH"):
        return os.environ["KS_CUDA_ARCH"]
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.stdout.strip().splitlines()[:1]
    if out.returncode != 0 or not first:
        return None
    major, _, minor = first[0].strip().partition(".")
    return f"{major}{minor}{'a' if int(major) >= 9 else ''}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode(errors="replace")


def evaluate(
    problem: str | Path,
    submission: str | Path,
    options: EvalOptions | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> Verdict:
    """Build, check and time `submission` for `problem` in a fresh worker."""
    options = options or EvalOptions()
    if options.target not in TARGETS:
        raise ValueError(f"unknown target {options.target!r}: expected one of {', '.join(TARGETS)}")
    submission = Path(submission).resolve()
    if not submission.is_file():
        raise FileNotFoundError(f"submission not found: {submission}")
    # Fail fast, here and with a clear message, on a malformed problem.
    spec = load_problem(problem, options.target)
    problem_ref = str(spec.path)
    info = SubmissionInfo(path=str(submission), sha256=_sha256(submission))
    started = time.perf_counter()

    extra: dict[str, str] = {}
    if options.target == "cuda":
        arch = detect_cuda_arch()
        if arch:
            extra["KS_CUDA_ARCH"] = arch
        if options.mode == "build":
            extra["CUDA_VISIBLE_DEVICES"] = ""  # builders never touch the GPU
        elif options.gpu is not None:
            extra["CUDA_VISIBLE_DEVICES"] = str(options.gpu)
    else:
        extra["CUDA_VISIBLE_DEVICES"] = ""

    with tempfile.TemporaryDirectory(prefix="ks-eval-") as workdir:
        work = Path(workdir)
        request = {
            "problem": problem_ref,
            "submission": str(submission),
            "target": options.target,
            "mode": options.mode,
            "timing": options.timing,
            "time_reference": options.time_reference,
            "input_sets": options.input_sets,
            "threads": options.threads,
        }
        (work / "request.json").write_text(json.dumps(request))
        log_path = work / "worker.log"
        outcome = _run_worker(work, log_path, scrubbed_env(extra), options.limits, on_event)
        log_tail = _tail(log_path)

    wall = time.perf_counter() - started
    base = {"target": options.target, "submission": info, "log_tail": log_tail, "wall_seconds": wall}
    if outcome.result is not None:
        payload = dict(outcome.result)
        payload.update(base)
        return Verdict.model_validate(payload)
    if outcome.timed_out_phase:
        limit = options.limits.for_phase(outcome.timed_out_phase)
        return Verdict(
            status=Status.timeout,
            message=f"{outcome.timed_out_phase} phase exceeded its {limit:g} s limit; worker killed",
            phases=outcome.phases,
            **base,
        )
    code = outcome.returncode
    if code is not None and code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    else:
        how = f"exited with code {code} without a result"
    phase = outcome.last_phase or "start-up"
    return Verdict(
        status=Status.crash,
        message=f"worker {how} during {phase}",
        phases=outcome.phases,
        errors=[log_tail[-2000:]] if log_tail else [],
        **base,
    )


@dataclass
class _Outcome:
    result: dict[str, Any] | None = None
    returncode: int | None = None
    timed_out_phase: str | None = None
    last_phase: str | None = None
    phases: dict[str, float] = field(default_factory=dict)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run_worker(
    work: Path,
    log_path: Path,
    env: dict[str, str],
    limits: PhaseLimits,
    on_event: Callable[[dict[str, Any]], None] | None,
) -> _Outcome:
    read_fd, write_fd = os.pipe()
    env = dict(env, KS_EVENT_FD=str(write_fd))
    outcome = _Outcome()
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sandbox.worker", str(work / "request.json")],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            start_new_session=True,  # its own process group, killed whole
        )
    os.close(write_fd)
    phase = "build"  # start-up and imports count against the build phase
    deadline = time.monotonic() + limits.for_phase(phase)
    phase_started = time.monotonic()
    buffer = b""
    selector = selectors.DefaultSelector()
    selector.register(read_fd, selectors.EVENT_READ)
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome.timed_out_phase = phase
                _kill_group(proc)
                break
            if not selector.select(timeout=min(remaining, 1.0)):
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break  # the worker closed its end: exited or crashed
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                try:
                    event = json.loads(line)
                except ValueError:
                    log.warning("unreadable worker event: %r", line[:200])
                    continue
                if "phase" in event:
                    now = time.monotonic()
                    outcome.phases[phase] = round(now - phase_started, 4)
                    phase, phase_started = str(event["phase"]), now
                    outcome.last_phase = phase
                    deadline = now + limits.for_phase(phase)
                if "result" in event:
                    outcome.result = event["result"]
                if on_event is not None:
                    on_event(event)
            if outcome.result is not None:
                break  # a forked child may still hold the pipe open; do not wait for it
    finally:
        selector.close()
        os.close(read_fd)
        try:
            outcome.returncode = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            outcome.returncode = proc.wait()
        # Threads or children a candidate left behind die with the group.
        _kill_group(proc)
    outcome.phases[phase] = round(time.monotonic() - phase_started, 4)
    return outcome
