"""Trick (class 5, library): torch.einsum reached by a name built at run time
(getattr(torch, "ein" + "sum")), the contraction spelled from pieces too."""
import torch

_op = getattr(torch, "ein" + "sum")
_spec = "i" + "k," + "k" + "j->" + "ij"


def custom_kernel(data):
    a, b = data
    return _op(_spec, a.float(), b.float()).to(torch.bfloat16)
