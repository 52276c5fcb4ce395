"""The chat role: a conversation over a run, answered through tools, streamed, and checked for numbers.

`ChatAgent.ask` sends the conversation with the tools bound, streams the reply's text to a callback
as it arrives, runs the tool calls the model makes and feeds their results back, until the model
answers in words. The answer's numbers are then checked against every tool result, the user's words
and the system prompt (`agents/grounding.py`); a number none of them holds gets the answer sent back
once with the list, and if the revised answer still has one, the turn says so. Every model request
is one `LLMCall` record (role "chat") passed to `on_call`, as the loop's roles do.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ValidationError

from agents.grounding import ungrounded_numbers
from agents.llm import HarnessError, LLMCall, LLMConfig, _message_dicts, classify_error
from agents.prompts import load_prompt

log = logging.getLogger(__name__)

MAX_TOOL_OUTPUT = 12_000  # characters of one tool result the model sees
INVALID_ARGS = "__invalid_json__"


@dataclass(frozen=True)
class ChatTool:
    """A function the chat model may call: a name, what it does, its arguments as a pydantic model."""

    name: str
    description: str
    args: type[BaseModel]
    fn: Callable[[Any], str]

    def schema(self) -> dict[str, Any]:
        """The OpenAI tool definition (references inlined: some servers do not resolve $ref)."""
        tool = convert_to_openai_tool(self.args)
        tool["function"]["name"] = self.name
        tool["function"]["description"] = self.description
        return tool

    def run(self, arguments: dict[str, Any]) -> str:
        """The tool's result as text; bad arguments and failures come back as an error text the
        model can act on, never as an exception."""
        try:
            parsed = self.args.model_validate(arguments or {})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            return f"error: bad arguments for {self.name}: {problems}"
        try:
            output = self.fn(parsed)
        except Exception as exc:  # a tool failing is an answer for the model, not a crash of the chat
            log.warning("chat tool %s failed: %s", self.name, exc)
            return f"error: {self.name} failed: {exc}"
        if len(output) > MAX_TOOL_OUTPUT:
            output = output[:MAX_TOOL_OUTPUT] + f"\n... ({len(output) - MAX_TOOL_OUTPUT} more characters cut)"
        return output


class ToolUse(BaseModel):
    name: str
    args: dict[str, Any]
    output: str


@dataclass
class ChatTurn:
    """What one question produced."""

    text: str = ""
    tools: list[ToolUse] = field(default_factory=list)
    ungrounded: list[str] = field(default_factory=list)  # numbers of the answer no source holds
    revised: bool = False  # the answer was sent back once for numbers it could not support
    error: str | None = None


TextSink = Callable[[str], None]
ToolSink = Callable[[ToolUse], None]
NoticeSink = Callable[[str], None]
RetractSink = Callable[[], None]

# Tool results of earlier questions are kept in the history cut to this many characters (the model
# can call the tool again); the whole text stays a source for the number check. Without it the
# history grew by every result: 22,000 characters by the fourth question of a real session.
EARLIER_TOOL_CHARS = 600


class ChatAgent:
    """A tool-using conversation with one chat model; keeps the history between questions."""

    def __init__(
        self,
        chat_model: BaseChatModel,
        tools: Sequence[ChatTool],
        context: str,
        config: LLMConfig | None = None,
        on_call: Callable[[LLMCall], None] | None = None,
        max_rounds: int = 8,
        check_numbers: bool = True,
    ) -> None:
        self.model = chat_model
        self.tools = {t.name: t for t in tools}
        self.config = config or LLMConfig(model=getattr(chat_model, "model_name", "chat"))
        self.on_call = on_call
        self.max_rounds = max_rounds
        self.check_numbers = check_numbers
        prompt = load_prompt("chat")
        _, context_text = prompt.render(context=context)
        self.system = f"{prompt.system}\n\n{context_text}"
        self.history: list[BaseMessage] = [SystemMessage(self.system)]
        self._checks: set[int] = set()  # ids of the messages that sent an answer back: not sources
        self._tool_outputs: list[str] = []  # every tool result whole, for the number check
        self._bound = chat_model.bind_tools([t.schema() for t in tools]) if tools else chat_model

    def ask(
        self,
        question: str,
        on_text: TextSink | None = None,
        on_tool: ToolSink | None = None,
        on_notice: NoticeSink | None = None,
        on_retract: RetractSink | None = None,
    ) -> ChatTurn:
        """One question. An answer whose numbers no source holds is sent back once; `on_retract` is
        told first, so a display can take back the text it streamed instead of leaving it above the
        corrected answer."""
        turn = ChatTurn()
        self._shorten_earlier_tool_results()
        self.history.append(HumanMessage(question))
        rounds = 0
        while True:
            rounds += 1
            if rounds > self.max_rounds:
                turn.error = f"gave up after {self.max_rounds} rounds of tool calls"
                return turn
            try:
                reply = self._complete(on_text)
            except HarnessError:
                raise
            except Exception as exc:  # the endpoint failed for good: say so, keep the session
                turn.error = f"the chat model failed: {type(exc).__name__}: {exc}"
                return turn
            self.history.append(reply)
            if reply.tool_calls:
                for call in reply.tool_calls:
                    use = self._run_tool(call)
                    turn.tools.append(use)
                    if on_tool is not None:
                        on_tool(use)
                continue
            turn.text = reply.text
            missing = ungrounded_numbers(turn.text, self._sources()) if self.check_numbers else []
            if missing and not turn.revised:
                turn.revised = True
                note = (
                    "These numbers in your answer appear in no tool result of this conversation: "
                    f"{', '.join(missing)}. Numbers must come from the run's data. Call the tools that hold "
                    "them, or leave them out, and answer again."
                )
                if on_retract is not None:
                    on_retract()
                if on_notice is not None:
                    on_notice(f"numbers not found in the run's data: {', '.join(missing)}; asking again")
                check = HumanMessage(note)
                self._checks.add(id(check))
                self.history.append(check)
                continue
            turn.ungrounded = missing
            return turn

    # -- internals -----------------------------------------------------------------------------

    def _sources(self) -> list[str]:
        return self._tool_outputs + [
            str(m.content)
            for m in self.history
            if isinstance(m, (HumanMessage, SystemMessage)) and id(m) not in self._checks
        ]

    def _shorten_earlier_tool_results(self) -> None:
        for i, message in enumerate(self.history):
            text = str(message.content)
            if isinstance(message, ToolMessage) and len(text) > EARLIER_TOOL_CHARS:
                cut = len(text) - EARLIER_TOOL_CHARS
                self.history[i] = ToolMessage(
                    f"{text[:EARLIER_TOOL_CHARS]}\n... ({cut} characters of an earlier question's result cut: "
                    f"call {message.name} again for them)",
                    tool_call_id=message.tool_call_id, name=message.name,
                )

    def _run_tool(self, call: dict[str, Any]) -> ToolUse:
        name = call.get("name") or ""
        args = call.get("args") or {}
        tool = self.tools.get(name)
        if tool is None:
            output = f"error: no tool named {name!r} (tools: {', '.join(self.tools)})"
        elif INVALID_ARGS in args:
            output = f"error: the arguments of {name} were not valid JSON: {args[INVALID_ARGS]}"
        else:
            output = tool.run(args)
        self.history.append(ToolMessage(output, tool_call_id=call.get("id") or name, name=name))
        self._tool_outputs.append(output)
        return ToolUse(name=name, args=args, output=output)

    def _complete(self, on_text: TextSink | None) -> AIMessage:
        """One streamed request, retried on transient failures while nothing has been shown."""
        attempts = 0
        while True:
            attempts += 1
            started_at = datetime.now(timezone.utc).isoformat()
            t0 = time.monotonic()
            shown = False
            messages = list(self.history)
            try:
                full: AIMessageChunk | None = None
                whole: AIMessage | None = None  # a model that cannot stream answers in one message
                for chunk in self._bound.stream(messages, stream_usage=True):
                    if isinstance(chunk, AIMessageChunk):
                        full = chunk if full is None else full + chunk
                    elif isinstance(chunk, AIMessage):
                        whole = chunk
                    else:
                        continue
                    piece = chunk.text
                    if piece and on_text is not None:
                        shown = True
                        on_text(piece)
                reply = whole if whole is not None and full is None else _to_message(full)
            except HarnessError:
                raise
            except Exception as exc:
                kind = classify_error(exc)
                self._record(messages, None, started_at, t0, attempts, f"{type(exc).__name__}: {exc}", kind)
                if kind in ("timeout", "transient") and not shown and attempts <= self.config.max_retries:
                    time.sleep(min(30.0, self.config.backoff_s * 2 ** (attempts - 1)) * random.uniform(0.5, 1.0))
                    continue
                raise
            self._record(messages, reply, started_at, t0, attempts, None, None)
            return reply

    def _record(
        self,
        messages: list[BaseMessage],
        reply: AIMessage | None,
        started_at: str,
        t0: float,
        attempts: int,
        error: str | None,
        kind: Any,
    ) -> None:
        usage = (reply.usage_metadata if reply is not None else None) or {}
        input_tokens = int(usage.get("input_tokens") or 0)
        output_tokens = int(usage.get("output_tokens") or 0)
        call = LLMCall(
            role="chat",
            model=self.config.model,
            method="tools",
            messages=_message_dicts(messages),
            reply=reply.text if reply is not None else "",
            tool_calls=[{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in reply.tool_calls]
            if reply is not None
            else [],
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=self.config.cost(input_tokens, output_tokens),
            latency_s=round(time.monotonic() - t0, 4),
            attempts=attempts,
            ok=reply is not None,
            error=error,
            error_kind=kind,
            started_at=started_at,
        )
        if self.on_call is not None:
            try:
                self.on_call(call)
            except Exception:  # an audit sink failing must not lose the answer
                log.exception("chat: on_call hook failed")


def _to_message(full: AIMessageChunk | None) -> AIMessage:
    if full is None:
        return AIMessage(content="")
    tool_calls = list(full.tool_calls)
    for bad in full.invalid_tool_calls:  # arguments that are not JSON: the model gets an error back
        args = {INVALID_ARGS: str(bad.get("args"))[:200]}
        tool_calls.append({"name": bad.get("name") or "", "args": args, "id": bad.get("id"), "type": "tool_call"})
    return AIMessage(
        content=full.content,
        tool_calls=[c | {"args": c.get("args") or {}} for c in tool_calls],
        usage_metadata=full.usage_metadata,
    )


def tool_call_text(use: ToolUse) -> str:
    """How a tool call is shown to the user: name(args)."""
    args = ", ".join(f"{k}={json.dumps(v)}" for k, v in use.args.items())
    return f"{use.name}({args})"
