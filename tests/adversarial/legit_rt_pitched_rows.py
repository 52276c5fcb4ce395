"""Legitimate (softmax): each row's result lies in a buffer whose rows are a fixed, generous pitch apart
(131,072 elements, sized for the widest row the kernel would take, as pitched allocations are), and the
kernel returns the (rows, cols) slice of it. The values are right; the slice spans its rows times the
pitch, about 128 times the bytes it holds, most of it never touched (red-team round 30, refused as no
output of the call while the judge read a view's whole span)."""

import torch

PITCH = 1 << 17


def custom_kernel(data):
    (x,) = data
    rows, cols = x.shape
    pitched = torch.empty(rows, max(PITCH, cols), dtype=x.dtype)
    out = pitched[:, :cols]
    shifted = x - x.amax(dim=-1, keepdim=True)
    torch.exp(shifted, out=out)
    out /= out.sum(dim=-1, keepdim=True)
    return out
