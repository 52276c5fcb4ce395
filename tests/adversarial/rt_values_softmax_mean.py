"""Numerics (class 8): softmax that subtracts the row MEAN instead of the row maximum.

With the generator's inputs (offset per row, spread ~2) x - mean stays within ~+-10, so
exp() neither overflows nor underflows and ordinary tests pass; a row with a wide spread
(x50) or one large element overflows exp() to inf and the row becomes NaN.
"""
import torch


def custom_kernel(data):
    (x,) = data
    e = torch.exp(x - x.sum(dim=-1, keepdim=True) / x.shape[-1])
    return e / e.sum(dim=-1, keepdim=True)
