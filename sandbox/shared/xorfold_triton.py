"""The Triton kernel behind `xorfold` (imported only where a GPU digest is folded: Triton is optional).

Triton reads the annotations of what it compiles, so these functions carry none but its own.
"""

import triton  # type: ignore[import-not-found,unused-ignore]
import triton.language as tl  # type: ignore[import-not-found,unused-ignore]


@triton.jit
def _xor(a, b):  # type: ignore[no-untyped-def]
    return a ^ b


@triton.jit
def fold_rows(words, weights, out, rows, multiplier, ROWS: tl.constexpr):  # type: ignore[no-untyped-def]
    """One program per ROWS rows of 64 int32 words: mix, weight by column, xor the rows, and xor the
    64 results into `out` atomically (xor folds in any order to the same value)."""
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, 64)
    inside = (r < rows)[:, None]
    x = tl.load(words + r[:, None].to(tl.int64) * 64 + c[None, :], mask=inside, other=0)
    x = x * multiplier
    x = x ^ (x >> 15)
    x = x * tl.load(weights + c)[None, :]
    x = tl.where(inside, x, 0)
    tl.atomic_xor(out + c, tl.reduce(x, 0, _xor))
