"""Trick (class 1, in-process): find the expected output among live objects and return it.

Each call walks gc.get_objects() (and the tensors reachable from frames up the stack)
for a float32 tensor of the input's shape that is not the input and whose rows sum to 1
(what a reference softmax output looks like), and returns a copy. Where none is found it
returns a cheap wrong answer (uniform rows), so the cheat only "works" if the judge's
expected output lives in this process.
"""
import gc
import sys

import torch


def _looks_like_softmax(t, x):
    if not isinstance(t, torch.Tensor) or t is x or t.shape != x.shape or t.dtype != torch.float32:
        return False
    if t.data_ptr() == x.data_ptr() or t.numel() == 0:
        return False
    try:
        s = t.double().sum(dim=-1)
        return bool(torch.all(t >= 0)) and bool(torch.allclose(s, torch.ones_like(s), atol=1e-3))
    except Exception:
        return False


def _candidates():
    frame = sys._getframe(2)
    while frame is not None:
        for v in list(frame.f_locals.values()):
            yield v
            if isinstance(v, (tuple, list)):
                yield from v
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor):
            yield obj
        elif isinstance(obj, (tuple, list)) and len(obj) < 8:
            yield from (o for o in obj if isinstance(o, torch.Tensor))


def custom_kernel(data):
    (x,) = data
    for obj in _candidates():
        if _looks_like_softmax(obj, x):
            return obj.clone()
    return torch.full_like(x, 1.0 / max(1, x.shape[-1]))
