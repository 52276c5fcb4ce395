"""Deterministic chat models for tests, demos and replays: no network, no randomness.

`ScriptedChatModel` answers from a script. Each item is one of:

- a str: the reply's content;
- an AIMessage: returned as is (usage filled in when absent);
- a dict ``{"args": {...}, "tool": name-or-None, "content": str}``: a call of the bound tool (the forced
  one when ``tool`` is None) with these arguments; with no tools bound, the arguments as JSON content;
- an exception instance: raised, to play a failing server (e.g. ``TimeoutError()``);
- a callable ``(messages, bound_kwargs) -> item``: computes the item from the request.

When the script runs out, the `responder` callable answers, then `default`, else `ScriptExhausted`.
Every request (messages and bound kwargs: tools, tool_choice, response_format) is kept in `requests`.

`ReplayChatModel` re-enacts recorded `LLMCall`s of one role in order, so a run can be replayed without
the model; a request that does not match the record, or a request past the last record, is an error.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, PrivateAttr

from agents.llm import HarnessError, LLMCall, ReplayedFailure

Responder = Callable[[list[BaseMessage], dict[str, Any]], Any]


class ScriptExhausted(HarnessError):
    """The scripted model was asked more often than its script allows."""


class ReplayMismatchError(HarnessError):
    """A replayed run asked for something other than what was recorded."""


@dataclass
class ScriptedRequest:
    messages: list[BaseMessage]
    kwargs: dict[str, Any]

    @property
    def text(self) -> str:
        """All message texts joined, for assertions on what the prompt contained."""
        return "\n".join(m.text for m in self.messages)

    @property
    def method(self) -> str:
        return request_method(self.kwargs)


def request_method(kwargs: dict[str, Any]) -> str:
    """The structured-output method a request's bound kwargs amount to (as `RoleLLM` binds them)."""
    if kwargs.get("tools"):
        return "function_calling"
    response_format = kwargs.get("response_format") or {}
    if isinstance(response_format, dict):
        if response_format.get("type") == "json_schema":
            return "json_schema"
        if response_format.get("type") == "json_object":
            return "json_mode"
    return "text"


def forced_tool_name(kwargs: dict[str, Any]) -> str | None:
    choice = kwargs.get("tool_choice")
    if isinstance(choice, dict):
        return (choice.get("function") or {}).get("name") or choice.get("name")
    names = [t.get("function", {}).get("name") for t in kwargs.get("tools") or []]
    if isinstance(choice, str) and choice in names:
        return choice
    return names[0] if names else None


def estimate_tokens(text: str) -> int:
    return len(text) // 4


def _with_usage(message: AIMessage, messages: Sequence[BaseMessage]) -> AIMessage:
    if message.usage_metadata is not None:
        return message
    prompt = sum(len(m.text) for m in messages)
    completion = len(message.text) + sum(len(json.dumps(c["args"])) for c in message.tool_calls)
    input_tokens, output_tokens = prompt // 4, completion // 4
    return message.model_copy(
        update={
            "usage_metadata": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            }
        }
    )


def _bind_tools(
    model: BaseChatModel, tools: Sequence[Any], tool_choice: str | dict[str, Any] | bool | None, **kwargs: Any
) -> Runnable[LanguageModelInput, AIMessage]:
    """Bind tools the way ChatOpenAI does, so requests look alike in tests."""
    formatted = [convert_to_openai_tool(t) for t in tools]
    names = [t["function"]["name"] for t in formatted]
    if isinstance(tool_choice, str) and tool_choice in names:
        tool_choice = {"type": "function", "function": {"name": tool_choice}}
    elif tool_choice is True or tool_choice == "any":
        tool_choice = "required"
    if tool_choice is not None:
        kwargs["tool_choice"] = tool_choice
    return model.bind(tools=formatted, **kwargs)


class ScriptedChatModel(BaseChatModel):
    """Replies from a script (see the module docstring); thread-safe."""

    script: list[Any] = Field(default_factory=list)
    responder: Responder | None = None
    default: Any = None
    model_name: str = "scripted"

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _position: int = PrivateAttr(default=0)
    _requests: list[ScriptedRequest] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    @property
    def requests(self) -> list[ScriptedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self.script) - self._position

    def extend(self, *items: Any) -> None:
        with self._lock:
            self.script.extend(items)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any],
        *,
        tool_choice: str | dict[str, Any] | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return _bind_tools(self, tools, tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            number = len(self._requests) + 1
            self._requests.append(ScriptedRequest(list(messages), dict(kwargs)))
            if self._position < len(self.script):
                item = self.script[self._position]
                self._position += 1
            elif self.responder is not None:
                item = self.responder
            elif self.default is not None:
                item = self.default
            else:
                raise ScriptExhausted(
                    f"scripted model {self.model_name!r}: request #{number} but the script has "
                    f"{len(self.script)} item(s) and no responder or default"
                )
        # Callables run outside the lock: they may be slow on purpose (timeouts) or run in parallel.
        while callable(item) and not isinstance(item, BaseException):
            item = item(list(messages), dict(kwargs))
        message = self._to_message(item, kwargs, number)
        return ChatResult(generations=[ChatGeneration(message=_with_usage(message, messages))])

    @staticmethod
    def _to_message(item: Any, kwargs: dict[str, Any], number: int) -> AIMessage:
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, AIMessage):
            return item
        if isinstance(item, str):
            return AIMessage(content=item)
        if isinstance(item, dict) and ("args" in item or "content" in item):
            args = item.get("args")
            text = item.get("content") or ""
            if args is None:
                return AIMessage(content=text)
            name = item.get("tool") or forced_tool_name(kwargs)
            if kwargs.get("tools") and name:
                return AIMessage(
                    content=text, tool_calls=[{"name": name, "args": args, "id": f"call_{number}", "type": "tool_call"}]
                )
            return AIMessage(content=text or json.dumps(args))
        raise TypeError(f"script item #{number} of type {type(item).__name__} is not a reply: {item!r}")


class ReplayChatModel(BaseChatModel):
    """Replays one role's recorded calls in order: content, tool calls, usage and failures."""

    records: list[LLMCall] = Field(default_factory=list)
    role: str | None = None
    model_name: str = "replay"
    check_method: bool = True  # a request must use the method its record used

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _position: int = PrivateAttr(default=0)

    @classmethod
    def from_calls(cls, calls: Iterable[LLMCall | dict[str, Any]], role: str | None = None) -> ReplayChatModel:
        records = [c if isinstance(c, LLMCall) else LLMCall.model_validate(c) for c in calls]
        if role is not None:
            records = [r for r in records if r.role == role]
        return cls(records=records, role=role, model_name=records[0].model if records else "replay")

    @classmethod
    def from_jsonl(cls, path: str | Path, role: str | None = None) -> ReplayChatModel:
        """Records as written one JSON object a line (`LLMCall.model_dump_json()`)."""
        lines = Path(path).read_text().splitlines()
        return cls.from_calls((LLMCall.model_validate_json(line) for line in lines if line.strip()), role)

    @property
    def _llm_type(self) -> str:
        return "replay"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "role": self.role}

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self.records) - self._position

    def assert_exhausted(self) -> None:
        if left := self.remaining:
            raise ReplayMismatchError(f"replay for role {self.role!r}: {left} recorded call(s) were never requested")

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any],
        *,
        tool_choice: str | dict[str, Any] | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return _bind_tools(self, tools, tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            number = self._position + 1
            if self._position >= len(self.records):
                raise ReplayMismatchError(
                    f"replay for role {self.role!r}: request #{number} but only {len(self.records)} call(s) recorded"
                )
            record = self.records[self._position]
            self._position += 1
        method = request_method(kwargs)
        if self.check_method and method != record.method:
            raise ReplayMismatchError(
                f"replay for role {self.role!r}: request #{number} uses {method} but the record used {record.method}"
            )
        if record.error_kind in ("rejected", "timeout", "transient", "fatal"):
            raise ReplayedFailure(record.error_kind, f"replayed: {record.error}")
        tool_calls = [
            {"name": c["name"], "args": c.get("args") or {}, "id": c.get("id") or f"call_{number}", "type": "tool_call"}
            for c in record.tool_calls
            if not c.get("invalid")
        ]
        invalid = [
            {
                "name": c.get("name"),
                "args": c.get("args"),
                "id": c.get("id"),
                "error": None,
                "type": "invalid_tool_call",
            }
            for c in record.tool_calls
            if c.get("invalid")
        ]
        message = AIMessage(
            content=record.reply,
            tool_calls=tool_calls,
            invalid_tool_calls=invalid,
            usage_metadata={
                "input_tokens": record.input_tokens,
                "output_tokens": record.output_tokens,
                "total_tokens": record.input_tokens + record.output_tokens,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
