"""What a problem allows, the violation the judge raises, and an advisory scan of the source.

Defences no longer live in the candidate's process: the judge (sandbox/judge/) decides from
what it observes. The static scan only reads the source (an AST walk; every finding carries
a reason and a line) and its findings are warnings for the Critic and the Coder, never a
verdict: a scan can be fooled by `getattr` on built strings, and it must not reject honest
code that happens to use a name. Standard library only.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from typing import Any

# Only a syntax error is an error (the import would fail anyway); everything else is advice.
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
    # Regular expressions over the (mangled) symbols of library code the runner ran, e.g. "gemm".
    forbidden_symbols: list[str] = field(default_factory=list)
    # Regular expressions over the file names of libraries whose code the runner may not run at all, e.g.
    # "^libcublas": their pages mapped into the runner after the candidate loaded (sandbox/judge/footprint.py).
    forbidden_libraries: list[str] = field(default_factory=list)
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
                self.add(node, "reference-call", WARNING, f"imports {alias.name!r} from the problem's reference")
        self.generic_visit(node)

    def _check_module(self, node: ast.AST, module: str) -> None:
        if module in _HARNESS_MODULES:
            self.add(node, "harness-import", WARNING, f"imports {module!r}: the judge runs in another process; nothing there is reachable")
        root = module.split(".")[0]
        if root in _WARN_MODULES and not (root == "threading" and self.policy.allow_threads):
            self.add(node, f"module-{root}", WARNING, f"imports {module!r}: {_WARN_MODULES[root]}")
        if root in ("gc", "inspect"):
            self.add(node, "introspection", WARNING, f"imports {module!r}: the judge's memory is in another process")

    def _assigned(self, target: ast.AST) -> None:
        dotted = self.resolve(target)
        if dotted and dotted in _TIMER_TARGETS:
            self.add(target, "timer-patch", WARNING, f"replaces {'.'.join(dotted)}, which the harness uses to time and check")
        if dotted and dotted[:1] == ("builtins",):
            self.add(target, "builtins-patch", WARNING, f"replaces builtins.{'.'.join(dotted[1:])}")

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
                self.add(node, "reference-call", WARNING, "calls the problem's ref_kernel")
            if dotted in _SNOOP_CALLS or dotted[-2:] in _SNOOP_CALLS:
                self.add(node, "introspection", WARNING, f"calls {name}: reading the harness's objects or frames")
            if dotted in (("setattr",),) and node.args:
                target = self.resolve(node.args[0])
                attr = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
                if target and isinstance(attr, str) and target + (attr,) in _TIMER_TARGETS:
                    self.add(node, "timer-patch", WARNING, f"setattr replaces {'.'.join(target + (attr,))}")
            if dotted[-1] in ("open", "read_text", "read_bytes", "loadtxt", "load") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    if any(f in first.value for f in _HARNESS_FILES):
                        self.add(node, "harness-file", WARNING, f"reads {first.value!r}: the harness's files are off limits")
            if dotted[:3] == ("torch", "cuda", "Stream") or dotted[-1] == "Stream":
                self.add(node, "side-stream", WARNING, "creates a CUDA stream: its work must be joined before returning")
            for op in self.policy.forbidden_ops:
                if dotted[-1] == op.lstrip("_") and dotted[0] in ("torch", "F", "nn", "functional"):
                    self.add(node, "forbidden-op", WARNING, f"calls {name}, which this problem forbids in the timed path")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in ("__subclasses__", "__globals__", "f_back", "f_locals", "f_globals"):
            self.add(node, "introspection", WARNING, f"uses {node.attr}: reading the harness's objects or frames")
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


# -- what the judge raises -------------------------------------------------------------


class IntegrityViolation(Exception):
    """A candidate did something the judge does not allow; `rule` names the rule, `reason` says what."""

    def __init__(self, rule: str, reason: str, detail: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.rule = rule
        self.reason = reason
        self.detail = detail  # the measurements behind the rejection, kept in the verdict
        self.attempts = 1  # how often the measurement it refuses was made (a timing is measured again)
