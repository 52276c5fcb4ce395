"""What a GPU runner spends per timed call besides the kernel, step by step, on one shape.

    python bench/gpu_call_costs.py [--problem fp8_blockscale_gemm] [--variant triton] [--shape m=1024,n=576,k=7168]

Without --shape, each of the problem's benchmark shapes in turn.

The judge's clock bounds a GPU runner's figure per call (sandbox/judge/timed.py): everything the
runner does around a call that the calibration's no-op does not do the same way lands on that
bound. This times each step alone with the host's clock around a device sync, as the judge sees
it: building a call's inputs from a recipe (`blend.apply_recipe`), the output's digest (as the
runner computes it, and with the tree in torch operations, the form before sandbox/shared/fold.py),
the L2 flush, the kernel itself, a bare sync, and the kernel's launch on the host.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _median_us(step: Any, repeats: int = 30) -> float:
    import torch

    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        started = time.perf_counter()
        step()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - started) * 1e6)
    return round(statistics.median(samples), 1)


def measure(problem_name: str, variant: str | None, params: dict[str, Any]) -> dict[str, Any]:
    import torch

    from sandbox.problem import load_problem
    from sandbox.runner.main import FLUSH_BYTES
    from sandbox.shared.arena import tensors
    from sandbox.shared import fold
    from sandbox.shared.blend import apply_recipe, digest

    problem = load_problem(problem_name, "cuda")
    problem.bind()
    kernel = problem.load_submission(problem.seed_for("cuda", variant))
    bases = [dict(tensors(problem.generate_input(dict(params, seed=s), "cuda"))) for s in (1, 2)]
    data = problem.generate_input(params, "cuda")
    work = dict(tensors(data))
    output_path = list(work)[-1]
    recipe = {"first": 0, "mix": {p: (3, 0.4) for p, t in work.items() if t.is_floating_point() and p != output_path}}
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    out = kernel(data)
    kernel(data)
    torch.cuda.synchronize()
    started = time.perf_counter()
    kernel(data)
    launch = (time.perf_counter() - started) * 1e6
    found = [t for _, t in tensors(out)]
    folded = _median_us(lambda: digest(found))
    saved, fold.triton = fold.triton, None
    try:
        in_torch = _median_us(lambda: digest(found))
    finally:
        fold.triton = saved
    return {"problem": problem_name, "variant": variant, "params": params,
            "apply_recipe_us": _median_us(lambda: apply_recipe(work, bases, recipe, [output_path])),
            "output_bytes": sum(t.numel() * t.element_size() for t in found),
            "digest_us": folded, "digest_torch_us": in_torch,
            "flush_us": _median_us(lambda: flush.zero_()), "kernel_us": _median_us(lambda: kernel(data)),
            "sync_us": _median_us(lambda: None), "launch_us": round(launch, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", default="fp8_blockscale_gemm")
    parser.add_argument("--variant", default="triton", help="the seed's variant; '' for the plain CUDA seed")
    parser.add_argument("--shape", default="", help="the shape's parameters, name=value,... (default: each benchmark)")
    args = parser.parse_args()
    if args.shape:
        shapes: list[dict[str, Any]] = [{k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}]
    else:
        from sandbox.problem import load_problem

        shapes = [dict(shape) for shape in load_problem(args.problem, "cuda").benchmarks]
    for params in shapes:
        params.setdefault("seed", 1)
        print(json.dumps(measure(args.problem, args.variant or None, params)), flush=True)


if __name__ == "__main__":
    main()
