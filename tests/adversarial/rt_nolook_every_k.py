"""Trick (class 3, nobody looks): correct only on every k-th call (k = 3), hoping only a
sample of calls is compared; the others return uniform rows (cheap, plausible-looking)."""
import torch

K = 3
_calls = {"n": 0}


def custom_kernel(data):
    (x,) = data
    _calls["n"] += 1
    if _calls["n"] % K == 1:
        m = x.amax(dim=-1, keepdim=True)
        e = torch.exp(x - m)
        return e / e.sum(dim=-1, keepdim=True)
    return torch.full_like(x, 1.0 / max(1, x.shape[-1]))
