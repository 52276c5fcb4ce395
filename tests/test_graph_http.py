"""A full run through the real client path: ChatOpenAI against an OpenAI-compatible server on
127.0.0.1 that lacks JSON-schema output, rate-limits, fails once, and answers with tool calls."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agents.llm import forget_methods
from graph.archive import Archive
from graph.config import Budgets, RunConfig, SandboxSettings, load_llm_settings
from graph.runs import build_context, create_run, execute
from tests import scientist_script as script
from tests.openai_server import FakeOpenAIServer, Reply, rate_limited, server_error, tool_call

pytestmark = pytest.mark.slow  # every test here starts runs, workers or a server

SECRET = "sk-test-0123456789abcdef-do-not-leak"


def respond(body: dict[str, Any]) -> Reply:
    messages = [SimpleNamespace(content=m.get("content") or "") for m in body["messages"]]
    system = messages[0].content
    if "You are the Selector" in system:
        item = script.selector(messages, {})
    elif "You are the Researcher" in system:
        item = script.researcher(messages, {})
    elif "You are the Coder" in system:
        item = {"args": {"mode": "file", "source": script.FAST_SOFTMAX.read_text(), "summary": "omp, one exp"}}
    else:
        item = script.approve(messages, {})
    return tool_call(item["args"])


def test_run_through_an_openai_compatible_server_with_faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forget_methods()
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with FakeOpenAIServer(supports_json_schema=False, responder=respond) as server:
        server.push(rate_limited(), server_error())  # the first request is retried twice
        settings_file = tmp_path / "llm.yml"
        settings_file.write_text(
            f"default: {{model: test-model, base_url: '{server.base_url}', backoff_s: 0.01, timeout_s: 20,"
            " price_input_per_mtok: 2.0, price_output_per_mtok: 8.0}\n"
        )
        config = RunConfig(
            problem="softmax",
            seed=str(script.SLOW_SOFTMAX),
            parallel=1,
            tuner_per_generation=0,
            budgets=Budgets(generations=1, patience=None),
            sandbox=SandboxSettings(timing_budget_s=0.2, verify_wins=False),
            llm=load_llm_settings(settings_file),
            use_knowledge=False,
        )
        handle = create_run(config, tmp_path / "runs")
        archive = Archive(handle.archive_path)
        final = execute(handle, build_context(handle, archive))
        requests = server.requests
    assert final["stop_reason"] == "generation budget reached (1)"
    assert archive.best().origin == "llm"
    calls = archive.llm_calls()
    # The first request asked for json_schema and got a 400: the client went down to tool calls,
    # got a 429 and a 500 there, and succeeded on its third attempt.
    assert (calls[0]["role"], calls[0]["method"], calls[0]["ok"]) == ("researcher", "json_schema", False)
    assert (calls[1]["method"], calls[1]["attempts"], calls[1]["ok"]) == ("function_calling", 3, True)
    # The downgrade is remembered: every later call starts at tool calls.
    assert all(c["method"] == "function_calling" for c in calls[1:])
    assert all(c["ok"] for c in calls[1:])
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in requests)
    spend = archive.spend()
    assert spend.tokens > 0 and spend.cost_usd > 0
    # The key reaches the server and nothing else: not the archive, the run's files, or the config.
    for path in handle.run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
