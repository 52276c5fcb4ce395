"""LLM access layer: one `RoleLLM` per agent role over any OpenAI-compatible chat endpoint.

`RoleLLM.structured` asks for a reply that validates against a pydantic schema and degrades gracefully
on servers that lack structured output: JSON schema -> forced tool call -> JSON mode -> plain text with
tolerant JSON extraction. A method the server rejects (HTTP 400/422, "unsupported", NotImplementedError)
is skipped and remembered, for this object and process-wide per (base_url, model), so later calls start
at the method that works. Transient failures (429, 5xx, timeouts, dropped connections, malformed bodies)
are retried with jittered exponential backoff, honouring Retry-After. Failures never raise: the reply
carries the error. Every request sent yields one `LLMCall` audit record (retries of it counted in
`attempts`), with token usage and cost, passed to `on_call` and summed into `usage`.

The API key is read from the environment when the client is made and goes only into the client; it
is never logged or recorded, and error texts are scrubbed of it.
"""

from __future__ import annotations

import contextvars
import email.utils
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Generic, Literal, TypeVar

import openai
from langchain_core.exceptions import ContextOverflowError, ModelError, ModelInvalidRequestError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field, SecretStr, ValidationError

from agents.llm_config import LLMConfig

logger = logging.getLogger(__name__)

StructuredMethod = Literal["json_schema", "function_calling", "json_mode", "text"]
METHOD_CHAIN: tuple[StructuredMethod, ...] = ("json_schema", "function_calling", "json_mode", "text")
# Why a record failed: the server refused the method, the request kept timing out or failing
# transiently, it failed for good, or the reply came back but did not validate.
ErrorKind = Literal["rejected", "timeout", "transient", "fatal", "unparseable"]

MAX_BACKOFF_S = 30.0
PLACEHOLDER_API_KEY = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) accept any key
_DEADLINE_GRACE_S = 2.0


class LLMError(Exception):
    """A failure that no retry or fallback can fix (e.g. no API key configured)."""


class HarnessError(LLMError):
    """A mistake in a test or replay harness (script ran out, replay diverged): always propagates."""


class ReplayedFailure(Exception):
    """A recorded failure re-enacted by a replay model; classified by its recorded kind, never retried."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind


class WallClockTimeout(TimeoutError):
    """The request outlived its wall-clock deadline although the transport did not time out."""


# -- configuration and records ---------------------------------------------------------------------


class LLMCall(BaseModel):
    """Audit record of one request (with its retries). `ok` means a usable reply came back."""

    role: str
    model: str
    method: str
    schema_name: str | None = None
    messages: list[dict[str, Any]]
    reply: str = ""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float
    attempts: int
    ok: bool
    error: str | None = None
    error_kind: ErrorKind | None = None
    started_at: str


class Usage(BaseModel):
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, call: LLMCall) -> None:
        self.calls += 1
        self.input_tokens += call.input_tokens
        self.output_tokens += call.output_tokens
        self.cost_usd += call.cost_usd


T = TypeVar("T", bound=BaseModel)


@dataclass
class StructuredReply(Generic[T]):
    value: T | None
    calls: list[LLMCall] = field(default_factory=list)
    error: str | None = None
    method: str | None = None  # the method whose reply validated (or the last one tried on failure)

    @property
    def ok(self) -> bool:
        return self.value is not None and self.error is None


@dataclass
class TextReply:
    text: str | None
    calls: list[LLMCall] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.text is not None and self.error is None


# -- process-wide memory of working methods ---------------------------------------------------------

_method_memory: dict[tuple[str, str], StructuredMethod] = {}
_method_memory_lock = threading.Lock()


def known_method(base_url: str | None, model: str) -> StructuredMethod | None:
    with _method_memory_lock:
        return _method_memory.get((base_url or "", model))


def forget_methods() -> None:
    """Clear the process-wide memory of downgrades (tests)."""
    with _method_memory_lock:
        _method_memory.clear()


def _later(a: StructuredMethod, b: StructuredMethod | None) -> StructuredMethod:
    if b is None:
        return a
    return a if METHOD_CHAIN.index(a) >= METHOD_CHAIN.index(b) else b


# -- JSON extraction ---------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _balanced_objects(text: str) -> Iterator[str]:
    """Every top-level balanced {...} span, skipping braces inside JSON strings."""
    start = text.find("{")
    while start != -1:
        depth, in_string, escaped = 0, False, False
        end = -1
        for i in range(start, len(text)):
            ch = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        if end == -1:
            return
        yield text[start : end + 1]
        start = text.find("{", end + 1)


def _loads_tolerant(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(_TRAILING_COMMA.sub(r"\1", text))


def json_candidates(text: str) -> Iterator[Any]:
    """JSON values a reply may hold, best first: the whole text, fenced blocks, then balanced objects."""
    stripped = text.strip()
    pieces = [stripped, *(m.group(1).strip() for m in _FENCE.finditer(text)), *_balanced_objects(text)]
    seen: set[str] = set()
    for piece in pieces:
        if not piece or piece in seen:
            continue
        seen.add(piece)
        try:
            yield _loads_tolerant(piece)
        except (json.JSONDecodeError, RecursionError):
            continue


def _summarize(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()[:5]]
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_structured(text: str, schema: type[T]) -> tuple[T | None, str | None]:
    """Validate the first JSON value in `text` that fits `schema`; else None and why not."""
    last: str | None = None
    for candidate in json_candidates(text):
        if not isinstance(candidate, dict):
            last = f"expected a JSON object, got {type(candidate).__name__}"
            continue
        try:
            return schema.model_validate(candidate), None
        except ValidationError as exc:
            last = _summarize(exc)
    return None, last or "no JSON object found"


# -- helpers -------------------------------------------------------------------------------------------


def _schema_name(schema: type[BaseModel]) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64] or "Reply"


def _schema_tool(schema: type[BaseModel]) -> dict[str, Any]:
    tool = convert_to_openai_tool(schema)
    tool["function"]["name"] = _schema_name(schema)
    return tool


def _message_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    role_of = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
    return [{"role": role_of.get(m.type, m.type), "content": m.content} for m in messages]


def _secret_values(config: LLMConfig) -> list[str]:
    value = os.environ.get(config.api_key_env, "")
    return [value] if len(value) >= 6 else []  # a very short value would scrub ordinary text


def _scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def _retry_after_s(exc: BaseException) -> float | None:
    """Server hint from `retry-after-ms` or `retry-after` (seconds or an HTTP date), if any."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000.0)
        if (value := headers.get("retry-after")) is not None:
            try:
                return max(0.0, float(value))
            except ValueError:
                when = email.utils.parsedate_to_datetime(value)
                return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
    except (TypeError, ValueError):
        return None
    return None


_UNSUPPORTED = re.compile(r"not supported|unsupported|does not support|not implemented|unknown parameter", re.I)


def classify_error(exc: BaseException) -> ErrorKind:
    """Map an exception from a chat model to how the caller should react."""
    if isinstance(exc, ReplayedFailure):
        return exc.kind
    if isinstance(exc, NotImplementedError):
        return "rejected"
    if isinstance(exc, ContextOverflowError):
        return "fatal"  # a smaller prompt is needed, not another method
    if isinstance(exc, (openai.APITimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status in (408, 409, 429) or status >= 500:
            return "transient"
        if status in (400, 422) or _UNSUPPORTED.search(str(exc)):
            return "rejected"
        return "fatal"
    if isinstance(exc, openai.APIConnectionError):
        return "transient"
    if isinstance(exc, ModelError):
        if exc.is_retryable:
            return "transient"
        return "rejected" if isinstance(exc, ModelInvalidRequestError) else "fatal"
    if isinstance(exc, json.JSONDecodeError):
        return "transient"  # a truncated or garbled body from the server or a proxy
    return "fatal"


_ERROR_LABEL: dict[ErrorKind, str] = {
    "rejected": "rejected by the server",
    "timeout": "timeout",
    "transient": "request failed",
    "fatal": "request failed",
    "unparseable": "unparseable reply",
}


# -- the role client -------------------------------------------------------------------------------------


@dataclass
class _Outcome:
    message: AIMessage | None
    call: LLMCall
    kind: ErrorKind | None


class RoleLLM:
    """The model of one role: structured or text replies, retries, method fallback, accounting."""

    def __init__(
        self,
        role: str,
        chat_model: BaseChatModel,
        config: LLMConfig,
        on_call: Callable[[LLMCall], None] | None = None,
    ) -> None:
        self.role = role
        self.chat_model = chat_model
        self.config = config
        self.on_call = on_call
        self.usage = Usage()
        self._lock = threading.Lock()
        self._learned: StructuredMethod | None = None
        # Only real endpoints share what they support; scripted models in tests must not leak into each other.
        is_endpoint = type(chat_model).__module__.startswith("langchain_openai")
        self._shared_key = (config.base_url or "", config.model) if is_endpoint else None

    # -- public API --------------------------------------------------------------------------------

    @property
    def start_method(self) -> StructuredMethod:
        """The method the next structured call will try first."""
        configured: StructuredMethod = (
            "json_schema" if self.config.structured_method == "auto" else self.config.structured_method
        )
        with self._lock:
            start = _later(configured, self._learned)
        if self._shared_key is not None:
            with _method_memory_lock:
                start = _later(start, _method_memory.get(self._shared_key))
        return start

    def structured(self, system: str, user: str, schema: type[T]) -> StructuredReply[T]:
        calls: list[LLMCall] = []
        name = _schema_name(schema)
        start = self.start_method
        rejected = False
        last_error = "no method tried"
        method: StructuredMethod = start
        for method in METHOD_CHAIN[METHOD_CHAIN.index(start) :]:
            try:
                runnable = self._bind(method, schema)
            except NotImplementedError:
                logger.info("%s: model cannot bind %s; trying the next method", self.role, method)
                rejected = True
                continue
            outcome = self._invoke(runnable, self._structured_messages(system, user, schema, method), method, name)
            calls.append(outcome.call)
            if outcome.message is None:
                if outcome.kind == "rejected" and method != "text":
                    rejected = True
                    self._finish(outcome.call)
                    logger.info("%s: server rejected %s; downgrading", self.role, method)
                    continue
                self._finish(outcome.call)
                return StructuredReply(None, calls, outcome.call.error, method)
            if rejected:
                self._remember(method)
            value, why = self._parse(outcome.message, schema, method)
            if value is not None:
                outcome.call.ok = True
                self._finish(outcome.call)
                return StructuredReply(value, calls, None, method)
            last_error = f"{_ERROR_LABEL['unparseable']}: {why}"
            outcome.call.ok = False
            outcome.call.error = last_error
            outcome.call.error_kind = "unparseable"
            self._finish(outcome.call)
            logger.info("%s: %s reply did not validate (%s); trying the next method", self.role, method, why)
        return StructuredReply(None, calls, last_error, method)

    def text(self, system: str, user: str) -> TextReply:
        outcome = self._invoke(self.chat_model, [SystemMessage(system), HumanMessage(user)], "text", None)
        if outcome.message is None:
            self._finish(outcome.call)
            return TextReply(None, [outcome.call], outcome.call.error)
        outcome.call.ok = True
        self._finish(outcome.call)
        return TextReply(outcome.message.text, [outcome.call], None)

    # -- methods ---------------------------------------------------------------------------------

    def _bind(self, method: StructuredMethod, schema: type[BaseModel]) -> Runnable[Any, Any]:
        if method == "json_schema":
            tool = _schema_tool(schema)["function"]
            json_schema = {"name": tool["name"], "schema": tool["parameters"], "strict": False}
            if tool.get("description"):
                json_schema["description"] = tool["description"]
            return self.chat_model.bind(response_format={"type": "json_schema", "json_schema": json_schema})
        if method == "function_calling":
            return self.chat_model.bind_tools([_schema_tool(schema)], tool_choice=_schema_name(schema))
        if method == "json_mode":
            return self.chat_model.bind(response_format={"type": "json_object"})
        return self.chat_model

    @staticmethod
    def _structured_messages(
        system: str, user: str, schema: type[BaseModel], method: StructuredMethod
    ) -> list[BaseMessage]:
        name = _schema_name(schema)
        if method == "json_schema":
            hint = f"Reply with only a JSON object that follows the `{name}` schema."
        elif method == "function_calling":
            hint = f"Reply by calling the `{name}` tool with your answer as its arguments."
        else:
            # JSON mode and plain text carry no schema of their own: spell it out.
            params = json.dumps(_schema_tool(schema)["function"]["parameters"], indent=1)
            hint = (
                f"Reply with only a JSON object (no prose, no code fences) that validates against this "
                f"JSON schema for `{name}`:\n{params}"
            )
        return [SystemMessage(f"{system}\n\n{hint}" if system else hint), HumanMessage(user)]

    @staticmethod
    def _parse(message: AIMessage, schema: type[T], method: StructuredMethod) -> tuple[T | None, str | None]:
        why: str | None = None
        if method == "function_calling":
            name = _schema_name(schema)
            calls = sorted(message.tool_calls, key=lambda c: c.get("name") != name)
            for call in calls:
                try:
                    return schema.model_validate(call.get("args") or {}), None
                except ValidationError as exc:
                    why = f"tool call {call.get('name')!r}: {_summarize(exc)}"
            for bad in message.invalid_tool_calls:
                value, why = parse_structured(str(bad.get("args") or ""), schema)
                if value is not None:
                    return value, None
            if not calls and not message.invalid_tool_calls:
                why = "no tool call in the reply"
        # The content may still hold the JSON (servers that answer a forced tool call in prose).
        text = message.text
        if text.strip():
            value, content_why = parse_structured(text, schema)
            if value is not None:
                return value, None
            why = why or content_why
        return None, why or "empty reply"

    # -- requests ---------------------------------------------------------------------------------

    def _invoke(
        self, runnable: Runnable[Any, Any], messages: list[BaseMessage], method: str, schema_name: str | None
    ) -> _Outcome:
        cfg = self.config
        started_at = datetime.now(timezone.utc).isoformat()
        t0 = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            try:
                reply = self._call_with_deadline(runnable, messages)
                break
            except HarnessError:
                raise
            except Exception as exc:
                kind = classify_error(exc)
                detail = _scrub(f"{type(exc).__name__}: {exc}", _secret_values(cfg))
                retryable = kind in ("timeout", "transient") and not isinstance(exc, ReplayedFailure)
                if retryable and attempts <= cfg.max_retries:
                    delay = self._retry_delay(exc, attempts)
                    logger.warning(
                        "%s: %s attempt %d failed (%s); retrying in %.2fs", self.role, method, attempts, detail, delay
                    )
                    time.sleep(delay)
                    continue
                error = f"{_ERROR_LABEL[kind]} after {attempts} attempt(s): {detail}"
                if kind == "timeout":
                    error = f"timeout ({cfg.timeout_s:g}s) after {attempts} attempt(s): {detail}"
                call = self._record(method, schema_name, messages, None, started_at, t0, attempts)
                call.error, call.error_kind = error, kind
                return _Outcome(None, call, kind)
        message = reply if isinstance(reply, AIMessage) else AIMessage(content=str(getattr(reply, "content", reply)))
        call = self._record(method, schema_name, messages, message, started_at, t0, attempts)
        return _Outcome(message, call, None)

    def _call_with_deadline(self, runnable: Runnable[Any, Any], messages: list[BaseMessage]) -> Any:
        """Invoke in a helper thread so that a transport that never times out cannot hang the caller."""
        deadline = self.config.timeout_s + max(_DEADLINE_GRACE_S, 0.25 * self.config.timeout_s)
        box: list[tuple[bool, Any]] = []
        context = contextvars.copy_context()

        def target() -> None:
            try:
                box.append((True, context.run(runnable.invoke, messages)))
            except BaseException as exc:  # handed back to the caller's thread
                box.append((False, exc))

        worker = threading.Thread(target=target, name=f"llm-{self.role}", daemon=True)
        worker.start()
        worker.join(deadline)
        if worker.is_alive() or not box:
            raise WallClockTimeout(f"no reply within {deadline:.1f}s")
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def _retry_delay(self, exc: BaseException, attempt: int) -> float:
        hinted = _retry_after_s(exc)
        if hinted is not None:
            return min(hinted, MAX_BACKOFF_S)
        base = min(MAX_BACKOFF_S, self.config.backoff_s * 2 ** (attempt - 1))
        return base * random.uniform(0.5, 1.0)  # jitter spreads parallel experiments apart

    def _record(
        self,
        method: str,
        schema_name: str | None,
        messages: list[BaseMessage],
        message: AIMessage | None,
        started_at: str,
        t0: float,
        attempts: int,
    ) -> LLMCall:
        input_tokens = output_tokens = 0
        reply = ""
        tool_calls: list[dict[str, Any]] = []
        if message is not None:
            usage = message.usage_metadata or {}
            input_tokens = int(usage.get("input_tokens") or 0)
            output_tokens = int(usage.get("output_tokens") or 0)
            reply = message.text
            tool_calls = [{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in message.tool_calls]
            tool_calls += [
                {"name": c.get("name"), "args": c.get("args"), "id": c.get("id"), "invalid": True}
                for c in message.invalid_tool_calls
            ]
        return LLMCall(
            role=self.role,
            model=self.config.model,
            method=method,
            schema_name=schema_name,
            messages=_message_dicts(messages),
            reply=reply,
            tool_calls=tool_calls,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=self.config.cost(input_tokens, output_tokens),
            latency_s=round(time.monotonic() - t0, 4),
            attempts=attempts,
            ok=False,
            started_at=started_at,
        )

    def _finish(self, call: LLMCall) -> None:
        with self._lock:
            self.usage.add(call)
        logger.info(
            "%s: %s call %s in %.2fs (%d attempt(s), %d+%d tokens, $%.4f)%s",
            self.role,
            call.method,
            "ok" if call.ok else "failed",
            call.latency_s,
            call.attempts,
            call.input_tokens,
            call.output_tokens,
            call.cost_usd,
            f": {call.error}" if call.error else "",
        )
        if self.on_call is not None:
            try:
                self.on_call(call)
            except Exception:  # an audit sink failing must not lose the reply
                logger.exception("%s: on_call hook failed", self.role)

    def _remember(self, method: StructuredMethod) -> None:
        with self._lock:
            self._learned = _later(method, self._learned)
        if self._shared_key is not None:
            with _method_memory_lock:
                _method_memory[self._shared_key] = _later(method, _method_memory.get(self._shared_key))
        logger.info("%s: structured output for %s now starts at %s", self.role, self.config.model, method)


# -- construction ----------------------------------------------------------------------------------------


def make_chat_model(config: LLMConfig) -> BaseChatModel:
    """A ChatOpenAI for the config; the key comes from the environment and goes nowhere else."""
    from langchain_openai import ChatOpenAI

    key = os.environ.get(config.api_key_env)
    if not key:
        if config.base_url is None:
            raise LLMError(
                f"no API key for model {config.model!r}: set the environment variable {config.api_key_env} "
                "(or give base_url for a local server that needs none)"
            )
        key = PLACEHOLDER_API_KEY
    kwargs: dict[str, Any] = {
        "model": config.model,
        "api_key": SecretStr(key),
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "timeout": config.timeout_s,
        "max_retries": 0,  # RoleLLM retries, so attempts are counted and backoff is ours
    }
    if config.base_url is not None:
        kwargs["base_url"] = config.base_url
        kwargs["use_responses_api"] = False  # compatible servers speak Chat Completions
    return ChatOpenAI(**kwargs)


def make_role_llm(role: str, config: LLMConfig, on_call: Callable[[LLMCall], None] | None = None) -> RoleLLM:
    return RoleLLM(role, make_chat_model(config), config, on_call)
