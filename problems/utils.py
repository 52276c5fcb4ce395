"""Helpers shared by the bundled problems' reference code (GPU MODE layout).

Reference files import this as the top-level module `utils`, exactly as the
GPU MODE harness does, so each problem directory also works with that harness.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def generator(seed: int) -> torch.Generator:
    """A generator on the device the harness chose (its `with torch.device(...)`)."""
    gen = torch.Generator(device=torch.get_default_device())
    gen.manual_seed(seed)
    return gen


def device() -> torch.device:
    return torch.get_default_device()


@torch.no_grad()
def allclose_report(got: Any, expected: torch.Tensor, rtol: float, atol: float) -> tuple[bool, str]:
    """(passed, message) with the count of bad elements and the worst one."""
    if not isinstance(got, torch.Tensor):
        return False, f"expected a tensor, got {type(got).__name__}"
    if got.shape != expected.shape:
        return False, f"shape {tuple(got.shape)} != expected {tuple(expected.shape)}"
    g, e = got.double(), expected.double()
    diff = (g - e).abs()
    bad = (diff > atol + rtol * e.abs()) | (torch.isnan(g) != torch.isnan(e))
    count = int(bad.sum())
    if count == 0:
        return True, f"max abs error {float(torch.nan_to_num(diff, nan=0.0).max()):.3g}"
    score = torch.where(bad, torch.nan_to_num(diff, nan=float("inf")), torch.zeros_like(diff))
    index = tuple(int(i) for i in torch.unravel_index(score.argmax(), got.shape))
    return False, (
        f"{count} mismatched elements; worst at {index}: got {float(g[index]):.6g}, "
        f"expected {float(e[index]):.6g}"
    )


def make_match_reference(reference: Callable[[Any], Any], rtol: float, atol: float) -> Callable[[Any, Any], tuple[bool, str]]:
    """check_implementation(data, output) comparing against `reference(data)`."""

    def check(data: Any, output: Any) -> tuple[bool, str]:
        return allclose_report(output, reference(data), rtol=rtol, atol=atol)

    return check
