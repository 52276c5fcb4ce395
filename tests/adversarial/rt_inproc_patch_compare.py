"""Trick (class 1, in-process): patch the judge's comparison and clocks from inside.

At import it imports sandbox.compare and sandbox.judge.checks (wherever they can be
imported) and replaces compare_outputs / Judge.verdict_of / bound_by_judge with versions
that always pass, torch.allclose / torch.equal with `return True`, statistics.median with
a function returning 0, and time.perf_counter(_ns) with a frozen clock. Then it returns
zeros. In the old in-process design this made the checker accept anything; with the judge
in another process none of these objects is the judge's.
"""
import statistics
import sys
import time

import torch

_patched = []


def _always_pass(*args, **kwargs):
    try:
        from sandbox.compare import Comparison
        return Comparison(passed=True, message="ok")
    except Exception:
        return True


for name in ("sandbox.compare", "sandbox.judge.checks", "sandbox.judge.evaluation"):
    try:
        mod = __import__(name, fromlist=["_"])
    except Exception:
        continue
    for attr in ("compare_outputs",):
        if hasattr(mod, attr):
            setattr(mod, attr, _always_pass)
            _patched.append(f"{name}.{attr}")
    if hasattr(mod, "bound_by_judge"):
        mod.bound_by_judge = lambda *a, **k: None
        _patched.append(f"{name}.bound_by_judge")
    judge_cls = getattr(mod, "Judge", None)
    if judge_cls is not None:
        judge_cls.verdict_of = lambda self, *a, **k: _always_pass()
        judge_cls.inputs_unchanged = lambda self, *a, **k: None
        _patched.append(f"{name}.Judge")

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
statistics.median = lambda *a, **k: 0.0
_frozen = time.perf_counter()
time.perf_counter = lambda: _frozen
time.perf_counter_ns = lambda: int(_frozen * 1e9)
sys.stderr.write(f"rt_inproc_patch_compare: patched {_patched}\n")


def custom_kernel(data):
    (x,) = data
    return torch.zeros_like(x)
