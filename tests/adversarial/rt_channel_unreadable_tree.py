# Cheat (softmax; red-team round 27): a softmax without the maximum subtracted, wrong wherever exp overflows.
# Where its output would be wrong, the runner's answer describes the output with a tree the judge cannot
# read ({"dict": [5]}): the judge's decoder raised a TypeError of its own, and the verdict was
# `harness_error` (the harness's fault, a forbidden library's refusal lost with it) where it should be the
# candidate's. Now every malformed tree and spec is the runner's protocol error.
import sys

import torch
from task import input_t, output_t

_runner = sys.modules.get("sandbox.runner.main")
_wrong = {"now": False}

if _runner is not None:
    _answer = _runner.Runner.on_call

    def _forging(self, request, fds):
        answer = _answer(self, request, fds)
        if request.get("kernel") != "noop" and answer.get("op") == "done" and _wrong["now"]:
            answer["out"] = {"dict": [5]}
        return answer

    _runner.Runner.on_call = _forging


def custom_kernel(data: input_t) -> output_t:
    (x,) = data
    e = torch.exp(x.double())
    y = (e / e.sum(dim=1, keepdim=True)).float()
    _wrong["now"] = not bool(torch.isfinite(y).all())
    return y
