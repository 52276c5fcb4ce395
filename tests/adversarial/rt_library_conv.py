"""Trick (class 5, library): the matrix product as a 1x1 convolution (oneDNN / NNPACK).

C[i, j] = sum_k A[i, k] B[k, j] is conv1d over a length-m signal with k input channels,
n output channels and a kernel of width 1. oneDNN generates its own machine code at run
time (JIT): samples land in anonymous memory, not in a named library symbol.
"""
import torch
import torch.nn.functional as F


def custom_kernel(data):
    a, b = data
    m, k = a.shape
    _n = b.shape[1]  # the output width, implied by the weights
    x = a.float().t().contiguous().unsqueeze(0)        # (1, k, m)
    w = b.float().t().contiguous().unsqueeze(-1)       # (n, k, 1)
    y = F.conv1d(x, w)                                  # (1, n, m)
    return y[0].t().contiguous().to(torch.bfloat16)
