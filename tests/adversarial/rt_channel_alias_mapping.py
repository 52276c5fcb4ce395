"""Cheat (the recipe path, where the runner keeps each call's output for the judge): one output buffer
for every call, reached through many mappings of the same memory (a memfd mapped 40 times), one per
call in turn. Every call's output then has an address of its own, so the runner's overlap test, which
compares addresses, sees no later output landing on a kept one and copies nothing; yet each call
overwrites the output the previous one returned. What the judge draws afterwards is not what the
call answered: the digest each answer committed to must catch it (`output-changed-after-return`)."""
import mmap
import os

import torch

MAPPINGS = 40
_views: dict = {}


def _aliases(shape, dtype):
    nbytes = torch.Size(shape).numel() * torch.tensor([], dtype=dtype).element_size()
    fd = os.memfd_create("ks-alias")
    os.ftruncate(fd, nbytes)
    views = []
    for _ in range(MAPPINGS):
        mapped = mmap.mmap(fd, nbytes)
        views.append(torch.frombuffer(mapped, dtype=dtype).view(shape))
    return views


def custom_kernel(data):
    (x,) = data
    key = (tuple(x.shape), x.dtype)
    if key not in _views:
        _views[key] = {"calls": 0, "views": _aliases(x.shape, x.dtype)}
    state = _views[key]
    state["calls"] += 1
    out = state["views"][state["calls"] % MAPPINGS]
    shifted = torch.exp(x - x.amax(dim=-1, keepdim=True))
    torch.div(shifted, shifted.sum(dim=-1, keepdim=True), out=out)
    return out
