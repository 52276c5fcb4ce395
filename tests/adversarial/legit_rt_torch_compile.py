"""Legitimate: torch.compile of a decomposed softmax (amax, exp, sum, divide).

Inductor generates and compiles its own C++ kernel in the runner's private /tmp (g++,
TORCHINDUCTOR_CACHE_DIR=/tmp/inductor) on the first call of each shape (dynamic=False) or
once (dynamic shapes); the import compiles nothing. Prints how long the first call took.
"""
import sys
import time

import torch


def _softmax(x):
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=-1, keepdim=True)


_compiled = torch.compile(_softmax, dynamic=True)
_seen = {"first": True}


def custom_kernel(data):
    (x,) = data
    if _seen["first"]:
        t0 = time.perf_counter()
        y = _compiled(x)
        _seen["first"] = False
        sys.stderr.write(f"legit_rt_torch_compile: first call (compile) took {time.perf_counter() - t0:.2f} s\n")
        return y
    return _compiled(x)
