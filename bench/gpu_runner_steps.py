"""Where a GPU runner's host time goes, the no-op against a problem's seed, outside the judge and its sandbox.

    python bench/gpu_runner_steps.py fp8_blockscale_gemm triton "{'m': 1024, 'n': 3072, 'k': 1536}" [MODES]

MODES, comma-separated: `pinned` (the runner's cores), `seccomp` (its system-call filter), `judge` (another
process doing device work between batches, then the runner's settle), or `plain` (none).

Does what sandbox/runner/main.py does for a batch of 16 calls on recipes, with the same functions: every
call's inputs first, then per call a sync, the timed call (flush, sync, events, the call, sync) and the
digest; with the sync before each call and without it. Prints per batch the inputs' and the calls' host
time (median [range]) and per call each step's median [quartiles]. Set beside the runner's own account in
a verdict (`runner_steps_us`), it says whether the judge's environment adds to the runner's work."""
import ast
import importlib.util
import os
import random
import statistics
import sys
import time

import torch

sys.path.insert(0, ".")
from sandbox.problem import load_problem  # noqa: E402
from sandbox.runner.main import _noop  # noqa: E402
from sandbox.shared.arena import tensors  # noqa: E402
from sandbox.shared.blend import apply_recipe, digest  # noqa: E402
from sandbox.shared.clock import timed_on_device  # noqa: E402

name, variant = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None)
params = ast.literal_eval(sys.argv[3])
spec = load_problem(name, "cuda")
spec.bind()
seed_path = spec.seed_for("cuda", variant)
module_spec = importlib.util.spec_from_file_location("seed_kernel", seed_path)
seed = importlib.util.module_from_spec(module_spec)
module_spec.loader.exec_module(seed)
bases = [dict(tensors(spec.generate_input(dict(params, seed=s), "cuda"))) for s in (11, 12)]
first = spec.generate_input(dict(params, seed=11), "cuda")
# The preallocated output: the last input the generator leaves all zeros.
buffers = [p for p, t in tensors(first) if t.is_floating_point() and t.element_size() > 1 and not t.any()][-1:]
flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
BATCH = 16
slots = [spec.generate_input(dict(params, seed=11), "cuda") for _ in range(BATCH)]  # the runner's work slots
rng = random.Random(5)


def recipe():
    mix = {}
    for p, t in bases[0].items():
        if p in buffers or not t.is_floating_point():
            continue
        mix[p] = [rng.randrange(1, 4) * 128 if t.numel() > 1024 else 1, 0.25 + 0.5 * rng.random()]
    return {"first": rng.randrange(2), "mix": mix}


def noop(data):
    """The runner's own no-op: the preallocated output, else a copy of the largest input."""
    return _noop(data, 0, buffers[0] if buffers else None)


def one_batch(fn, pre_sync=True):
    if judge is not None:  # the other process's turn on the device first, then the runner's settle
        judge.stdin.write("go\n")
        judge.stdin.flush()
        judge.stdout.readline()
        flush[:1].zero_()
        torch.cuda.synchronize()
    steps = []
    t0 = time.perf_counter_ns()
    for work in slots:
        apply_recipe(dict(tensors(work)), bases, recipe(), buffers)
    prepared = time.perf_counter_ns()
    for work in slots:
        a = time.perf_counter_ns()
        if pre_sync:
            torch.cuda.synchronize()
        b = time.perf_counter_ns()
        us, out = timed_on_device(fn, work, flush)
        c = time.perf_counter_ns()
        found = [t for _, t in tensors(out)]
        digest(found)
        d = time.perf_counter_ns()
        steps.append(((b - a) / 1e3, (c - b) / 1e3, us, (d - c) / 1e3))
    end = time.perf_counter_ns()
    return (prepared - t0) / 1e3, (end - prepared) / 1e3, steps


def summary(rows):
    """Per column: the median [lower quartile-upper quartile]."""
    parts = []
    for col in zip(*rows):
        low, _, high = statistics.quantiles(col, n=4)
        parts.append(f"{statistics.median(col):7.1f} [{low:6.1f}-{high:6.1f}]")
    return " ".join(parts)


# The judge's part between batches: device work in another process (a check: a product and a sum).
OTHER = """
import sys, torch
x = torch.randn(2048, 2048, device="cuda")
for line in sys.stdin:
    (x @ x).sum().item()
    print("done", flush=True)
"""


MODES = sys.argv[4].split(",") if len(sys.argv) > 4 else ["plain"]
judge = None
if "judge" in MODES:  # another process uses the device between batches, as the judge's checks do
    import subprocess

    judge = subprocess.Popen([sys.executable, "-c", OTHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
if "pinned" in MODES:  # the runner is kept on the quicker half of the cores (sandbox/envinfo.py)
    from sandbox.envinfo import quickest_cores

    cores = quickest_cores()
    if cores:
        os.sched_setaffinity(0, cores)
    print("cores:", sorted(cores) if cores else "all")
if "seccomp" in MODES:
    from sandbox.runner import seccomp

    print("seccomp:", seccomp.install(deferred_work=False, keep_cores=True))

print("modes:", MODES)
kernels = {"noop": noop, "kernel": seed.custom_kernel}
for pre_sync in (True, False):
    for _ in range(3):
        for fn in kernels.values():
            one_batch(fn, pre_sync)
    record = {k: [] for k in kernels}
    for _ in range(12):
        for k, fn in kernels.items():
            record[k].append(one_batch(fn, pre_sync))
    print(f"pre-call sync {pre_sync}: per batch of {BATCH}: prepare us, calls us | "
          "per call: sync, timed call (host), events, digest")
    for k, batches in record.items():
        prep = [b[0] for b in batches]
        calls = [b[1] for b in batches]
        per_call = [s for b in batches for s in b[2]]
        print(f"  {k:7s} prepare {statistics.median(prep):8.1f} [{min(prep):8.1f}-{max(prep):8.1f}] "
              f"calls {statistics.median(calls):8.1f} [{min(calls):8.1f}-{max(calls):8.1f}] | {summary(per_call)}")
