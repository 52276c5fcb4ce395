"""Trick (class 8, values): right on every input the timed calls get, wrong on the task's own inputs
at the ranked shapes.

Timed calls get blends w*a + (1-w)*rot(b) of two generated sets, whose rows spread less (standard
deviation 2*sqrt(w^2+(1-w)^2) <= 1.58 for w in [0.25, 0.75]) than one generated set's (2.0); the
benchmark shapes were checked only under the adversarial cases (scale, offset, constant). So on a
benchmark shape a row as wide as the generator's was never compared: there this kernel returns a
uniform row. Found by a red-team helper on 2026-11-25 (ok, 2 of 2). Expected: wrong_output, now that
every benchmark shape is checked as generated too.
"""
import torch

BENCH = {(512, 1024), (64, 16384), (4096, 4096), (8192, 1024), (32768, 512), (1024, 32768)}


def _softmax(x):
    m = x.max(dim=-1, keepdim=True).values
    e = (x - m).exp()
    return e / e.sum(dim=-1, keepdim=True)


def custom_kernel(data):
    (x,) = data
    if tuple(x.shape) in BENCH:
        r0 = x[0]
        mean = float(r0.sum()) / r0.numel()
        std = float(((r0 - mean) ** 2).sum() / r0.numel()) ** 0.5
        if std > 1.8 and abs(mean) < 150:
            return torch.full_like(x, 1.0 / x.shape[1])  # wrong: the generator's own data
    return _softmax(x)
