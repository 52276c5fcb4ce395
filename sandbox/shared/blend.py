"""How a call's inputs are made from two generated sets, and how an output is committed to.

Both sides run this code: the judge to know exactly what a call was given, a GPU runner to
build the call's inputs on its own device (copying them over the bus for every call would
cost more than most kernels). The recipe (which set first, the rotation, the weight) is the
judge's secret until the call is requested, so nothing can be prepared for it.

`digest` commits a runner to an output at the moment it answers: the judge asks for the
bytes of a secret subset of calls afterwards and checks them against the digest they were
announced with, so an output cannot be computed after the timed call returned.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from sandbox.shared import xorfold


def _signed32(value: int) -> int:
    value %= 1 << 32
    return value - (1 << 32) if value >= 1 << 31 else value


# An odd multiplier and 64 odd column weights, as signed 32-bit values (a fixed pattern: the digest
# needs no secret, only the exact bytes of the output).
_MULTIPLIER = _signed32(0x2545F491)
_WEIGHTS32 = [_signed32(0x9E3779B9 * (2 * i + 1) | 1) for i in range(64)]


def flat(tensor: torch.Tensor) -> torch.Tensor:
    """The elements of a dense tensor in storage order (a view)."""
    return tensor.as_strided((tensor.numel(),), (1,), tensor.storage_offset())


def blend_into(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, k: int, weight: float) -> None:
    """out = weight * a + (1 - weight) * b rotated by k elements, in storage order."""
    o, x, y = flat(out), flat(a), flat(b)
    n = x.numel()
    _lerp(y[k:], x[: n - k], weight, o[: n - k])
    if k:
        _lerp(y[:k], x[n - k:], weight, o[n - k:])


def _lerp(start: torch.Tensor, end: torch.Tensor, weight: float, out: torch.Tensor) -> None:
    if out.element_size() == 1:  # fp8 has no arithmetic of its own: blend in float32, round once
        out.copy_(torch.lerp(start.float(), end.float(), weight))
    else:
        torch.lerp(start, end, weight, out=out)


def apply_recipe(work: dict[str, torch.Tensor], bases: list[dict[str, torch.Tensor]], recipe: dict[str, Any],
                 buffers: list[str]) -> None:
    """Fill the call's tensors (`work`, by path) from the two sets as the recipe says."""
    first = bases[int(recipe["first"])]
    second = bases[1 - int(recipe["first"])]
    mixes = recipe.get("mix") or {}
    for path, target in work.items():
        if path in buffers:
            poison(target)
        elif path in mixes:
            k, weight = mixes[path]
            blend_into(target, first[path], second[path], int(k), float(weight))
        else:
            target.copy_(first[path])


def poison(tensor: torch.Tensor) -> None:
    """Fill a preallocated output so that any element a kernel forgets to write fails the check."""
    if tensor.is_floating_point():
        if tensor.element_size() == 1:
            tensor.view(torch.uint8).fill_(0x80 if tensor.dtype == torch.float8_e4m3fnuz else 0x7F)
        else:
            tensor.fill_(float("nan"))
    elif tensor.dtype == torch.bool:
        tensor.fill_(True)
    else:
        tensor.fill_(-1 if tensor.dtype.is_signed else 0x7F)


_WEIGHTS_ON: dict[torch.device, torch.Tensor] = {}


def _weights(device: torch.device) -> torch.Tensor:
    """The column weights, copied to a device once (a copy per call would wait for the host)."""
    if device not in _WEIGHTS_ON:
        _WEIGHTS_ON[device] = torch.tensor(_WEIGHTS32, dtype=torch.int32, device=device)
    return _WEIGHTS_ON[device]


def _xor_rows(rows: torch.Tensor) -> list[int]:
    """The xor of all rows: padded with zero rows to a power of two, then halved in place."""
    count = rows.shape[0]
    size = 1 << (count - 1).bit_length()
    if size != count:
        padded = rows.new_zeros((size, rows.shape[1]))
        padded[:count] = rows
        rows = padded
    while rows.shape[0] > 1:
        half = rows.shape[0] // 2
        rows[:half].bitwise_xor_(rows[half:])
        rows = rows[:half]
    return [int(w) for w in rows[0].tolist()]


def _mixed(words: torch.Tensor) -> torch.Tensor:
    """Each 32-bit word multiplied and xor-shifted (wrapping, arithmetic shift), as a new tensor."""
    mixed = words * _MULTIPLIER
    return mixed.bitwise_xor_(mixed >> 15)


def digest(tensors: list[torch.Tensor]) -> str:
    """A position-sensitive, non-linear digest of the tensors' bytes, computed where they lie.

    32-bit words are multiplied and xor-shifted (wrapping), weighted by their column among 64, then
    folded with xor: no sum (a problem may forbid library reductions, and this runs in the runner).
    A GPU runner commits to every call's output with it, inside the judge's clock, so it costs a
    few launches per halving of the rows (xor folds in any order to the same value).
    """
    parts = []
    for tensor in tensors:
        raw = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
        usable = raw.numel() // 4 * 4
        full = usable // 4 // 64 * 64  # words in whole rows of 64
        folded: list[int] = [0] * 64
        if full and xorfold.available(tensor):
            folded = xorfold.fold(raw[:full * 4].view(torch.int32), _MULTIPLIER, _weights(tensor.device))
            tail = _mixed(raw[full * 4:usable].view(torch.int32))
        else:
            mixed = _mixed(raw[:usable].view(torch.int32))
            if full:
                folded = _xor_rows(mixed[:full].view(-1, 64).mul_(_weights(tensor.device)))
            tail = mixed[full:]
        words = [w & 0xFFFFFFFF for w in folded + tail.tolist()] + raw[usable:].tolist()
        parts.append(hashlib.sha256(repr((words, raw.numel())).encode()).hexdigest()[:32])
    return "/".join(parts)
