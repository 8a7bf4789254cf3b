"""A chat node's request on one line, without encoding its whole history again each turn.

A chat ``node.start`` records the request whole: every message, as sent. Encoded as one
structure, a long run's history went through the encoder, the credential search and the
terminal-safety search once a turn, so the journal and the pipe to the app made a turn cost
more and more as the history grew (three times as much after 1,000 turns).

An agent's requests repeat: each is the one before plus the messages since. This keeps, per
first message (an agent's system prompt), the encoded messages of its last request; a new
request encodes and looks at only its new messages and the seams between the parts. A message
that holds a credential or a terminal control is encoded value by value, as the whole event
would be. The line is the same bytes the whole encoding gives, but for the numbers' spelling
(``1e-07`` or ``1e-7``) around such a message: the same values.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import is_
from typing import Any, NamedTuple

from pydantic_core import PydanticSerializationError, to_json

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
    safe: bool  # whether ``body`` may be written as it is (no credential may lie across a seam)
    values: tuple[str, ...]  # the credentials it was looked at for


_bodies: dict[int, _Body] = {}


def spliced(fields: dict[str, Any], redactor: Redactor, safe: Callable[[bytes], bool],
            fix: Callable[[Any], bytes], limit: int | None = None) -> bytes | None:
    """The line of an event whose ``data`` holds a long ``request``, when the rest of the event is
    ``safe`` as it is, no credential lies across a seam and the line is no longer than ``limit``; None
    otherwise (the event is then encoded the usual way). A message that is not ``safe`` is ``fix``-ed."""
    data = fields.get("data")
    sent = data.get("request") if type(data) is dict else None
    if type(sent) is not Sent or len(sent.messages) < _SHORTEST:
        return None
    body = _body(sent.messages, redactor, safe, fix)
    if body is None or limit is not None and len(body) > limit:
        return None
    empty = sent.model_copy(update={"messages": []})
    head = to_json({**fields, "data": {**data, "request": empty}}, fallback=stable_repr, inf_nan_mode="null")
    if head.count(_SEAM) != 1 or not safe(head):  # (a sampling value holding the same: not here)
        return None
    at = head.find(_SEAM) + len(_SEAM)
    line = head[:at] + body + head[at:]
    if redactor.straddles(line, at) or redactor.straddles(line, at + len(body)):
        return None
    return line


def forget() -> None:
    """Let go of the encoded messages (a run has ended: its conversations are over)."""
    _bodies.clear()


def _body(messages: list[Any], redactor: Redactor, safe: Callable[[bytes], bool],
          fix: Callable[[Any], bytes]) -> bytes | None:
    key, values = id(messages[0]), redactor.values  # (the credentials looked for: another thread may add one)
    known = _bodies.get(key)
    if known is not None and not (known.values == values and len(known.messages) <= len(messages)
                                  and all(map(is_, messages, known.messages))
                                  and all(_encoded(messages[i]) == raw for i, raw in known.calls)):
        known = None
    if known is not None and len(known.messages) == len(messages):
        return known.body if known.safe else None
    start = len(known.messages) if known is not None else 0
    added = messages[start:]
    new = [_encoded(m) for m in added]  # (once each: what is checked later is what was joined)
    parts = [part if part is not None and safe(part) else fix(message_sent(m)) for part, m in zip(new, added)]
    body = b",".join(parts if known is None else [known.body, *parts])
    ok = known is None or known.safe
    comma = len(known.body) if known is not None else len(parts[0])
    for part in parts[0 if known is not None else 1:]:  # each seam (a comma): after the body, between new ones
        ok = ok and not redactor.straddles(body, comma) and not redactor.straddles(body, comma + 1)
        comma += 1 + len(part)
    calls = (known.calls if known is not None else ()) + tuple(
        (start + i, part) for i, part in enumerate(new) if messages[start + i].tool_calls)
    _bodies.pop(key, None)
    held = list(_bodies.values())  # (a copy in one step: another thread may encode too)
    if len(held) >= _FOLLOWED or sum(len(b.body) for b in held) + len(body) > _HELD:
        _bodies.clear()  # (more than that at once: each is encoded whole again, once)
    if len(body) <= _HELD:
        _bodies[key] = _Body(list(messages), calls, body, ok, values)
    return body if ok else None


def _encoded(message: Any) -> bytes | None:
    """A message's JSON, encoded as deep as it lies in its event; None for text the encoder refuses (a
    lone surrogate: the message is fixed). A structure too deep for it raises, as the whole event's would."""
    deep: Any = message_sent(message)
    for _ in range(_DEEPER):
        deep = [deep]
    try:
        return to_json(deep, fallback=stable_repr, inf_nan_mode="null")[_DEEPER:-_DEEPER]
    except PydanticSerializationError as exc:
        if "UnicodeEncodeError" not in str(exc):
            raise
        return None
