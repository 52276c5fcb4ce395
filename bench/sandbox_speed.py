"""Time to verdict for a small CUDA kernel, and build/GPU overlap in the pool.

    python bench/sandbox_speed.py [--repeats 3] [--candidates 6]

1. cold: an empty build cache and a new worker process (imports, nvcc, check, timing);
2. cached: the same source again, new worker process, build from the cache;
3. cold_build_warm_worker: a source never built, a worker started ahead of time
   and warmed up on the problem (how a run evaluates: keep_warm);
4. warm: a source built before and a warm worker;
5. pool: N distinct candidates (distinct cache keys) evaluated one after another
   versus through EvaluationPool (builds in parallel while the GPU times another).

The kernel is the bundled vector_add CUDA seed on its 3 benchmark shapes (16M-268M
elements), with a timing budget of 0.25 s per shape.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import median, save  # noqa: E402
from sandbox.evaluator import EvalOptions, evaluate, shutdown_standby_workers  # noqa: E402
from sandbox.pool import EvaluationPool  # noqa: E402
from sandbox.verdict import Status  # noqa: E402

TIMING = {"budget_s": 0.25, "warmup_s": 0.02}
SEED = ROOT / "problems" / "vector_add" / "seeds" / "cuda.py"


def _variant(folder: Path, i: int) -> Path:
    path = folder / f"variant{i}.py"
    path.write_text(SEED.read_text().replace('name="vector_add"', f'name="vector_add", flags=["-DVARIANT={i}"]'))
    return path


def _timed(problem: str, submission: Path, options: EvalOptions) -> tuple[float, dict]:
    started = time.perf_counter()
    verdict = evaluate(problem, submission, options)
    wall = time.perf_counter() - started
    if verdict.status != Status.ok:
        raise SystemExit(f"{submission.name}: {verdict.status.value}: {verdict.message}\n{verdict.log_tail}")
    return wall, {"phases": verdict.phases, "cached": verdict.build.cached}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=6)
    parser.add_argument("--settle", type=float, default=12.0, help="seconds for a standby worker to warm up")
    args = parser.parse_args()
    results: dict = {"kernel": "vector_add CUDA seed, 3 shapes", "timing": TIMING}
    options = EvalOptions(target="cuda", timing=TIMING)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cold, cached, cold_warm, warm = [], [], [], []
        for r in range(args.repeats):
            # Nothing prepared: a new process (torch import, device context) and nvcc.
            os.environ["KS_CACHE_DIR"] = str(folder / f"cache-cold-{r}")
            wall, info = _timed("vector_add", SEED, options)
            assert not info["cached"]
            cold.append({"wall_s": wall, **info})
            wall, info = _timed("vector_add", SEED, options)
            assert info["cached"]
            cached.append({"wall_s": wall, **info})
        # As in a run: a worker is waiting, warmed up on the problem, when a candidate arrives.
        os.environ["KS_CACHE_DIR"] = str(folder / "cache-warm")
        warm_options = EvalOptions(target="cuda", timing=TIMING, keep_warm=True)
        _timed("vector_add", SEED, warm_options)  # starts the first standby worker
        for r in range(args.repeats):
            time.sleep(args.settle)  # the standby finishes warming up, as between generations
            wall, info = _timed("vector_add", _variant(folder, 1000 + r), warm_options)
            assert not info["cached"]
            cold_warm.append({"wall_s": wall, **info})
            time.sleep(args.settle)
            wall, info = _timed("vector_add", SEED, warm_options)
            assert info["cached"]
            warm.append({"wall_s": wall, **info})
        shutdown_standby_workers()
        for key, runs in (("cold", cold), ("cached", cached), ("cold_build_warm_worker", cold_warm), ("warm", warm)):
            results[key] = {"runs": runs, "median_s": median([c["wall_s"] for c in runs])}

        # Pool: distinct candidates, so every one needs nvcc.
        os.environ["KS_CACHE_DIR"] = str(folder / "cache-seq")
        seq_sources = [_variant(folder, i) for i in range(args.candidates)]
        _timed("vector_add", SEED, warm_options)
        time.sleep(args.settle)
        started = time.perf_counter()
        for src in seq_sources:
            _timed("vector_add", src, warm_options)  # one after another, a warm worker ready at the start
        sequential = time.perf_counter() - started
        shutdown_standby_workers()
        os.environ["KS_CACHE_DIR"] = str(folder / "cache-pool")
        pool_sources = [_variant(folder, 100 + i) for i in range(args.candidates)]
        with EvaluationPool(options, devices=[0], build_workers=args.candidates) as pool:
            pool.prewarm("vector_add")  # a run starts its workers when it starts
            time.sleep(args.settle)
            started = time.perf_counter()
            verdicts = pool.map("vector_add", pool_sources)
            pooled = time.perf_counter() - started
        assert all(v.status == Status.ok for v in verdicts), [v.message for v in verdicts]
        evals = sorted((t for t in pool.timeline if t["stage"] == "evaluate"), key=lambda t: t["start"])
        gpu_busy = sum(t["end"] - t["start"] for t in evals)
        first_gpu = evals[0]["start"]
        span = evals[-1]["end"] - first_gpu
        results["pool"] = {
            "candidates": args.candidates,
            "sequential_s": sequential,
            "pool_s": pooled,
            "speedup": sequential / pooled,
            "gpu_busy_fraction_after_first_build": gpu_busy / span if span else None,
        }

    path = save("sandbox_speed", results)
    print(f"time to verdict, cold (empty cache, new process): median {results['cold']['median_s']:.2f} s")
    print(f"time to verdict, cached build, new process:       median {results['cached']['median_s']:.2f} s")
    print(f"time to verdict, new source, warm worker:         median {results['cold_build_warm_worker']['median_s']:.2f} s")
    print(f"time to verdict, cached build, warm worker:       median {results['warm']['median_s']:.2f} s")
    p = results["pool"]
    print(
        f"{p['candidates']} distinct candidates: sequential {p['sequential_s']:.1f} s, pool {p['pool_s']:.1f} s "
        f"({p['speedup']:.2f}x); GPU busy {100 * (p['gpu_busy_fraction_after_first_build'] or 0):.0f}% after the first build"
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
