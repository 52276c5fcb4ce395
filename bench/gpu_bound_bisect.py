"""The GPU bound with parts of the sandbox switched off: one fp8 Triton evaluation, and per shape what the judge saw
per call beyond the runner's figure (median and range over the shapes).

    TAG=no-isolation KS_ISOLATION=off python bench/gpu_bound_bisect.py
    TAG=no-cgroups KS_CGROUPS=off python bench/gpu_bound_bisect.py

Run on a GPU host (the device tool); the thirteenth session's figures in docs/BENCHMARKS.md came from it.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, ".")
from sandbox.evaluator import EvalOptions, evaluate  # noqa: E402
from sandbox.problem import load_problem  # noqa: E402
seed = load_problem("fp8_blockscale_gemm", "cuda").seed_for("cuda", "triton")
t = time.time()
v = evaluate("fp8_blockscale_gemm", seed, EvalOptions(target="cuda", timing={"budget_s": 0.3, "warmup_s": 0.02}))
tag = os.environ.get("TAG", "default")
excess = []
for b in v.benchmarks:
    j = b.judge or {}
    if j.get("per_call_us"):
        excess.append(statistics.median(j["per_call_us"]) - b.median_us)
viol = v.integrity.violation
if viol is not None and viol.detail:
    j = viol.detail.get("judge", {})
    if j.get("per_call_us") and j.get("reported_per_call_us"):
        excess.append(statistics.median(j["per_call_us"]) - statistics.median(j["reported_per_call_us"]))
print(f"{tag}: {v.status.value} in {time.time() - t:.0f}s; excess per call over {len(excess)} shapes: median "
      f"{statistics.median(excess):.0f} us, range {min(excess):.0f}..{max(excess):.0f}; "
      f"isolation: {str(v.integrity.protections.get('runner'))[:80]}", flush=True)
