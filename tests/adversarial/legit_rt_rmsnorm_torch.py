"""Legitimate: RMSNorm in plain torch elementwise ops plus a sum (no mean, rsqrt, norm or
var, which this problem forbids): float32 sum of squares, 1 / sqrt, one rounding."""
import torch

EPS = 1e-6


def custom_kernel(data):
    x, weight, out = data
    xf = x.float()
    ss = xf.pow(2).sum(dim=-1, keepdim=True)
    inv = 1.0 / torch.sqrt(ss / x.shape[-1] + EPS)
    out.copy_((xf * inv * weight.float()).to(torch.bfloat16))
    return out
