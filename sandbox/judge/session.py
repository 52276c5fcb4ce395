"""The judge's handle on its runner: start it inside the sandbox, talk to it, time it, end it.

Every reply is read with a deadline the judge sets, parsed as JSON and checked against the
one answer the protocol allows next. While the runner imports a candidate it may ask for
native builds; the judge builds them itself (the only process that writes the cache).
The judge's own clock brackets every call (`Call.rtt_us`): what the runner reports about a
call is believed only within what that clock allows (sandbox/judge/timing_bound.py).
"""

from __future__ import annotations

import logging
import os
import signal
import select
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandbox import envinfo, native
from sandbox.judge import cgroups, isolation, procs
from sandbox.judge.bound import BATCH_STEPS
from sandbox.judge.cgroups import MEMORY, TASKS, CpuAccount, LimitGroup
from sandbox.judge.glimpse import Glimpses
from sandbox.judge.procs import descendants
from sandbox.shared import protocol

if TYPE_CHECKING:
    from sandbox.judge import remote
    from sandbox.shared.arena import Arena

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# What a runner reads of the project: the code it runs and the bundled problems. The rest (runs and
# their archives, configuration files that may hold an LLM key, the tests) is not in its view.
RUNNER_SOURCES = (PROJECT_ROOT / "sandbox", PROJECT_ROOT / "problems")
_BOOTSTRAP = (
    "import sys; sys.path.insert(0, {root!r}); from sandbox.runner.main import main; sys.exit(main())"
)
# Variables a runner gets; everything else (keys, tokens, the judge's own settings) stays out.
_RUNNER_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH",
               "HIP_PLATFORM", "CXX", "CC", "NVCC", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
               "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "TORCH_CUDA_ARCH_LIST", "PYTORCH_ROCM_ARCH",
               "HSA_OVERRIDE_GFX_VERSION", "KS_CUDA_ARCH", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
               "CUDA_DEVICE_ORDER")


# Processes and threads one runner's sandbox may have at once, where the host gives it a task group:
# torch's pools on a 128-core host take a few hundred; a fork bomb takes the host's process table.
TASK_LIMIT = 4096
# What a CPU verdict's protections say of its outputs (`RunnerSession.outputs_note`).
READ_OUTPUTS = "read by the judge from the runner's memory while it is stopped: no figure holds a copy"
PLACED_OUTPUTS = ("placed in the arena by the runner, inside each figure (a kernel that replaces the runner's copy "
                  "skips it): the judge cannot read the runner's memory here: ")


class RunnerGone(RuntimeError):
    """The runner exited or crashed; `how` says which (signal, exit code)."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


class ArenaRefused(RuntimeError):
    """The runner could not map the device arena it was offered (the message says why); the judge
    offers host shared memory instead."""


class RunnerLate(TimeoutError):
    """The runner did not answer before the judge's deadline."""


class RunnerBroke(ValueError):
    """The runner answered something the protocol does not allow here; `rule` names it in the verdict."""

    rule = "protocol"


class ImpossibleTiming(RunnerBroke):
    """A batch's calls were reported to take longer than the judge's clock around the whole batch: the
    calls run one after another inside that round trip, so only a forged figure can exceed it."""

    rule = "timing-impossible"


# New libraries one evaluation may add to the build cache (first-call autotuning of a few variants fits).
MAX_FRESH_BUILDS = 16
# What a batch's reported figures may exceed its round trip by: the runner's clock and the judge's are one
# monotonic clock (device events on a GPU, whose timestamps drift from it by parts per million).
REPORT_SLACK = 0.01
REPORT_SLACK_US = 20.0


@dataclass
class Call:
    """One call as both sides saw it."""

    ok: bool
    reported_us: float  # the runner's own figure (events on the GPU, its clock on the CPU)
    rtt_us: float  # the judge's clock from sending the request to reading the reply
    output: Any = None  # the reply's data tree (arena specs), read by the judge
    digest: str = ""  # for a call on a recipe: the runner's commitment to the output it keeps
    message: str = ""
    fatal: bool = False
    copied: bool = False  # the runner kept a copy of the output (a kernel that returns one buffer from every call)
    overwritten: bool = False  # its kept output was overwritten by a later call of its batch: not deliverable
    # What the runner says its own clock saw of the call on a recipe, in microseconds: before the timed
    # call (inputs, waits), the timed call on the host's clock, and after it (keeping, the digest). Never
    # believed, only shown beside a refusal: where an honest kernel's round trips went.
    steps_us: tuple[float, ...] | None = None


def judge_kernel_cache() -> Path:
    """Where judges keep Triton's builds of their own kernels (the digest's fold): a folder only judges write.
    A runner's Triton cache is private to its sandbox and starts empty, so each runner built the fold again,
    2-3 s of every GPU evaluation's first calibration, with the device held; each now starts from a copy of
    this folder (`sandbox/runner/main.py`), made before any candidate code exists in it."""
    return native.buildcache.cache_root().parent / "triton-judge"


def use_judge_kernel_cache() -> None:
    """This process (a judge) builds its Triton kernels into `judge_kernel_cache`."""
    os.environ["TRITON_CACHE_DIR"] = str(judge_kernel_cache())


def _secret_free_env(gpu: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _RUNNER_ENV}
    env.update(HOME="/tmp", TMPDIR="/tmp", PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1",
               TRITON_CACHE_DIR="/tmp/triton", TORCH_EXTENSIONS_DIR="/tmp/torch_extensions",
               TORCHINDUCTOR_CACHE_DIR="/tmp/inductor")
    if gpu and (kernels := judge_kernel_cache()).is_dir():
        env["KS_JUDGE_KERNELS"] = str(kernels)
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
        # Idle OpenMP threads sleep rather than spin after a parallel region: a runner that waits for
        # the judge leaves the cores to the judge, whose clock bounds the runner's figures.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        # numpy's OpenBLAS keeps its own threads, which spin after each call by default: the same,
        # and a spinning pool would read as work left running after the calls returned.
        env.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    return env


class RunnerSession:
    """One runner process, for one candidate."""

    def __init__(self, *, gpu: bool, problem_dir: Path, log_path: Path, readable: list[Path]) -> None:
        self.gpu = gpu
        judge_end, runner_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = judge_end
        env = _secret_free_env(gpu)
        inner = [sys.executable, "-I", "-c", _BOOTSTRAP.format(root=str(PROJECT_ROOT)), str(runner_end.fileno()),
                 "gpu" if gpu else "cpu"]
        reference = problem_dir / "reference.py"
        command = isolation.command(
            inner, env=env, gpu=gpu,
            readable=[*RUNNER_SOURCES, Path(sys.prefix), Path(sys.base_prefix), problem_dir, problem_dir.parent,
                      native.buildcache.cache_root(), *([judge_kernel_cache()] if "KS_JUDGE_KERNELS" in env else [])],
            hidden=[reference] if reference.is_file() else [],
        )
        self.isolated = command is not inner
        # Its own control group where the host lets the judge make one: every task of the sandbox is
        # charged there as it runs, whoever reaps it (`cpu_seconds`).
        self.account = CpuAccount.create()
        self.memory = LimitGroup.create(MEMORY, self.account)
        self.tasks = LimitGroup.create(TASKS, self.account)
        if self.tasks is not None and not self.tasks.cap(TASK_LIMIT):
            self.tasks = None
        command = cgroups.enter([g for g in (self.account, self.memory, self.tasks) if g is not None], command)
        self.memory_limit_mb: int | None = None
        # A GPU runner stays on the quicker cores (envinfo.quickest_cores): it inherits the mask of the
        # thread that starts it, which is set for the start alone.
        self.cores = envinfo.quickest_cores() if gpu else None
        with open(log_path, "ab") as log_file, envinfo.pinned_for_now(self.cores):
            self.proc = subprocess.Popen(
                command, env=env if not self.isolated else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                pass_fds=(runner_end.fileno(),), start_new_session=True, cwd="/tmp",
            )
        runner_end.close()
        procs.own(self.proc.pid)
        self.arena: Arena | None = None
        self.build_records: list[dict[str, Any]] = []
        self.host_pid: int | None = None
        # CPU: the runner's memory, where the judge reads each output (None: the runner places outputs in the
        # arena inside its figures); what the verdict says of it (None until the first setup's probe).
        self.outputs: remote.RunnerMemory | None = None
        self.outputs_note: str | None = None
        self.glimpses = Glimpses()  # the runner's code seen in the middle of batches
        self.glimpsed = False  # whether the last batch was glimpsed
        # The runner imports torch while the judge does the same: its greeting is read at first use.
        self._greeted = False
        # CPU seconds the runner used between answering a batch and receiving the next one, when it
        # has nothing to do: work a candidate left running after its calls returned.
        self.idle_cpu_s = 0.0
        self._answered_cpu: float | None = None
        # CPU time the runner's sandbox used during the last batch, in microseconds (None: unreadable).
        self.batch_cpu_us: float | None = None
        # Processes stopped since the runner's last answer (CPU target): see `_freeze`.
        self._frozen: list[int] = []
        self.answer_cpu: float | None = None  # the sandbox's CPU time at the runner's last answer
        self.arrived_ns = 0  # when the runner's last message arrived (perf_counter_ns)
        self.system_calls = "not known"  # the runner's seccomp filter, as its greeting (before any candidate) said
        # What the runner says its clock saw of its last batch, in microseconds (`BATCH_STEPS`): shown, never believed.
        self.batch_said: tuple[float, ...] | None = None

    def _greeting(self, deadline: float) -> None:
        if self._greeted:
            return
        hello = self._receive(deadline)
        if hello.get("op") != "hello":
            raise RunnerBroke(f"the runner greeted with {str(hello)[:200]}")
        self._greeted = True
        self.system_calls = str(hello.get("system_calls") or "no system-call filter")[:200]

    # -- requests -------------------------------------------------------------------------

    def setup(self, arena: Arena, device: str, threads: int | None, problem_dir: Path, deadline: float,
              modules: dict[str, str] | None = None) -> None:
        """Hand the runner the arena (host memory: its descriptor; device memory: its IPC handle), the
        device and the problem's modules. ArenaRefused: the runner could not map a device arena."""
        from sandbox.judge import remote  # torch with it: imported here, while the runner starts (`__init__`)

        self._greeting(deadline)
        self.arena = arena
        # The first setup comes before any candidate code: only then does the probe say what the host allows.
        token = remote.new_token() if not self.gpu and self.outputs_note is None else None
        self._send({"op": "setup", "device": device, "threads": threads, "problem_dir": str(problem_dir),
                    "modules": modules or {}, "arena": arena.describe(), "token": token.hex() if token else None},
                   fds=[] if arena.on_device else [arena.fd])
        reply = self._receive(deadline)
        if reply.get("op") != "ready":
            raise RunnerBroke(f"setup answered with {str(reply)[:200]}")
        self.host_pid = runner_host_pid(self.proc.pid)
        if token is not None:
            self._probe_memory(reply.get("token_at"), token)
        if reply.get("arena_error"):
            self.arena = None
            raise ArenaRefused(str(reply["arena_error"])[:500])

    def _probe_memory(self, address: Any, token: bytes) -> None:
        """Whether the judge can read the runner's memory, where a CPU kernel's outputs then stay (`remote`)."""
        from sandbox.judge import remote

        why = "the runner's process was not found"
        if self.host_pid is not None:
            self.outputs, why = remote.RunnerMemory.probe(self.host_pid, address, token)
        self.outputs_note = READ_OUTPUTS if self.outputs is not None else PLACED_OUTPUTS + why

    def load(self, problem: str, kind: str, submission: Path, deadline: float) -> dict[str, Any]:
        """Import the candidate, serving its build requests; the runner's last word on the import."""
        self._send({"op": "load", "problem": problem, "kind": kind,
                                  "source": submission.read_text(errors="replace")})
        while True:
            reply = self._receive(deadline)
            if reply.get("op") != "build":
                return reply
            self._send(self._build(reply))

    def call(self, index: int, deadline: float, *, data: Any = None, recipe: dict[str, Any] | None = None,
             out_region: dict[str, int] | None = None, noop: bool = False, out_bytes: int = 0) -> Call:
        """One call: on arena data (`data`; its output copied into `out_region`, or without one read where
        it lies, `outputs`) or on a recipe over the sets the runner holds (`recipe`: the output stays
        there, announced by its digest)."""
        request: dict[str, Any] = {"op": "call", "i": index, "kernel": "noop" if noop else "candidate",
                                   "out_bytes": out_bytes}
        if recipe is not None:
            request["recipe"] = recipe
        else:
            request.update(data=data, out=out_region)
        self.quiesce()  # before the clock starts: the judge's own queued device work is not the call's
        now_cpu = self.cpu_seconds()
        if self._answered_cpu is not None and now_cpu is not None:
            self.idle_cpu_s += max(0.0, now_cpu - self._answered_cpu)
        started = time.perf_counter_ns()
        self._send(request, quiet=True)
        reply = self._receive(deadline)
        rtt = (self.arrived_ns - started) / 1e3
        self._answered_cpu = self.answer_cpu
        if reply.get("i") != index or reply.get("op") not in ("done", "error"):
            raise RunnerBroke(f"expected the answer to call {index}, got {str(reply)[:200]}")
        return _call_of(reply, rtt)

    def batch(self, items: list[dict[str, Any]], deadline: float, noop: bool = False,
              out_bytes: int = 0, out_path: str | None = None, glimpse_after_s: float | None = None
              ) -> tuple[list[Call], float]:
        """Calls one after another in the runner (each item: `i` and `data`+`out` or `recipe`), with one
        round trip on the judge's clock for all of them: its noise is shared by the batch's calls.
        The no-op returns what a kernel returns: the preallocated output at `out_path`, else a new
        tensor of `out_bytes` bytes. With `glimpse_after_s`, the runner's code is read that long after
        the request went, if it is still working then (`glimpsed` says whether it was)."""
        request = {"op": "batch", "kernel": "noop" if noop else "candidate", "calls": items, "out_bytes": out_bytes,
                   "out_path": out_path}
        self.quiesce()  # before the clock starts: the judge's own queued device work is not the call's
        now_cpu = self.cpu_seconds()
        if self._answered_cpu is not None and now_cpu is not None:
            self.idle_cpu_s += max(0.0, now_cpu - self._answered_cpu)
        started = time.perf_counter_ns()
        self._send(request, quiet=True)
        self.glimpsed = glimpse_after_s is not None and self._glimpse(glimpse_after_s)
        reply = self._receive(deadline)
        rtt = (self.arrived_ns - started) / 1e3
        self._answered_cpu = self.answer_cpu
        self.batch_cpu_us = (self._answered_cpu - now_cpu) * 1e6 \
            if self._answered_cpu is not None and now_cpu is not None else None
        self.batch_said = _said_times(reply.get("batch_us"), len(BATCH_STEPS))
        answers = reply.get("results")
        if reply.get("op") != "batch_done" or not isinstance(answers, list) or not 0 < len(answers) <= len(items):
            raise RunnerBroke(f"expected the answers to a batch of {len(items)} calls, got {str(reply)[:200]}")
        calls = []
        for item, answer in zip(items, answers, strict=False):
            if not isinstance(answer, dict) or answer.get("i") != item["i"] or answer.get("op") not in ("done", "error"):
                raise RunnerBroke(f"expected the answer to call {item['i']}, got {str(answer)[:200]}")
            calls.append(_call_of(answer, rtt))
        if len(calls) < len(items) and calls[-1].ok:
            raise RunnerBroke(f"a batch of {len(items)} calls answered {len(calls)} times without an error")
        _within_round_trip(calls, rtt)
        return calls, rtt

    def _glimpse(self, after_s: float) -> bool:
        """Read the runner's code from its memory `after_s` into a batch (`glimpse`), unless it answered.
        The sandbox is stopped while it is read (on the CPU): a kernel that watched for the reading (a
        red-team kernel kept a page of its own where the reading would fault it in first) cannot put
        other code in place before its own is read."""
        if self.host_pid is None or select.select([self.sock], [], [], max(after_s, 0.0))[0]:
            return False
        self.look()
        return True

    def look(self) -> None:
        """A glimpse of the runner's code with its sandbox stopped (`glimpse`)."""
        if self.host_pid is None:
            return
        was_frozen = bool(self._frozen)
        if not was_frozen:
            self._freeze()
            self.stopped_cpu_seconds()
        try:
            # From the sandbox's first process: a helper cloned as the runner's sibling (CLONE_PARENT) is
            # no child of the runner's (red-team round 19).
            self.glimpses.take(self.proc.pid if self.isolated else self.host_pid)
        finally:
            if not was_frozen:
                self._thaw()

    def bases(self, key: str, sets: list[Any], buffers: list[str], deadline: float, slots: int = 1) -> None:
        """Hand the runner a shape's two generated sets (arena trees) to keep on its device under `key`,
        with `slots` sets of call tensors (one per call of a batch); no sets: forget the shape."""
        self._send({"op": "bases", "key": key, "sets": sets, "buffers": buffers, "slots": slots})
        reply = self._receive(deadline)
        if reply.get("op") != "based":
            raise RunnerBroke(f"the answer to bases was {str(reply)[:200]}")

    def settle(self, deadline: float) -> None:
        """Let the runner's device work start afresh (after the judge used the same GPU)."""
        self._send({"op": "settle"})
        reply = self._receive(deadline)
        if reply.get("op") != "settled":
            raise RunnerBroke(f"the answer to settle was {str(reply)[:200]}")

    def deliver(self, index: int, out_region: dict[str, int], deadline: float, inputs: bool = False) -> Any:
        """The kept output of call `index` copied into the arena: its tree (and with `inputs`, the tree of
        the inputs as the call left them: a pair), or None when the runner has none."""
        self._send({"op": "deliver", "i": index, "out": out_region, "inputs": inputs})
        reply = self._receive(deadline)
        if reply.get("i") != index or reply.get("op") not in ("delivered", "error"):
            raise RunnerBroke(f"expected the output of call {index}, got {str(reply)[:200]}")
        if reply["op"] != "delivered":
            return None
        if inputs and reply.get("inputs") is None:
            raise RunnerBroke(f"the inputs of call {index} were asked for and not handed over")
        return (reply.get("out"), reply.get("inputs")) if inputs else reply.get("out")

    def _build(self, request: dict[str, Any]) -> dict[str, Any]:
        """Build in the judge: the cache is written here only, and a library is hashed before use. One
        candidate may add at most `MAX_FRESH_BUILDS` new libraries to the cache (each at most
        `native.MAX_LIBRARY_MB`): every distinct source is a new entry that later runners can read."""
        before = len(native.BUILD_RECORDS)
        fresh = sum(1 for r in self.build_records if not r.get("cached"))
        if fresh >= MAX_FRESH_BUILDS:
            return {"op": "build_failed", "log": f"this candidate has built {fresh} libraries, the most one evaluation "
                                                 "may add to the build cache: build fewer variants"}
        hits = self.memory.hits() if self.memory is not None else 0
        try:
            path = native.library(
                name=str(request.get("name", "kernel")), source=str(request.get("source", "")),
                lang=str(request.get("lang", "cpp")), flags=[str(f) for f in request.get("flags") or []],
                openmp=bool(request.get("openmp", True)), wrap=self._compiler_command,
                limited=lambda: self.memory is not None and self.memory.hits() > hits,
            )
        except native.BuildError as exc:
            self.build_records.extend(native.BUILD_RECORDS[before:])
            return {"op": "build_failed", "log": exc.log[-20000:]}
        except (ValueError, TypeError) as exc:
            return {"op": "build_failed", "log": str(exc)}
        self.build_records.extend(native.BUILD_RECORDS[before:])
        return {"op": "built", "path": str(path)}

    def _compiler_command(self, command: list[str], work: Path) -> list[str]:
        """The candidate's compiler, sandboxed, and in the runner's memory group where it has one: what
        the compiler holds counts against the candidate's limit with the rest of its memory (a
        red-team source had the compiler hold 0.8 GB beside a runner already at its limit)."""
        wrapped = isolation.compiler_command(command, work)
        return self.memory.enter(wrapped) if self.memory is not None else wrapped

    # -- the channel ------------------------------------------------------------------------

    def cpu_seconds(self) -> float | None:
        """CPU time so far of everything the runner's sandbox holds: the runner's threads, every process
        below the sandbox's first one (a helper it never waits for, an orphan its PID namespace
        adopted) and what those waited for; without a namespace, the orphans the judge adopted too.
        A process's time is not its parent's until the parent waits for it, so the runner's own
        figure alone would miss work handed to another process."""
        if self.host_pid is None:
            return None
        return self._used()

    def stopped_cpu_seconds(self, wait_s: float = 0.02) -> float | None:
        """The sandbox's CPU time once every thread of it has stopped, waiting at most `wait_s`: a stop
        signal lands asynchronously, and a thread's last slice is charged when it leaves the core, so
        a reading taken at once could still grow for an honest kernel. A thread inside a system call
        that ignores the signal keeps running past the wait, and what it uses after is its own."""
        deadline = time.monotonic() + wait_s
        while self._frozen and not procs.all_stopped(self._frozen) and time.monotonic() < deadline:
            time.sleep(0.0005)
        return self.cpu_seconds()

    def idle_cpu_now(self) -> float:
        """The idle CPU counted so far (`idle_cpu_s`), and what the sandbox has used since its last
        answer: work that goes on while the judge times something else (the reference, the other
        kernel of a pair) is counted without waiting for the runner's next request."""
        now, answered = self.cpu_seconds(), self._answered_cpu
        pending = max(0.0, now - answered) if now is not None and answered is not None else 0.0
        return self.idle_cpu_s + pending

    def _used(self, pids: list[int] | None = None) -> float:
        """CPU seconds of the sandbox: its control group's, which every task that ever ran there was
        charged to; where there is none, these processes' (default: the sandbox's, walked now) from
        /proc (a child reaped automatically takes its time with it there). The control group's figure
        needs no walk of the process tree: on a GPU host with many threads a process, the walk cost a
        second an evaluation."""
        used = self.account.used_s() if self.account is not None else None
        if used is not None:
            return used
        return procs.cpu_seconds(self._sandbox_pids() if pids is None else pids)

    def _sandbox_pids(self) -> list[int]:
        """Every process of the runner's sandbox (`cpu_seconds`, `_freeze`): its control group's where it has
        one (a read of one file), else those below its first process, parents first."""
        grouped = self.account.pids() if self.account is not None else None
        pids = grouped if grouped else [self.proc.pid, *descendants(self.proc.pid)]
        return pids + procs.strays() if not self.isolated else pids

    def _freeze(self) -> float | None:
        """Stop every process of the runner's sandbox the moment it has answered (CPU target), until
        the judge next speaks to it; the sandbox's CPU time at that moment.

        Outputs are read and checked while nothing of the candidate runs, so an output that was not
        complete when its call returned stays incomplete, whatever process or thread was to finish
        it (a child the kernel never waits for, one the kernel reaps automatically and whose CPU
        time is then on nobody's books). In paired timing the other kernel's runner stays stopped
        while this one is timed: neither can slow the other. The process group goes first, in one
        call; then each process found below the sandbox, which catches those in sessions of their
        own. GPU runners are not stopped: their outputs are committed to by digest when the call
        returns, and the judge's later requests need them awake."""
        if self.gpu or self.host_pid is None:
            return self.cpu_seconds()
        return self._used(self._stop_all())

    def _stop_all(self, wait_s: float = 0.5, settle_s: float = 0.002) -> list[int]:
        """Stop signals to the sandbox's processes, pass after pass, until the sandbox is seen still twice over
        (`_agree`); the processes. A process of the sandbox not yet stopped can continue one that was:
        red-team round 30 kept 16 helpers in sessions of their own sending SIGCONT to the runner as each answer
        went out, and the runner ran on for milliseconds while its outputs were read. An honest sandbox is still
        after the first pass (under 2 ms). One whose threads were seen stopped and then running again, still so
        after `wait_s`, broke the protocol; a thread that only stays in the kernel that long (a vfork's parent
        whose child was stopped before it could exec) is no such evidence, and the stop stands as it is."""
        assert self.host_pid is not None
        deadline = time.monotonic() + wait_s
        stopped_once: set[int] = set()
        continued = False
        while True:
            try:
                os.killpg(self.host_pid, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass
            pids = self._sandbox_pids()
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except (ProcessLookupError, PermissionError):
                    continue
                if pid not in self._frozen:
                    self._frozen.append(pid)
            settled = time.monotonic() + settle_s
            while True:
                readings = [procs.threads(pids)]
                if procs.still(readings[0]):
                    readings.append(procs.threads(self._sandbox_pids()))  # the processes listed again
                for found in readings:
                    continued |= any(tid in stopped_once for tid, (state, _) in found.items() if state in "RS")
                    stopped_once |= {tid for tid, (state, _) in found.items() if state in "Tt"}
                if len(readings) == 2 and _agree(*readings):
                    return pids
                if time.monotonic() >= settled:
                    break
                time.sleep(0.0002)
            if time.monotonic() >= deadline:
                if continued:
                    raise RunnerBroke(f"the runner's processes kept continuing each other for {wait_s:g} s after its "
                                      "answer: its outputs cannot be read while nothing of the candidate runs")
                return pids

    def _thaw(self) -> None:
        if not self._frozen:
            return
        for pid in self._frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                continue
        if self.host_pid is not None:
            try:
                os.killpg(self.host_pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
        self._frozen = []

    def quiesce(self) -> None:
        """With the arena in device memory: the judge's copies into it (and out of it) are finished
        before the runner is asked to read or overwrite it."""
        if self.arena is not None and self.arena.on_device:
            import torch

            torch.cuda.synchronize()

    def _send(self, message: dict[str, Any], fds: list[int] | None = None, quiet: bool = False) -> None:
        """`quiet`: the caller has quiesced the device already (before its clock started)."""
        if message.get("op") != "batch":  # the runner has work of the judge's to do: not idle
            self._answered_cpu = None
        if not quiet:
            self.quiesce()
        self._thaw()
        try:
            protocol.send(self.sock, message, fds=fds)
        except OSError as exc:  # the runner is gone (a broken pipe): say how it ended
            raise RunnerGone(self.exit_description()) from exc

    def _receive(self, deadline: float) -> dict[str, Any]:
        """The runner's next message; its sandbox is stopped the moment it arrives (`_freeze`), whatever
        it answers, not only after a timed batch: a helper process the candidate left running must
        not work on while the judge reads an output, builds, or times the base beside it.
        `answer_cpu` is the sandbox's CPU time at that moment."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RunnerLate("deadline passed")
        self.sock.settimeout(remaining)
        try:
            message = protocol.receive(self.sock)
            # The answer's arrival ends a round trip on the judge's clock: stopping the sandbox is the
            # judge's work, whose cost grows with the runner's threads (red-team round 23: 1,000 idle
            # threads put 30 ms a call on an honest vector_add's clock, refused `timing-contradicted`).
            self.arrived_ns = time.perf_counter_ns()
            self.answer_cpu = self._freeze()
            return message
        except TimeoutError as exc:
            raise RunnerLate("no answer before the deadline") from exc
        except (protocol.ChannelClosed, ConnectionError) as exc:  # closed, or reset with our request unread
            raise RunnerGone(self.exit_description()) from exc
        except protocol.ProtocolError as exc:
            raise RunnerBroke(str(exc)) from exc

    def exit_description(self) -> str:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "closed its channel without exiting"
        # bubblewrap reports a child killed by a signal as 128 + the signal.
        if code < 0 or (self.isolated and code > 128):
            number = -code if code < 0 else code - 128
            try:
                return f"killed by {signal.Signals(number).name}"
            except ValueError:
                return f"killed by signal {number}"
        return f"exited with code {code}"

    def close(self) -> None:
        self._thaw()
        try:
            protocol.send(self.sock, {"op": "exit"})
        except OSError:
            pass
        # bubblewrap's group, and everything below it (the runner has a session of its own; a
        # namespace dies with its first process where the kernel honours the parent-death signal).
        below = descendants(self.proc.pid)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.sock.close()
        if self.outputs is not None:
            self.outputs.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("runner %s did not exit", self.proc.pid)
        for group in (self.account, self.memory, self.tasks):
            if group is not None:
                group.remove()

    def cap_memory(self, megabytes: int | None) -> bool:
        """Hold the runner's memory group to `megabytes`: every page it faults in counts, those of files
        it keeps in memory too. False where the host gives the runner no memory group."""
        if not megabytes or self.memory is None or not self.memory.cap(int(megabytes) << 20):
            return False
        self.memory_limit_mb = int(megabytes)
        return True

    def memory_exceeded(self) -> bool:
        """Whether the kernel killed a task of the runner for its memory group's limit."""
        return self.memory_limit_mb is not None and self.memory is not None and self.memory.hits() > 0

    def tasks_exceeded(self) -> bool:
        """Whether the runner tried to start more processes and threads than its task group allows."""
        return self.tasks is not None and self.tasks.hits() > 0


def _within_round_trip(calls: list[Call], rtt: float) -> None:
    """Every figure the runner reports, the no-op's included, fits inside the judge's clock around its
    batch. A larger one is no measurement: reported for the calibration's no-op it would zero the
    overhead the judge subtracts, and leave a poisoned calibration's spread in force."""
    reported = sum(c.reported_us for c in calls if c.ok)
    if reported > rtt * (1 + REPORT_SLACK) + REPORT_SLACK_US:
        raise ImpossibleTiming(f"the runner reported {reported:.1f} µs for {len(calls)} calls that the judge's clock "
                               f"saw take {rtt:.1f} µs in all, request to answer: more time than passed")


def _call_of(reply: dict[str, Any], rtt: float) -> Call:
    if reply["op"] == "error":
        return Call(False, 0.0, rtt, message=str(reply.get("message", ""))[:4000] + _trace(reply),
                    fatal=bool(reply.get("fatal")))
    reported = reply.get("us")
    if not isinstance(reported, (int, float)) or isinstance(reported, bool) or not 0 <= reported < 1e12:
        raise RunnerBroke(f"call {reply.get('i')} reported a time of {reported!r}")
    return Call(True, float(reported), rtt, output=reply.get("out"), digest=str(reply.get("digest", "")),
                copied=reply.get("copied") is True, overwritten=reply.get("overwritten") is True,
                steps_us=_said_times(reply.get("steps_us"), 3))


def _said_times(value: Any, count: int) -> tuple[float, ...] | None:
    """Times the runner says it took, as `count` finite numbers, or nothing: shown, never believed."""
    if not isinstance(value, list) or len(value) != count:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e12 for v in value):
        return None
    return tuple(float(v) for v in value)


def _trace(reply: dict[str, Any]) -> str:
    trace = reply.get("trace")
    return f"\n{str(trace)[-4000:]}" if trace else ""


def runner_host_pid(top: int) -> int | None:
    """The runner's process as the host numbers it: `top` itself, or its descendant under bubblewrap."""
    for pid in [top, *descendants(top)]:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"sandbox.runner.main" in cmdline and not cmdline.startswith(b"bwrap") and b"/bwrap" not in cmdline.split(b"\0")[0]:
            return pid
    return None


def _agree(first: dict[int, tuple[str, int]], second: dict[int, tuple[str, int]]) -> bool:
    """Two readings of a sandbox's threads (`procs.threads`) show it still: the same threads, none able to run,
    none having run between the two. Read one after another, threads can take turns: a helper read as stopped
    may have continued the runner, read earlier, just before it stopped itself. Any thread that ran between its
    two readings has run longer in the second, and one that ran after its second reading was continued by one
    that ran before its own."""
    return second.keys() == first.keys() and procs.still(first) and procs.still(second) and all(
        second[tid][1] == first[tid][1] for tid in first)
