"""A real OpenAI chat-completions server on loopback, scripted per request.

Tests start one, point litellm at it with ``api_base=server.base_url`` and
queue what each incoming request gets::

    with LoopbackOpenAI() as server:
        server.script(rate_limited(retry_after_s=0.01), reply("hello"))
        ...  # first call gets a 429, the retry gets "hello"
        assert server.requests[1].body["messages"][0]["role"] == "system"

Every request is recorded (path, headers, JSON body) so tests can assert what
litellm actually sent. A conversation OpenAI refuses (a tool message that
answers no call, a call left unanswered) gets OpenAI's 400, whatever the script. Streaming requests (``"stream": true``) get SSE with
chunked transfer encoding, so a connection dropped mid-stream is a real
protocol error on the client side rather than a silently short body.

Hostile servers too: :func:`raw` answers with exactly the body given (a 200 with no choices, plain
JSON to a streaming request, an error body in another shape than OpenAI's), :func:`events` streams
exactly the chunks given, :func:`trickle` sends a keep-alive byte now and then and never a reply.

Only the standard library: ``http.server`` in a daemon thread.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Action",
    "LoopbackOpenAI",
    "RecordedRequest",
    "chunk",
    "drop_mid_stream",
    "events",
    "http_error",
    "keep_alive",
    "malformed_json",
    "rate_limited",
    "raw",
    "reply",
    "server_error",
    "slow",
    "trickle",
    "unauthorized",
]


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Action:
    """What the server does with one request. Build them with the helpers below."""

    kind: str
    content: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: str | None = None
    delay_s: float = 0.0
    usage: tuple[Any, Any] = (11, 7)
    chunks: int = 3
    events: tuple[str, ...] = ()
    finish_reason: str | None = None


def reply(content: str | None = "", *, tool_calls: list[dict[str, Any]] | None = None,
          usage: tuple[Any, Any] = (11, 7), chunks: int = 3, finish_reason: str | None = None) -> Action:
    """A normal completion. ``tool_calls`` items are ``{"name":..., "args": {...}}``
    (or ``"arguments"`` as a ready JSON string; an ``"id"`` given is sent as it is, ``""`` too);
    ``usage`` is (prompt, completion), sent as given; streamed replies split the content into
    ``chunks`` fragments. ``finish_reason`` defaults to ``tool_calls`` or ``stop``."""
    calls = tuple(tool_calls or ())
    return Action("reply", content=content, tool_calls=calls, usage=usage, chunks=chunks,
                  finish_reason=finish_reason)


def as_sent(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """A request's messages from the server's side, in comparable terms (an independent reading of the
    wire): (role, content, [(call id, name, arguments)], tool_call_id) each."""
    out = []
    for m in messages:
        calls = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                 for c in m.get("tool_calls") or []]
        out.append((m["role"], m.get("content") or "", calls, m.get("tool_call_id")))
    return out


def raw(body: Any, *, status: int = 200, content_type: str = "application/json") -> Action:
    """A response with exactly this body (a dict or a list is sent as JSON), whether or not the
    request asked for a stream: a server that answers a streaming request with plain JSON, or with
    a 200 the API never sends (``{"choices": []}``)."""
    text = body if isinstance(body, str) else json.dumps(body)
    return Action("raw", status=status, headers=(("Content-Type", content_type),), body=text)


def events(*items: Any) -> Action:
    """A stream of exactly these SSE events (a dict is sent as ``data: <its JSON>``, a string as
    ``data: <the string>``), then ``data: [DONE]``. :func:`chunk` builds a chunk's dict."""
    return Action("events", events=tuple(i if isinstance(i, str) else json.dumps(i) for i in items))


def chunk(delta: dict[str, Any] | None = None, *, finish_reason: str | None = None,
          choice: dict[str, Any] | None = None, usage: dict[str, Any] | None = None,
          model: str = "gpt-test") -> dict[str, Any]:
    """One ``chat.completion.chunk``: its choice is ``choice`` if given, else ``{"index": 0,
    "delta": delta, "finish_reason": finish_reason}``."""
    out = _delta_chunk(model, delta or {}, finish_reason=finish_reason)
    if choice is not None:
        out["choices"] = [choice]
    if usage is not None:
        out["usage"] = usage
    return out


def trickle(seconds: float, piece: str = ": keepalive\n") -> Action:
    """A 200 that sends ``piece`` (a keep-alive comment, or whitespace) every 0.1 s for ``seconds``
    and never a reply, then drops the connection: what OpenRouter sends a non-streamed request while
    the model works, from a server that never finishes. Each read gets bytes in time, so only a
    bound on the whole wait ends it. A streaming request gets SSE keep-alives instead."""
    return Action("trickle", body=piece, chunks=max(int(seconds * 10), 1))


def http_error(status: int, message: str = "scripted error", *,
               headers: dict[str, str] | None = None) -> Action:
    """An HTTP error with an OpenAI-shaped error body."""
    body = json.dumps({"error": {"message": message, "type": "loopback_error",
                                 "code": str(status)}})
    return Action("error", status=status, headers=tuple((headers or {}).items()), body=body)


def rate_limited(*, retry_after_s: float | None = None) -> Action:
    """A 429, with a ``Retry-After`` header in seconds when given."""
    headers = {} if retry_after_s is None else {"Retry-After": _fmt_seconds(retry_after_s)}
    return http_error(429, "Rate limit reached (scripted)", headers=headers)


def server_error(status: int = 500) -> Action:
    return http_error(status, f"server error {status} (scripted)")


def unauthorized(*, echo_key: bool = False) -> Action:
    """A 401 like OpenAI's for a rejected key. With ``echo_key`` the error
    message quotes the Authorization header it got, as some servers do, to
    test that the key never reaches an error message."""
    if echo_key:
        return http_error(401, "Incorrect API key provided: {authorization}.")
    return http_error(401, "Incorrect API key provided (scripted).")


def slow(delay_s: float, then: Action | None = None) -> Action:
    """Wait ``delay_s`` before doing ``then`` (a normal reply by default): past a
    client timeout the client gives up first. The wait ends early when the
    server stops, so a test never hangs on it."""
    inner = then or reply("late reply")
    return Action(inner.kind, content=inner.content, tool_calls=inner.tool_calls,
                  status=inner.status, headers=inner.headers, body=inner.body,
                  delay_s=delay_s, usage=inner.usage, chunks=inner.chunks)


def drop_mid_stream(content: str = "partial answer that never ends", *,
                    chunks: int = 2) -> Action:
    """Send a few chunks (SSE when streaming, half a JSON body otherwise), then
    close the socket without finishing the message."""
    return Action("drop", content=content, chunks=chunks)


def stall(seconds: float) -> Action:
    """Start a stream, send a first piece, then nothing for ``seconds`` (no keep-alive either), and close:
    a server that stalls mid-reply."""
    return Action("stall", chunks=max(int(seconds * 10), 1))


def keep_alive(seconds: float) -> Action:
    """Start a stream, then send nothing but keep-alive comments (``: keepalive``), 10 a second, for
    ``seconds``: a server or a proxy that holds the connection open with no reply coming."""
    return Action("keepalive", chunks=max(int(seconds * 10), 1))


def malformed_json() -> Action:
    """A 200 whose body is not JSON (or SSE events that are not JSON)."""
    return Action("malformed")


def _fmt_seconds(s: float) -> str:
    return str(int(s)) if float(s).is_integer() else f"{s:g}"


# --------------------------------------------------------------------------- server


@dataclass
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    received_at: float = field(default_factory=time.monotonic)


class LoopbackOpenAI:
    """A threaded HTTP server on ``127.0.0.1`` with a random free port.

    ``script(*actions)`` appends to the queue; each request to
    ``/v1/chat/completions`` pops one. With the queue empty the server answers
    ``default`` if set, else a 500 that says the script ran out (so a test that
    makes an unexpected call fails loudly instead of hanging).
    """

    def __init__(self, *, default: Action | None = None) -> None:
        self.requests: list[RecordedRequest] = []
        self.default = default
        self._queue: deque[Action] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------
    def start(self) -> "LoopbackOpenAI":
        handler = _make_handler(self)
        server = _QuietServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        # Do not join handler threads on close: a "slow" one may still be waiting.
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="loopback-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "LoopbackOpenAI":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # scripting -------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """The ``api_base`` to give litellm."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *actions: Action) -> None:
        with self._lock:
            self._queue.extend(actions)

    def reset(self) -> None:
        """Forget the script and the recorded requests (for a shared server)."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
        self.default = None

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _next_action(self) -> Action | None:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self.default

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client hanging up on a scripted fault is expected, not news


def _make_handler(owner: LoopbackOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # keep test output clean

        def do_GET(self) -> None:  # noqa: N802
            self._send_json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            owner._record(RecordedRequest("POST", self.path,
                                          {k.lower(): v for k, v in self.headers.items()},
                                          body))
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send_json(404, {"error": {"message": f"unknown path {self.path}"}})
                return
            refused = _refusal(body)
            if refused is not None:  # what OpenAI answers to such a body, before any script
                self._send_json(400, {"error": {"message": refused, "type": "invalid_request_error",
                                                "param": "messages", "code": None}})
                return
            action = owner._next_action()
            if action is None:
                self._send_json(500, {"error": {"message": "loopback: script ran out of actions"}})
                return
            if action.delay_s and owner._stopping.wait(action.delay_s):
                return
            stream = bool(body and body.get("stream"))
            model = (body or {}).get("model", "gpt-test")
            try:
                self._perform(action, stream=stream, model=model)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (e.g. its timeout fired): nothing to tell it

        # ------------------------------------------------------------------
        def _perform(self, action: Action, *, stream: bool, model: str) -> None:
            if action.kind == "error":
                self.send_response(action.status)
                for k, v in action.headers:
                    self.send_header(k, v)
                text = (action.body or "").replace(
                    "{authorization}", self.headers.get("Authorization", "").removeprefix("Bearer "))
                data = text.encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif action.kind == "malformed":
                if stream:
                    self._start_sse()
                    self._chunk(b"data: {this is not json\n\n")
                    self._chunk(b"data: [DONE]\n\n")
                    self._chunk(b"")
                else:
                    data = b'{"id": "x", "choices": [ this is not json'
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
            elif action.kind == "drop":
                if stream:
                    self._start_sse()
                    for piece in _split(action.content or "", max(action.chunks, 1)):
                        self._chunk(_sse(_delta_chunk(model, {"content": piece})))
                else:
                    whole = json.dumps(_completion(model, action)).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(whole)))
                    self.end_headers()
                    self.wfile.write(whole[: len(whole) // 2])
                self.wfile.flush()
                self._abort()
            elif action.kind == "keepalive":
                self._start_sse()
                self._chunk(_sse(_delta_chunk(model, {"role": "assistant", "content": ""})))
                for _ in range(action.chunks):
                    if owner._stopping.wait(0.1):
                        break
                    self._chunk(b": keepalive\n\n")
                self._abort()
            elif action.kind == "stall":
                self._start_sse()
                self._chunk(_sse(_delta_chunk(model, {"role": "assistant", "content": "a first piece"})))
                owner._stopping.wait(action.chunks / 10)
                self._abort()
            elif action.kind == "raw":
                data = (action.body or "").encode()
                self.send_response(action.status)
                for k, v in action.headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif action.kind == "events":
                self._start_sse()
                for event in action.events:
                    self._chunk(b"data: " + event.encode() + b"\n\n")
                self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")
            elif action.kind == "trickle":
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream" if stream else "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                piece = b": keepalive\n\n" if stream else (action.body or "").encode()
                for _ in range(action.chunks):
                    self._chunk(piece)
                    if owner._stopping.wait(0.1):
                        break
                self._abort()
            elif action.kind == "reply":
                if stream:
                    self._stream_reply(action, model)
                else:
                    self._send_json(200, _completion(model, action))
            else:  # pragma: no cover - a typo in a test helper
                self._send_json(500, {"error": {"message": f"unknown action {action.kind}"}})

        def _stream_reply(self, action: Action, model: str) -> None:
            self._start_sse()
            self._chunk(_sse(_delta_chunk(model, {"role": "assistant", "content": ""})))
            for piece in _split(action.content or "", max(action.chunks, 1)):
                self._chunk(_sse(_delta_chunk(model, {"content": piece})))
            for i, call in enumerate(action.tool_calls):
                args = _arguments(call)
                head = {"index": i, "id": _call_id(call, i), "type": "function",
                        "function": {"name": call["name"], "arguments": ""}}
                self._chunk(_sse(_delta_chunk(model, {"tool_calls": [head]})))
                # Arguments arrive in fragments, as real servers send them.
                for frag in _split(args, 3):
                    self._chunk(_sse(_delta_chunk(
                        model, {"tool_calls": [{"index": i, "function": {"arguments": frag}}]})))
            last = _delta_chunk(model, {}, finish_reason=_finish(action))
            p, c = action.usage
            last["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": _total(p, c)}
            self._chunk(_sse(last))
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")  # terminating zero-length chunk

        # low-level ---------------------------------------------------------
        def _send_json(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _start_sse(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _abort(self) -> None:
            # RST rather than FIN, and never reuse this connection.
            self.close_connection = True
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           b"\x01\x00\x00\x00\x00\x00\x00\x00")
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    return Handler


MAX_CONTENT = 10_485_760  # characters of one message's content OpenAI takes


def _refusal(body: Any) -> str | None:
    """OpenAI's 400 for a conversation it refuses (its own wording), or None. Written from the
    API's behaviour, independently of flowtui's own check."""
    messages = (body or {}).get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return "Missing required parameter: 'messages'."
    waiting: list[str] = []
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str) and len(content) > MAX_CONTENT:
            return (f"Invalid 'messages[{i}].content': string too long. Expected a string with maximum length "
                    f"{MAX_CONTENT}, but got a string with length {len(content)} instead.")
        if role == "tool":
            if m.get("tool_call_id") not in waiting:
                return (f"Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                        f"message with 'tool_calls'. (messages.[{i}].role)")
            waiting.remove(m["tool_call_id"])
            continue
        if waiting:
            return ("An assistant message with 'tool_calls' must be followed by tool messages responding to "
                    f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                    f"{', '.join(waiting)}")
        if role == "assistant":
            waiting = [c.get("id") for c in m.get("tool_calls") or []]
    if waiting:
        return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(waiting)}")
    return None


def _arguments(call: dict[str, Any]) -> str:
    if isinstance(call.get("arguments"), str):
        return call["arguments"]
    return json.dumps(call.get("args") or {})


def _call_id(call: dict[str, Any], i: int) -> Any:
    return call["id"] if "id" in call else f"call_{i}"


def _finish(action: Action) -> str:
    return action.finish_reason or ("tool_calls" if action.tool_calls else "stop")


def _total(p: Any, c: Any) -> Any:
    return p + c if isinstance(p, int) and isinstance(c, int) else None


def _completion(model: str, action: Action) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": action.content}
    if action.tool_calls:
        message["tool_calls"] = [
            {"id": _call_id(call, i), "type": "function",
             "function": {"name": call["name"], "arguments": _arguments(call)}}
            for i, call in enumerate(action.tool_calls)
        ]
    p, c = action.usage
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(action)}],
        "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": _total(p, c)},
    }


def _delta_chunk(model: str, delta: dict[str, Any], *,
                 finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _split(text: str, n: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)]
