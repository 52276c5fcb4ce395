"""The digest's column fold on a GPU in one launch (Triton), where Triton is installed.

A GPU runner commits to every call's output (`blend.digest`) inside the judge's clock; folded
with torch, the rows take a launch per halving (a dozen or more for a few megabytes), which
is more time than many kernels take. This computes the same value, the xor over all rows of
the mixed and weighted words, in a single kernel. The judge never needs it: it checks a
digest with `blend.digest`'s own fold, so the two must agree (tests/test_judge_design.py).
"""

from __future__ import annotations

from typing import Any

import torch

_KERNEL: Any = None
_ROWS_PER_PROGRAM = 64


def available(tensor: torch.Tensor) -> bool:
    """True where a one-launch fold runs: a CUDA tensor, and Triton installed and able to compile it
    (tried once, on a row of its own, so a failure falls back to torch before any digest needs it)."""
    return tensor.is_cuda and _kernel(tensor.device) is not None


def fold(words: torch.Tensor, multiplier: int, weights: torch.Tensor) -> list[int]:
    """The xor over rows of ((w * multiplier) xor-shifted by 15) * weights[column], for int32 words
    viewed as rows of 64 (their count a multiple of 64), as signed 32-bit integers."""
    kernel = _kernel(words.device)
    rows = words.numel() // 64
    out = torch.zeros(64, dtype=torch.int32, device=words.device)
    grid = ((rows + _ROWS_PER_PROGRAM - 1) // _ROWS_PER_PROGRAM,)
    kernel[grid](words, weights, out, rows, multiplier, ROWS=_ROWS_PER_PROGRAM)
    return [int(w) for w in out.tolist()]


def _kernel(device: torch.device) -> Any:
    """The Triton kernel, compiled and run once on first use; None where that failed."""
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = False
        try:
            built = _build()
            one_row = torch.zeros(64, dtype=torch.int32, device=device)
            built[(1,)](one_row, one_row, torch.zeros_like(one_row), 1, 1, ROWS=_ROWS_PER_PROGRAM)
            _KERNEL = built
        except Exception:  # noqa: BLE001 - no Triton, or one that cannot compile here: torch folds instead
            pass
    return _KERNEL or None


def _build() -> Any:
    from sandbox.shared.xorfold_triton import fold_rows

    return fold_rows
