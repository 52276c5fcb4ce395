"""Deterministic scripted roles for full runs of the scientist in tests.

Each role is a ScriptedChatModel whose responder reads the prompt it was sent, as a real model
would, and answers with the role's structured reply. Tests swap single behaviours (a Coder that
first writes a file that does not compile, a model that answers garbage).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from agents.scripted import ScriptedChatModel

FIXTURES = Path(__file__).parent / "fixtures" / "scientist"
SLOW_SOFTMAX = FIXTURES / "softmax_slow.py"
FAST_SOFTMAX = FIXTURES / "softmax_fast.py"

_ROW = re.compile(r"^\| (k\d+) \| [^|]* \| [^|]* \| ok \|", re.MULTILINE)


def prompt_text(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages)


def best_in_table(text: str) -> str:
    """The first correct kernel in the Selector's table (the table lists the fastest first)."""
    match = _ROW.search(text)
    assert match, "the selector prompt has no population table"
    return match.group(1)


def selector(messages: list[BaseMessage], kwargs: dict[str, Any]) -> dict[str, Any]:
    base = best_in_table(prompt_text(messages))
    return {"args": {"base_id": base, "reference_id": None, "reason": f"{base} is the fastest correct kernel"}}


PLAN = {
    "title": "parallel rows, one exponential per element",
    "description": "Split rows over OpenMP threads and store each exponential once instead of computing it twice.",
    "rubric": ["#pragma omp parallel for over rows", "store exp in the output, scale in place"],
    "est_min_speedup": 1.5,
    "est_max_speedup": 3.0,
    "innovation": 4,
    "sources": ["[1]"],
}


def researcher(messages: list[BaseMessage], kwargs: dict[str, Any]) -> dict[str, Any]:
    avenues = [{"title": f"avenue {i}", "rationale": "from the roofline"} for i in range(10)]
    return {"args": {"avenues": avenues, "plans": [PLAN]}}


def distinct(source: str, n: int) -> str:
    """A Python kernel made the n-th answer's own: a real Coder never writes the same file twice, and the
    run sends back a candidate whose code it has already evaluated (graph/experiment.py)."""
    return f"{source.rstrip()}\n\nANSWER = {n}\n"


def varying_coder(source: str) -> Callable[[list[BaseMessage], dict[str, Any]], dict[str, Any]]:
    """A Coder that writes this kernel, each answer its own (`distinct`)."""
    calls = {"n": 0}

    def respond(messages: list[BaseMessage], kwargs: dict[str, Any]) -> dict[str, Any]:
        calls["n"] += 1
        return {"args": {"mode": "file", "source": distinct(source, calls["n"]), "summary": "omp rows, single exp"}}

    return respond


def coder_writing(*sources: str) -> Callable[[list[BaseMessage], dict[str, Any]], dict[str, Any]]:
    """A Coder that returns these files in turn (the last one from then on)."""
    calls = {"n": 0}

    def respond(messages: list[BaseMessage], kwargs: dict[str, Any]) -> dict[str, Any]:
        source = sources[min(calls["n"], len(sources) - 1)]
        calls["n"] += 1
        return {"args": {"mode": "file", "source": source, "summary": "omp rows, single exp"}}

    return respond


def approve(messages: list[BaseMessage], kwargs: dict[str, Any]) -> dict[str, Any]:
    text = prompt_text(messages)
    if "Static integrity scan" in text:
        return {"args": {"approve": True, "issues": [], "advice": ""}}
    return {
        "args": {
            "hypothesis": "threads and one exp per element cut the time",
            "change": "omp parallel rows; exp stored once",
            "explanation": "the exponentials dominate; halving them and using both cores pays",
            "lesson": "compute-bound row kernels want all cores",
        }
    }


def scientist_models(
    coder: Callable[[list[BaseMessage], dict[str, Any]], Any] | None = None,
    *,
    garbage: bool = False,
) -> dict[str, ScriptedChatModel]:
    """Chat models for the four roles; `garbage` makes every role answer nonsense."""
    if garbage:
        nonsense = "I am not sure what you mean. {not json"
        return {role: ScriptedChatModel(default=nonsense) for role in ("selector", "researcher", "coder", "critic")}
    return {
        "selector": ScriptedChatModel(responder=selector),
        "researcher": ScriptedChatModel(responder=researcher),
        "coder": ScriptedChatModel(responder=coder or varying_coder(FAST_SOFTMAX.read_text())),
        "critic": ScriptedChatModel(responder=approve),
    }
