"""The graph's own overhead per experiment, excluding LLM latency and sandbox time.

A real run on the CPU target with scripted roles (so LLM latency is near zero and is subtracted
anyway) and the real sandbox. The Coder writes a new file every time (a counter in a comment),
so every experiment is a real evaluation. Per generation:

    overhead per experiment = (generation wall time - LLM latency - sandbox time) / experiments

where the generation's wall time runs from its `select` to the end of its `collect`, so it
includes selection, planning, the archive writes, checkpoints, the Critic's integrity scan and
the fan-out. One experiment per generation by default, so sandbox waits do not overlap.

    python bench/graph_overhead.py --generations 8
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.llm import LLMConfig  # noqa: E402
from agents.scripted import ScriptedChatModel  # noqa: E402
from bench.common import save  # noqa: E402
from graph.archive import Archive  # noqa: E402
from graph.config import Budgets, LLMSettings, RunConfig, SandboxSettings  # noqa: E402
from graph.runs import build_context, create_run, execute  # noqa: E402
from tests import scientist_script as script  # noqa: E402


class Clock:
    """Progress sink: when each generation started and ended, and the sandbox time so far."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, int, float, float]] = []
        self.evaluator: Any = None
        self._lock = threading.Lock()

    def event(self, kind: str, **data: Any) -> None:
        if kind in ("generation", "generation_done"):
            with self._lock:
                self.marks.append((kind, data["generation"], time.perf_counter(), self.evaluator.sandbox_seconds))


def distinct_coder() -> Any:
    counter = itertools.count()
    source = script.FAST_SOFTMAX.read_text()

    def respond(messages: Any, kwargs: Any) -> Any:
        return {"args": {"mode": "file", "source": f"# variant {next(counter)}\n{source}", "summary": "omp"}}

    return respond


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--budget", type=float, default=0.1, help="timing seconds per shape")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        models = script.scientist_models(coder=distinct_coder())
        models["researcher"] = ScriptedChatModel(
            responder=lambda m, k: {
                "args": {"plans": [dict(script.PLAN, title=f"plan {i}") for i in range(args.parallel)]}
            }
        )
        config = RunConfig(
            problem="softmax",
            seed=str(script.SLOW_SOFTMAX),
            parallel=args.parallel,
            tuner_per_generation=0,
            budgets=Budgets(generations=args.generations, patience=None),
            sandbox=SandboxSettings(timing_budget_s=args.budget),
            llm=LLMSettings(default=LLMConfig(model="scripted", max_retries=0)),
            use_knowledge=False,
        )
        handle = create_run(config, Path(tmp) / "runs")
        archive = Archive(handle.archive_path)
        clock = Clock()
        ctx = build_context(handle, archive, chat_models=models, progress=clock)
        clock.evaluator = ctx.evaluator
        started = time.perf_counter()
        execute(handle, ctx)
        total = time.perf_counter() - started
        calls = archive.llm_calls()
        per_generation = []
        starts = {g: (t, s) for kind, g, t, s in clock.marks if kind == "generation"}
        for kind, g, t_end, s_end in clock.marks:
            if kind != "generation_done":
                continue
            t_start, s_start = starts[g]
            llm = sum(c["latency_s"] for c in calls if (c["step"] or "").startswith(f"g{g}"))
            experiments = len(archive.experiments(g))
            wall = t_end - t_start
            sandbox = s_end - s_start
            per_generation.append(
                {
                    "generation": g,
                    "experiments": experiments,
                    "wall_s": wall,
                    "llm_s": llm,
                    "sandbox_s": sandbox,
                    "overhead_per_experiment_ms": 1000 * (wall - llm - sandbox) / max(1, experiments),
                }
            )
    overheads = [g["overhead_per_experiment_ms"] for g in per_generation]
    result = {
        "command": " ".join(sys.argv),
        "generations": args.generations,
        "parallel": args.parallel,
        "total_s": total,
        "per_generation": per_generation,
        "median_overhead_per_experiment_ms": statistics.median(overheads),
        "max_overhead_per_experiment_ms": max(overheads),
        "target_ms": 100.0,
    }
    path = save(f"graph_overhead.p{args.parallel}", result)
    print(
        f"overhead per experiment: median {result['median_overhead_per_experiment_ms']:.1f} ms, "
        f"max {result['max_overhead_per_experiment_ms']:.1f} ms over {len(overheads)} generations "
        f"(target 100 ms); run took {total:.1f} s; {path}"
    )
    for g in per_generation:
        print(
            f"  g{g['generation']}: wall {g['wall_s']:.2f} s, sandbox {g['sandbox_s']:.2f} s, "
            f"llm {g['llm_s'] * 1000:.1f} ms -> {g['overhead_per_experiment_ms']:.1f} ms/experiment"
        )


if __name__ == "__main__":
    main()
