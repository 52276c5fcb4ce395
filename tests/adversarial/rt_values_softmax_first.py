"""Numerics (class 8): softmax that subtracts each row's FIRST element instead of its max.

Ordinary rows (spread ~2 around the row's offset) keep x - x[0] small; a wide spread within
a row (x50) makes exp(x - x[0]) overflow float32 wherever an element exceeds the first by
more than ~88.
"""
import torch


def custom_kernel(data):
    (x,) = data
    e = torch.exp(x - x[..., :1])
    return e / e.sum(dim=-1, keepdim=True)
