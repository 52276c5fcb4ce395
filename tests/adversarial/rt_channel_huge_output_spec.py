"""Trick (class 2, channel): describe an output the judge must allocate. The softmax is honest; the
first check call's output is described as a view with zero strides over one element of the arena,
of shape 2^20 x 2^20: it lies inside the arena, and a judge copying it out would allocate 4 TiB (the
evaluation ended in a harness error, which blames no candidate). Found by a red-team helper on
2026-11-25. Expected: rejected, protocol (an output larger than the whole arena)."""
import sys
import torch

SHAPE = [1 << 20, 1 << 20]  # 4 TiB of float32 when materialised


def custom_kernel(data):
    (x,) = data
    m = x.max(dim=-1, keepdim=True).values
    e = (x - m).exp()
    return e / e.sum(dim=-1, keepdim=True)


_rm = sys.modules.get("sandbox.runner.main")
if _rm is not None:
    _orig_call = _rm.Runner.on_call
    _done = {"n": 0}

    def on_call(self, request, fds):
        reply = _orig_call(self, request, fds)
        if _done["n"] == 0 and reply.get("op") == "done" and isinstance(reply.get("out"), dict) and "tensor" in reply["out"]:
            _done["n"] += 1
            spec = dict(reply["out"]["tensor"])
            spec["shape"] = SHAPE
            spec["stride"] = [0] * len(SHAPE)
            reply["out"] = {"tensor": spec}
        return reply

    _rm.Runner.on_call = on_call
