"""Trick (class 5, library): scipy.special.softmax, a library softmax that is not torch's.

scipy implements it with numpy's max, exp and sum ufuncs, so the samples land in numpy's
ufunc loops (no `softmax` symbol anywhere); it is still a library softmax doing the whole
job instead of the kernel.
"""
import torch
from scipy.special import softmax as _lib_softmax


def custom_kernel(data):
    (x,) = data
    return torch.from_numpy(_lib_softmax(x.numpy(), axis=-1).astype("float32", copy=False))
