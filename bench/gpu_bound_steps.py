"""The GPU bound on honest seeds: how often each is refused `timing-contradicted`, and per shape the runner's
steps beside the no-op's, the judge's clock per batch, and the allowance.

    OUT=<folder> REPEATS=2 python bench/gpu_bound_steps.py rmsnorm: fp8_blockscale_gemm:triton vector_add:triton

Arguments are `problem:variant` (an empty variant: the CUDA seed); each verdict's JSON goes to $OUT. Run on a
GPU host (the device tool); the figures of docs/BENCHMARKS.md's eleventh session came from it.
"""
import os
import sys
import time

sys.path.insert(0, ".")
from sandbox.evaluator import EvalOptions, evaluate  # noqa: E402
from sandbox.problem import load_problem  # noqa: E402

OUT = os.environ.get("OUT", "/tmp")
DEFAULT = ["rmsnorm:triton", "vector_add:triton", "matmul_bf16:triton", "fp8_blockscale_gemm:triton", "rmsnorm:"]
CASES = [a.split(":") for a in sys.argv[1:] or DEFAULT]
REPEATS = int(os.environ.get("REPEATS", "2"))


def _outside(judge: dict) -> tuple[float, float] | None:
    """The judge's round trip less the runner's whole batch, per batch (ms, medians), for the no-op beside the
    candidate (from the calibration in force: meaningful where it is the late one's level) and the kernel."""
    steps = judge.get("runner_steps_us") or {}
    noop = sorted(b[3] for b in steps.get("no-op_batches") or [] if b)
    kernel = [b[3] for b in steps.get("kernel_batches") or [] if b]
    per_call, n, overhead = judge.get("per_call_us") or [], judge.get("batch") or 1, judge.get("overhead_us")
    if not noop or not kernel or not per_call or overhead is None:
        return None
    trips = sorted(p * n + overhead - w for p, w in zip(per_call, kernel))
    return (overhead - noop[len(noop) // 2]) / 1e3, trips[len(trips) // 2] / 1e3


def _drift(steps: dict) -> float | None:
    """The no-op's whole batch beside the candidate over the same before it loaded (medians), where both are said."""
    beside = [b[3] for b in steps.get("no-op_batches") or [] if b]
    before = [b[3] for b in steps.get("no-op_batches_before_load") or [] if b]
    if not beside or not before:
        return None
    return sorted(beside)[len(beside) // 2] / sorted(before)[len(before) // 2]


for name, variant in CASES:
    seed = load_problem(name, "cuda").seed_for("cuda", variant or None)
    for i in range(REPEATS):
        t0 = time.time()
        v = evaluate(name, seed, EvalOptions(target="cuda", timing={"budget_s": 0.3, "warmup_s": 0.02}))
        tag = f"{name}-{variant or 'cuda'}-{i}"
        with open(f"{OUT}/{tag}.json", "w") as f:
            f.write(v.model_dump_json(indent=1))
        print(f"== {tag}: {v.status.value} in {time.time() - t0:.0f}s | {v.message[:300]}")
        judges = [(f"{b.shape} median {b.median_us:.1f}", b.judge or {}) for b in v.benchmarks]
        viol = v.integrity.violation
        if viol is not None and viol.detail:
            judges.append((viol.shape, viol.detail.get("judge", {})))
        for shape, j in judges:
            steps = j.get("runner_steps_us", {})
            drift = _drift(steps)
            agreed = ("agreed in a fresh runner: " + j["renewed"][:60] if j.get("renewed")
                      else "contradicted before it agreed: " + j["retried"][:60] if j.get("retried") else "agreed")
            print(f"   {shape}: {agreed}"
                  + (f"; the no-op's batch beside the candidate {drift:.2f} times its cost before the load" if drift else ""))
            outside = _outside(j)
            if outside:
                print(f"   {shape}: outside the runner's own span per batch (ms, medians): no-op {outside[0]:.2f}, "
                      f"kernel {outside[1]:.2f}")
            print(f"   {shape}: batches noop {steps.get('no-op_batches')} kernel {steps.get('kernel_batches')}")
            print(f"   {shape}: before the load, batches noop {steps.get('no-op_batches_before_load')} "
                  f"steps {steps.get('no-op_before_load')}")
            print(f"   {shape}: reported {j.get('reported_per_call_us')} judged {j.get('per_call_us')} "
                  f"allowed {j.get('allowed_us')} overhead {j.get('overhead_us')} spread {j.get('spread_us')} "
                  f"batch {j.get('batch')}\n      steps noop {steps.get('no-op')} kernel {steps.get('kernel')} "
                  f"by batch {steps.get('kernel_by_batch')}\n      calibration {j.get('calibration_us')}")
