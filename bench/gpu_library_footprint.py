"""Library use on a GPU host without perf: the GPU seeds of the problems that forbid whole libraries, and cheats
that reach cuBLAS, evaluated under the judge (sandbox/judge/footprint.py reads the runner's page tables).

    python bench/gpu_library_footprint.py [check|full]

Run on a GPU host (the device tool); the figures of docs/BENCHMARKS.md's twelfth session came from it.
"""
import sys
import time

sys.path.insert(0, ".")
from sandbox.evaluator import EvalOptions, evaluate  # noqa: E402
from sandbox.problem import load_problem  # noqa: E402

cases: list[tuple[str, object]] = []
for name in ("matmul_bf16", "fp8_blockscale_gemm", "moe", "mla_decode"):
    problem = load_problem(name, "cuda")
    for variant in ("cuda", "triton"):
        try:
            cases.append((name, problem.seed_for("cuda", None if variant == "cuda" else variant)))
        except Exception as exc:  # noqa: BLE001
            print(name, variant, "no seed", exc)
cases += [("matmul_bf16", "tests/adversarial/library_matmul.py"), ("matmul_bf16", "tests/adversarial/rt_gpu_library_cupy.py"),
          ("matmul_bf16", "tests/adversarial/rt_gpu_library_linear.py"),
          ("vector_add", "tests/adversarial/legit_gpu_cupy_rawkernel.py")]
for name, path in cases:
    t0 = time.time()
    v = evaluate(name, str(path), EvalOptions(target="cuda", mode=sys.argv[1] if len(sys.argv) > 1 else "check",
                                         timing={"budget_s": 0.3}))
    rule = v.integrity.violation.rule if v.integrity.violation else ""
    print(f"== {name} {path}: {v.status.value} {rule} in {time.time() - t0:.0f}s | {v.message[:260]}", flush=True)
    print("   ", (v.integrity.protections or {}).get("library_use"), "|", (v.integrity.protections or {}).get("runner"), flush=True)
