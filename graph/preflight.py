"""Checks before a run starts: a run that cannot work ends at once with exit code 2 and one line,
instead of creating a run that idles without a GPU or quietly loses its LLM after minutes of retries."""

from __future__ import annotations

import ast
import importlib.util
import logging
import sys
from pathlib import Path

from graph.config import ROLES, TARGETS, LLMSettings, RunConfig, unknown_target
from sandbox.devices import gpu_found

log = logging.getLogger(__name__)

PING_TIMEOUT_S = 20.0  # a first small request; a healthy endpoint answers in a few seconds
# Every refusal that this machine's setup can cause names the doctor, which lists what is missing and the fix.
DOCTOR_HINT = "`kernel-scientist doctor` says what is missing"
_VENDOR = {"cuda": ("NVIDIA", "nvidia-smi"), "hip": ("AMD", "/sys/class/kfd")}


class PreflightError(ValueError):
    """A reason the run cannot start, in one line the user can act on."""


def check_target(target: str) -> None:
    """The target exists and, for a GPU target, this host has a GPU of its vendor."""
    if target not in TARGETS:
        raise PreflightError(unknown_target(target))
    if not gpu_found(target):
        vendor, probe = _VENDOR[target]
        raise PreflightError(
            f"--target {target} needs an {vendor} GPU and {probe} shows none on this machine; "
            f"use --target cpu here, or run on a host with one ({DOCTOR_HINT})"
        )


def check_llm(settings: LLMSettings) -> None:
    """Each distinct endpoint answers one tiny request, without retries: a wrong URL, model name or
    key fails here in seconds instead of being retried for every role of every generation."""
    from agents.llm import make_role_llm

    seen: set[tuple[str | None, str, str]] = set()
    for role in ROLES:
        config = settings.for_role(role)
        if config is None or (config.base_url, config.model, config.api_key_env) in seen:
            continue
        seen.add((config.base_url, config.model, config.api_key_env))
        quick = config.model_copy(update={"max_retries": 0, "timeout_s": min(config.timeout_s, PING_TIMEOUT_S)})
        where = f"model {config.model!r} at {config.base_url or 'the OpenAI API'}"
        try:
            reply = make_role_llm("preflight", quick).text("Answer with one word.", "Are you there?")
        except Exception as exc:  # e.g. no API key and no base_url: the client refuses to start
            raise PreflightError(f"{where} cannot be used: {exc} ({DOCTOR_HINT})") from exc
        if not reply.ok:
            raise PreflightError(f"{where} did not answer a first small request: {reply.error} ({DOCTOR_HINT})")
        log.info("LLM %s answered", where)


PROBLEM_MODULES = {"task", "utils", "reference", "submission"}  # what a GPU MODE harness puts beside it


def _module_tree(submission: Path) -> ast.Module | None:
    try:
        return ast.parse(submission.read_text())
    except (OSError, SyntaxError, ValueError):
        return None  # the judge reports what is wrong with the file itself, with the line


def missing_imports(tree: ast.Module) -> list[str]:
    """Top-level modules the submission imports that this Python cannot find (helion, aiter,
    cutlass, triton, ...): found before an evaluation instead of as a bare ModuleNotFoundError."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    candidates = sorted(names - PROBLEM_MODULES - set(sys.stdlib_module_names))
    return [name for name in candidates if importlib.util.find_spec(name) is None]


def module_names(tree: ast.Module) -> set[str]:
    """Names the module binds at its top level: functions, classes, assignments, imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def check_submission(submission: Path, entry: str = "custom_kernel") -> None:
    """A submission that cannot be a candidate is a user's mistake, said in one line: it imports
    what is not installed, or never defines its entry point (custom_kernel; ModelNew for KernelBench)."""
    tree = _module_tree(submission)
    if tree is None:
        return
    missing = missing_imports(tree)
    if missing:
        raise PreflightError(
            f"{submission.name} imports {', '.join(missing)}, not installed in this environment: install "
            f"{'it' if len(missing) == 1 else 'them'} (e.g. pip install {' '.join(missing)}) where the GPU it targets is"
        )
    if entry not in module_names(tree) and "*" not in module_names(tree):
        shape = "class ModelNew" if entry == "ModelNew" else "custom_kernel(data)"
        raise PreflightError(f"{submission.name} defines no {shape}, which the judge calls")


def directive_notes(config: RunConfig) -> list[str]:
    """What the user should know about their directives: without an LLM nobody reads them."""
    if config.directives and not config.llm.configured:
        return [
            f"{len(config.directives)} directive(s) stored but unused: only the LLM roles read directives, "
            "and this run has no LLM (the Tuner explores the seed's tunables)"
        ]
    return []
