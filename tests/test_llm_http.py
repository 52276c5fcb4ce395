"""RoleLLM over real HTTP: ChatOpenAI (via make_role_llm) against the fake OpenAI-compatible server."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, SecretStr

from agents.llm import LLMCall, LLMConfig, forget_methods, known_method, make_role_llm
from tests.openai_server import (
    FakeOpenAIServer,
    content,
    error,
    malformed,
    rate_limited,
    server_error,
    slow,
    tool_call,
)

pytestmark = pytest.mark.slow  # every test here starts runs, workers or a server

KEY_ENV = "KS_TEST_LLM_KEY"
SECRET = "sk-test-0123456789-TOPSECRET"


class Verdict(BaseModel):
    approve: bool
    reason: str


VERDICT = {"approve": True, "reason": "vectorised loads, no races"}


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv
    forget_methods()


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


def make(srv: FakeOpenAIServer, calls: list[LLMCall] | None = None, **overrides: Any) -> Any:
    settings: dict[str, Any] = {
        "model": "fake-model",
        "base_url": srv.base_url,
        "api_key_env": KEY_ENV,
        "backoff_s": 0.01,
        "max_retries": 2,
        "timeout_s": 5.0,
    }
    return make_role_llm("critic", LLMConfig(**(settings | overrides)), calls.append if calls is not None else None)


def test_json_schema_round_trip_with_server_usage(server: FakeOpenAIServer) -> None:
    server.push(content(json.dumps(VERDICT), usage=(1234, 56)))
    calls: list[LLMCall] = []
    llm = make(server, calls, price_input_per_mtok=2.0, price_output_per_mtok=10.0)
    reply = llm.structured("You review kernels.", "Review this.", Verdict)
    assert reply.ok and reply.value == Verdict(**VERDICT) and reply.method == "json_schema"
    (request,) = server.requests
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    body = request.body
    assert body["model"] == "fake-model" and body["temperature"] == 0.2
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "Verdict"
    assert body["messages"][1] == {"role": "user", "content": "Review this."}
    (call,) = calls
    assert (call.input_tokens, call.output_tokens, call.attempts) == (1234, 56, 1)
    assert call.cost_usd == pytest.approx(1234 * 2 / 1e6 + 56 * 10 / 1e6)
    assert llm.usage.input_tokens == 1234


def test_rate_limit_then_success(server: FakeOpenAIServer) -> None:
    server.push(rate_limited(retry_after_ms=30), content(json.dumps(VERDICT)))
    calls: list[LLMCall] = []
    llm = make(server, calls, backoff_s=5.0)  # the server's retry-after-ms wins over the backoff
    started = time.monotonic()
    reply = llm.structured("s", "u", Verdict)
    assert reply.ok and len(calls) == 1 and calls[0].attempts == 2
    assert len(server.requests) == 2 and time.monotonic() - started < 3


def test_server_error_then_success(server: FakeOpenAIServer) -> None:
    server.push(server_error(), content(json.dumps(VERDICT)))
    reply = make(server).structured("s", "u", Verdict)
    assert reply.ok and reply.calls[0].attempts == 2 and len(server.requests) == 2


def test_persistent_server_errors_fail_cleanly(server: FakeOpenAIServer) -> None:
    server.push(server_error(), server_error(), server_error())
    reply = make(server, max_retries=2).structured("s", "u", Verdict)
    assert not reply.ok and reply.calls[0].attempts == 3 and reply.calls[0].error_kind == "transient"
    assert reply.error is not None and "500" in reply.error
    assert server.pending == 0


def test_slow_reply_times_out_quickly(server: FakeOpenAIServer) -> None:
    server.push(slow(5.0), slow(5.0))
    llm = make(server, timeout_s=0.5, max_retries=1)
    started = time.monotonic()
    reply = llm.structured("s", "u", Verdict)
    elapsed = time.monotonic() - started
    assert not reply.ok and reply.error is not None and "timeout" in reply.error.lower()
    assert reply.calls[0].attempts == 2 and reply.calls[0].error_kind == "timeout"
    assert elapsed < 3.0


def test_malformed_body_is_retried(server: FakeOpenAIServer) -> None:
    server.push(malformed(), content(json.dumps(VERDICT)))
    reply = make(server).structured("s", "u", Verdict)
    assert reply.ok and reply.calls[0].attempts == 2


def test_malformed_bodies_fail_cleanly(server: FakeOpenAIServer) -> None:
    server.push(malformed(), malformed())
    reply = make(server, max_retries=1).structured("s", "u", Verdict)
    assert not reply.ok and reply.error is not None and "JSONDecodeError" in reply.error


def test_no_tool_call_where_forced_reads_the_content(server: FakeOpenAIServer) -> None:
    server.push(content(f"Calling tools is hard, so: {json.dumps(VERDICT)}"))
    reply = make(server, structured_method="function_calling").structured("s", "u", Verdict)
    assert reply.ok and reply.method == "function_calling" and len(server.requests) == 1
    assert server.requests[0].body["tool_choice"] == {"type": "function", "function": {"name": "Verdict"}}


def test_no_tool_call_and_no_json_falls_back(server: FakeOpenAIServer) -> None:
    server.push(content("I approve, it looks fine."), content(json.dumps(VERDICT)))
    reply = make(server, structured_method="function_calling").structured("s", "u", Verdict)
    assert reply.ok and reply.method == "json_mode"
    assert [c.method for c in reply.calls] == ["function_calling", "json_mode"]
    assert server.requests[1].body["response_format"] == {"type": "json_object"}


def test_tool_call_reply(server: FakeOpenAIServer) -> None:
    server.push(tool_call(VERDICT))
    reply = make(server, structured_method="function_calling").structured("s", "u", Verdict)
    assert reply.ok and reply.value == Verdict(**VERDICT)
    assert reply.calls[0].tool_calls[0]["name"] == "Verdict"


def test_json_schema_rejection_downgrades_and_is_remembered() -> None:
    with FakeOpenAIServer(supports_json_schema=False) as srv:
        try:
            srv.push(tool_call(VERDICT), tool_call(VERDICT), tool_call(VERDICT))
            llm = make(srv)
            first = llm.structured("s", "u", Verdict)
            assert first.ok and first.method == "function_calling"
            assert [c.error_kind for c in first.calls] == ["rejected", None]
            assert first.calls[0].attempts == 1 and "not supported" in (first.calls[0].error or "")
            assert llm.structured("s", "u", Verdict).ok
            # Process-wide for this endpoint and model: a new role client skips json_schema too.
            assert known_method(srv.base_url, "fake-model") == "function_calling"
            assert make(srv).structured("s", "u", Verdict).ok
            kinds = ["response_format" if "response_format" in b else "tools" for b in srv.bodies]
            assert kinds == ["response_format", "tools", "tools", "tools"]
        finally:
            forget_methods()


def test_secret_never_recorded_or_logged(server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    # A server that echoes the key in its error (some do) must not leak it into records or logs.
    server.push(error(401, f"Incorrect API key provided: {SECRET}"), content(json.dumps(VERDICT)))
    calls: list[LLMCall] = []
    llm = make(server, calls)
    failed = llm.structured("s", "u", Verdict)
    assert not failed.ok and failed.error is not None and "***" in failed.error
    assert llm.text("s", "u").ok
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert len(calls) == 2
    for call in calls:
        assert SECRET not in call.model_dump_json()
    assert SECRET not in caplog.text
    assert SECRET not in repr(llm.config) and SECRET not in llm.config.model_dump_json()


def test_local_server_without_a_key(server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    server.push(content("hello"))
    reply = make(server).text("s", "u")
    assert reply.ok and reply.text == "hello"
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_server_streams_content_and_tool_calls(server: FakeOpenAIServer) -> None:
    # The server's SSE path, for the streaming chat that will come later.
    model = ChatOpenAI(model="fake-model", base_url=server.base_url, api_key=SecretStr("x"), max_retries=0)
    server.push(content("streamed reply, in several chunks"), tool_call(VERDICT, name="Verdict"))
    text = "".join(chunk.text for chunk in model.stream("hi"))
    assert text == "streamed reply, in several chunks"
    chunks = list(model.bind_tools([Verdict], tool_choice="Verdict").stream("hi"))
    message = chunks[0]
    for chunk in chunks[1:]:
        message = message + chunk
    assert message.tool_calls[0]["args"] == VERDICT  # type: ignore[attr-defined]
    assert all(b.get("stream") for b in server.bodies)
