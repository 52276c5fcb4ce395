"""Legitimate: generator-based chunking. A generator yields row blocks of about 256 KB;
each block is normalised into its slice of a new output (decomposed softmax)."""
import torch

BLOCK_BYTES = 256 * 1024


def _blocks(rows, cols):
    step = max(1, BLOCK_BYTES // max(1, 4 * cols))
    lo = 0
    while lo < rows:
        hi = min(rows, lo + step)
        yield lo, hi
        lo = hi


def custom_kernel(data):
    (x,) = data
    y = torch.empty_like(x)
    for lo, hi in _blocks(*x.shape):
        xs = x[lo:hi]
        e = torch.exp(xs - xs.amax(dim=-1, keepdim=True))
        y[lo:hi] = e / e.sum(dim=-1, keepdim=True)
    return y
