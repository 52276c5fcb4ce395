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

import ctypes
import hashlib
from typing import Any

import torch


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


def _signed64(value: int) -> int:
    value %= 1 << 64
    return value - (1 << 64) if value >= 1 << 63 else value


# Odd 64-bit multipliers (splitmix64's), as torch's signed int64 holds them.
_K1, _K2 = (_signed64(k) for k in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9))
LANES = 32  # 64-bit words per row of the tree: 256 bytes
TOP_ROWS = 64  # the tree stops at this many rows (16 KB), which SHA-256 reads whole


def _shifted(x: torch.Tensor, bits: int) -> torch.Tensor:
    """x >> bits with zeros shifted in (torch shifts int64 arithmetically)."""
    return (x >> bits).bitwise_and_((1 << (64 - bits)) - 1)


def _mix_(x: torch.Tensor) -> torch.Tensor:
    """A xor-shift, multiply, xor-shift finaliser, in place: with the multiply of `_node` before it,
    each output bit of a word depends on every input bit of both words joined."""
    x.bitwise_xor_(_shifted(x, 29)).mul_(_K2)
    return x.bitwise_xor_(_shifted(x, 32))


def _node(left: torch.Tensor, right: torch.Tensor, level: int) -> torch.Tensor:
    """Two rows of a level made one: mixed((left * K1) xor right rotated), then each lane xored with
    the lane a power of two away. The distance doubles with the level, so that within five levels
    every word of a subtree reaches every lane of its root: no lane can be matched apart from the
    others. Multiplies, shifts and xors only: a runner's own additions would read, in its samples,
    as the library sum a problem forbids."""
    shift = 1 << (level % 5)
    joined = left * _K1
    joined.bitwise_xor_(torch.roll(right, shifts=shift, dims=-1))
    _mix_(joined)
    return joined.bitwise_xor_(torch.roll(joined, shifts=shift, dims=-1))


def _tree(rows: torch.Tensor) -> torch.Tensor:
    """Rows of 64-bit words halved level by level (row 2i with row 2i + 1; an odd last row passes up
    as it is) until at most TOP_ROWS remain. Neighbours join, so every subtree is a run of whole rows:
    a kernel on a GPU can fold a block of them where it lies and come to the same value."""
    from sandbox.shared.fold import fold

    folded = fold(rows, TOP_ROWS, _K1, _K2)
    return folded if folded is not None else torch_tree(rows)


def torch_tree(rows: torch.Tensor) -> torch.Tensor:
    """`_tree` in torch operations, wherever the rows lie (the GPU's fold is checked against it)."""
    level = 0
    while rows.shape[0] > TOP_ROWS:
        count = rows.shape[0]
        even = count // 2 * 2
        joined = _node(rows[0:even:2], rows[1:even:2], level)
        if count % 2:
            joined = torch.cat([joined, rows[even:]])
        rows, level = joined, level + 1
    return rows


def _host_bytes(tensor: torch.Tensor) -> bytes:
    """A tensor's bytes in storage order, on the host."""
    host = tensor.detach().to("cpu").contiguous()
    return ctypes.string_at(host.data_ptr(), host.numel() * host.element_size()) if host.numel() else b""


def digest(tensors: list[torch.Tensor]) -> str:
    """A commitment to the tensors' bytes, computed where they lie.

    The bytes, as rows of 32 64-bit words, are joined pairwise by a non-linear mix (multiply, xor,
    rotate lanes, xor-shift and multiply) level by level down to 64 rows, which SHA-256 reads with
    the leftover bytes and the length. No step is linear over the rows: a fold that combined the
    rows' mixed words by xor (this digest's earlier form) let a runner announce the digest of
    garbage, compute the true output only when the judge asked for it, and flip low bits of a few
    elements, chosen by solving a linear system, until the late output matched. Here each of the
    64 rows SHA-256 reads is a non-linear mix of its whole subtree, 2048 bits wide; a late output
    would have to meet all 64 exactly. On a GPU the tree is folded by sandbox/shared/fold.py, a
    launch per six levels, and the 16 KB copied to the host.
    """
    parts = []
    for tensor in tensors:
        raw = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
        full = raw.numel() // (8 * LANES) * (8 * LANES)
        head = b""
        if full:
            words = raw[:full]
            if words.data_ptr() % 8:
                words = words.clone()
            head = _host_bytes(_tree(words.view(torch.int64).view(-1, LANES)))
        tail = _host_bytes(raw[full:])
        parts.append(hashlib.sha256(head + tail + raw.numel().to_bytes(8, "little")).hexdigest()[:32])
    return "/".join(parts)
