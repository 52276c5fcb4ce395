"""Trick (class 3, nobody looks): say every kept output was overwritten, so that no call is checked.

A runner keeps each call's output on its device until the judge has drawn which calls it checks;
a kernel that returns one buffer from every call overwrites them, and the runner answers such calls
as `overwritten` (not deliverable). This kernel patches the runner so that every answer says so,
and writes nothing at all into its output in batches (every timed call).

Stopped: an overwritten output is allowed only in a kernel's first batch, which is never timed;
in a timed batch it is `output-changed-after-return`. Run with `resident_inputs=True` on the CPU
(the GPU's way of feeding calls) or on a GPU.
"""
import sys

import torch

_batch = {"in": False}
_runner = sys.modules.get("sandbox.runner.main")
if _runner is not None:
    _on_batch = _runner.Runner.on_batch

    def _claiming(self, request, fds):
        _batch["in"] = True
        try:
            reply = _on_batch(self, request, fds)
        finally:
            _batch["in"] = False
        for answer in reply.get("results") or []:
            answer["overwritten"] = True
        return reply

    _runner.Runner.on_batch = _claiming


def custom_kernel(data):
    a, b, out = data
    if not _batch["in"]:  # the check phase's single calls are answered honestly
        torch.add(a, b, out=out)
    return out
