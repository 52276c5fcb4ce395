"""The graph's state: small, JSON-able, checkpointed after every step.

Kernels, verdicts and LLM calls live in the archive; the state holds ids and numbers, so a
checkpoint stays small however long the run.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict


class ExperimentSpec(TypedDict, total=False):
    """One experiment, as sent to the experiment node (LangGraph `Send`)."""

    id: str  # g<generation>e<index>
    generation: int
    idx: int
    kind: str  # llm (Coder writes it) or tune (the Tuner renders it)
    plan: dict[str, Any]  # ExperimentPlan fields
    assignment: dict[str, str] | None  # tunable values, for kind == tune
    base_id: str
    reference_id: str | None
    # The generation's Tuner variants beside it ({id, assignment, title}), set at the fan-out.
    tuned_siblings: list[dict[str, Any]]


class ExperimentResult(TypedDict, total=False):
    experiment_id: str
    generation: int
    kind: str
    status: str  # ok, failed (no kernel came out), or the kernel's verdict status
    kernel_id: str | None
    geomean_us: float | None


class RunState(TypedDict, total=False):
    generation: int
    selection: dict[str, Any]
    plans: list[ExperimentSpec]
    results: Annotated[list[ExperimentResult], operator.add]
    best_id: str | None
    best_geomean_us: float | None
    stale: int  # generations since the best improved
    elapsed_s: float  # running time over all sessions
    generation_started: float  # epoch seconds
    stop_reason: str | None
