"""The sets a benchmark shape's calls are blended from, as the judge holds them while it times the shape.

Two sets are drawn from secret seeds for a shape (`prepare`); every call blends them anew by a secret
recipe (sandbox/shared/blend.py). On a GPU the runner holds its own copy and builds each call's inputs
on its device (`hand_over`). The sets themselves are drawn anew between batches and as each attempt
at the shape's timing starts (`SetRenewal`), so that nothing a kernel learns of them serves it later.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sandbox.judge.checks import Judge, output_bytes
from sandbox.shared.arena import align, tensors

# Every call of a batch blends the shape's two generated sets. Red-team round 16 learnt the sets from six
# calls of its untimed warm-up batch and answered each later call of a 256^3 matmul from products cached
# for every rotation of them: O(m*n) work a call instead of O(m*n*k), correct outputs, 2.9x the honest
# kernel (tests/adversarial/rt_memo_blend_family.py). The sets are drawn anew after a batch whenever
# drawing them has so far cost no more than this share of the shape's timing: after nearly every batch
# where they are small, which is where such a cache pays; seldom where they are large (a product cached
# per rotation of large sets does not fit in memory), so that drawing never dominates a verdict's time.
RENEWAL_SHARE = 0.25

MAX_BATCH = 16
# Bytes of inputs and outputs one batch may hold: slots in the arena on the CPU, call tensors on a GPU.
BATCH_BYTES = {"cpu": 64 << 20, "gpu": 2 << 30}

@dataclass
class Shape:
    """What the judge holds while it times one shape."""

    key: str
    params: dict[str, Any]
    bases: list[Any]  # two input sets from secret seeds; every call blends them anew
    buffers: list[str]  # paths of preallocated outputs
    out_bytes: int
    in_bytes: int
    batch: int
    drawn_s: float = 0.0  # what drawing its first sets cost
    seen: bool = False  # whether a batch has used its sets (the runner, and code loaded there, saw them)


def batch_size(judge: Judge, in_bytes: int, out_bytes: int) -> int:
    budget = BATCH_BYTES["cpu" if judge.device == "cpu" else "gpu"]
    return max(1, min(MAX_BATCH, budget // max(1, in_bytes + out_bytes)))


def prepare(judge: Judge, params: dict[str, Any], batch: int | None = None) -> Shape:
    """Two fresh sets for a shape, and (GPU) the runner's copy of them with a slot per batch call."""
    started = time.perf_counter()
    bases = [judge.fresh(params) for _ in range(2)]
    drawn_s = time.perf_counter() - started
    first, buffers = judge.expected(bases[0])
    out_bytes = output_bytes(first)
    del first
    in_bytes = sum(align(t.numel() * t.element_size()) for _, t in tensors(bases[0]))
    shape = Shape(judge.problem.shape_label(params), params, bases, buffers, out_bytes, in_bytes,
                  batch or batch_size(judge, in_bytes, out_bytes), drawn_s=drawn_s)
    if judge.resident_inputs:
        hand_over(judge, shape)
    return shape


@dataclass
class SetRenewal:
    """New sets for one attempt at a shape's timing. As the attempt starts, if a batch has used the
    sets: the second calibration runs its no-op beside the candidate's code, which can read its
    inputs, and a timing measured again after a contradiction follows a whole attempt on them
    (red-team round 17 under-reported to be retried, learnt the sets in the first attempt and
    answered the second from its cache). Then after a batch, whenever this attempt's draws have
    cost no more than RENEWAL_SHARE of its wall time. The kernels timed side by side on a shape
    share its sets: each gets the new ones (a runner that builds its inputs itself, a copy)."""

    pairs: list[tuple[Judge, Shape]]
    started: float = field(default_factory=time.perf_counter)
    spent_s: float = 0.0  # what this attempt's sets cost to draw
    renewals: int = 0

    def __post_init__(self) -> None:
        shape = self.pairs[0][1]
        if shape.seen:
            self._draw()
        else:
            self.spent_s = shape.drawn_s

    def after_batch(self) -> bool:
        """Draw new sets if they are due; True when they were drawn."""
        if self.spent_s > RENEWAL_SHARE * (time.perf_counter() - self.started):
            return False
        self._draw()
        return True

    def _draw(self) -> None:
        judge, shape = self.pairs[0]
        started = time.perf_counter()
        for _, each in self.pairs:
            each.bases = []  # the old sets go first: never two pairs of sets at once, on a GPU least of all
        bases = [judge.fresh(shape.params) for _ in range(2)]
        for owner, each in self.pairs:
            each.bases, each.seen = bases, False
            if owner.resident_inputs:
                hand_over(owner, each)
        self.spent_s += time.perf_counter() - started
        self.renewals += 1

    def noted(self, result: dict[str, Any]) -> dict[str, Any]:
        """A shape's timing result with how many times its sets were drawn anew, beside the bound."""
        result["judge"]["set_renewals"] = self.renewals
        return result


def release(judge: Judge, shape: Shape) -> None:
    """The runner may drop the shape's sets (the judge keeps its own until the reference is timed)."""
    if judge.resident_inputs:
        judge.session.bases(shape.key, [], shape.buffers, judge.deadline)


def free_device_memory(device: str) -> None:
    """The judge and the runner share one GPU: what the judge no longer holds goes back to the driver."""
    if device != "cpu":
        import torch

        torch.cuda.empty_cache()


def hand_over(judge: Judge, shape: Shape) -> None:
    from sandbox.shared.arena import Layout, decode, encode

    layout = Layout()
    trees = [encode(b, layout.place) for b in shape.bases]
    judge._ensure(max(layout.end, shape.out_bytes + 4096))
    assert judge.arena is not None
    for tree, base in zip(trees, shape.bases, strict=True):
        for (_, view), (_, tensor) in zip(tensors(decode(tree, judge.arena.view)), tensors(base), strict=True):
            view.copy_(tensor)
    judge.session.bases(shape.key, trees, shape.buffers, judge.deadline, slots=shape.batch)
