"""Correctness and timing of one loaded candidate, inside a worker process.

The candidate always gets a clone of the inputs, never the tensors the check
uses. Output buffers the problem preallocates (found by running the reference
and seeing which input it wrote and returned) are filled with NaN before each
call, and freed memory of the output's size is filled with NaN too, so that
elements a candidate forgot to write fail the check instead of passing on
stale values.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from sandbox import integrity, roctx
from sandbox.compare import Comparison, compare_outputs
from sandbox.problem import Problem
from sandbox.targets import TargetProfile
from sandbox.timing import Timer, TimingPolicy


class CandidateFailure(Exception):
    """The candidate raised or crashed the device during a call."""

    def __init__(self, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal  # the device context is unusable: stop here


class Guard:
    """Runtime state shared by the harness's candidate calls.

    While a candidate runs, `running` is set: the problem's reference, wrapped
    by `guard_reference`, refuses to run then.
    """

    running = False


def guard_reference(problem: Problem) -> None:
    """Make the reference refuse calls made from inside the candidate."""
    import sys

    original = problem._reference
    if original is None or getattr(original, "_ks_guarded", False):
        return

    def guarded(data: Any) -> Any:
        if Guard.running:
            raise integrity.IntegrityViolation("reference-call", "called the problem's reference implementation")
        return original(data)

    guarded._ks_guarded = True  # type: ignore[attr-defined]
    problem._reference = guarded
    module = sys.modules.get("reference")
    if module is not None and getattr(module, "ref_kernel", None) is original:
        module.ref_kernel = guarded


def clone_data(data: Any) -> Any:
    if isinstance(data, torch.Tensor):
        # clone() keeps the strides of dense tensors: column-major stays column-major.
        return data.clone()
    if isinstance(data, tuple):
        return tuple(clone_data(x) for x in data)
    if isinstance(data, list):
        return [clone_data(x) for x in data]
    if isinstance(data, dict):
        return {k: clone_data(v) for k, v in data.items()}
    return data


def _items(data: Any) -> list[tuple[Any, torch.Tensor]]:
    if isinstance(data, torch.Tensor):
        return [((), data)]
    if isinstance(data, (tuple, list)):
        return [(i, x) for i, x in enumerate(data) if isinstance(x, torch.Tensor)]
    if isinstance(data, dict):
        return [(k, v) for k, v in data.items() if isinstance(v, torch.Tensor)]
    return []


def _get(data: Any, key: Any) -> torch.Tensor:
    return data if key == () else data[key]


def output_buffers(ref_data: Any, ref_output: Any) -> list[Any]:
    """Keys of inputs the reference wrote its result into (preallocated outputs)."""
    outs = [ref_output] if isinstance(ref_output, torch.Tensor) else [
        o for o in (ref_output if isinstance(ref_output, (tuple, list)) else []) if isinstance(o, torch.Tensor)
    ]
    ptrs = {o.data_ptr() for o in outs if o.numel()}
    return [k for k, t in _items(ref_data) if t.numel() and t.data_ptr() in ptrs]


def poison(tensor: torch.Tensor) -> None:
    if tensor.is_floating_point():
        if tensor.dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2):
            tensor.view(torch.uint8).fill_(0x7F if tensor.dtype != torch.float8_e4m3fnuz else 0x80)
        else:
            tensor.fill_(float("nan"))
    elif tensor.dtype == torch.bool:
        tensor.fill_(True)
    else:
        tensor.fill_(-1 if tensor.dtype.is_signed else 0x7F)


def poison_free_memory(nbytes: int, device: str, blocks: int = 4) -> None:
    """Leave NaN-filled blocks of this size in the allocator's free pool.

    A candidate that returns `torch.empty(...)` without writing all of it then
    reads NaN where it skipped, not a previous call's (or the reference's)
    answer. On the GPU the caching allocator first gives its cached blocks back
    to the driver, so stale memory cannot come back through a fresh segment
    either; the next few allocations of the output's size get poisoned blocks.
    """
    if nbytes <= 0:
        return
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    held = [torch.empty(nbytes, dtype=torch.uint8, device=device) for _ in range(blocks)]
    for block in held:
        block.fill_(0xFF)  # all-ones is NaN in fp32, fp16 and bf16
    del held


def _output_nbytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for _, t in _items(value if not isinstance(value, list) else tuple(value)))


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def call_candidate(
    kernel: Callable[[Any], Any],
    data: Any,
    device: str,
    policy: integrity.Policy | None = None,
    record_ops: bool = False,
) -> Any:
    """One checked call: exceptions become CandidateFailure, cheating IntegrityViolation."""
    policy = policy or integrity.Policy()
    recorder = integrity.OpRecorder() if record_ops else None
    try:
        with integrity.ThreadWatch(policy.allow_threads):
            Guard.running = True
            try:
                if recorder is not None:
                    with recorder:
                        out = kernel(data)
                else:
                    out = kernel(data)
            finally:
                Guard.running = False
        integrity.stable_after_return(out, device)
    except integrity.IntegrityViolation:
        raise
    except Exception as exc:  # noqa: BLE001 - anything a candidate raises is its failure
        text = "".join(traceback.format_exception(exc)[-8:])
        fatal = device.startswith("cuda") and _device_broken(exc)
        raise CandidateFailure(f"{type(exc).__name__}: {exc}\n{text}", fatal=fatal) from exc
    integrity.timers_intact()
    integrity.plain_tensors(out, device)
    if recorder is not None:
        integrity.check_ops(recorder.ops, policy)
    return out


def _device_broken(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(
        s in text
        for s in ("illegal memory access", "illegal instruction", "misaligned address", "unspecified launch failure", "device-side assert")
    )


@dataclass
class ShapeCheck:
    params: dict[str, Any]
    passed: bool
    message: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    worst_index: list[int] | None = None
    seconds: float = 0.0


def judge(problem: Problem, pristine: Any, output: Any, expected: Any) -> Comparison:
    """Pass or fail by the problem's tolerance, else by its own check."""
    if problem.tolerance is not None:
        rtol, atol = problem.tolerance
        return compare_outputs(output, expected, rtol, atol)
    detail = compare_outputs(output, expected, None, None)
    if not detail.passed and detail.max_abs_error is None:
        return detail  # structure differs (shape, dtype, type): say so plainly
    ok, message = problem.check_implementation(clone_data(pristine), output)
    detail.passed = ok
    detail.message = detail.message if ok else f"{message.strip()[:2000]} ({detail.message})"
    return detail


def check_shape(
    problem: Problem,
    kernel: Callable[[Any], Any],
    params: dict[str, Any],
    device: str,
    policy: integrity.Policy | None = None,
) -> ShapeCheck:
    """Check one test shape: candidate before the reference, the reference, candidate again.

    The first call happens before the reference's answer exists anywhere in
    memory, so no candidate can copy it; it also records the operators the
    candidate dispatches. The second call gets its preallocated outputs
    poisoned. Both outputs must pass, and no call may change its inputs.
    """
    policy = policy or integrity.Policy()
    started = time.perf_counter()
    pristine = problem.generate_input(params, device)
    first_data = clone_data(pristine)
    first_prints = integrity.fingerprint(first_data)
    poison_free_memory(_output_nbytes(first_data), device)
    first = call_candidate(kernel, first_data, device, policy, record_ops=True)

    ref_data = clone_data(pristine)
    ref_output = problem.reference(ref_data)
    _sync(device)
    buffers = output_buffers(ref_data, ref_output)
    expected = clone_data(ref_output)
    del ref_data, ref_output
    integrity.inputs_unchanged(first_prints, integrity.fingerprint(first_data), buffers)
    result = judge(problem, pristine, first, expected)
    if result.passed:
        del first, first_data
        second_data = clone_data(pristine)
        for key in buffers:
            poison(_get(second_data, key))
        second_prints = integrity.fingerprint(second_data)
        poison_free_memory(_output_nbytes(expected), device)
        second = call_candidate(kernel, second_data, device, policy)
        integrity.inputs_unchanged(second_prints, integrity.fingerprint(second_data), buffers)
        result = judge(problem, pristine, second, expected)
    return ShapeCheck(
        params=params,
        passed=result.passed,
        message=result.message,
        max_abs_error=_finite(result.max_abs_error),
        max_rel_error=_finite(result.max_rel_error),
        worst_index=result.worst_index,
        seconds=time.perf_counter() - started,
    )


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


@dataclass
class ShapeTiming:
    params: dict[str, Any]
    stats: dict[str, Any]
    reference: dict[str, Any] | None = None
    flops: float | None = None
    bytes: float | None = None
    sol_us: float | None = None
    host_synced_us: float | None = None


def _refresh(target: Any, source: Any, skip: list[Any]) -> None:
    """Copy source's tensors into target's, in place (same pointers, new contents)."""
    for key, tensor in _items(target):
        if key not in skip:
            tensor.copy_(_get(source, key))


def time_shape(
    problem: Problem,
    kernel: Callable[[Any], Any],
    params: dict[str, Any],
    device: str,
    policy: TimingPolicy,
    profile: TargetProfile | None,
    time_reference: bool,
    input_sets: int = 3,
    verify_every: int = 10,
) -> ShapeTiming:
    """Median time of the candidate (and the reference) on one benchmark shape.

    Every repetition gets new input contents in the same buffers: the sets
    (seeds seed, seed+1, ...) are copied in turn into one argument set outside
    the timed region, and preallocated outputs are poisoned. So a kernel that
    caches results by pointer, by shape or in a global returns a stale answer,
    and the output is checked against the right expected every `verify_every`
    repetitions and after the last.
    """
    seed = int(params.get("seed", 0))
    pristines, expecteds, buffer_keys = [], [], None
    for i in range(max(1, input_sets)):
        p = dict(params, seed=seed + i) if "seed" in params else dict(params)
        pristine = problem.generate_input(p, device)
        ref_data = clone_data(pristine)
        ref_output = problem.reference(ref_data)
        if buffer_keys is None:
            buffer_keys = output_buffers(ref_data, ref_output)
        expecteds.append(clone_data(ref_output))
        pristines.append(pristine)
        del ref_data, ref_output
    keys = buffer_keys or []
    args = clone_data(pristines[0])
    n_sets = len(pristines)

    def prepare(i: int) -> Any:
        _refresh(args, pristines[i % n_sets], keys)
        for key in keys:
            poison(_get(args, key))
        return args

    def verify(i: int, output: Any) -> None:
        _sync(device)
        verdict = judge(problem, pristines[i % n_sets], output, expecteds[i % n_sets])
        if not verdict.passed:
            raise integrity.IntegrityViolation(
                "stale-result", f"output wrong at timed repetition {i} (inputs refreshed in place): {verdict.message}"
            )

    _sync(device)
    label = problem.shape_label(params)
    timer = Timer(device, policy, marker=roctx.call_marker(label))
    Guard.running = True
    try:
        stats = timer.run(kernel, prepare, verify, verify_every)
        host = confirm = None
        if device.startswith("cuda"):
            host = timer.host_synced_median_us(kernel, prepare)
            if host.suspicious():
                # Another context's work on this GPU (a process starting or ending) can delay a
                # few calls; work on another stream delays every call. Measure again, longer.
                confirm = timer.host_synced_median_us(kernel, prepare, calls=15)
    except integrity.IntegrityViolation:
        raise
    except Exception as exc:  # noqa: BLE001
        raise CandidateFailure(f"{type(exc).__name__} while timing: {exc}", fatal=_device_broken(exc)) from exc
    finally:
        Guard.running = False
    integrity.timers_intact()
    result = ShapeTiming(params=params, stats=stats.to_dict(), host_synced_us=host.synced_us if host else None)
    # Events see only the current stream; a whole-device sync sees everything. What neither the
    # events nor the host's own time until return explain ran somewhere else.
    if host is not None and host.suspicious() and confirm is not None and confirm.suspicious():
        raise integrity.IntegrityViolation(
            "work-outside-timed-stream",
            f"{host.describe()}; measured again, {confirm.describe()}: work runs on another stream and "
            "escapes the measurement",
        )
    if time_reference:
        ref_args = [clone_data(p) for p in pristines]
        ref_policy = TimingPolicy(
            warmup_s=policy.warmup_s, min_reps=min(policy.min_reps, 5), max_reps=policy.max_reps,
            budget_s=policy.budget_s / 2, rel_stderr=policy.rel_stderr * 5,
        )
        ref_timer = Timer(device, ref_policy, marker=roctx.reference_marker(label))
        ref_stats = ref_timer.run(problem.reference, lambda i: ref_args[i % n_sets])
        result.reference = ref_stats.to_dict()
    flops, nbytes = problem.roofline.at(params)
    result.flops, result.bytes = flops, nbytes
    if profile is not None:
        sol = profile.sol_seconds(flops, nbytes, problem.roofline.compute)
        result.sol_us = sol * 1e6 if sol else None
    return result

