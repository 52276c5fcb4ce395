"""Evaluations through a local Ray instance on the CPU target: a short optimisation run, and a
worker killed mid-evaluation that Ray retries elsewhere without the verdict counting twice."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed")

from graph.archive import Archive  # noqa: E402
from graph.config import Budgets, RunConfig, SandboxSettings  # noqa: E402
from graph.evaluation import RunEvaluator  # noqa: E402
from graph.runs import build_context, create_run, execute  # noqa: E402
from sandbox.evaluator import EvalOptions  # noqa: E402
from sandbox.problem import load_problem  # noqa: E402
from sandbox.ray_pool import CPU_SLOT, RayEvaluationPool, connect  # noqa: E402
from tests.scientist_script import FAST_SOFTMAX, FIXTURES  # noqa: E402

pytestmark = pytest.mark.slow  # every test here starts runs, workers or a server


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory):
    attempts = tmp_path_factory.mktemp("ray") / "attempts.log"
    os.environ["KS_RAY_ATTEMPT_LOG"] = str(attempts)  # forwarded to the workers by connect()
    started = connect("local", local_cpus=2)
    assert ray.cluster_resources().get(CPU_SLOT) == 1
    yield attempts
    os.environ.pop("KS_RAY_ATTEMPT_LOG", None)
    if started:
        ray.shutdown()


def test_short_optimisation_through_ray(local_ray: Path, tmp_path: Path) -> None:
    config = RunConfig(
        problem="softmax",
        seed=str(FIXTURES / "softmax_tunable.py"),
        parallel=2,
        budgets=Budgets(generations=1, patience=None),
        sandbox=SandboxSettings(timing_budget_s=0.2, cluster="local", verify_wins=False),
    )
    handle = create_run(config, tmp_path / "runs")
    archive = Archive(handle.archive_path)
    ctx = build_context(handle, archive)
    assert isinstance(ctx.evaluator.pool, RayEvaluationPool)
    final = execute(handle, ctx)
    assert final["stop_reason"] == "generation budget reached (1)"
    kernels = archive.kernels()
    assert [k.origin for k in kernels] == ["seed", "tune", "tune"] and all(k.ok for k in kernels)
    assert len(ctx.evaluator.pool.timeline) == 3  # every evaluation went through a Ray task
    assert ray.is_initialized()  # the run joined the fixture's instance and left it running


def test_worker_lost_mid_evaluation_is_retried_and_counted_once(local_ray: Path, tmp_path: Path) -> None:
    attempts = local_ray
    attempts.write_text("")
    problem = load_problem("softmax", "cpu").path
    pool = RayEvaluationPool(EvalOptions(target="cpu", timing={"budget_s": 0.5}), address="local")
    archive = Archive(tmp_path / "archive.sqlite")
    evaluator = RunEvaluator(archive, tmp_path, problem, pool)
    source = FAST_SOFTMAX.read_text() + "# lost and retried\n"
    result: dict[str, object] = {}
    thread = threading.Thread(target=lambda: result.update(verdict=evaluator.verdict_for(source)))
    thread.start()
    deadline = time.monotonic() + 120
    while not attempts.read_text().split() and time.monotonic() < deadline:
        time.sleep(0.1)
    (first,) = attempts.read_text().split()
    time.sleep(1.0)  # inside the evaluation: the sandbox worker is building or checking
    os.kill(int(first), signal.SIGKILL)  # the Ray worker dies as a lost host would
    thread.join(timeout=300)
    assert not thread.is_alive()
    pids = attempts.read_text().split()
    assert len(pids) == 2 and pids[0] != pids[1]  # retried in another worker process
    assert result["verdict"].passed
    assert [row["status"] for row in archive.evaluation_log()] == ["ok"]  # one verdict, stored once
