"""Evaluations as Ray tasks, for GPUs on other hosts (the optional `ray` extra).

Same interface as `EvaluationPool` (`submit` -> Future[Verdict], `map`, `prewarm`, `close`).
Each evaluation is one task that needs one GPU (cuda/hip) or one `ks_cpu_slot` (the CPU
target: CPU timings must not share cores), plus any custom resource the user names, such as
`gfx942` or `sm_90` for hosts that joined with `ray start --resources='{"gfx942": 4}'`. The
task carries the problem's files and the submission's text, so a worker host needs only what
the sandbox worker needs (torch, PyYAML) and Ray; the sandbox package itself travels in the
task's runtime environment.

A worker that dies mid-evaluation (its host lost, the process killed) is retried by Ray on
another worker up to `max_retries` times; a task returns one verdict however often it ran, and
the run's archive keeps one verdict per source.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from sandbox.evaluator import EvalOptions
from sandbox.verdict import Verdict

log = logging.getLogger(__name__)

CPU_SLOT = "ks_cpu_slot"
SANDBOX_DIR = Path(__file__).resolve().parent


class ClusterError(RuntimeError):
    pass


def pack_problem(problem: str | Path) -> dict[str, Any]:
    """The problem's files as text: a GPU MODE directory (and the `utils.py` one level up, which
    bundled problems share) or a KernelBench file."""
    path = Path(problem).resolve()
    if path.is_file():
        return {"name": path.name, "kind": "file", "files": {path.name: path.read_text()}, "parent": {}}
    files = {
        str(p.relative_to(path)): p.read_text()
        for p in sorted(path.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".yml", ".yaml", ".txt", ".md")
    }
    parent = {"utils.py": (path.parent / "utils.py").read_text()} if (path.parent / "utils.py").is_file() else {}
    return {"name": path.name, "kind": "dir", "files": files, "parent": parent}


def unpack_problem(packed: dict[str, Any], root: Path) -> Path:
    for name, text in packed["parent"].items():
        (root / name).write_text(text)
    if packed["kind"] == "file":
        target = root / packed["name"]
        target.write_text(packed["files"][packed["name"]])
        return target
    base = root / packed["name"]
    for rel, text in packed["files"].items():
        dest = base / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
    return base


def run_evaluation(packed: dict[str, Any], submission_name: str, source: str, options: dict[str, Any]) -> str:
    """The task body, on a worker host: materialise the files, evaluate, return the verdict JSON."""
    import ray

    from sandbox.evaluator import PhaseLimits, evaluate

    attempt_log = os.environ.get("KS_RAY_ATTEMPT_LOG")  # tests: which process ran each attempt
    if attempt_log:
        with open(attempt_log, "a") as f:
            f.write(f"{os.getpid()}\n")
    # Ray sets OMP_NUM_THREADS to the task's CPU count (1): a candidate must see the host's
    # threads as it would outside Ray, or CPU kernels would be timed on one core.
    if os.environ.get("OMP_NUM_THREADS") == "1" and "OMP_NUM_THREADS" not in _forwarded_env():
        os.environ.pop("OMP_NUM_THREADS")
    _restore_priority()
    limits = PhaseLimits(**options.pop("limits"))
    opts = EvalOptions(**options, limits=limits)
    gpu_ids = ray.get_gpu_ids() if opts.target != "cpu" else []
    if gpu_ids:
        opts = replace(opts, gpu=int(gpu_ids[0]))  # the physical index Ray gave this task
    with tempfile.TemporaryDirectory(prefix="ks-ray-") as tmp:
        root = Path(tmp)
        problem_path = unpack_problem(packed, root)
        submission = root / "submission" / submission_name
        submission.parent.mkdir()
        submission.write_text(source)
        return evaluate(problem_path, submission, opts).to_json()


class RayEvaluationPool:
    def __init__(
        self,
        options: EvalOptions,
        address: str = "auto",
        resources: dict[str, float] | None = None,
        max_retries: int = 3,
        local_cpus: int | None = None,
    ) -> None:
        """`address`: "local" starts a Ray instance in this process's machine; "auto" joins the
        one `ray start` made here; "ray://host:10001" a remote cluster."""
        try:
            import ray
        except ImportError as exc:
            raise ClusterError("Ray is not installed: pip install 'kernel-scientist[ray]'") from exc
        self.options = options
        self.address = address
        self._started = connect(address, local_cpus)
        gpu = options.target in ("cuda", "hip")
        needs = dict(resources or {})
        if not gpu:
            needs.setdefault(CPU_SLOT, 1)
        self._task = ray.remote(run_evaluation).options(
            num_cpus=1,
            num_gpus=1 if gpu else 0,
            resources=needs or None,
            max_retries=max_retries,  # system failures: the worker or its node died
            retry_exceptions=False,  # the evaluation's own errors are verdicts, not retries
        )
        self._packed: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.timeline: list[dict[str, Any]] = []

    def prewarm(self, problem: str | Path) -> None:
        self._pack(problem)

    def _pack(self, problem: str | Path) -> dict[str, Any]:
        key = str(Path(problem).resolve())
        with self._lock:
            if key not in self._packed:
                self._packed[key] = pack_problem(problem)
            return self._packed[key]

    def submit(
        self,
        problem: str | Path,
        submission: str | Path,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> Future[Verdict]:
        packed = self._pack(problem)
        options = asdict(self.options)
        options.pop("gpu", None)
        if on_event is not None:
            on_event({"phase": "queued on the Ray cluster"})
        start = time.perf_counter()
        ref = self._task.remote(packed, Path(submission).name, Path(submission).read_text(), options)
        result: Future[Verdict] = Future()

        def done(raw: Future[str]) -> None:
            try:
                verdict = Verdict.from_json(raw.result())
            except Exception as exc:  # the task failed past its retries: the cluster's fault
                result.set_exception(ClusterError(f"evaluation of {submission} failed on the cluster: {exc}"))
                return
            with self._lock:
                self.timeline.append(
                    {"submission": str(submission), "stage": "ray", "start": start, "end": time.perf_counter()}
                )
            result.set_result(verdict)

        ref.future().add_done_callback(done)
        return result

    def map(self, problem: str | Path, submissions: list[str | Path]) -> list[Verdict]:
        futures = [self.submit(problem, s) for s in submissions]
        return [f.result() for f in futures]

    def close(self) -> None:
        import ray

        if self._started and ray.is_initialized():
            ray.shutdown()


def connect(address: str, local_cpus: int | None = None) -> bool:
    """Join (or, for "local", start) a Ray cluster unless this process already has; True when
    this call did. The sandbox package travels with the job to every worker host."""
    import ray

    if ray.is_initialized():
        return False
    job_env = {"py_modules": [str(SANDBOX_DIR)], "env_vars": _forwarded_env()}
    try:
        if address == "local":
            os.environ.setdefault("RAY_worker_niceness", "0")  # the raylet's workers at normal priority
            ray.init(
                num_cpus=local_cpus or os.cpu_count() or 2,
                resources={CPU_SLOT: 1},
                include_dashboard=False,
                log_to_driver=False,
                runtime_env=job_env,
            )
        else:
            ray.init(address=address, log_to_driver=False, runtime_env=job_env)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ClusterError(f"cannot reach the Ray cluster at {address}: {exc}") from exc
    return True


def _restore_priority() -> None:
    """Ray starts its workers at niceness 15 unless the cluster says otherwise (`RAY_worker_niceness`),
    and the evaluation's processes inherit it: on a 2-core host, Ray's own daemons then took the
    cores from the judge and its runner, and a vector_add evaluation's timing phase took 32 s instead
    of 3. The evaluation asks for the normal priority back; where the host refuses (a user without
    the right to raise priority), it says so, and each verdict records the niceness it timed at."""
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    if niceness <= 0:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except PermissionError:
        log.warning("this Ray worker runs at niceness %d and may not raise it: its timings compete with the "
                    "host's other work; start the cluster with RAY_worker_niceness=0", niceness)


def _forwarded_env() -> dict[str, str]:
    """Settings a worker host should share with this one (never credentials)."""
    names = ("KS_RAY_ATTEMPT_LOG", "KS_DEFAULT_CUDA_ARCH")
    return {n: os.environ[n] for n in names if n in os.environ}
