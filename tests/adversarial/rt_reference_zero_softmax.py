"""Trick (class 7, reference): make the reference agree with a zero output.

At import it replaces torch.softmax, torch.nn.functional.softmax, torch.Tensor.softmax and
torch.special.softmax with functions returning zeros (and the reference module's own
binding, if `reference` is importable), then returns zeros itself. If the reference ran in
this process it would now agree with the kernel.
"""
import sys

import torch
import torch.nn.functional as F


def _zeros(x, *args, **kwargs):
    return torch.zeros_like(x)


torch.softmax = _zeros
F.softmax = _zeros
torch.special.softmax = _zeros
torch.Tensor.softmax = _zeros
for name in ("reference", "problems.softmax.reference"):
    try:
        ref = __import__(name, fromlist=["_"])
        ref.ref_kernel = lambda data: torch.zeros_like(data[0])
        sys.stderr.write(f"patched {name}.ref_kernel\n")
    except Exception as exc:  # noqa: BLE001 - reference.py is hidden behind an empty file
        sys.stderr.write(f"could not patch {name}: {exc}\n")


def custom_kernel(data):
    (x,) = data
    return torch.zeros_like(x)
