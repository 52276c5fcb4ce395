"""Compare a candidate's output with the reference's, and say exactly how it differs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class Comparison:
    passed: bool
    message: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    worst_index: list[int] | None = None
    mismatches: int = 0


def _tensors(value: Any) -> list[torch.Tensor] | None:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in value):
        return list(value)
    return None


def compare_outputs(
    got: Any, expected: Any, rtol: float | None, atol: float | None
) -> Comparison:
    """Element-wise |got - expected| <= atol + rtol*|expected|, NaN never passing.

    With rtol/atol None only the diagnostics are computed and `passed` says
    whether structure (type, shape, dtype) matched.
    """
    got_list, exp_list = _tensors(got), _tensors(expected)
    if exp_list is None:
        return Comparison(passed=True, message="reference output is not a tensor; not compared")
    if got_list is None:
        return Comparison(False, f"expected a tensor output, got {type(got).__name__}")
    if len(got_list) != len(exp_list):
        return Comparison(False, f"expected {len(exp_list)} output tensors, got {len(got_list)}")
    total_bad = 0
    worst: Comparison | None = None
    for i, (g, e) in enumerate(zip(got_list, exp_list, strict=True)):
        label = f"output {i}: " if len(exp_list) > 1 else ""
        if tuple(g.shape) != tuple(e.shape):
            return Comparison(
                False, f"{label}wrong shape: got {tuple(g.shape)}, expected {tuple(e.shape)}"
            )
        if g.dtype != e.dtype:
            return Comparison(False, f"{label}wrong dtype: got {g.dtype}, expected {e.dtype}")
        if g.device != e.device:
            return Comparison(False, f"{label}wrong device: got {g.device}, expected {e.device}")
        result = _compare_tensor(g, e, rtol, atol, label)
        total_bad += result.mismatches
        if worst is None or (not result.passed and worst.passed) or (
            result.passed == worst.passed
            and (result.max_abs_error or 0) > (worst.max_abs_error or 0)
        ):
            worst = result
    assert worst is not None
    worst.mismatches = total_bad
    return worst


def _compare_tensor(
    got: torch.Tensor, expected: torch.Tensor, rtol: float | None, atol: float | None, label: str
) -> Comparison:
    if got.numel() == 0:
        return Comparison(True, f"{label}empty output")
    quick = _quick_pass(got, expected, rtol, atol)
    if quick is not None:
        return Comparison(True, f"{label}all elements within tolerance, max abs error {quick:.3g}", quick, None, None, 0)
    g = got.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    diff = (g - e).abs()
    # NaN or inf where the reference is finite is the worst possible error; where the reference is
    # infinite, only the same infinity matches (its allowance, atol + rtol * inf, would take anything).
    bad_value = (~torch.isfinite(g) & torch.isfinite(e)) | (torch.isinf(e) & (g != e))
    nan_mismatch = torch.isnan(g) ^ torch.isnan(e)
    # The worst element is the one furthest beyond its own allowance (with tolerances), else the one
    # furthest off: a large error well inside a large allowance is not what failed.
    excess = diff / (atol + rtol * e.abs()).clamp_min(1e-300) if rtol is not None and atol is not None else diff
    score = torch.where(bad_value | nan_mismatch, torch.full_like(diff, float("inf")), excess)
    score = torch.nan_to_num(score, nan=0.0)
    flat = int(torch.argmax(score).item())
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), got.shape)]
    worst_got, worst_exp = g.reshape(-1)[flat].item(), e.reshape(-1)[flat].item()
    max_abs = float(diff.reshape(-1)[flat].item())
    rel = abs(worst_got - worst_exp) / max(abs(worst_exp), 1e-30)
    if rtol is None or atol is None:
        mismatches = int((bad_value | nan_mismatch).sum().item())
        return Comparison(
            mismatches == 0,
            f"{label}worst element {tuple(index)}: got {worst_got:.6g}, expected {worst_exp:.6g}",
            max_abs,
            rel,
            index,
            mismatches,
        )
    allowed = atol + rtol * e.abs()
    mismatch = (diff > allowed) | bad_value | nan_mismatch
    mismatches = int(mismatch.sum().item())
    where = f"{label}worst element {tuple(index)}: got {worst_got:.6g}, expected {worst_exp:.6g}"
    if mismatches == 0:
        return Comparison(True, f"{where}, abs error {max_abs:.3g}", max_abs, rel, index, 0)
    limit = atol + rtol * abs(worst_exp)
    unwritten = int(torch.isnan(g).sum().item())
    note = f"; {unwritten} elements unwritten (still NaN)" if unwritten else ""
    return Comparison(
        False,
        f"{mismatches} of {got.numel()} elements out of tolerance (rtol={rtol:g}, atol={atol:g}); "
        f"{where}, abs error {max_abs:.3g} > allowed {limit:.3g}{note}",
        max_abs,
        rel,
        index,
        mismatches,
    )


def _quick_pass(got: torch.Tensor, expected: torch.Tensor, rtol: float | None, atol: float | None,
                chunk: int = 1 << 22) -> float | None:
    """The largest absolute error when every element clearly passes, computed in float32; else None.

    The exact float64 pass, with the worst element and its message, runs only for outputs that
    may fail: on large outputs it costs several times the float32 pass. "Clearly" leaves a
    margin of 1e-6 relative to the allowance, so a float32 rounding never turns a fail into a pass.
    Chunks of `chunk` elements keep the temporaries small whatever the output's size.
    """
    if rtol is None or atol is None or not got.is_floating_point() or got.dtype == torch.float64:
        return None
    g_all = got.detach().reshape(-1)
    e_all = expected.detach().reshape(-1)
    worst = 0.0
    for start in range(0, g_all.numel(), chunk):
        g = g_all[start:start + chunk].float()
        e = e_all[start:start + chunk].float()
        diff = (g - e).abs_()
        allowed = e.abs().mul_(rtol).add_(atol).mul_(1 - 1e-6)
        # NaN or inf in the output makes `diff` NaN or inf, which no finite allowance admits; an infinite
        # (or NaN) reference makes the allowance so, which is no check: one reduction finds it.
        if not math.isfinite(float(allowed.max())) or not bool((diff <= allowed).all()):
            return None
        worst = max(worst, float(diff.max()))
    return worst
