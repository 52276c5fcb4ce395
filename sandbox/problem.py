"""Kernel problems in one internal form, from two public formats.

GPU MODE `reference-kernels` directories are loaded as they are: `task.yml`
(tests, benchmarks, ranking_by), `reference.py` (generate_input, ref_kernel,
check_implementation), `task.py`, a `utils.py` beside or one level up, and a
submission defining `custom_kernel(data)`. Our bundled problems use the same
format plus an optional `kernel_scientist:` block in task.yml (tolerance,
FLOPs and bytes per shape, per-target shape lists).

KernelBench files (`Model`, `get_inputs`, `get_init_inputs`; a candidate
defines `ModelNew`) go through an adapter into the same form.

Worker side: torch, the standard library and PyYAML only.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import math
import operator
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sandbox.shared import HARNESS_OPS

PROBLEMS_DIR = Path(__file__).resolve().parent.parent / "problems"

# Modules a GPU MODE problem brings under these top-level names.
_PROBLEM_MODULES = ("task", "utils", "reference", "submission")


class ProblemError(ValueError):
    """The problem's files are missing or malformed."""


class SubmissionError(ValueError):
    """The submission cannot be loaded as a candidate for this problem."""


def _load_module(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


def eval_size_expression(expr: str | int | float, params: dict[str, Any]) -> float:
    """Evaluate an arithmetic formula such as '2*m*n*k' over shape parameters.

    Only numbers, parameter names, + - * / // % ** and ceil/min/max are allowed:
    task.yml files come from users and are never handed to eval().
    """
    if isinstance(expr, (int, float)):
        return float(expr)
    funcs: dict[str, Callable[..., Any]] = {"ceil": math.ceil, "min": min, "max": max}

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in params:
                raise ProblemError(f"unknown name {node.id!r} in {expr!r}")
            return params[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in funcs
            and not node.keywords
        ):
            return funcs[node.func.id](*[walk(a) for a in node.args])
        raise ProblemError(f"unsupported expression in {expr!r}")

    try:
        tree = ast.parse(str(expr), mode="eval")
    except SyntaxError as exc:
        raise ProblemError(f"bad expression {expr!r}: {exc}") from exc
    return float(walk(tree))


@dataclass
class Roofline:
    """What one call must do at least: FLOPs, bytes moved, and the math unit used."""

    flops: str | float | None = None
    bytes: str | float | None = None
    compute: str = "fp32"  # which peak applies: fp32, tf32, bf16, fp16, fp8

    def at(self, params: dict[str, Any]) -> tuple[float | None, float | None]:
        flops = eval_size_expression(self.flops, params) if self.flops is not None else None
        nbytes = eval_size_expression(self.bytes, params) if self.bytes is not None else None
        return flops, nbytes


@dataclass
class Problem:
    """A problem as the harness sees it, whatever format it came from."""

    name: str
    kind: str  # "gpumode" or "kernelbench"
    path: Path
    description: str
    tests: list[dict[str, Any]]
    benchmarks: list[dict[str, Any]]
    ranking_by: str = "geom"
    tolerance: tuple[float, float] | None = None  # (rtol, atol), None: the problem's own check
    roofline: Roofline = field(default_factory=Roofline)
    targets: list[str] = field(default_factory=lambda: ["cuda"])
    # Seed submissions by "target" (the default) or "target:variant" ("cuda:triton").
    seeds: dict[str, Path] = field(default_factory=dict)
    # What candidates may do (forbidden library operators, threads): integrity.Policy fields.
    integrity: dict[str, Any] = field(default_factory=dict)
    # Value patterns every kernel must handle (sandbox/judge/checks.apply_values), checked on every test shape.
    adversarial: list[dict[str, Any]] = field(default_factory=list)
    # GPU MODE: the utils.py the reference imports (task.yml's `files:` may name one elsewhere in the tree).
    utils_path: Path | None = None
    # Set by bind(): the loaded reference functions.
    _generate: Callable[..., Any] | None = None
    _reference: Callable[[Any], Any] | None = None
    _check: Callable[[Any, Any], Any] | None = None
    _kb: dict[str, Any] = field(default_factory=dict)

    def seed_for(self, target: str, variant: str | None = None) -> Path:
        key = f"{target}:{variant}" if variant else target
        if key not in self.seeds:
            if not self.seeds:  # KernelBench files and most GPU MODE folders bring none: say what to give
                entry = "class ModelNew" if self.kind == "kernelbench" else "custom_kernel(data)"
                raise ProblemError(f"{self.name} comes with no seed kernel: give a file that defines {entry} "
                                   "(eval PROBLEM SUBMISSION, run PROBLEM --seed SUBMISSION)")
            known = ", ".join(sorted(self.seeds))
            raise ProblemError(f"{self.name} has no seed for {key!r} (seeds: {known})")
        return self.seeds[key]

    def shape_label(self, params: dict[str, Any]) -> str:
        """Shapes by their parameters; where the seed is all that tells them apart (KernelBench's
        fixed `get_inputs`), by the seed, so that no two rows read "default"."""
        label = ", ".join(f"{k}={v}" for k, v in params.items() if k != "seed")
        return label or (f"seed={params['seed']}" if "seed" in params else "default")

    # -- reference side (imports torch; only call inside a worker) -----------

    def bind(self) -> None:
        """Import the reference code (task.py, utils.py, reference.py)."""
        if self.kind == "gpumode":
            _bind_gpumode(self)
        else:
            _bind_kernelbench(self)

    def generate_input(self, params: dict[str, Any], device: str) -> Any:
        import torch

        assert self._generate is not None, "bind() first"
        with torch.device(device):
            return self._generate(**params)

    def reference(self, data: Any) -> Any:
        assert self._reference is not None, "bind() first"
        return self._reference(data)

    def check_implementation(self, data: Any, output: Any) -> tuple[bool, str]:
        """The problem's own check, normalised to (passed, message)."""
        assert self._check is not None, "bind() first"
        result = self._check(data, output)
        if isinstance(result, tuple):
            ok, message = bool(result[0]), str(result[1]) if len(result) > 1 else ""
            return ok, message
        if isinstance(result, str):
            return result == "", result
        return bool(result), ""

    def load_submission(self, path: Path) -> Callable[[Any], Any]:
        """Import a candidate and return its `custom_kernel(data)` callable."""
        if self.kind == "gpumode":
            module = _load_module("submission", path)
            kernel = getattr(module, "custom_kernel", None)
            if not callable(kernel):
                raise SubmissionError(f"{path.name} defines no custom_kernel(data)")
            return kernel
        return _load_kernelbench_candidate(self, path)


# -- GPU MODE format ---------------------------------------------------------


def _read_task_yml(path: Path) -> dict[str, Any]:
    try:
        task = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ProblemError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(task, dict):
        raise ProblemError(f"{path}: expected a mapping at the top level")
    return task


def _shape_list(value: Any, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ProblemError(f"{where}: expected a list of shape mappings")
    return [dict(v) for v in value]


def _declared_files(task: dict[str, Any], directory: Path) -> dict[str, Path]:
    """task.yml's `files:` list (name -> source, relative to the problem), as the competition's
    runner copies them beside the submission: how a problem names a utils.py kept elsewhere."""
    files: dict[str, Path] = {}
    for entry in task.get("files") or []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("source"), str):
            if not entry["source"].startswith("@"):
                files[entry["name"]] = (directory / entry["source"]).resolve()
    return files


def _reference_signature(reference: Path) -> tuple[list[str], str]:
    """generate_input's parameter names and the reference's source, read without importing it."""
    source = reference.read_text()
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ProblemError(f"{reference}: not valid Python: {exc}") from exc
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "generate_input":
            return [a.arg for a in node.args.args + node.args.kwonlyargs], source
    return [], source


_CUDA_INPUTS = re.compile(r"""device\s*=\s*["']cuda|\.cuda\(\)|DEVICE\s*=\s*["']cuda""")


def _refuse_what_cannot_run(directory: Path, reference: Path, target: str | None, ours: dict[str, Any]) -> None:
    """Problems that load but cannot run here, refused with the reason and what would run them."""
    params, source = _reference_signature(reference)
    if "rank" in params or "world_size" in params:
        raise ProblemError(
            f"{directory.name} is a distributed problem (its generate_input takes {', '.join(params)}): it needs "
            "several GPUs under torch.distributed, which the sandbox does not run"
        )
    declares_cpu = "cpu" in (ours.get("targets") or {}) or any(str(k).startswith("cpu") for k in ours.get("seeds") or {})
    if target == "cpu" and not declares_cpu and _CUDA_INPUTS.search(source):
        raise ProblemError(
            f"{directory.name} makes its inputs on a CUDA device (reference.py): it needs --target cuda "
            "(an NVIDIA GPU) or --target hip (an AMD GPU); the CPU target cannot run it"
        )


def load_gpumode(directory: Path, target: str | None = None) -> Problem:
    directory = directory.resolve()
    task_file = directory / "task.yml"
    if not task_file.is_file():
        raise ProblemError(f"{directory}: no task.yml (not a GPU MODE problem directory)")
    task = _read_task_yml(task_file)
    declared = _declared_files(task, directory)
    reference = declared.get("reference.py", directory / "reference.py")
    if not reference.is_file():
        raise ProblemError(f"{directory}: missing reference.py")
    if not declared.get("task.py", directory / "task.py").is_file():
        own = " and its own eval.py defines what a submission provides" if (directory / "eval.py").is_file() else ""
        raise ProblemError(
            f"{directory}: no task.py{own}; the sandbox runs problems whose submissions define "
            "custom_kernel(data) with the types task.py declares"
        )
    utils = next(
        (p for p in (declared.get("utils.py"), directory / "utils.py", directory.parent / "utils.py") if p and p.is_file()),
        None,
    )
    if utils is None:
        raise ProblemError(f"{directory}: no utils.py beside it, one level up, or named in task.yml's files")
    ours = task.get("kernel_scientist") or {}
    _refuse_what_cannot_run(directory, reference, target, ours)
    tests = _shape_list(task.get("tests"), f"{task_file}: tests")
    benchmarks = _shape_list(task.get("benchmarks"), f"{task_file}: benchmarks")
    # Per-target shape lists, e.g. smaller shapes for the CPU.
    per_target = (ours.get("targets") or {}).get(target or "", {}) or {}
    tests = _shape_list(per_target.get("tests"), "tests") or tests
    benchmarks = _shape_list(per_target.get("benchmarks"), "benchmarks") or benchmarks
    if not tests:
        raise ProblemError(f"{task_file}: no tests")
    tol = ours.get("tolerance")
    tolerance = (float(tol["rtol"]), float(tol["atol"])) if tol else None
    roof = ours.get("roofline") or {}
    seeds = {
        str(t): (directory / p).resolve() for t, p in (ours.get("seeds") or {}).items()
    }
    if not seeds and (directory / "submission.py").is_file():
        seeds = {"cuda": directory / "submission.py"}
    return Problem(
        name=str(ours.get("name") or directory.name),
        kind="gpumode",
        path=directory,
        description=str(task.get("description", "")).strip(),
        tests=tests,
        benchmarks=benchmarks,
        ranking_by=str(task.get("ranking_by", "geom")),
        tolerance=tolerance,
        roofline=Roofline(
            flops=roof.get("flops"), bytes=roof.get("bytes"), compute=roof.get("compute", "fp32")
        ),
        targets=sorted({t.split(":")[0] for t in seeds}) or ["cuda"],
        seeds=seeds,
        integrity=_integrity(ours.get("integrity") or {}, task_file),
        adversarial=_adversarial(ours.get("adversarial"), task_file),
        utils_path=utils,
    )


def _integrity(block: Any, where: Path) -> dict[str, Any]:
    if not isinstance(block, dict):
        raise ProblemError(f"{where}: integrity: expected a mapping")
    clash = sorted(set(block.get("forbidden_ops") or []) & HARNESS_OPS)
    if clash:
        raise ProblemError(f"{where}: integrity: forbidden_ops {clash} are operators the sandbox's runner uses itself")
    for key in ("forbidden_symbols", "forbidden_libraries"):
        for pattern in block.get(key) or []:
            try:
                re.compile(pattern)
            except (re.error, TypeError) as exc:
                raise ProblemError(f"{where}: integrity: {key}: {pattern!r} is not a regular expression ({exc})") from exc
    return dict(block)


_VALUE_CASES = {"name", "scale", "offset", "constant", "spike", "inputs"}


def _adversarial(value: Any, where: Path) -> list[dict[str, Any]]:
    """The `adversarial:` list of task.yml: mappings of name, scale, offset, constant, spike, and the
    positions of the inputs they change (`inputs: [0]`; all floating inputs when absent)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ProblemError(f"{where}: adversarial: expected a list of mappings")
    for case in value:
        unknown = set(case) - _VALUE_CASES
        if unknown or len(case.keys() - {"name", "inputs"}) == 0:
            raise ProblemError(f"{where}: adversarial case {case}: use {sorted(_VALUE_CASES)}")
        lists = [k for k, v in case.items() if isinstance(v, list) and k != "inputs"]
        named = case.get("inputs")
        if lists and not (isinstance(named, list) and all(len(case[k]) == len(named) for k in lists)):
            raise ProblemError(f"{where}: adversarial case {case}: a list of values needs `inputs` of the same length")
    return [dict(v) for v in value]


def _bind_gpumode(problem: Problem) -> None:
    directory = problem.path
    for name in _PROBLEM_MODULES:
        sys.modules.pop(name, None)
    # reference.py and submissions import `task` and `utils` as top-level modules.
    for entry in (str(directory.parent), str(directory)):
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
    _load_module("utils", problem.utils_path or directory / "utils.py")
    _load_module("task", directory / "task.py")
    reference = _load_module("reference", directory / "reference.py")
    for needed in ("generate_input", "ref_kernel", "check_implementation"):
        if not callable(getattr(reference, needed, None)):
            raise ProblemError(f"{directory}/reference.py defines no {needed}()")
    problem._generate = reference.generate_input
    problem._reference = reference.ref_kernel
    problem._check = reference.check_implementation


# -- KernelBench format ------------------------------------------------------

KERNELBENCH_TOLERANCE = (1e-2, 1e-2)  # KernelBench's own default atol/rtol


def load_kernelbench(path: Path) -> Problem:
    path = path.resolve()
    if not path.is_file():
        raise ProblemError(f"{path}: no such file")
    try:
        tree = ast.parse(path.read_text())
    except SyntaxError as exc:
        raise ProblemError(f"{path}: not valid Python: {exc}") from exc
    names = {
        n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))
    }
    missing = {"Model", "get_inputs", "get_init_inputs"} - names
    if missing:
        raise ProblemError(f"{path}: not a KernelBench problem, missing {sorted(missing)}")
    doc = ast.get_docstring(tree) or ""
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    description = ast.get_docstring(model) or doc
    return Problem(
        name=path.stem,
        kind="kernelbench",
        path=path,
        description=description.strip(),
        tests=[{"seed": s} for s in (42, 1234, 7)],
        benchmarks=[{"seed": 42}],
        tolerance=KERNELBENCH_TOLERANCE,
        targets=["cuda", "cpu"],
    )


def _module_name(path: Path) -> str:
    return "ks_kb_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]


def _bind_kernelbench(problem: Problem) -> None:
    import torch

    module = _load_module(_module_name(problem.path), problem.path)
    problem._kb["module"] = module
    problem._kb["models"] = {}

    def model_on(device: str) -> Any:
        models = problem._kb["models"]
        if device not in models:
            # Same seed before building both models, so their weights agree.
            torch.manual_seed(problem._kb.get("init_seed", 42))
            init = module.get_init_inputs()
            models[device] = module.Model(*init).to(device).eval()
        return models[device]

    def generate(seed: int = 42) -> Any:
        device = torch.get_default_device()
        torch.manual_seed(seed)
        inputs = module.get_inputs()
        return tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs)

    def reference(data: Any) -> Any:
        device = next((x.device for x in data if isinstance(x, torch.Tensor)), "cpu")
        with torch.no_grad():
            return model_on(str(device))(*data)

    problem._generate = generate
    problem._reference = reference
    problem._check = None  # the harness compares with KernelBench's tolerance


def _load_kernelbench_candidate(problem: Problem, path: Path) -> Callable[[Any], Any]:
    import torch

    module = _load_module("submission", path)
    model_new = getattr(module, "ModelNew", None)
    if model_new is None:
        raise SubmissionError(f"{path.name} defines no class ModelNew")
    kb = problem._kb["module"]
    instances: dict[str, Any] = {}

    def custom_kernel(data: Any) -> Any:
        device = str(next((x.device for x in data if isinstance(x, torch.Tensor)), "cpu"))
        if device not in instances:
            torch.manual_seed(problem._kb.get("init_seed", 42))
            instances[device] = model_new(*kb.get_init_inputs()).to(device).eval()
        with torch.no_grad():
            return instances[device](*data)

    return custom_kernel


# -- finding problems ---------------------------------------------------------


def bundled_problems() -> dict[str, Path]:
    """Bundled problem directories by name."""
    if not PROBLEMS_DIR.is_dir():
        return {}
    return {
        p.name: p for p in sorted(PROBLEMS_DIR.iterdir()) if (p / "task.yml").is_file()
    }


def load_problem(spec: str | Path, target: str | None = None) -> Problem:
    """A bundled problem's name, a GPU MODE directory or a KernelBench file."""
    path = Path(spec)
    if path.is_dir():
        return load_gpumode(path, target)
    if path.is_file() and path.suffix == ".py":
        return load_kernelbench(path)
    bundled = bundled_problems()
    if str(spec) in bundled:
        return load_gpumode(bundled[str(spec)], target)
    known = ", ".join(bundled) or "none"
    raise ProblemError(
        f"no problem {str(spec)!r}: not a directory with task.yml, not a KernelBench .py file, "
        f"and not a bundled problem (bundled: {known})"
    )
