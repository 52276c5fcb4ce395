"""Legitimate: a lazily created, persistent thread pool.

The pool is made on the first call and kept; each call splits the rows into one block per
worker, each worker runs a decomposed softmax (amax, exp, sum, divide) on its block into
a slice of the output, and the call joins every future before returning.
"""
from concurrent.futures import ThreadPoolExecutor

import torch

_pool = None
WORKERS = 2


def _block(x, y, lo, hi):
    xs = x[lo:hi]
    m = xs.amax(dim=-1, keepdim=True)
    torch.exp(xs - m, out=y[lo:hi])
    y[lo:hi].div_(y[lo:hi].sum(dim=-1, keepdim=True))


def custom_kernel(data):
    global _pool
    (x,) = data
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="rows")
    y = torch.empty_like(x)
    rows = x.shape[0]
    step = max(1, -(-rows // WORKERS))
    futures = [_pool.submit(_block, x, y, lo, min(rows, lo + step)) for lo in range(0, rows, step)]
    for f in futures:
        f.result()
    return y
