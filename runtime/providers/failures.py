"""Why a model call failed, in words, and whether another attempt may succeed.

litellm and the SDKs under it report a failure in many shapes: an HTTP status
(or a 500 of litellm's own for a reply it could not read, or a connection that
dropped), a timeout, a reply that came (HTTP 200) with no usable answer in it
(:class:`~flowtui.runtime.providers._litellm.MalformedReply`), a server's
``Retry-After``. :func:`classify` says whether to retry; :func:`said` what the
provider said, whole (redact it, then :func:`cut` it).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

from flowtui.runtime.providers._litellm import MalformedReply
from flowtui.runtime.secrets import MARK

RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class EmptyStream(Exception):
    """A streamed reply that closed with no chunk at all (retried like a drop)."""

    status_code = 502


def classify(exc: BaseException) -> tuple[int | None, bool]:
    """(HTTP status if any, whether another attempt may succeed)."""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    if is_missing_key(exc):  # reported as 500 by some paths; no retry will find a key
        return status, False
    if unencodable(exc):  # the request is no JSON: nothing was sent, and no retry sends it
        return None, False
    if _not_http(exc) or refused_here(exc):  # api_base="htp://...": no attempt can reach it
        return None, False
    if is_timeout(exc) or is_connection(exc) or is_malformed(exc):
        return None, True  # no answer came, or none that can be used: litellm's 408 or 500 here is its own
    if status is None:
        return None, False
    return status, status in RETRYABLE_STATUS


def is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return True
    return any(c.__name__ in ("Timeout", "APITimeoutError", "TimeoutException", "ReadTimeout",
                              "ConnectTimeout") for c in type(exc).__mro__)


def is_connection(exc: BaseException) -> bool:
    """A connection that failed or dropped, also where litellm reports it as an HTTP 500 of its own
    (an ``InternalServerError`` whose cause is the client's connection error)."""
    for cause in causes(exc):
        if isinstance(cause, (ConnectionError, EmptyStream)):
            return True
        if any(c.__name__ in ("APIConnectionError", "TransportError", "RemoteProtocolError",
                              "ClientConnectionError", "ServerDisconnectedError") for c in type(cause).__mro__):
            return True
    return False


def unreachable(exc: BaseException) -> str | None:
    """Why a connection could not be made, in words (the address is no web address, its host name is
    unknown, nothing listens there); None when that cannot be told."""
    if _not_http(exc):
        return "the address is not an http:// or https:// one"
    for cause in causes(exc, 12):
        if isinstance(cause, socket.gaierror):
            return "its host name was not found"
        if isinstance(cause, ConnectionRefusedError):
            return "nothing listens at that host and port (connection refused)"
    return None


def unencodable(exc: BaseException) -> bool:
    """The request could not be written as JSON (a set, an object, a NaN in its sampling or a tool's
    schema): the JSON encoder raised before anything was sent. litellm calls it a 500 of its own, and
    the call was retried three times as a server's failure."""
    return any(isinstance(c, (TypeError, ValueError)) and _raised_in(c, "json.encoder") for c in causes(exc))


def _raised_in(exc: BaseException, module: str) -> bool:
    """Whether ``exc`` was raised in module ``module`` (by its name: a file's path depends on the build)."""
    frame = _raising_frame(exc)
    return frame is not None and frame.f_globals.get("__name__") == module


def _raising_frame(exc: BaseException) -> Any:
    """The frame ``exc`` was raised in (its traceback's last), or None."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame if tb is not None else None


def _not_http(exc: BaseException) -> bool:
    return any(type(c).__name__ in ("NonHttpUrlClientError", "UnsupportedProtocol") for c in causes(exc, 12))


def refused_here(exc: BaseException) -> bool:
    """The HTTP client refused the request before sending it (an api_base with user:password@ and an API
    key too: two Authorizations), which litellm calls a 500 of the server's, retried in vain."""
    return any(isinstance(c, ValueError) and str(c).startswith("Cannot combine AUTHORIZATION header")
               for c in causes(exc, 12))


# litellm's words for a 200 it could not turn into a response (a field missing, one of the wrong type),
# and for a stream that closed before the reply was finished
_INVALID = "Invalid response object"
_UNFINISHED = "Stream ended before a finish_reason was received"
_UNREADABLE = "Empty or invalid response from LLM endpoint"  # litellm calls these a 500 of its own
_RECEIVED = re.compile(r"Received: '(.*?)'(?:\. Check|$)", re.S)
_REPEATING = "The model is repeating the same chunk"
# litellm's types of a response: a ValidationError of one is a reply that does not fit the API
_RESPONSE_TYPES = frozenset({"Usage", "ModelResponse", "ModelResponseStream", "Choices", "StreamingChoices",
                             "Message", "Delta", "Function", "ChatCompletionMessageToolCall",
                             "ChatCompletionDeltaToolCall"})


def is_malformed(exc: BaseException) -> bool:
    """A reply that came (HTTP 200) but holds no usable answer: ours (:class:`MalformedReply`), or
    one litellm could not read (it calls that a 500 of its own, or a connection error)."""
    return malformed(exc) is not None


def malformed(exc: BaseException) -> str | None:
    """What is wrong with a reply that holds no usable answer, in words; None for other failures."""
    chain = list(causes(exc))
    for cause in chain:
        if isinstance(cause, MalformedReply):
            return str(cause)
    if any(type(cause).__name__ == "HTTPStatusError" for cause in chain):
        return None  # the server answered with an error status: that is what it said
    for cause in chain:
        if isinstance(cause, json.JSONDecodeError):
            return f"the server's reply is not valid JSON ({cause})"
        if isinstance(cause, (AttributeError, TypeError, KeyError, IndexError)) and _in_stream_reading(cause):
            # (a chunk of the wrong shape, "choices": "notalist": litellm calls it a 500 of its own)
            return f"a stream chunk is not a chat completion chunk ({_one_line(cause)})"
        if type(cause).__name__ == "ValidationError" and getattr(cause, "title", None) in _RESPONSE_TYPES:
            return f"the server's reply is not a valid chat completion ({_one_line(cause)})"
    for cause in chain:
        text = str(cause)
        if text.lstrip().startswith(_INVALID):
            root = chain[-1]
            why = "" if str(root).lstrip().startswith(_INVALID) else f" ({_one_line(root)})"
            return "the server's reply is not a valid chat completion" + why
        if _UNFINISHED in text:
            return "the server ended the stream before the reply was finished (no finish_reason came)"
        if _UNREADABLE in text:  # a 200 litellm could not read (an HTML page, events to a plain request)
            began = _RECEIVED.search(text)
            return "the server's reply is not a valid chat completion" + (
                f" (it began: {began.group(1)[:120]!r})" if began else "")
        if _REPEATING in text:
            return "the server's stream repeated one piece over and over (litellm stops reading such a stream)"
    return None


def _in_stream_reading(exc: BaseException) -> bool:
    """Raised where litellm reads a stream's chunks (not in flowtui's code, nor the flow's)."""
    frame = _raising_frame(exc)
    return frame is not None and "streaming_handler" in frame.f_code.co_filename.replace("\\", "/")


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def causes(exc: BaseException, depth: int = 8) -> Iterator[BaseException]:
    """``exc`` and what it was raised from or while handling, a few links deep."""
    seen: set[int] = set()
    while exc is not None and depth and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
        depth -= 1


def is_missing_key(exc: BaseException) -> bool:
    """litellm and the SDKs report a missing key in words, with varying statuses."""
    text = str(exc).lower()
    return ("missing credentials" in text or re.search(r"missing \w+ api key", text) is not None
            or ("api_key" in text and "must be set" in text))


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds from ``Retry-After`` (seconds or HTTP date) or ``retry-after-ms``."""
    headers = None
    for source in (getattr(exc, "litellm_response_headers", None),
                   getattr(getattr(exc, "response", None), "headers", None),
                   getattr(exc, "headers", None)):
        if source:
            headers = source
            break
    if not headers:
        return None
    try:
        lowered = {str(k).lower(): str(v) for k, v in dict(headers).items()}
    except Exception:  # noqa: BLE001
        return None
    if "retry-after-ms" in lowered:
        try:
            ms = float(lowered["retry-after-ms"])
        except ValueError:
            pass
        else:
            return ms / 1000.0 if ms >= 0 else None  # (NaN or below 0: no wait said; the backoff's)
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def said(exc: BaseException) -> str:
    """What the provider said, whole (see :func:`cut`): the message without litellm's prefixes
    and debug noise, the server's own text when the client kept only "Error code: 404" (a body
    ``{"error": "some text"}``, as Ollama and many proxies send), and for a reply with no usable
    answer, what was wrong with it (never litellm's traceback)."""
    fault = malformed(exc)
    if fault is not None:
        return fault
    text = str(getattr(exc, "message", None) or exc) or type(exc).__name__
    text = re.sub(r"^(litellm\.\w+:\s*)+", "", text)
    text = re.sub(r"^\w+Error:\s*", "", text)
    text = text.replace("OpenAIException - ", "")
    text = " ".join(text.split())
    if re.fullmatch(r"Error code: \d+", text):
        body = _server_text(exc)
        if body:
            text += " - " + " ".join(body.split())
    return text


def _server_text(exc: BaseException) -> str | None:
    """The error text in the body of the server's answer: ``{"error": "text"}``,
    ``{"error": {"message": "text"}}``, ``{"detail": ...}``, or a body that is plain text."""
    for cause in causes(exc):
        found = _body_text(getattr(cause, "body", None))
        if found:
            return found
    for cause in causes(exc):
        try:
            raw = cause.response.text  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - no response, or one not read (a stream)
            continue
        if not isinstance(raw, str) or not raw.strip():
            continue
        try:
            found = _body_text(json.loads(raw))
        except ValueError:
            found = raw.strip()
        if found:
            return found
    return None


def _body_text(body: Any, depth: int = 0) -> str | None:
    if isinstance(body, str):
        return body.strip() or None
    if isinstance(body, dict) and depth < 3:
        for key in ("error", "message", "detail", "msg", "error_message"):
            found = _body_text(body.get(key), depth + 1)
            if found:
                return found
    if body is None or body == {} or body == []:
        return None
    try:
        return json.dumps(body, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return None


def cut(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters. Cut only a redacted text (a cut would leave a piece of a
    credential too short to be found); the cut never splits a ``[redacted]``."""
    if len(text) <= limit:
        return text
    end = limit - 1
    start = text.rfind(MARK, max(0, end - len(MARK) + 1), end + len(MARK) - 1)
    if start != -1 and start < end < start + len(MARK):
        end = start  # the cut would fall inside the mark: cut before it
    return text[:end] + "…"
