"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests of the LLM layer.

Replies are programmed per request: tests queue replies and faults (``server.push(...)``), and each
POST /v1/chat/completions takes the next one. Server-wide capability flags mimic endpoints that lack
JSON-schema output or tools, answering those requests with a 400 before the queue is consulted, as
vLLM, Ollama or llama.cpp servers of some versions do. Every request is recorded (path, headers, JSON
body) for assertions. Non-streaming and streaming (SSE) replies are both served.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

ReplyKind = Literal["content", "tool", "error", "malformed"]


@dataclass
class Reply:
    """One programmed answer: a normal reply, an HTTP error, or a broken body, optionally after a delay."""

    kind: ReplyKind = "content"
    content: str | None = None
    tool_args: dict[str, Any] | None = None
    tool_name: str | None = None  # None: the tool the request forced (or its first tool)
    status: int = 200
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    usage: tuple[int, int] | None = None  # (prompt, completion); None: estimated from the text


def content(text: str, usage: tuple[int, int] | None = None, delay_s: float = 0.0) -> Reply:
    return Reply(kind="content", content=text, usage=usage, delay_s=delay_s)


def tool_call(args: dict[str, Any], name: str | None = None, text: str | None = None) -> Reply:
    return Reply(kind="tool", tool_args=args, tool_name=name, content=text)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply(kind="error", status=status, message=message, headers=dict(headers or {}))


def rate_limited(retry_after_ms: int = 20) -> Reply:
    return error(429, "Rate limit reached", {"retry-after-ms": str(retry_after_ms)})


def server_error(message: str = "internal error") -> Reply:
    return error(500, message)


def slow(delay_s: float, then: Reply | None = None) -> Reply:
    reply = then or content("{}")
    reply.delay_s = delay_s
    return reply


def malformed() -> Reply:
    return Reply(kind="malformed")


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def _forced_tool(body: dict[str, Any]) -> str | None:
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return choice.get("function", {}).get("name")
    tools = body.get("tools") or []
    if tools:
        return tools[0].get("function", {}).get("name")
    return None


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class FakeOpenAIServer:
    """Context manager: ``with FakeOpenAIServer() as srv: ChatOpenAI(base_url=srv.base_url, ...)``."""

    def __init__(
        self,
        *,
        supports_json_schema: bool = True,
        supports_tools: bool = True,
        supports_json_mode: bool = True,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
    ) -> None:
        self.supports_json_schema = supports_json_schema
        self.supports_tools = supports_tools
        self.supports_json_mode = supports_json_mode
        self.responder = responder  # answers when the queue is empty
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- programming and inspection -------------------------------------------------------------

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.body for r in self.requests]

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        handler = _make_handler(self)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # a handler still sleeping in a slow reply must not hold up close
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- request handling -------------------------------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        response_format = body.get("response_format") or {}
        if response_format.get("type") == "json_schema" and not self.supports_json_schema:
            return error(400, "response_format json_schema is not supported by this server")
        if response_format.get("type") == "json_object" and not self.supports_json_mode:
            return error(400, "response_format json_object is not supported by this server")
        if body.get("tools") and not self.supports_tools:
            return error(400, "tools are not supported by this server")
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(body)
        # 404 is neither retried nor taken for an unsupported method, so a missing reply fails fast.
        return error(404, "fake server: no reply queued")

    def _sleep(self, seconds: float) -> None:
        self._closing.wait(seconds)


def _completion(body: dict[str, Any], reply: Reply) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    text = reply.content or ""
    tool_calls: list[dict[str, Any]] = []
    if reply.kind == "tool":
        name = reply.tool_name or _forced_tool(body) or "tool"
        tool_calls.append(
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(reply.tool_args or {})},
            }
        )
    if reply.usage is not None:
        prompt_tokens, completion_tokens = reply.usage
    else:
        prompt_text = "".join(str(m.get("content") or "") for m in body.get("messages", []))
        prompt_tokens = _estimate_tokens(prompt_text)
        completion_tokens = _estimate_tokens(text + "".join(c["function"]["arguments"] for c in tool_calls))
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return usage, text, tool_calls


def _make_handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

        def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send_json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
            else:
                self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send_json(400, {"error": {"message": "request body is not JSON", "type": "invalid_request"}})
                return
            with server._lock:
                server.requests.append(
                    RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request"}})
                return
            reply = server._next_reply(body)
            if reply.delay_s:
                server._sleep(reply.delay_s)
                if server._closing.is_set():
                    return
            try:
                if reply.kind == "error":
                    err_type = "rate_limit_error" if reply.status == 429 else "invalid_request_error"
                    payload = {"error": {"message": reply.message, "type": err_type, "code": None, "param": None}}
                    self._send_json(reply.status, payload, reply.headers)
                elif reply.kind == "malformed":
                    data = b'{"id": "chatcmpl-broken", "choices": [ {"message": '
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                elif body.get("stream"):
                    self._stream(body, reply)
                else:
                    self._complete(body, reply)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); nothing to answer

        def _complete(self, body: dict[str, Any], reply: Reply) -> None:
            usage, text, tool_calls = _completion(body, reply)
            message: dict[str, Any] = {"role": "assistant", "content": text if (text or not tool_calls) else None}
            if tool_calls:
                message["tool_calls"] = tool_calls
            payload = {
                "id": f"chatcmpl-{len(server.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "fake-model"),
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if tool_calls else "stop",
                        "logprobs": None,
                    }
                ],
                "usage": usage,
            }
            self._send_json(200, payload, reply.headers)

        def _stream(self, body: dict[str, Any], reply: Reply) -> None:
            usage, text, tool_calls = _completion(body, reply)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            base = {
                "id": f"chatcmpl-{len(server.requests)}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": body.get("model", "fake-model"),
            }

            def emit(delta: dict[str, Any] | None, finish: str | None = None, usage_: Any = None) -> None:
                chunk = dict(base)
                chunk["choices"] = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
                if usage_ is not None:
                    chunk["usage"] = usage_
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

            emit({"role": "assistant", "content": ""})
            for start in range(0, len(text), 8):
                emit({"content": text[start : start + 8]})
            for index, call in enumerate(tool_calls):
                emit(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
                emit({"tool_calls": [{"index": index, "function": {"arguments": call["function"]["arguments"]}}]})
            emit({}, finish="tool_calls" if tool_calls else "stop")
            if (body.get("stream_options") or {}).get("include_usage"):
                emit(None, usage_=usage)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler
