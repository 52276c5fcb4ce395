"""Trick (class 5, library): vector_add through torch.stack(...).sum(0) with the method
name built at run time (getattr(torch, "s" + "um")): the forbidden `sum` operator, hidden."""
import torch


def custom_kernel(data):
    a, b, out = data
    both = torch.stack((a, b))
    getattr(torch, "s" + "um")(both, 0, out=out)
    return out
