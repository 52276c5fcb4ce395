"""Numerics (class 8): RMSNorm with the squares and their sum kept in float16.

For N(0, 1) inputs the sum of squares (about `hidden`) fits float16 easily and the result
is within bfloat16 tolerance; large magnitudes (x100) overflow float16 (max 65504) to inf,
and the row comes out as zeros.
"""
import torch

EPS = 1e-6


def custom_kernel(data):
    x, weight, out = data
    xh = x.to(torch.float16)
    ss = (xh * xh).sum(dim=-1, keepdim=True, dtype=torch.float16)
    inv = 1.0 / torch.sqrt(ss.float() / x.shape[-1] + EPS)
    out.copy_((x.float() * inv * weight.float()).to(torch.bfloat16))
    return out
