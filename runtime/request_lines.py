"""A chat node's request on one line, without encoding its whole history again each turn.

A chat ``node.start`` records the request whole: every message, as sent. Encoded as one
structure, a long run's history went through the encoder, the credential search and the
terminal-safety search once a turn, so the journal and the pipe to the app made a turn cost
more and more as the history grew (three times as much after 1,000 turns).

An agent's requests repeat: each is the one before plus the messages since. This keeps, per
first message (an agent's system prompt), the encoded messages of its last request and
whether they are safe to write as they are; a new request encodes and looks at only its new
messages and the seams between the parts. The line is the same bytes the whole encoding gives.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import is_
from typing import Any, NamedTuple

from pydantic_core import to_json

from flowtui.runtime.chat import Sent, message_sent
from flowtui.runtime.context import stable_repr
from flowtui.runtime.secrets import Redactor

_SHORTEST = 32  # messages: a shorter request is encoded whole (one pass of the encoder is as fast)
_FOLLOWED = 16  # conversations followed at once (several agents, parallel branches)
_SEAM = b'"request":{"messages":['  # (a string's quotes are escaped: only the structure writes this)


class _Body(NamedTuple):
    """The encoded messages of a conversation's last request (never changed: a new one replaces it)."""
    messages: list[Any]  # the messages encoded (the same objects: a message is frozen)
    calls: tuple[tuple[int, bytes], ...]  # each message with tool calls, by index, and its encoding: a call's
    # arguments are a dict, which code may change in place, so these are encoded again and must match
    body: bytes  # the messages' JSON, comma-joined
    safe: bool  # whether ``body`` may be written as it is
    values: tuple[str, ...]  # the credentials it was looked at for


_bodies: dict[int, _Body] = {}


def spliced(fields: dict[str, Any], redactor: Redactor, safe: Callable[[bytes], bool]) -> bytes | None:
    """The line of an event whose ``data`` holds a long ``request``, when each part, and each seam,
    is ``safe`` as it is; None otherwise (the event is then encoded the usual way)."""
    data = fields.get("data")
    sent = data.get("request") if type(data) is dict else None
    if type(sent) is not Sent or len(sent.messages) < _SHORTEST:
        return None
    body = _body(sent.messages, redactor, safe)
    if body is None:
        return None
    empty = sent.model_copy(update={"messages": []})
    head = to_json({**fields, "data": {**data, "request": empty}}, fallback=stable_repr, inf_nan_mode="null")
    at = head.rfind(_SEAM)
    if at < 0 or not safe(head):
        return None
    at += len(_SEAM)
    reach = redactor.longest_mark
    if not safe(head[max(0, at - reach):at] + body[:reach]) or not safe(body[-reach:] + head[at:at + reach]):
        return None
    return head[:at] + body + head[at:]


def _body(messages: list[Any], redactor: Redactor, safe: Callable[[bytes], bool]) -> bytes | None:
    key = id(messages[0])
    known = _bodies.get(key)
    if known is not None and not (known.values == redactor.values and len(known.messages) <= len(messages)
                                  and all(map(is_, messages, known.messages))
                                  and all(_encoded(messages[i]) == raw for i, raw in known.calls)):
        known = None
    if known is not None and len(known.messages) == len(messages):
        return known.body if known.safe else None
    start = len(known.messages) if known is not None else 0
    new = messages[start:]
    raw = to_json([message_sent(m) for m in new], fallback=stable_repr, inf_nan_mode="null")[1:-1]
    reach = redactor.longest_mark
    if known is None:
        body, ok = raw, safe(raw)
    else:
        body = known.body + b"," + raw
        ok = known.safe and safe(raw) and safe(known.body[-reach:] + b"," + raw[:reach])
    calls = (known.calls if known is not None else ()) + tuple(
        (start + i, _encoded(m)) for i, m in enumerate(new) if m.tool_calls)
    if len(_bodies) >= _FOLLOWED and key not in _bodies:
        _bodies.clear()  # (more conversations than that at once: each is encoded whole again, once)
    _bodies[key] = _Body(list(messages), calls, body, ok, redactor.values)
    return body if ok else None


def _encoded(message: Any) -> bytes:
    return to_json(message_sent(message), fallback=stable_repr, inf_nan_mode="null")
