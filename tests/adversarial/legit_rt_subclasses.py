"""Legitimate: a registry of kernel classes discovered with __subclasses__().

Each subclass of Variant says which shapes it handles; the kernel picks the first one that
applies (narrow rows -> one vectorised pass, wide rows -> a chunked pass). Nothing but the
registry is introspected.
"""
import torch


class Variant:
    @staticmethod
    def applies(x):
        return False

    @staticmethod
    def run(x):
        raise NotImplementedError


class Narrow(Variant):
    @staticmethod
    def applies(x):
        return x.shape[-1] <= 2048

    @staticmethod
    def run(x):
        m = x.amax(dim=-1, keepdim=True)
        e = torch.exp(x - m)
        return e / e.sum(dim=-1, keepdim=True)


class Wide(Variant):
    @staticmethod
    def applies(x):
        return True

    @staticmethod
    def run(x):
        y = torch.empty_like(x)
        for lo in range(0, x.shape[0], 16):
            xs = x[lo:lo + 16]
            m = xs.amax(dim=-1, keepdim=True)
            e = torch.exp(xs - m)
            y[lo:lo + 16] = e / e.sum(dim=-1, keepdim=True)
        return y


def _registry():
    return [cls for cls in Variant.__subclasses__()]


def custom_kernel(data):
    (x,) = data
    for cls in _registry():
        if cls.applies(x):
            return cls.run(x)
    raise RuntimeError("no variant applies")
