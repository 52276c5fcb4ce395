"""RoleLLM over scripted and replayed chat models: methods, fallback, retries, accounting, audit, replay."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import openai
import pytest
from httpx2 import Request
from langchain_core.exceptions import ModelInvalidRequestError
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel, Field, SecretStr

from agents.llm import (
    LLMCall,
    LLMConfig,
    LLMError,
    RoleLLM,
    StructuredReply,
    forget_methods,
    make_chat_model,
    parse_structured,
)
from agents.scripted import (
    ReplayChatModel,
    ReplayMismatchError,
    ScriptedChatModel,
    ScriptExhausted,
    request_method,
)


class Plan(BaseModel):
    """An experiment plan."""

    idea: str = Field(description="what to try")
    tiles: list[int]


PLAN = {"idea": "tile the reduction", "tiles": [64, 128]}


def config(**overrides: Any) -> LLMConfig:
    base: dict[str, Any] = {"model": "scripted", "backoff_s": 0.0, "max_retries": 2, "timeout_s": 10.0}
    return LLMConfig(**(base | overrides))


def role_llm(
    script: list[Any], calls: list[LLMCall] | None = None, **overrides: Any
) -> tuple[RoleLLM, ScriptedChatModel]:
    model = ScriptedChatModel(script=script)
    return RoleLLM("coder", model, config(**overrides), on_call=calls.append if calls is not None else None), model


@pytest.fixture(autouse=True)
def _fresh_method_memory() -> None:
    forget_methods()


# -- each method ------------------------------------------------------------------------------------


def test_json_schema_is_the_default_method() -> None:
    llm, model = role_llm([{"args": PLAN}])
    reply = llm.structured("You plan.", "Plan the softmax.", Plan)
    assert reply.ok and reply.value == Plan(**PLAN) and reply.method == "json_schema"
    (request,) = model.requests
    response_format = request.kwargs["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Plan"
    assert response_format["json_schema"]["strict"] is False
    assert set(response_format["json_schema"]["schema"]["properties"]) == {"idea", "tiles"}
    assert "tools" not in request.kwargs


def test_function_calling_forces_the_schema_tool() -> None:
    llm, model = role_llm([{"args": PLAN}], structured_method="function_calling")
    reply = llm.structured("You plan.", "Plan.", Plan)
    assert reply.ok and reply.method == "function_calling" and reply.value == Plan(**PLAN)
    kwargs = model.requests[0].kwargs
    assert kwargs["tool_choice"] == {"type": "function", "function": {"name": "Plan"}}
    assert kwargs["tools"][0]["function"]["name"] == "Plan"
    assert reply.calls[0].tool_calls[0]["args"] == PLAN


def test_json_mode_puts_the_schema_in_the_prompt() -> None:
    llm, model = role_llm([json.dumps(PLAN)], structured_method="json_mode")
    reply = llm.structured("You plan.", "Plan.", Plan)
    assert reply.ok and reply.method == "json_mode"
    request = model.requests[0]
    assert request.kwargs == {"response_format": {"type": "json_object"}}
    assert '"tiles"' in request.messages[0].text and "what to try" in request.messages[0].text


@pytest.mark.parametrize(
    "content",
    [
        'Sure! Here it is:\n```json\n{"idea": "tile the reduction", "tiles": [64, 128],}\n```\nGood luck.',
        '<think>maybe {"tiles": "x"}? no.</think> {"idea": "tile the reduction", "tiles": [64, 128]} done',
        '{"idea": "tile the reduction", "tiles": [64, 128]}',
    ],
)
def test_text_method_extracts_json_tolerantly(content: str) -> None:
    llm, model = role_llm([content], structured_method="text")
    reply = llm.structured("", "Plan.", Plan)
    assert reply.ok and reply.value == Plan(**PLAN) and reply.method == "text"
    assert model.requests[0].kwargs == {}


def test_parse_structured_skips_braces_in_strings() -> None:
    text = 'note: {"idea": "use } and { in a string", "tiles": [1]} trailing {broken'
    value, why = parse_structured(text, Plan)
    assert why is None and value is not None and value.idea == "use } and { in a string"
    value, why = parse_structured('{"idea": 3}', Plan)
    assert value is None and why is not None and "tiles" in why and "Field required" in why


def test_text_replies() -> None:
    llm, model = role_llm(["a plain answer"])
    reply = llm.text("You chat.", "Hello?")
    assert reply.ok and reply.text == "a plain answer"
    assert reply.calls[0].method == "text" and reply.calls[0].messages[1] == {"role": "user", "content": "Hello?"}


# -- fallback ---------------------------------------------------------------------------------------


def _rejects_json_schema(messages: list[BaseMessage], kwargs: dict[str, Any]) -> Any:
    if request_method(kwargs) == "json_schema":
        raise ModelInvalidRequestError("response_format json_schema is not supported")
    return {"args": PLAN}


def test_auto_downgrade_is_remembered() -> None:
    calls: list[LLMCall] = []
    model = ScriptedChatModel(responder=_rejects_json_schema)
    llm = RoleLLM("coder", model, config(), on_call=calls.append)
    first = llm.structured("s", "u", Plan)
    assert first.ok and first.method == "function_calling"
    assert [c.method for c in first.calls] == ["json_schema", "function_calling"]
    assert first.calls[0].error_kind == "rejected" and first.calls[0].attempts == 1  # not retried
    assert llm.start_method == "function_calling"
    second = llm.structured("s", "u", Plan)
    assert second.ok and [c.method for c in second.calls] == ["function_calling"]
    assert [r.method for r in model.requests] == ["json_schema", "function_calling", "function_calling"]
    assert len(calls) == 3
    # Scripted models do not share what they learned: a fresh RoleLLM starts over.
    assert RoleLLM("coder", model, config()).start_method == "json_schema"


def test_not_implemented_bind_tools_skips_function_calling() -> None:
    class NoTools(ScriptedChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    model = NoTools(script=["nope", json.dumps(PLAN)])
    reply = RoleLLM("coder", model, config()).structured("s", "u", Plan)
    assert reply.ok and reply.method == "json_mode"
    assert [r.method for r in model.requests] == ["json_schema", "json_mode"]


def test_parse_failure_falls_through_one_try_each() -> None:
    script = [
        "I would rather explain in prose.",  # json_schema: no JSON
        "still prose, and no tool call",  # function_calling: no tool call, no JSON
        json.dumps(PLAN),  # json_mode: fine
    ]
    llm, model = role_llm(script)
    reply = llm.structured("s", "u", Plan)
    assert reply.ok and reply.method == "json_mode"
    assert [c.method for c in reply.calls] == ["json_schema", "function_calling", "json_mode"]
    assert [c.ok for c in reply.calls] == [False, False, True]
    assert reply.calls[1].error is not None and "no tool call" in reply.calls[1].error
    assert all(c.error_kind == "unparseable" for c in reply.calls[:2])
    # A parse failure says nothing about what the server supports.
    assert llm.start_method == "json_schema"


def test_forced_tool_answered_in_content_still_parses() -> None:
    llm, _ = role_llm([f"Here you go: {json.dumps(PLAN)}"], structured_method="function_calling")
    reply = llm.structured("s", "u", Plan)
    assert reply.ok and reply.method == "function_calling" and len(reply.calls) == 1


def test_garbage_everywhere_returns_an_error() -> None:
    calls: list[LLMCall] = []
    llm, model = role_llm(["garbage", {"args": {"idea": 1}}, "[1, 2]", '{"idea": "x"}'], calls)
    reply = llm.structured("s", "u", Plan)
    assert isinstance(reply, StructuredReply) and not reply.ok and reply.value is None
    assert reply.error is not None and reply.error.startswith("unparseable reply:")
    assert "tiles" in reply.error
    assert len(reply.calls) == 4 and len(calls) == 4 and model.remaining == 0
    assert llm.usage.calls == 4


# -- retries and failures ----------------------------------------------------------------------------


def _connection_error() -> openai.APIConnectionError:
    return openai.APIConnectionError(request=Request("POST", "http://127.0.0.1/v1/chat/completions"))


def test_transient_errors_are_retried_within_one_record() -> None:
    calls: list[LLMCall] = []
    llm, model = role_llm([_connection_error(), TimeoutError("slow"), {"args": PLAN}], calls)
    reply = llm.structured("s", "u", Plan)
    assert reply.ok
    assert len(calls) == 1 and calls[0].attempts == 3 and calls[0].ok
    assert len(model.requests) == 3


def test_retries_run_out_into_a_timeout_error() -> None:
    llm, _ = role_llm([TimeoutError(), TimeoutError()], max_retries=1)
    reply = llm.structured("s", "u", Plan)
    assert not reply.ok and reply.error is not None and "timeout" in reply.error
    assert reply.calls[0].attempts == 2 and reply.calls[0].error_kind == "timeout"


def test_fatal_errors_are_not_retried_nor_downgraded() -> None:
    llm, model = role_llm([ValueError("bad model output type")])
    reply = llm.structured("s", "u", Plan)
    assert not reply.ok and reply.error is not None and "ValueError" in reply.error
    assert len(model.requests) == 1 and reply.calls[0].error_kind == "fatal"


def test_wall_clock_deadline_stops_a_hung_model() -> None:
    release = threading.Event()

    def hang(messages: list[BaseMessage], kwargs: dict[str, Any]) -> str:
        release.wait(10)
        return "too late"

    llm, _ = role_llm([hang], timeout_s=0.1, max_retries=0)
    started = time.monotonic()
    reply = llm.text("s", "u")
    release.set()
    assert time.monotonic() - started < 5
    assert not reply.ok and reply.error is not None and "timeout" in reply.error


def test_backoff_honours_retry_after_and_caps() -> None:
    llm, _ = role_llm([], backoff_s=1.0)

    class Hinted(Exception):
        class response:  # noqa: N801 - mimics an httpx response
            headers = {"retry-after-ms": "250"}

    assert llm._retry_delay(Hinted(), 1) == pytest.approx(0.25)
    Hinted.response.headers = {"retry-after": "1000"}
    assert llm._retry_delay(Hinted(), 1) == 30.0
    assert 0.5 <= llm._retry_delay(ValueError(), 1) <= 1.0
    assert 4.0 <= llm._retry_delay(ValueError(), 4) <= 8.0
    assert llm._retry_delay(ValueError(), 20) <= 30.0


def test_exhausted_script_propagates() -> None:
    llm, _ = role_llm([])
    with pytest.raises(ScriptExhausted, match="request #1"):
        llm.structured("s", "u", Plan)


# -- accounting and audit ------------------------------------------------------------------------------


def test_usage_and_cost_accounting() -> None:
    usage = {"input_tokens": 1000, "output_tokens": 200, "total_tokens": 1200}
    script = [
        AIMessage(content="not json", usage_metadata=usage),
        AIMessage(content="", tool_calls=[{"name": "Plan", "args": PLAN, "id": "c1"}], usage_metadata=usage),
        AIMessage(content="plain", usage_metadata=usage),
    ]
    calls: list[LLMCall] = []
    llm, _ = role_llm(script, calls, price_input_per_mtok=3.0, price_output_per_mtok=15.0)
    assert llm.structured("s", "u", Plan).ok
    assert llm.text("s", "u").ok
    assert llm.usage.calls == 3 and llm.usage.input_tokens == 3000 and llm.usage.output_tokens == 600
    assert calls[0].cost_usd == pytest.approx(1000 * 3 / 1e6 + 200 * 15 / 1e6)
    assert llm.usage.cost_usd == pytest.approx(3 * calls[0].cost_usd)


def test_scripted_usage_is_deterministic() -> None:
    llm, _ = role_llm(["x" * 40])
    call = llm.text("a" * 40, "b" * 40).calls[0]
    assert (call.input_tokens, call.output_tokens) == (20, 10)


def test_audit_records_and_a_failing_hook() -> None:
    def broken_hook(call: LLMCall) -> None:
        raise RuntimeError("audit sink down")

    model = ScriptedChatModel(script=[{"args": PLAN}])
    reply = RoleLLM("critic", model, config(), on_call=broken_hook).structured("sys", "usr", Plan)
    assert reply.ok  # the hook failing does not lose the reply
    call = reply.calls[0]
    assert call.role == "critic" and call.model == "scripted" and call.schema_name == "Plan"
    assert call.messages[0]["role"] == "system" and call.messages[0]["content"].startswith("sys")
    assert call.messages[1] == {"role": "user", "content": "usr"}
    assert call.started_at.endswith("+00:00") and call.latency_s >= 0
    assert json.loads(call.reply) == PLAN


def test_prompt_dependent_replies_and_parallel_use() -> None:
    def by_prompt(messages: list[BaseMessage], kwargs: dict[str, Any]) -> Any:
        n = int(messages[-1].text.split()[-1])
        return {"args": {"idea": f"idea {n}", "tiles": [n]}}

    model = ScriptedChatModel(responder=by_prompt)
    llm = RoleLLM("coder", model, config())
    results: dict[int, StructuredReply[Plan]] = {}

    def work(n: int) -> None:
        results[n] = llm.structured("s", f"experiment {n}", Plan)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[n].value == Plan(idea=f"idea {n}", tiles=[n]) for n in range(8))
    assert llm.usage.calls == 8 and len(model.requests) == 8


# -- replay -------------------------------------------------------------------------------------------------


def test_replay_reproduces_a_recorded_sequence(tmp_path: Any) -> None:
    script = [
        _rejects_json_schema,  # 1st structured: json_schema rejected
        {"args": PLAN},  # ... then a tool call; function_calling is remembered
        "prose only",  # 2nd structured: function_calling, unparseable
        "still prose",  # json_mode, unparseable
        "more prose",  # text, unparseable: the call fails
        "final answer",  # text()
    ]
    recorded: list[LLMCall] = []
    live = RoleLLM("coder", ScriptedChatModel(script=script), config(), on_call=recorded.append)
    first = live.structured("s", "u", Plan)
    second = live.structured("s", "u", Plan)
    text = live.text("s", "u")
    assert first.ok and not second.ok and text.ok
    other = RoleLLM("critic", ScriptedChatModel(script=["critic says"]), config(), on_call=recorded.append)
    other.text("s", "u")

    path = tmp_path / "calls.jsonl"
    path.write_text("".join(c.model_dump_json() + "\n" for c in recorded))
    replay = ReplayChatModel.from_jsonl(path, role="coder")
    assert replay.remaining == 6 and replay.model_name == "scripted"
    again = RoleLLM("coder", replay, config())
    r1, r2, r3 = again.structured("s", "u", Plan), again.structured("s", "u", Plan), again.text("s", "u")
    assert (r1.value, r1.method) == (first.value, first.method)
    assert (r2.value, r2.method, r2.error) == (second.value, second.method, second.error)
    assert r3.text == text.text == "final answer"
    assert [c.method for c in r1.calls + r2.calls] == [c.method for c in first.calls + second.calls]
    assert again.usage.input_tokens == live.usage.input_tokens
    replay.assert_exhausted()
    with pytest.raises(ReplayMismatchError, match="only 6 call"):
        again.text("s", "u")


def test_replay_detects_a_different_request() -> None:
    call = LLMCall(
        role="coder", model="m", method="text", messages=[], reply="hi", latency_s=0.1, attempts=1, ok=True,
        started_at="2026-01-01T00:00:00+00:00",
    )  # fmt: skip
    replay = ReplayChatModel.from_calls([call])
    with pytest.raises(ReplayMismatchError, match="uses json_schema"):
        RoleLLM("coder", replay, config()).structured("s", "u", Plan)
    with pytest.raises(ReplayMismatchError, match="never requested"):
        ReplayChatModel.from_calls([call, call]).assert_exhausted()


# -- construction -------------------------------------------------------------------------------------------


def test_make_chat_model_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KS_NO_SUCH_KEY", raising=False)
    with pytest.raises(LLMError, match="KS_NO_SUCH_KEY"):
        make_chat_model(LLMConfig(model="gpt-4o-mini", api_key_env="KS_NO_SUCH_KEY"))
    local = make_chat_model(LLMConfig(model="qwen", base_url="http://127.0.0.1:1/v1", api_key_env="KS_NO_SUCH_KEY"))
    key = local.openai_api_key  # type: ignore[attr-defined]
    assert isinstance(key, SecretStr) and key.get_secret_value() == "not-needed"
    assert local.max_retries == 0  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        LLMConfig(model="m", api_key="sk-inline")  # type: ignore[call-arg]
