"""Trick (class 5, library, GPU): torch's `linear` on a transposed weight, a product no kernel of its own wrote.

On a GPU host without perf, no operator recorder and no sample watches the runner: cuBLASLt's pages mapped
into it after the candidate loaded are what gives the library away (sandbox/judge/footprint.py).
Expected: `rejected`, forbidden-op.
"""
import torch

_product = getattr(torch.nn.functional, "lin" + "ear")


def custom_kernel(data):
    a, b = data
    return _product(a, b.t())
