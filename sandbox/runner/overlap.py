"""Whether two tensors share a byte: the runner's test for a kept output overwritten by a later call.

A kernel may hand out slices of one persistent workspace as its outputs. The runner keeps each
call's output until the judge has drawn its checks, so it must know when a later output lands on a
kept one (`main.Runner._keep` then copies outputs as they return). Slices meet only where their
bytes do: a ring of slots passes whether its slots are blocks or interleaved along an axis (every
slot's byte range then spans the whole ring; comparing ranges refused such an honest kernel).
The answer is exact: a search over the two layouts' strides, and where that does not decide in
SEARCH_STEPS steps, a mask of bytes; each pair of layouts is decided once per runner.

Standard library and torch only.
"""

from __future__ import annotations

import functools
from typing import Any


Layout = tuple[tuple[int, ...], tuple[int, ...], int]  # shape, strides (elements), element size (bytes)
SEARCH_STEPS = 20_000  # steps of the search (about 1 µs each) before the bytes are marked instead
MASK_BYTES = 256 << 20  # the largest span marked byte by byte; beyond, the layouts are called meeting


def meet(first: Any, second: Any) -> bool:
    """Whether two non-empty tensors share a byte. Slices of one workspace meet only where their
    bytes do: a ring handing out distinct slices overwrites nothing, whether its slots are blocks
    or interleaved along an axis (every slot's range then spans the whole ring)."""
    layouts = _layout(first), _layout(second)
    start, other = first.data_ptr(), second.data_ptr()
    if not (start < other + _extent(layouts[1]) and other < start + _extent(layouts[0])):
        return False
    return layouts_meet(*layouts, other - start)


def _layout(tensor: Any) -> Layout:
    return tuple(tensor.shape), tuple(tensor.stride()), tensor.element_size()


@functools.lru_cache(maxsize=1024)
def layouts_meet(first: Layout, second: Layout, offset: int) -> bool:
    """Whether a tensor of the first layout and one of the second starting `offset` bytes after it
    share a byte (a batch's outputs repeat their layouts: each pair is decided once). Exact: element
    a of the first lies at sum(a_i * stride_i * size) and the two meet where some pair of elements
    lies closer than an element's size, which `_reachable` searches for; where it does not decide,
    the first's bytes are marked in a mask and the second's read."""
    terms: dict[int, tuple[int, int]] = {}  # a byte step -> the range of its coefficient
    for (shape, strides, size), sign in ((first, 1), (second, -1)):
        for n, stride in zip(shape, strides, strict=True):
            if n > 1 and stride:
                low, high = terms.get(stride * size, (0, 0))
                terms[stride * size] = (low, high + n - 1) if sign > 0 else (low - (n - 1), high)
    # first's byte at x, second's at offset + y, x - y a sum over the terms: they meet when
    # -size(first) < x - offset - y < size(second).
    found = _reachable(sorted(terms.items(), reverse=True), offset - first[2], offset + second[2])
    if found is not None:
        return found
    low, high = min(0, offset), max(_extent(first), offset + _extent(second))
    if high - low > MASK_BYTES:
        return True  # the cautious answer: the outputs are copied from then on
    return _meet_by_mask(first, second, offset, low, high)


def _extent(layout: Layout) -> int:
    """The bytes from a tensor's first element to the end of its last (torch's strides are >= 0)."""
    shape, strides, size = layout
    return (sum((n - 1) * st for n, st in zip(shape, strides, strict=True)) + 1) * size


def _meet_by_mask(first: Layout, second: Layout, offset: int, low: int, high: int) -> bool:
    """`layouts_meet` by marking the first layout's bytes in a mask over [low, high) (host memory,
    wherever the tensors lie) and reading the second's."""
    import torch

    mask = torch.zeros(high - low, dtype=torch.uint8)

    def covered(layout: Layout, at: int) -> Any:
        shape, strides, size = layout
        return mask.as_strided([*shape, size], [s * size for s in strides] + [1], at - low)

    covered(first, 0).fill_(1)
    return bool(covered(second, offset).any())


def _reachable(terms: list[tuple[int, tuple[int, int]]], low: int, high: int) -> bool | None:
    """Whether some sum of c * weight over `terms` (weight, (c_min, c_max)), heaviest first, lies strictly
    between low and high; None when SEARCH_STEPS steps did not decide. Depth first; at each term
    only coefficients the lighter terms can still complete are tried, so for the layouts tensors have
    (each step beyond the reach of the smaller ones) a level tries one or two."""
    count = len(terms)
    least, most = [0] * (count + 1), [0] * (count + 1)  # what the terms from i on can sum to
    for i in range(count - 1, -1, -1):
        weight, (c_low, c_high) = terms[i]
        least[i], most[i] = least[i + 1] + c_low * weight, most[i + 1] + c_high * weight
    stack, nodes = [(0, low, high)], 0
    while stack:
        i, below, above = stack.pop()
        nodes += 1
        if nodes > SEARCH_STEPS:
            return None
        if i == count:
            if below < 0 < above:
                return True
            continue
        weight, (c_low, c_high) = terms[i]
        first = max(c_low, (below - most[i + 1]) // weight + 1)
        last = min(c_high, -((least[i + 1] - above) // weight) - 1)
        stack.extend((i + 1, below - c * weight, above - c * weight) for c in range(first, last + 1))
    return False
