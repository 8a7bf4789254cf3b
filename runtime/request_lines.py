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
_HELD = 64 << 20  # bytes of encoded messages kept at most, all conversations together
_SEAM = b'"request":{"messages":['  # (a string's quotes are escaped: only the structure writes this)
_DEEPER = 8  # levels a message lies deeper in its event than on its own (it is encoded as deep as there,
# so a structure too deep for the encoder fails here too, and the event is encoded value by value)


class _Body(NamedTuple):
    """The encoded messages of a conversation's last request (never changed: a new one replaces it)."""
    messages: list[Any]  # the messages encoded (the same objects: a message is frozen)
    calls: tuple[tuple[int, bytes], ...]  # each message with tool calls, by index, and its encoding: a call's
    # arguments are a dict, which code may change in place, so these are encoded again and must match
    body: bytes  # the messages' JSON, comma-joined
    safe: bool  # whether ``body`` may be written as it is
    values: tuple[str, ...]  # the credentials it was looked at for


_bodies: dict[int, _Body] = {}


def spliced(fields: dict[str, Any], redactor: Redactor, safe: Callable[[bytes], bool],
            limit: int | None = None) -> bytes | None:
    """The line of an event whose ``data`` holds a long ``request``, when each part, and each seam,
    is ``safe`` as it is and the line is no longer than ``limit``; None otherwise (the event is then
    encoded the usual way)."""
    data = fields.get("data")
    sent = data.get("request") if type(data) is dict else None
    if type(sent) is not Sent or len(sent.messages) < _SHORTEST:
        return None
    body = _body(sent.messages, redactor, safe)
    reach = redactor.longest_mark
    if body is None or len(body) <= reach or limit is not None and len(body) > limit:
        return None
    empty = sent.model_copy(update={"messages": []})
    head = to_json({**fields, "data": {**data, "request": empty}}, fallback=stable_repr, inf_nan_mode="null")
    if head.count(_SEAM) != 1 or not safe(head):  # (a sampling value holding the same: not here)
        return None
    at = head.find(_SEAM) + len(_SEAM)
    if not safe(head[max(0, at - reach):at] + body[:reach]) or not safe(body[-reach:] + head[at:at + reach]):
        return None
    return head[:at] + body + head[at:]


def forget() -> None:
    """Let go of the encoded messages (a run has ended: its conversations are over)."""
    _bodies.clear()


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
    new = [_encoded(m) for m in messages[start:]]  # (once each: what is checked later is what was joined)
    raw = b",".join(new)
    reach = redactor.longest_mark
    if known is None:
        body, ok = raw, safe(raw)
    else:
        body = known.body + b"," + raw
        ok = known.safe and safe(raw) and safe(known.body[-reach:] + b"," + raw[:reach])
    calls = (known.calls if known is not None else ()) + tuple(
        (start + i, part) for i, part in enumerate(new) if messages[start + i].tool_calls)
    _bodies.pop(key, None)
    if len(_bodies) >= _FOLLOWED or sum(len(b.body) for b in _bodies.values()) + len(body) > _HELD:
        _bodies.clear()  # (more than that at once: each is encoded whole again, once)
    if len(body) <= _HELD:
        _bodies[key] = _Body(list(messages), calls, body, ok, redactor.values)
    return body if ok else None


def _encoded(message: Any) -> bytes:
    """A message's JSON, encoded as deep as it lies in its event."""
    deep: Any = message_sent(message)
    for _ in range(_DEEPER):
        deep = [deep]
    return to_json(deep, fallback=stable_repr, inf_nan_mode="null")[_DEEPER:-_DEEPER]
