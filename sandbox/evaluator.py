"""Run one evaluation in its own judge process and turn the outcome into a Verdict.

The orchestrator never imports a candidate, and neither does the judge it starts:
`python -m sandbox.judge` (a new process group, a temporary folder, a scrubbed
environment with no keys or tokens) owns the verdict and runs the candidate in a runner
process inside an OS sandbox (sandbox/judge/). Here, from outside both, the orchestrator
enforces a backstop wall-clock limit per phase and the memory limit over the judge and
every process below it; past either, all of them are killed. A judge that dies without
reporting gives a `crash` verdict with its signal and the tail of its log.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import logging
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox import profiled, rocprof
from sandbox.judge.procs import descendants
from sandbox.problem import load_problem
from sandbox.safe_env import safe_env
from sandbox.verdict import ProblemInfo, Status, SubmissionInfo, Verdict

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("cpu", "cuda", "hip")  # hip: a ROCm PyTorch host (MI300), which torch calls "cuda"

# Variables a worker may inherit; everything else, and anything that looks
# like a credential whatever its name, stays behind.


PROFILER_FLUSH_S = 120.0
# The judge enforces each phase's limit itself and reports the timeout; the orchestrator's
# limit is a backstop for a judge that cannot (a hung device call), a little later.
BACKSTOP_GRACE_S = 20.0  # how long a profiled worker may take to write its trace


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
    # Start the next worker (torch imported, device initialised) as soon as this
    # one finishes, so the next candidate skips start-up. Still one process each.
    keep_warm: bool = False
    memory_limit_mb: int = 16384  # resident memory of the worker's process group
    open_files: int = 4096
    isolate_network: bool = True  # where `unshare -n` works
    warm_workers: int = 1  # how many to keep ready: more when candidates arrive faster than start-up
    # hip target: "auto" times under rocprofv3 where it is installed, "off" with device events.
    profiler: str = "auto"
    # Timed inputs built in the runner from two sets it holds (True), or written by the judge for every
    # call (False); None: the runner builds them on GPUs, the judge on the CPU (sandbox/judge/checks.py).
    resident_inputs: bool | None = None
    # A base kernel to time side by side with the submission (full mode): the verdict's benchmarks then
    # carry the paired speed-up base/submission with its interval (sandbox/judge/timed.py's run_paired).
    paired_with: str | None = None
    # Cores the judge and its runners are pinned to (sandbox/envinfo.py's parse_cores); torch's threads
    # follow their number unless `threads` says otherwise. None: wherever the scheduler puts them.
    cores: tuple[int, ...] | None = None


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = safe_env()
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


@functools.lru_cache(maxsize=1)
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


def _worker_env_extra(problem_ref: str, options: EvalOptions) -> dict[str, str]:
    """What a worker for this problem and these options needs on top of the scrubbed env."""
    extra: dict[str, str] = {}
    if options.target in ("cuda", "hip"):
        arch = detect_cuda_arch() if options.target == "cuda" else None
        if options.target == "cuda" and arch is None and options.mode == "build":
            # No GPU visible here (a build host): build for the primary target, Hopper.
            arch = os.environ.get("KS_DEFAULT_CUDA_ARCH", "90a")
        if arch:
            extra["KS_CUDA_ARCH"] = arch
        if options.mode == "build":
            extra["CUDA_VISIBLE_DEVICES"] = ""  # builders never touch the GPU
        elif options.gpu is not None:
            extra["CUDA_VISIBLE_DEVICES"] = str(options.gpu)
            # Indices in PCI order, as nvidia-smi counts them: the runner's sandbox then gets that
            # GPU's device node alone (sandbox/judge/isolation.py `gpu_nodes`).
            extra["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        if options.target == "hip" and "CUDA_VISIBLE_DEVICES" in extra:
            extra["HIP_VISIBLE_DEVICES"] = extra["CUDA_VISIBLE_DEVICES"]
    else:
        extra["CUDA_VISIBLE_DEVICES"] = ""
    if options.mode != "build":
        # The worker imports torch and binds the problem before the request.
        extra.update(KS_WARM_PROBLEM=problem_ref, KS_WARM_TARGET=options.target)
    if profiled.profiler_for(options.target, options.mode, options.profiler):
        extra["KS_PROFILED"] = "1"  # the worker names its calls; see sandbox/profiled.py
    extra["KS_OPEN_FILES"] = str(options.open_files)
    if options.cores:
        extra["KS_CORES"] = ",".join(map(str, options.cores))  # a standby judge pins itself before its runner starts
    if options.isolate_network and network_isolation():
        extra["KS_NETWORK_ISOLATED"] = "1"
    return extra


@functools.lru_cache(maxsize=1)
def network_isolation() -> list[str]:
    """The command prefix that starts a worker without network, or [] where none works."""
    if shutil.which("unshare") is None:
        return []
    try:
        probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return ["unshare", "-n", "--"] if probe.returncode == 0 else []


def protections(options: EvalOptions) -> dict[str, Any]:
    """What guarded this evaluation, for the verdict."""
    return {
        "own_process_per_candidate": True,
        "process_group_killed_on_timeout": True,
        "phase_limits_s": {"build": options.limits.build, "check": options.limits.check, "time": options.limits.time},
        "scrubbed_environment": True,
        "temporary_directory": True,
        "judge_outside_candidate": True,
        "network": "isolated (unshare -n)" if options.isolate_network and network_isolation() else "not isolated",
        "memory_limit_mb": options.memory_limit_mb,
        "open_files_limit": options.open_files,
        "static_scan": "advisory",
    }


def prepare_workers(problem: str | Path, options: EvalOptions, count: int | None = None) -> None:
    """Start workers for this problem and these options ahead of the first candidate."""
    spec = load_problem(problem, options.target)
    env = scrubbed_env(_worker_env_extra(str(spec.path), options))
    _STANDBY.prepare(env, count or options.warm_workers)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tail(path: Path, limit: int = 4000) -> str:
    """The log's last `limit` bytes, read from its end: a candidate decides how long the log is."""
    try:
        with open(path, "rb") as log_file:
            log_file.seek(max(0, log_file.seek(0, 2) - limit))
            data = log_file.read(limit)
    except OSError:
        return ""
    return data.decode(errors="replace")


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

    extra = _worker_env_extra(problem_ref, options)
    request = {
        "problem": problem_ref,
        "submission": str(submission),
        "target": options.target,
        "mode": options.mode,
        "timing": options.timing,
        "time_reference": options.time_reference,
        "input_sets": options.input_sets,
        "threads": options.threads or (len(options.cores) if options.cores else None),
        "limits": {"build": options.limits.build, "check": options.limits.check, "time": options.limits.time},
        "resident_inputs": options.resident_inputs,
        "paired_with": str(Path(options.paired_with).resolve()) if options.paired_with else None,
        "memory_limit_mb": options.memory_limit_mb,  # the runner's own memory group, where the host allows one
    }
    env = scrubbed_env(extra)
    worker = _STANDBY.take(env) or _Worker.spawn(env)
    try:
        outcome = worker.run(request, options.limits, on_event, _tree_limit_mb(options))
        log_tail = _tail(worker.log_path) + _tail(worker.work / "runner.log")
        if outcome.result is not None and worker.profiler is not None and worker.trace_dir is not None:
            profiled.apply_trace(outcome.result, worker.trace_dir, worker.profiler)
    finally:
        worker.retire()
    if options.keep_warm:
        _STANDBY.prepare(env, options.warm_workers)

    wall = time.perf_counter() - started
    base: dict[str, Any] = {"target": options.target, "submission": info, "log_tail": log_tail, "wall_seconds": wall}
    # Verdicts the judge could not write itself still say what was evaluated, and on which shape it ended.
    known: dict[str, Any] = {"problem": ProblemInfo(name=spec.name, kind=spec.kind, path=str(spec.path), ranking_by=spec.ranking_by),
             "environment": _requested_environment(options)}
    on_shape = f" (shape {outcome.last_shape})" if outcome.last_shape else ""
    guards = protections(options)
    if outcome.result is not None:
        payload = dict(outcome.result)
        payload.update(base)
        payload.setdefault("integrity", {})
        payload["integrity"]["protections"] = guards | dict(payload["integrity"].get("protections") or {})
        return Verdict.model_validate(payload)
    base["integrity"] = {"protections": guards}
    if outcome.memory_mb is not None:
        return Verdict(
            status=Status.resource_limit,
            message=(
                f"memory use reached {outcome.memory_mb:.0f} MB, over the {_tree_limit_mb(options)} MB limit, "
                f"during the {outcome.last_phase or 'build'} phase{on_shape}; the candidate was stopped"
            ),
            phases=outcome.phases,
            **base,
            **known,
        )
    if outcome.timed_out_phase:
        limit = options.limits.for_phase(outcome.timed_out_phase)
        return Verdict(
            status=Status.timeout,
            message=f"the {outcome.timed_out_phase} phase{on_shape} exceeded its {limit:g} s limit; the candidate was stopped",
            phases=outcome.phases,
            **base,
            **known,
        )
    code = outcome.returncode
    if code is not None and code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    else:
        how = f"exited with code {code} before giving a verdict"
    phase = outcome.last_phase or "start-up"
    return Verdict(
        status=Status.crash,
        message=f"the evaluation {how} during the {phase} phase{on_shape}",
        phases=outcome.phases,
        errors=[log_tail[-2000:]] if log_tail else [],
        **base,
        **known,
    )


def _requested_environment(options: EvalOptions) -> dict[str, Any]:
    """What is known of the environment without the judge: the torch installed and the device asked for."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = None
    device = "cpu" if options.target == "cpu" else f"gpu {options.gpu}" if options.gpu is not None else "gpu"
    return {"torch": torch_version, "device": device}


@dataclass
class _Outcome:
    result: dict[str, Any] | None = None
    returncode: int | None = None
    timed_out_phase: str | None = None
    last_phase: str | None = None
    phases: dict[str, float] = field(default_factory=dict)
    memory_mb: float | None = None  # set when the memory limit was exceeded
    last_shape: str | None = None  # the shape the judge last said it started


_PAGE = os.sysconf("SC_PAGE_SIZE")


def _tree_limit_mb(options: EvalOptions) -> int:
    """What the worker's whole tree may hold: the limit, once for each runner. Each runner is held to
    the limit itself where it has a memory group; a paired evaluation's two runners (the candidate
    and its base) each hold a copy of the kernel's data, so one limit for both falsely stopped an
    honest pair that fit it alone."""
    return options.memory_limit_mb * (2 if options.paired_with else 1)


def tree_rss_mb(root: int) -> float:
    """Resident memory of a process and every process below it, in MB: an upper bound, read fast.

    The runner starts its own session (and a candidate may start more), so a process
    group would miss them; the judge is their subreaper, so orphans stay below it. Pages that
    forked processes share count once per process here (`tree_pss_mb` divides them).
    """
    return sum(_rss_bytes(pid) for pid in [root, *descendants(root)]) / 2**20


class _TreeMemory:
    """The worker tree's memory as the limit sees it, read every 0.2 s: the resident sum where it is
    under the limit, else the proportional sum (shared pages divided). Reading that walks each
    process's page tables under its memory-map lock: a kernel that forked enough children to keep
    the resident sum over the limit had it read five times a second, and the judge's reference, whose
    allocations wait on that lock, was slowed 30x on a small shape, the candidate's speed-up with it.
    So it is read every `PSS_EVERY_S`; in between, the resident sum's growth since the last read is
    added whole, and where that estimate passes the limit the sum is read again, at most every
    `PSS_SOON_S`, before anything is stopped (a pool forked in stages is charged its parent's pages
    once, not once per worker)."""

    PSS_EVERY_S = 2.0
    PSS_SOON_S = 0.5

    def __init__(self) -> None:
        self.read_at = -math.inf
        self.pss_mb = self.rss_then_mb = 0.0

    def used_mb(self, root: int, limit_mb: float) -> float:
        rss = tree_rss_mb(root)
        if rss <= limit_mb:
            return rss
        now = time.monotonic()
        estimate = self.pss_mb + max(0.0, rss - self.rss_then_mb)
        since = now - self.read_at
        if since >= self.PSS_EVERY_S or (estimate > limit_mb and since >= self.PSS_SOON_S):
            self.read_at, self.pss_mb, self.rss_then_mb = now, tree_pss_mb(root), rss
            return self.pss_mb
        return min(estimate, limit_mb)  # over only on a fresh reading


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def tree_pss_mb(root: int) -> float:
    """The same tree's memory with each shared page divided among the processes that map it (the
    kernel's proportional set size), in MB; a process whose share cannot be read counts whole.
    Slower to read than `tree_rss_mb`, so it decides only once that bound is over the limit: a
    kernel's pool of forked workers shares the parent's pages (torch's included), and summed per
    process 4096 small forks of one evaluation read 23 GB."""
    total = 0.0
    for pid in [root, *descendants(root)]:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
        except (OSError, ValueError, IndexError):
            total += _rss_bytes(pid)
    return total / 2**20


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the judge's group and every process below the judge, whatever its session."""
    below = descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class _Worker:
    """One worker process: started (perhaps ahead of time), given one request, gone."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env_key = _env_key(env)
        self._dir = tempfile.TemporaryDirectory(prefix="ks-eval-")
        self.work = Path(self._dir.name)
        self.log_path = self.work / "worker.log"
        read_fd, write_fd = os.pipe()
        self.read_fd = read_fd
        prefix = network_isolation() if env.get("KS_NETWORK_ISOLATED") else []
        command = [sys.executable, "-m", "sandbox.judge", "--standby"]
        self.profiler = rocprof.find_profiler() if env.get("KS_PROFILED") == "1" else None
        # The trace goes outside the candidate's working folder, where it would be easiest to forge.
        self._trace_dir = tempfile.TemporaryDirectory(prefix="ks-trace-") if self.profiler else None
        self.trace_dir = Path(self._trace_dir.name) if self._trace_dir else None
        if self.profiler is not None and self.trace_dir is not None:
            command = profiled.wrap_command(command, self.trace_dir, self.profiler)
        with open(self.log_path, "wb") as log_file:
            self.proc = subprocess.Popen(
                [*prefix, *command],
                cwd=self.work,
                env=dict(env, KS_EVENT_FD=str(write_fd)),
                stdin=subprocess.PIPE,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                start_new_session=True,  # its own process group, killed whole
            )
        os.close(write_fd)
        self.spawned = time.monotonic()

    @classmethod
    def spawn(cls, env: dict[str, str]) -> _Worker:
        return cls(env)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(
        self,
        request: dict[str, Any],
        limits: PhaseLimits,
        on_event: Callable[[dict[str, Any]], None] | None,
        memory_limit_mb: int | None = None,
    ) -> _Outcome:
        request_path = self.work / "request.json"
        request_path.write_text(json.dumps(request))
        outcome = _Outcome()
        phase = "build"  # start-up not yet done and imports count against the build phase
        deadline = time.monotonic() + limits.for_phase(phase) + BACKSTOP_GRACE_S
        phase_started = time.monotonic()
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(f"{request_path}\n".encode())
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died while waiting; the read loop sees EOF and reports a crash
        buffer = bytearray()  # appended in place: a line of hundreds of MB must not be copied per chunk
        tree_memory = _TreeMemory()
        selector = selectors.DefaultSelector()
        selector.register(self.read_fd, selectors.EVENT_READ)
        try:
            while outcome.result is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    outcome.timed_out_phase = phase
                    _kill_group(self.proc)
                    break
                if memory_limit_mb:
                    used = tree_memory.used_mb(self.proc.pid, memory_limit_mb)
                    if used > memory_limit_mb:
                        outcome.memory_mb = used
                        outcome.last_phase = phase
                        _kill_group(self.proc)
                        break
                if not selector.select(timeout=min(remaining, 0.2)):
                    continue
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    break  # the worker closed its end: exited or crashed
                buffer += chunk
                if b"\n" not in chunk:
                    continue
                *lines, rest = buffer.split(b"\n")
                buffer = bytearray(rest)
                for line in lines:
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
                        deadline = now + limits.for_phase(phase) + BACKSTOP_GRACE_S
                    if "shape_started" in event:
                        outcome.last_shape = str(event["shape_started"])
                    if "result" in event:
                        outcome.result = event["result"]
                    if on_event is not None:
                        on_event(event)
        finally:
            selector.close()
            if outcome.result is not None:
                if self.profiler is not None:
                    # The profiler writes its trace as the worker exits: wait for that.
                    try:
                        self.proc.wait(timeout=PROFILER_FLUSH_S)
                    except subprocess.TimeoutExpired:
                        log.warning("the profiled worker did not exit within %s s", PROFILER_FLUSH_S)
                # The verdict is in: kill the group now (threads or children a
                # candidate left behind die with it) and let retire() reap it,
                # so device-context teardown does not delay the verdict.
                _kill_group(self.proc)
            else:
                try:
                    outcome.returncode = self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    _kill_group(self.proc)
                    outcome.returncode = self.proc.wait()
                _kill_group(self.proc)
        outcome.phases[phase] = round(time.monotonic() - phase_started, 4)
        return outcome

    def retire(self) -> None:
        """Reap and clean up in the background; the verdict does not wait for it."""
        thread = threading.Thread(target=self.cleanup, name="ks-reap", daemon=True)
        thread.start()
        _RETIRING.append(thread)

    def cleanup(self) -> None:
        if self.alive():
            _kill_group(self.proc)
            self.proc.wait()
        try:
            os.close(self.read_fd)
        except OSError:
            pass
        self._dir.cleanup()
        if self._trace_dir is not None:
            self._trace_dir.cleanup()


def _env_key(env: dict[str, str]) -> str:
    return json.dumps(sorted(env.items()))


class _StandbyWorkers:
    """Workers started ahead of time, a few per environment (target, GPU, problem)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[str, list[_Worker]] = {}

    def prepare(self, env: dict[str, str], count: int = 1) -> None:
        key = _env_key(env)
        with self._lock:
            queue = [w for w in self._ready.get(key, []) if w.alive()]
            while len(queue) < count:
                queue.append(_Worker.spawn(env))
            self._ready[key] = queue

    def take(self, env: dict[str, str]) -> _Worker | None:
        with self._lock:
            queue = self._ready.get(_env_key(env), [])
            worker = queue.pop(0) if queue else None  # the oldest is the likeliest warm
        if worker is not None and not worker.alive():
            worker.cleanup()
            return None
        return worker

    def shutdown(self) -> None:
        with self._lock:
            workers = [w for queue in self._ready.values() for w in queue]
            self._ready = {}
        for worker in workers:
            worker.cleanup()


_STANDBY = _StandbyWorkers()
_RETIRING: list[threading.Thread] = []


def _finish_retiring() -> None:
    for thread in _RETIRING:
        thread.join(timeout=30)


atexit.register(_finish_retiring)
atexit.register(_STANDBY.shutdown)


def shutdown_standby_workers() -> None:
    """Stop workers started ahead of time (also done at interpreter exit)."""
    _STANDBY.shutdown()
