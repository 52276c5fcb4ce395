"""Legitimate: first-call autotuning.

On the first call of a shape three variants are each timed on that call's input (two runs
each) and the fastest is kept for the shape; the answer returned is the chosen variant's
on the current input. Later calls of the shape run only the winner.
"""
import time

import numpy as np
import torch


def _torch_full(x):
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=-1, keepdim=True)


def _torch_inplace(x):
    y = x - x.amax(dim=-1, keepdim=True)
    y.exp_()
    return y.div_(y.sum(dim=-1, keepdim=True))


def _numpy(x):
    a = x.numpy()
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    e /= e.sum(axis=-1, keepdims=True)
    return torch.from_numpy(e)


VARIANTS = [_torch_full, _torch_inplace, _numpy]
_best = {}


def custom_kernel(data):
    (x,) = data
    key = tuple(x.shape)
    fn = _best.get(key)
    if fn is None:
        timings = []
        for v in VARIANTS:
            best = float("inf")
            for _ in range(2):
                t0 = time.perf_counter()
                v(x)
                best = min(best, time.perf_counter() - t0)
            timings.append((best, v))
        fn = _best[key] = min(timings, key=lambda t: t[0])[1]
    return fn(x)
