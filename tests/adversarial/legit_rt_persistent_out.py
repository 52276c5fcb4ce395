"""Legitimate: persistent output buffers reused across calls.

One output tensor per shape is allocated once and overwritten (fully) on every call, then
returned; the harness copies what it needs before the next call.
"""
import torch

_out = {}


def custom_kernel(data):
    (x,) = data
    y = _out.get(tuple(x.shape))
    if y is None:
        y = _out[tuple(x.shape)] = torch.empty_like(x)
    m = x.amax(dim=-1, keepdim=True)
    torch.sub(x, m, out=y)
    y.exp_()
    y.div_(y.sum(dim=-1, keepdim=True))
    return y
