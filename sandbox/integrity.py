"""Defences against candidates that look fast without being fast and correct.

Two kinds: a static scan of the submission's source (an AST walk; every
finding carries a reason and a line), and runtime guards the harness uses
around candidate calls (operator recording, thread and timer checks, input
checksums, output type and stability). Worker side: stdlib and torch only.
"""

from __future__ import annotations

import ast
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from sandbox import timing

# Findings of this severity stop the candidate before it runs.
ERROR, WARNING = "error", "warning"


@dataclass
class Finding:
    rule: str
    severity: str
    line: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Policy:
    """What a problem allows. From task.yml's `kernel_scientist: integrity:` block."""

    forbidden_ops: list[str] = field(default_factory=list)  # aten op names, e.g. "mm", "_softmax"
    allow_threads: bool = False
    allow_streams: bool = True  # side streams are fine if joined before returning
    sol_margin: float = 1.05  # a time under sol/margin is physically impossible

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Policy:
        data = dict(data or {})
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


# -- static scan ----------------------------------------------------------------

_TIMER_TARGETS = {
    ("torch", "cuda", "Event"), ("torch", "cuda", "synchronize"), ("torch", "cuda", "Event", "elapsed_time"),
    ("torch", "cuda", "Event", "record"), ("time", "perf_counter"), ("time", "perf_counter_ns"),
    ("time", "time"), ("time", "monotonic"), ("torch", "cuda", "Stream", "synchronize"),
    ("torch", "Tensor", "__eq__"), ("torch", "allclose"), ("torch", "testing", "assert_close"),
}
_SNOOP_CALLS = {("gc", "get_objects"), ("gc", "get_referrers"), ("sys", "_getframe"), ("inspect", "currentframe"),
                ("inspect", "stack"), ("inspect", "getouterframes"), ("gc", "get_referents")}
_HARNESS_MODULES = {"reference", "sandbox.harness", "sandbox.worker", "sandbox.timing", "sandbox.compare"}
_HARNESS_FILES = ("reference.py", "request.json", "worker.log", "expected")
_WARN_MODULES = {
    "threading": "starts threads: work left running after return is rejected at run time",
    "multiprocessing": "starts processes: work must finish before custom_kernel returns",
    "concurrent": "uses executors: work must finish before custom_kernel returns",
    "subprocess": "runs programs: they share the worker's limits and leave no trace in the timing",
    "socket": "opens network sockets: the worker has no network",
    "urllib": "fetches URLs: the worker has no network",
    "requests": "fetches URLs: the worker has no network",
}


def _dotted(node: ast.AST) -> tuple[str, ...] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return None


class _Scanner(ast.NodeVisitor):
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.findings: list[Finding] = []
        self.aliases: dict[str, tuple[str, ...]] = {}  # local name -> dotted origin

    def add(self, node: ast.AST, rule: str, severity: str, reason: str) -> None:
        self.findings.append(Finding(rule, severity, getattr(node, "lineno", 0), reason))

    def resolve(self, node: ast.AST) -> tuple[str, ...] | None:
        dotted = _dotted(node)
        if dotted and dotted[0] in self.aliases:
            return self.aliases[dotted[0]] + dotted[1:]
        return dotted

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
            self.aliases[alias.asname or alias.name.split(".")[0]] = tuple(
                (alias.name if alias.asname else alias.name.split(".")[0]).split(".")
            )
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._check_module(node, module)
        for alias in node.names:
            origin = tuple(module.split(".")) + (alias.name,)
            self.aliases[alias.asname or alias.name] = origin
            if alias.name == "ref_kernel" or (module == "reference"):
                self.add(node, "reference-call", ERROR, f"imports {alias.name!r} from the problem's reference")
        self.generic_visit(node)

    def _check_module(self, node: ast.AST, module: str) -> None:
        if module in _HARNESS_MODULES:
            self.add(node, "harness-import", ERROR, f"imports {module!r}: the reference and the harness are off limits")
        root = module.split(".")[0]
        if root in _WARN_MODULES and not (root == "threading" and self.policy.allow_threads):
            self.add(node, f"module-{root}", WARNING, f"imports {module!r}: {_WARN_MODULES[root]}")
        if root in ("gc", "inspect"):
            self.add(node, "introspection", WARNING, f"imports {module!r}: looking into the harness's memory is rejected")

    def _assigned(self, target: ast.AST) -> None:
        dotted = self.resolve(target)
        if dotted and dotted in _TIMER_TARGETS:
            self.add(target, "timer-patch", ERROR, f"replaces {'.'.join(dotted)}, which the harness uses to time and check")
        if dotted and dotted[:1] == ("builtins",):
            self.add(target, "builtins-patch", ERROR, f"replaces builtins.{'.'.join(dotted[1:])}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._assigned(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assigned(node.target)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        dotted = self.resolve(node.func)
        if dotted:
            name = ".".join(dotted)
            if dotted[-1] == "ref_kernel":
                self.add(node, "reference-call", ERROR, "calls the problem's ref_kernel")
            if dotted in _SNOOP_CALLS or dotted[-2:] in _SNOOP_CALLS:
                self.add(node, "introspection", ERROR, f"calls {name}: reading the harness's objects or frames")
            if dotted in (("setattr",),) and node.args:
                target = self.resolve(node.args[0])
                attr = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
                if target and attr and target + (attr,) in _TIMER_TARGETS:
                    self.add(node, "timer-patch", ERROR, f"setattr replaces {'.'.join(target + (attr,))}")
            if dotted[-1] in ("open", "read_text", "read_bytes", "loadtxt", "load") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    if any(f in first.value for f in _HARNESS_FILES):
                        self.add(node, "harness-file", ERROR, f"reads {first.value!r}: the harness's files are off limits")
            if dotted[:3] == ("torch", "cuda", "Stream") or dotted[-1] == "Stream":
                self.add(node, "side-stream", WARNING, "creates a CUDA stream: its work must be joined before returning")
            for op in self.policy.forbidden_ops:
                if dotted[-1] == op.lstrip("_") and dotted[0] in ("torch", "F", "nn", "functional"):
                    self.add(node, "forbidden-op", WARNING, f"calls {name}, which this problem forbids in the timed path")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in ("__subclasses__", "__globals__", "f_back", "f_locals", "f_globals"):
            self.add(node, "introspection", ERROR, f"uses {node.attr}: reading the harness's objects or frames")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and {"mm", "matmul"} & set(self.policy.forbidden_ops):
            self.add(node, "forbidden-op", WARNING, "uses the @ operator, a library matmul this problem forbids")
        self.generic_visit(node)


def scan_source(source: str, policy: Policy | None = None) -> list[Finding]:
    """Findings for a submission's source; a syntax error is one finding."""
    policy = policy or Policy()
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [Finding("syntax", ERROR, exc.lineno or 0, f"not valid Python: {exc.msg}")]
    scanner = _Scanner(policy)
    scanner.visit(tree)
    return scanner.findings


# -- runtime guards ---------------------------------------------------------------


class IntegrityViolation(Exception):
    """A candidate did something the harness does not allow; the message says what."""

    def __init__(self, rule: str, reason: str) -> None:
        super().__init__(reason)
        self.rule = rule
        self.reason = reason


class OpRecorder(TorchDispatchMode):
    """Records every aten operator a candidate's call dispatches."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        packet = getattr(func, "overloadpacket", None)
        self.ops.add(getattr(packet, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def check_ops(recorded: set[str], policy: Policy) -> None:
    used = sorted(recorded & set(policy.forbidden_ops))
    if used:
        raise IntegrityViolation(
            "forbidden-op",
            f"called the library operator(s) {', '.join(used)}, which this problem forbids: write the kernel",
        )


def timers_intact() -> None:
    """The functions the harness measures and checks with must be the originals."""
    import time as time_module

    checks = {
        "torch.cuda.Event": (torch.cuda.Event, timing._Event),
        "torch.cuda.synchronize": (torch.cuda.synchronize, timing._synchronize),
        "time.perf_counter": (time_module.perf_counter, timing._perf_counter),
        "time.perf_counter_ns": (time_module.perf_counter_ns, timing._perf_counter_ns),
        "torch.cuda.Event.elapsed_time": (torch.cuda.Event.elapsed_time, timing._elapsed_time),
        "torch.cuda.Event.record": (torch.cuda.Event.record, timing._record),
    }
    for name, (now, original) in checks.items():
        if now is not original:
            raise IntegrityViolation("timer-patch", f"replaced {name}, which the harness times with")


def plain_tensors(output: Any, device: str) -> None:
    """Outputs must be ordinary tensors on the problem's device, holding real data."""
    items = output if isinstance(output, (tuple, list)) else [output]
    for item in items:
        if not isinstance(item, torch.Tensor):
            continue
        if type(item) is not torch.Tensor and not isinstance(item, torch.nn.Parameter):
            raise IntegrityViolation(
                "tensor-subclass",
                f"returned a {type(item).__name__} (a torch.Tensor subclass): lazy or deferred results are rejected",
            )
        if item.is_meta or item.device.type != torch.device(device).type:
            raise IntegrityViolation("device", f"returned a tensor on {item.device}, expected {device}")


def fingerprint(data: Any) -> list[tuple[Any, bytes | None]]:
    """A cheap content digest of each input tensor, to see what a call changed."""
    items = data if isinstance(data, (tuple, list)) else [data]
    prints = []
    for i, item in enumerate(items):
        if isinstance(item, torch.Tensor) and item.numel():
            raw = item.detach().reshape(-1).view(torch.uint8) if item.is_contiguous() else item.detach().contiguous().reshape(-1).view(torch.uint8)
            # Sums of strided slices: position-sensitive, computed on the device.
            words = raw[: raw.numel() // 8 * 8].view(torch.int64) if raw.numel() >= 8 else raw.to(torch.int64)
            digest = torch.stack([words.sum(), words[::7].sum(), words[1::3].sum(), torch.tensor(raw.numel(), device=raw.device)])
            prints.append((i, digest.cpu().numpy().tobytes()))
        else:
            prints.append((i, None))
    return prints


def inputs_unchanged(before: list[tuple[Any, bytes | None]], after: list[tuple[Any, bytes | None]], outputs: list[Any]) -> None:
    for (i, a), (_, b) in zip(before, after, strict=True):
        if i in outputs or a is None:
            continue
        if a != b:
            raise IntegrityViolation("input-mutation", f"changed input #{i}: inputs must be left as they were given")


class ThreadWatch:
    """Python threads a call starts must have finished when it returns."""

    def __init__(self, allowed: bool) -> None:
        self.allowed = allowed
        self.before: set[int] = set()

    def __enter__(self) -> ThreadWatch:
        self.before = {t.ident for t in threading.enumerate() if t.ident is not None}
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None or self.allowed:
            return
        left = [t for t in threading.enumerate() if t.ident not in self.before and t.is_alive()]
        if left:
            names = ", ".join(t.name for t in left)
            raise IntegrityViolation("thread-left-running", f"left thread(s) running after returning: {names}")


def _bytes_of(output: Any) -> list[torch.Tensor]:
    items = output if isinstance(output, (tuple, list)) else [output]
    return [t.detach().clone() for t in items if isinstance(t, torch.Tensor)]


def stable_after_return(output: Any, device: str, settle_s: float = 0.01) -> None:
    """The output must not change after the call returned.

    On the GPU the snapshot waits only for the current stream (what the timing
    events see); work on another stream or a thread that is still writing
    shows up as a difference once the whole device has been synchronised.
    """
    if device.startswith("cuda"):
        torch.cuda.current_stream().synchronize()
    snapshot = _bytes_of(output)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    time.sleep(settle_s)
    after = _bytes_of(output)
    for before, now in zip(snapshot, after, strict=True):
        if not torch.equal(before.view(torch.uint8) if before.is_contiguous() else before.contiguous().view(torch.uint8),
                           now.view(torch.uint8) if now.is_contiguous() else now.contiguous().view(torch.uint8)):
            raise IntegrityViolation(
                "work-after-return",
                "the output changed after custom_kernel returned: work was still running on another stream or thread",
            )
