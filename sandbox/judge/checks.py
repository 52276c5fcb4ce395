"""Checking and timing a candidate from the judge, one call at a time through the runner.

Every call gets inputs no earlier call could predict: the judge generates them with the
problem's own generator and a seed drawn from its secret random source, writes them into
the arena and poisons the preallocated outputs. Check calls, warm-up calls and timed calls
look the same to the runner; which outputs are compared is decided by the judge after the
call returned (every call of the check phase, a secret random subset of the timed ones),
and the inputs are compared with the judge's own copy after every call.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from sandbox.compare import Comparison, compare_outputs
from sandbox.integrity import IntegrityViolation, Policy
from sandbox.judge.remote import ReadBudget
from sandbox.judge.session import ArenaRefused, Call, RunnerSession
from sandbox.problem import Problem
from sandbox.shared.arena import Arena, DeviceArena, Layout, align, decode, encode, tensors
from sandbox.shared.blend import apply_recipe, digest, poison
from sandbox.shared.devmem import DeviceMemoryError


class CandidateFailure(Exception):
    """The candidate raised, or broke the device, during a call."""

    def __init__(self, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


class Secret:
    """The judge's random source: seeds and choices the runner cannot predict or replay.

    The operating system's generator, not a seeded Mersenne Twister: every timed call lets the runner
    observe some bits of the recipe (which set comes first, the rotation, the weight), and 624 outputs
    of a Mersenne Twister give away all that follow."""

    def __init__(self) -> None:
        self._rng = random.SystemRandom()

    def seed(self) -> int:
        return self._rng.getrandbits(31)

    def chance(self, p: float) -> bool:
        return self._rng.random() < p

    def between(self, low: int, high: int) -> int:
        return self._rng.randint(low, high)

    def fraction(self) -> float:
        return self._rng.random()


@dataclass
class Judge:
    """What one evaluation's judge holds: the problem, the device, the runner and its arena."""

    problem: Problem
    device: str
    session: RunnerSession
    policy: Policy
    deadline: float = 0.0
    secret: Secret = field(default_factory=Secret)
    arena: Arena | None = None
    threads: int | None = None
    calls: int = 0
    # Timed inputs built by the runner from two sets it holds (the GPU's way: nothing crosses the bus
    # per call; a checked call's inputs come back with its output), or written into the arena by the
    # judge (the CPU's way: the runner's round trip holds the calls and nothing else, so its clock
    # bounds them tightly even while a kernel's own threads compete for two cores). None: by the device.
    resident_inputs: bool | None = None
    # The arena in device memory (None: decide by the device); False once the runner could not map it.
    device_arena: bool | None = None
    arena_note: str = ""
    # What samples the runner from outside (libwatch.LibraryWatch), paused while the judge times its own
    # work (`own_timing`); None: nothing samples it.
    sampler: Any = None

    def __post_init__(self) -> None:
        if self.resident_inputs is None:
            self.resident_inputs = self.device != "cpu"

    @contextmanager
    def own_timing(self) -> Iterator[None]:
        """While the judge times work of its own (the reference): its runner's sampler stopped."""
        if self.sampler is None:
            yield
            return
        with self.sampler.paused():
            yield

    # -- inputs and outputs through the arena ------------------------------------------

    def fresh(self, params: dict[str, Any]) -> Any:
        """New inputs from a secret seed (the task's seed is replaced, never reused)."""
        chosen = dict(params, seed=self.secret.seed()) if "seed" in params else dict(params)
        return self.problem.generate_input(chosen, self.device)

    def expected(self, pristine: Any, consume: bool = False) -> tuple[Any, list[str]]:
        """The reference's output on a copy (on `pristine` itself when the caller is done with it and
        the tolerance decides: no second copy of a large input), and the paths of inputs it wrote."""
        data = pristine if consume and self.problem.tolerance is not None else clone(pristine)
        output = self.problem.reference(data)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        written = {t.data_ptr() for _, t in tensors(output) if t.numel()}
        buffers = [path for path, t in tensors(data) if t.numel() and t.data_ptr() in written]
        return output, buffers  # `data` is the judge's own copy: nothing else can change the output

    def place(self, pristine: Any, buffers: list[str], out_bytes: int, start: int = 0) -> tuple[Any, dict[str, int]]:
        """Write the call's inputs into the arena from `start` (outputs poisoned); the tree and the output region."""
        layout = Layout(start)
        specs: list[tuple[dict[str, Any], torch.Tensor, str]] = []
        paths = {id(t): p for p, t in tensors(pristine)}

        def leaf(tensor: torch.Tensor) -> dict[str, Any]:
            spec = layout.place(tensor)
            specs.append((spec, tensor, paths.get(id(tensor), "")))
            return spec

        tree = encode(pristine, leaf)
        region = {"offset": align(layout.end), "capacity": align(out_bytes) + 4096}
        self._ensure(region["offset"] + region["capacity"])
        assert self.arena is not None
        for spec, tensor, path in specs:
            view = self.arena.view(spec)
            if path in buffers:
                poison(view)
            else:
                view.copy_(tensor)
        return tree, region

    def place_recipe(self, bases: list[Any], buffers: list[str], recipe: dict[str, Any], out_bytes: int,
                     start: int = 0) -> tuple[Any, dict[str, int]]:
        """The call's inputs blended by the recipe straight into the arena from `start` (outputs poisoned),
        laid out as `place` lays out `blend`'s copy; the tree and the output region. A copy fewer than
        blending here and placing that, and nothing of the call held in the judge: a checked call's inputs
        are blended again (`blend`, the same values bit for bit) once it has returned."""
        layout = Layout(start)
        tree = encode(bases[0], layout.place)
        region = {"offset": align(layout.end), "capacity": align(out_bytes) + 4096}
        self._ensure(region["offset"] + region["capacity"])
        assert self.arena is not None
        views = decode(tree, self.arena.view)
        work = {path: view for (path, _), (_, view) in zip(tensors(bases[0]), tensors(views), strict=True)}
        apply_recipe(work, [dict(tensors(b)) for b in bases], recipe, buffers)
        return tree, region

    def recipe(self, base: Any, buffers: list[str]) -> dict[str, Any]:
        """A call's inputs that no earlier call had: a secret convex blend of two generated sets.

        Each floating input becomes w * a + (1 - w) * b', with w drawn from [0.25, 0.75] and b' the
        other set rotated by a secret whole number of rows (any number of elements for vectors).
        New values in every row, so no cache (by pointer, shape, sampled values or a full hash)
        hits and no cached row can be reused; a blend of two valid inputs stays inside any bounds
        the generator keeps (signs, ranges, row offsets). Other inputs come from the first set.
        """
        mix = {}
        for path, tensor in tensors(base):
            if path in buffers or not tensor.is_floating_point() or tensor.numel() < 2 or not _dense_storage(tensor):
                continue
            # A "row" is the run of elements that is contiguous in storage (column-major inputs too).
            row = next((n for n, st in zip(tensor.shape, tensor.stride(), strict=True) if st == 1 and n > 1), 1) \
                if tensor.dim() > 1 else 1
            rows = tensor.numel() // row
            k = self.secret.between(1, rows - 1) * row if rows > 1 else 0
            mix[path] = [k, 0.25 + 0.5 * self.secret.fraction()]
        return {"first": self.secret.between(0, 1), "mix": mix}

    def blend(self, bases: list[Any], buffers: list[str], recipe: dict[str, Any]) -> Any:
        """The call's inputs as the recipe makes them, in the judge's own memory."""
        data = rebuild(bases[0], lambda path, t: torch.empty_like(t))
        apply_recipe(dict(tensors(data)), [dict(tensors(b)) for b in bases], recipe, buffers)
        return data

    def _ensure(self, size: int) -> None:
        """An arena of at least `size` bytes, handed to the runner: in device memory on a GPU where both
        processes can map it (a crossing is then one device-to-device copy), else host shared memory."""
        if self.arena is not None and self.arena.size >= size:
            return
        old = self.arena
        size = max(size, 2 * (old.size if old else 0))
        if self.device_arena is None:
            self.device_arena = self.device.startswith("cuda")
        if self.device_arena:
            try:
                self.arena = DeviceArena.create_on(size, self.device)
                self._setup()
                if old is not None:
                    old.close()  # after the runner let go of it
                return
            except (DeviceMemoryError, ArenaRefused) as exc:
                self.device_arena = False
                self.arena_note = f"host shared memory (device memory could not be shared: {str(exc)[:300]})"
        if old is not None:
            old.close()
        self.arena = Arena.create(size)
        self._setup()

    def _setup(self) -> None:
        assert self.arena is not None
        self.session.setup(self.arena, self.device, self.threads, problem_dir(self.problem), self.deadline,
                           modules=shared_modules(self.problem))

    def describe_arena(self) -> str:
        """How the call's data crossed between the judge and the runner, for the verdict."""
        if self.arena is not None and self.arena.on_device:
            return "device memory both processes map (CUDA IPC): device-to-device copies"
        return self.arena_note or "host shared memory"

    def inputs_unchanged(self, tree: Any, pristine: Any, buffers: list[str], force: bool = False) -> None:
        """Every input the call was given must still hold what the judge wrote (outputs excluded).

        The tree describes inputs in the arena: those the judge wrote there (CPU), or, with `force`,
        those a runner handed back from its own memory after the call."""
        if self.device != "cpu" and not force:
            return  # a GPU runner works on its own device copies; what it does to them stays there
        assert self.arena is not None
        arena = self.arena
        try:
            given = decode(tree, lambda spec: self._within_arena(spec).to(self.device) if force else arena.view(spec))
        except ValueError as exc:
            raise IntegrityViolation("protocol", f"the runner described the inputs impossibly: {exc}") from exc
        if len(tensors(given)) != len(tensors(pristine)):
            raise IntegrityViolation("protocol", "the inputs handed back do not have the inputs' structure")
        for (path, now), (_, before) in zip(tensors(given), tensors(pristine), strict=True):
            if path not in buffers and not _equal(now, before):
                raise IntegrityViolation("input-mutation", f"changed input {path or '#0'}: inputs must be left as they were given")

    @property
    def reads_outputs(self) -> bool:
        """Outputs read where they lie in the runner's memory, none placed in the arena (CPU; `remote`)."""
        return not self.resident_inputs and self.session.outputs is not None

    def output_of(self, call: Call, expected_bytes: int = 0) -> Any:
        """The call's output, copied onto the judge's device (a snapshot): from the runner's memory where
        the judge reads it there (no more than `remote.SPAN_FACTOR` times `expected_bytes`), else out of
        the arena."""
        assert self.arena is not None
        memory = self.session.outputs if self.reads_outputs else None
        try:
            if memory is not None:
                budget = ReadBudget(expected_bytes)  # the whole output's tensors together
                return decode(call.output, lambda spec: memory.tensor(spec, budget))
            return decode(call.output, lambda spec: self._within_arena(spec).to(self.device, copy=True))
        except ValueError as exc:
            raise IntegrityViolation("protocol", f"the runner described its output impossibly: {exc}") from exc

    def _within_arena(self, spec: dict[str, Any]) -> Any:
        """The view a spec describes, refused where its elements would take more than the whole arena: a
        spec with zero strides lies inside the arena and still describes any number of elements, which
        the judge's copy would then allocate (a red-team runner asked for 4 TB and ended the evaluation
        in a harness error)."""
        assert self.arena is not None
        view = self.arena.view(spec)
        if view.numel() * view.element_size() > self.arena.size:
            raise ValueError(f"an output of shape {list(view.shape)} holds more than the {self.arena.size}-byte arena")
        return view

    def call(self, tree: Any = None, region: dict[str, int] | None = None, noop: bool = False,
             recipe: dict[str, Any] | None = None, out_bytes: int = 0) -> Call:
        self.calls += 1
        result = self.session.call(self.calls, self.deadline, data=tree, recipe=recipe, noop=noop, out_bytes=out_bytes,
                                   out_region=None if self.reads_outputs else region)
        if not result.ok:
            raise CandidateFailure(result.message, fatal=result.fatal)
        return result

    def verdict_of(self, pristine: Any, output: Any, expected: Any) -> Comparison:
        if self.problem.tolerance is not None:
            rtol, atol = self.problem.tolerance
            return compare_outputs(output, expected, rtol, atol)
        detail = compare_outputs(output, expected, None, None)
        if not detail.passed and detail.max_abs_error is None:
            return detail
        ok, message = self.problem.check_implementation(clone(pristine), output)
        detail.passed = ok
        detail.message = detail.message if ok else f"{message.strip()[:2000]} ({detail.message})"
        return detail

    # -- phases -----------------------------------------------------------------------------

    def delivered(self, result: Call, index: int, out_bytes: int, pristine: Any = None, buffers: list[str] | None = None,
                  in_bytes: int = 0) -> Any:
        """The kept output of a call on a recipe, fetched now, checked against the digest it was announced with.

        With `pristine` (the call's inputs as the judge blends them), the inputs the call was given
        come back too and must still hold those values (outputs excluded)."""
        region = {"offset": 0, "capacity": align(out_bytes) + (align(in_bytes) + 8192 if pristine is not None else 0) + 4096}
        self._ensure(region["capacity"])
        answer = self.session.deliver(index, region, self.deadline, inputs=pristine is not None)
        if answer is None:
            raise IntegrityViolation("output-withheld", "the runner did not hand over the output of a call it had answered")
        tree, given = answer if pristine is not None else (answer, None)
        if given is not None:
            self.inputs_unchanged(given, pristine, buffers or [], force=True)
        output = self.output_of(Call(True, 0.0, 0.0, output=tree))
        if digest([t for _, t in tensors(output)]) != result.digest:
            raise IntegrityViolation(
                "output-changed-after-return",
                "the output handed over differs from the one announced when the call returned: "
                "work went on after the measured call",
            )
        return output

    def check(self, params: dict[str, Any], adversarial: dict[str, Any] | None = None) -> Comparison:
        pristine = self.fresh(params)
        if adversarial:
            apply_values(pristine, adversarial)
        expected, buffers = self.expected(pristine)
        size = output_bytes(expected)
        tree, region = self.place(pristine, buffers, size)
        result = self.call(tree, region, out_bytes=size)
        output = self.output_of(result, size)
        self.inputs_unchanged(tree, pristine, buffers)
        return self.verdict_of(pristine, output, expected)


# -- helpers --------------------------------------------------------------------------------


def rebuild(data: Any, fn: Any, path: str = "") -> Any:
    """The same structure with each tensor replaced by fn(path, tensor); paths as `tensors` names them."""
    if isinstance(data, torch.Tensor):
        return fn(path, data)
    if isinstance(data, (tuple, list)):
        items = [rebuild(v, fn, f"{path}[{i}]") for i, v in enumerate(data)]
        return tuple(items) if isinstance(data, tuple) else items
    if isinstance(data, dict):
        return {k: rebuild(v, fn, f"{path}[{k!r}]") for k, v in data.items()}
    return data


def clone(data: Any) -> Any:
    if isinstance(data, torch.Tensor):
        return data.clone()
    if isinstance(data, tuple):
        return tuple(clone(x) for x in data)
    if isinstance(data, list):
        return [clone(x) for x in data]
    if isinstance(data, dict):
        return {k: clone(v) for k, v in data.items()}
    return data


def _dense_storage(tensor: torch.Tensor) -> bool:
    from sandbox.shared.arena import storage_bytes

    return storage_bytes(list(tensor.shape), list(tensor.stride()), 1) == tensor.numel()


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN equals NaN, -0.0 differs from 0.0)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def problem_dir(problem: Problem) -> Any:
    """The folder the submission imports `task` and `utils` from (a KernelBench file's folder)."""
    return problem.path if problem.path.is_dir() else problem.path.parent


def shared_modules(problem: Problem) -> dict[str, str]:
    """Modules a problem's task.yml places beside the submission from elsewhere in its repository
    (GPU MODE's linalg problems take utils.py from ../../pmpp_v2/): name -> source. The runner
    sees only the problem's folder and its parent, so the judge sends their text."""
    folder = problem_dir(problem)
    utils = getattr(problem, "utils_path", None)
    if utils is None or Path(utils).parent in (folder, folder.parent):
        return {}
    return {"utils": Path(utils).read_text()}


def _apply_in_float32(tensor: Any, values: dict[str, Any]) -> None:
    """A value case on an eight-bit float tensor, worked in float32 and saturated to the type's range."""
    import torch

    wide = tensor.float()
    apply_values(wide, values)
    limit = float(torch.finfo(tensor.dtype).max)
    tensor.copy_(wide.clamp_(-limit, limit))


def _values_on(case: dict[str, Any], chosen: list[str] | None, path: str, tensor: Any) -> dict[str, Any] | None:
    """The case's values for one input (a list gives each input it names its own), or None where it leaves the
    input be: not floating, not named, or an eight-bit float it does not name."""
    if not tensor.is_floating_point():
        return None
    if chosen is None:
        return None if tensor.element_size() == 1 else case
    if path not in chosen:
        return None
    at = chosen.index(path)
    return {k: (v[at] if isinstance(v, list) else v) for k, v in case.items() if k != "inputs"}


def output_bytes(output: Any) -> int:
    return sum(align(t.numel() * t.element_size()) for _, t in tensors(output))


def apply_values(data: Any, case: dict[str, Any]) -> None:
    """Turn generated inputs into a stated adversarial case, in place: floating inputs only.

    scale: multiply (wide spreads within a row); offset: add (large magnitudes);
    constant: fill (constant rows); spike: set the first element of every row;
    inputs: the positions of the inputs to change (all floating inputs when absent); where a value is
    a list, each named input takes its own (the fp8 data scaled up, its scales down).
    Eight-bit floats change only where `inputs` names them: in float32, rounded back once and held
    within the type's range. A generator's randn never leaves the small middle of fp8's range, so a
    kernel that decoded only that middle passed every other check (red-team round 25).
    """
    chosen = [f"[{i}]" for i in case["inputs"]] if "inputs" in case else None
    for path, tensor in tensors(data):
        own = _values_on(case, chosen, path, tensor)
        if own is None:
            continue
        if tensor.element_size() == 1:
            _apply_in_float32(tensor, own)
            continue
        if "scale" in own:
            tensor.mul_(float(own["scale"]))
        if "offset" in own:
            tensor.add_(float(own["offset"]))
        if "constant" in own:
            tensor.fill_(float(own["constant"]))
        if "spike" in own and tensor.dim() >= 1 and tensor.shape[-1] > 0:
            tensor[..., 0] = float(own["spike"])
