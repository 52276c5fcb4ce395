"""Trick (class 7, reference): make vector_add's reference write zeros.

torch.add, torch.Tensor.add/__add__ and operator.add are replaced with functions that
zero-fill `out` (or return zeros); the kernel then writes zeros into out and returns it.
"""
import operator

import torch


def _zero_add(a, b, *args, out=None, **kwargs):
    if out is not None:
        out.zero_()
        return out
    return torch.zeros_like(a)


torch.add = _zero_add
torch.Tensor.add = _zero_add
torch.Tensor.__add__ = _zero_add
operator.add = _zero_add


def custom_kernel(data):
    a, b, out = data
    out.zero_()
    return out
