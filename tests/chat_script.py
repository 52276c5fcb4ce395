"""Runs and scripted models for the chat and report tests.

`mixed_run` is a real scripted run on the CPU target whose generations hold a kernel that wins
and one that does not compile, so the chat and the report have successes, a failure with the
compiler's words, a lineage and spend to show. `ThreadLauncher` starts a run the way the chat's
`control_run` does, in a thread of the test with scripted roles, where the real launcher starts a
process (tested separately against an OpenAI-compatible server).
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from agents.llm import LLMConfig
from agents.scripted import ScriptedChatModel
from graph.archive import Archive
from graph.config import Budgets, LLMSettings, RunConfig, SandboxSettings
from graph.runs import RunHandle, build_context, create_run, execute
from tests import scientist_script as script

SCRIPTED = LLMSettings(default=LLMConfig(model="scripted", max_retries=0))
BROKEN_SOURCE = script.FAST_SOFTMAX.read_text().replace("float total = 0.0f;", "float total = 0.0f")
SECOND_PLAN = {
    "title": "fused max and sum in one sweep",
    "description": "Compute the running max and the rescaled sum in a single pass over each row.",
    "rubric": ["online softmax: one pass for max and sum"],
    "est_min_speedup": 1.1,
    "est_max_speedup": 1.6,
    "innovation": 7,
    "sources": ["[2]"],
}


def two_plan_researcher(messages: list[BaseMessage], kwargs: dict[str, Any]) -> dict[str, Any]:
    reply = script.researcher(messages, kwargs)
    reply["args"]["plans"] = [script.PLAN, SECOND_PLAN]
    return reply


_ANSWERS = itertools.count(1)


def coder_by_plan(messages: list[BaseMessage], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The fast kernel for the first plan; a file with a missing ';' for the second (each answer its own)."""
    broken = SECOND_PLAN["title"] in script.prompt_text(messages)
    source = script.distinct(BROKEN_SOURCE if broken else script.FAST_SOFTMAX.read_text(), next(_ANSWERS))
    return {"args": {"mode": "file", "source": source, "summary": "one-pass softmax" if broken else "omp rows"}}


def mixed_models() -> dict[str, ScriptedChatModel]:
    models = script.scientist_models(coder=coder_by_plan)
    models["researcher"] = ScriptedChatModel(responder=two_plan_researcher)
    return models


def run_config(**overrides: Any) -> RunConfig:
    fields: dict[str, Any] = {
        "problem": "softmax",
        "target": "cpu",
        "seed": str(script.SLOW_SOFTMAX),
        "parallel": 2,
        "tuner_per_generation": 0,
        "coder_attempts": 1,
        "budgets": Budgets(generations=overrides.pop("generations", 1), patience=None),
        # Side-by-side verification of new leaders costs two paired evaluations each: on in the
        # tests that look at it (tests/test_graph_run.py), off where runs serve other checks.
        "sandbox": SandboxSettings(timing_budget_s=0.2, verify_wins=False),
        "llm": SCRIPTED,
        "use_knowledge": False,
    }
    return RunConfig(**(fields | overrides))


def mixed_run(runs_dir: Path, generations: int = 2) -> tuple[RunHandle, Archive]:
    handle = create_run(run_config(generations=generations), runs_dir)
    archive = Archive(handle.archive_path)
    execute(handle, build_context(handle, archive, chat_models=mixed_models()))
    return handle, archive


class ThreadLauncher:
    """Executes the run in a thread of this process with fresh scripted roles for each start."""

    def __init__(self, models: Callable[[], dict[str, ScriptedChatModel]]) -> None:
        self.models = models
        self.started: list[dict[str, ScriptedChatModel]] = []
        self.threads: list[threading.Thread] = []
        self.results: list[dict[str, Any]] = []
        self.errors: list[BaseException] = []

    def __call__(self, handle: RunHandle, archive: Archive) -> str:
        models = self.models()
        self.started.append(models)

        def target() -> None:
            own = Archive(handle.archive_path)  # the run's own connection, as another process has
            try:
                self.results.append(execute(handle, build_context(handle, own, chat_models=models)))
            except BaseException as exc:
                self.errors.append(exc)
            finally:
                own.close()

        thread = threading.Thread(target=target, name="scripted-run", daemon=True)
        thread.start()
        self.threads.append(thread)
        return "started the run in a thread"

    def join(self, timeout: float = 240) -> None:
        for thread in self.threads:
            thread.join(timeout)
            assert not thread.is_alive(), "the run did not finish in time"
        assert not self.errors, self.errors


def wait_for(predicate: Callable[[], Any], timeout: float = 120, what: str = "a condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def last_tool_output(messages: list[BaseMessage]) -> str:
    outputs = [m for m in messages if isinstance(m, ToolMessage)]
    assert outputs, "the model was answered without a tool result"
    return str(outputs[-1].content)


def leaderboard_row(text: str, rank: int = 1) -> dict[str, str]:
    """A row of the leaderboard tool's table, read the way a model reads it."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == str(rank):
            keys = ["rank", "kernel", "gen", "origin", "parents", "geomean", "vs_seed", "vs_pytorch", "plan"]
            row = dict(zip(keys, cells, strict=False))
            # "123 [118–130]": the time, then its 95% interval
            row["geomean"], _, interval = row["geomean"].partition(" [")
            row["geomean_ci"] = interval.split("]")[0]
            return row
    raise AssertionError(f"no row {rank} in:\n{text}")


def field_value(text: str, label: str) -> str:
    """The value after `label:` in a tool's output, up to the next ';' or line end."""
    match = re.search(rf"{re.escape(label)}:\s*([^;\n]+)", text)
    assert match, f"no {label!r} in:\n{text}"
    return match.group(1).strip()
