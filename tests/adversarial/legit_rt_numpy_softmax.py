"""Legitimate: softmax written with numpy's max, exp and sum (not a library softmax);
float32 all the way, the result wrapped back into a new torch tensor."""
import numpy as np
import torch


def custom_kernel(data):
    (x,) = data
    a = x.numpy()
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    e /= e.sum(axis=-1, keepdims=True, dtype=np.float32)
    return torch.from_numpy(e.astype(np.float32, copy=False))
