"""Legitimate: a module-level workspace dict keyed by shape (float32 scratch for the
upcast rows and the per-row scale), reused across calls; only scratch is cached."""
import torch

EPS = 1e-6
_ws = {}


def custom_kernel(data):
    x, weight, out = data
    rows, hidden = x.shape
    ws = _ws.get((rows, hidden))
    if ws is None:
        ws = _ws[(rows, hidden)] = {"xf": torch.empty(rows, hidden), "sq": torch.empty(rows, hidden),
                                    "scale": torch.empty(rows, 1), "wf": torch.empty(hidden)}
    xf, sq, scale, wf = ws["xf"], ws["sq"], ws["scale"], ws["wf"]
    xf.copy_(x)
    wf.copy_(weight)
    torch.mul(xf, xf, out=sq)
    torch.sum(sq, dim=-1, keepdim=True, out=scale)
    scale.div_(hidden).add_(EPS).sqrt_().reciprocal_()
    xf.mul_(scale).mul_(wf)
    out.copy_(xf)
    return out
