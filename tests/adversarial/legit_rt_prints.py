"""Legitimate: a chatty kernel. It prints ~1 MB at import and ~20 lines per call to both
stdout and stderr (progress, row statistics); the work is a decomposed softmax."""
import sys

import torch

for i in range(10000):
    print(f"[import] warming table entry {i:5d} " + "x" * 80)
_calls = {"n": 0}


def custom_kernel(data):
    (x,) = data
    _calls["n"] += 1
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    y = e / e.sum(dim=-1, keepdim=True)
    for r in range(min(10, x.shape[0])):
        print(f"call {_calls['n']} row {r}: max={float(m[r]):.3f}")
        print(f"call {_calls['n']} row {r}: ok", file=sys.stderr)
    return y
