"""Standby workers and the evaluation pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox.evaluator import EvalOptions, evaluate, shutdown_standby_workers
from sandbox.judge import isolation
from sandbox.pool import EvaluationPool
from sandbox.verdict import Status
from tests.candidates import write_build_error, write_spy

pytestmark = pytest.mark.slow  # every test here starts runs, workers or a server

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "problems" / "vector_add" / "seeds" / "cpu.py"


def _spy(tmp_path: Path, name: str) -> Path:
    return write_spy(tmp_path, name, SEED, check_tmp=isolation.probe().available)


def test_warm_workers_are_still_one_process_per_candidate(tmp_path: Path) -> None:
    options = EvalOptions(target="cpu", mode="check", keep_warm=True)
    try:
        first = evaluate("vector_add", _spy(tmp_path, "a"), options)
        second = evaluate("vector_add", _spy(tmp_path, "b"), options)
    finally:
        shutdown_standby_workers()
    # Each spy fails its import if the other's module or /tmp file is visible: a runner of its own.
    assert first.status == second.status == Status.ok, (first.message, second.message)
    # The second worker was started ahead of time: its import phase was already paid.
    assert second.phases["build"] < first.phases["build"] + 5


def test_pool_skips_device_time_for_build_failures(tmp_path: Path) -> None:
    good = _spy(tmp_path, "good")
    broken = write_build_error(tmp_path)
    options = EvalOptions(target="cpu", mode="check")
    # The two-stage pipeline is the GPU targets' default; the CPU target exercises it here.
    with EvaluationPool(options, devices=[0], build_workers=2, separate_builds=True) as pool:
        verdicts = pool.map("vector_add", [good, broken, SEED])
    assert [v.status for v in verdicts] == [Status.ok, Status.build_error, Status.ok]
    stages = [(Path(t["submission"]).name, t["stage"]) for t in pool.timeline]
    assert ("build_error.py", "build") in stages
    assert ("build_error.py", "evaluate") not in stages
    assert sum(1 for _, stage in stages if stage == "evaluate") == 2


def test_pool_runs_builds_in_parallel(tmp_path: Path) -> None:
    sources = []
    for i in range(3):
        path = tmp_path / f"cand{i}.py"
        path.write_text(SEED.read_text().replace("Naive CPU seed", f"variant {i}").replace(
            'name="vector_add"', f'name="vector_add", flags=["-DVARIANT={i}"]'
        ))
        sources.append(path)
    with EvaluationPool(EvalOptions(target="cpu", mode="build"), devices=[0], build_workers=3) as pool:
        pool.map("vector_add", sources)
    # mode=build goes straight to the device-slot stage with a build-only worker
    assert all(t["stage"] == "evaluate" for t in pool.timeline)
    options = EvalOptions(target="cpu", mode="check")
    with EvaluationPool(options, devices=[0], build_workers=3, separate_builds=True) as pool:
        verdicts = pool.map("vector_add", sources)
    assert all(v.status == Status.ok for v in verdicts)
    builds = [t for t in pool.timeline if t["stage"] == "build"]
    overlapping = any(
        a is not b and a["start"] < b["end"] and b["start"] < a["end"] for a in builds for b in builds
    )
    assert overlapping, json.dumps(builds)


def test_cpu_pool_builds_inside_the_evaluation(tmp_path: Path) -> None:
    broken = write_build_error(tmp_path)
    with EvaluationPool(EvalOptions(target="cpu", mode="check"), devices=[0]) as pool:
        verdicts = pool.map("vector_add", [SEED, broken])
    assert [v.status for v in verdicts] == [Status.ok, Status.build_error]
    assert [t["stage"] for t in pool.timeline] == ["evaluate", "evaluate"]  # no build beside a CPU timing
