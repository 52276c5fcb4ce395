"""What the graph's nodes work with: the run's archive, sandbox, roles and progress display.

Passed to LangGraph as the runtime context, so none of it is checkpointed: it is rebuilt when a
run resumes, from the run's directory.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from agents.coder import Coder
from agents.critic import Critic
from agents.outcome import Outcome
from agents.researcher import Researcher
from agents.selector import Selector
from agents.views import KernelView, ProblemView
from graph.archive import Archive, KernelRecord
from graph.config import RunConfig
from graph.evaluation import RunEvaluator
from sandbox.integrity import Policy

log = logging.getLogger(__name__)

# The step an LLM call belongs to ("g3e1/coder/0"), so the archive files each call under it.
current_step: contextvars.ContextVar[str | None] = contextvars.ContextVar("current_step", default=None)

M = TypeVar("M", bound=BaseModel)


class Progress(Protocol):
    def event(self, kind: str, **data: Any) -> None: ...


class LogProgress:
    """Progress as log lines (headless runs without a terminal)."""

    def event(self, kind: str, **data: Any) -> None:
        log.info("%s %s", kind, " ".join(f"{k}={v}" for k, v in data.items()))


@dataclass
class RunContext:
    run_id: str
    run_dir: Path
    config: RunConfig
    archive: Archive
    evaluator: RunEvaluator
    problem_path: Path
    view: ProblemView
    selector: Selector
    researcher: Researcher
    coder: Coder | None
    critic: Critic
    knowledge: Callable[[], Any] | None = None  # returns a KnowledgeBase, opened on first use
    progress: Progress = field(default_factory=LogProgress)
    session_started: float = field(default_factory=time.time)
    stop: threading.Event = field(default_factory=threading.Event)
    llm_seconds: float = 0.0  # for the overhead benchmark
    _memo_lock: threading.Lock = field(default_factory=threading.Lock)

    @cached_property
    def integrity_policy(self) -> Policy:
        """The problem's integrity policy, for the Critic's static scan (loaded once)."""
        from sandbox.problem import load_problem

        try:
            return Policy(**load_problem(self.problem_path, self.config.target).integrity)
        except TypeError:
            return Policy()

    @property
    def llm_enabled(self) -> bool:
        return self.coder is not None

    def kernel_view(self, record: KernelRecord | None) -> KernelView | None:
        return None if record is None else KernelView.model_validate(record.model_dump())

    def population(self) -> list[KernelRecord]:
        return self.archive.kernels()

    def memo_outcome(self, key: str, model: type[M], compute: Callable[[], Outcome[M]]) -> Outcome[M]:
        """A role's outcome, computed once per run: a resumed run reads it back instead of asking
        the LLM again."""
        stored = self.memo_value(key, lambda: compute().to_dict())
        return Outcome(model.model_validate(stored["value"]), stored["by"], stored.get("error"))

    def memo_value(self, key: str, compute: Callable[[], Any]) -> Any:
        stored = self.archive.get_step(key)
        if stored is not None:
            return stored
        token = current_step.set(key)
        try:
            value = compute()
        finally:
            current_step.reset(token)
        self.archive.put_step(key, value)
        return value

    def record_llm_call(self, record: Any) -> None:
        data = record.model_dump(mode="json") if hasattr(record, "model_dump") else dict(record)
        self.llm_seconds += float(data.get("latency_s") or 0.0)
        self.archive.add_llm_call(data, step=current_step.get())
