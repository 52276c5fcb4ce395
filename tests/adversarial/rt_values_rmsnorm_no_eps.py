"""Numerics (class 8): RMSNorm that leaves out eps (and so divides by the bare RMS).

With N(0, 1) inputs mean(x^2) ~ 1 and eps = 1e-6 is invisible; with small magnitudes
(x1e-3) mean(x^2) ~ 1e-6 is comparable to eps and the output is ~40% too large.
"""
import torch


def custom_kernel(data):
    x, weight, out = data
    xf = x.float()
    ms = (xf * xf).sum(dim=-1, keepdim=True) / x.shape[-1]
    out.copy_((xf / torch.sqrt(ms) * weight.float()).to(torch.bfloat16))
    return out
