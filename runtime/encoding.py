"""One event as one line of JSON, for every place an event leaves the process.

The journal, ``flowtui run --json`` and the worker's pipe to the app all
write events with :func:`encode_event`. Whatever a value holds, the line:

- holds no credential: values are redacted *before* encoding
  (:func:`~flowtui.runtime.secrets.redact` on each string), since JSON
  escaping would change the bytes of a key holding ``"``, ``\\`` or a newline;
- is valid UTF-8 JSON that the reader reads back: a lone surrogate becomes
  U+FFFD, an integer too long for a JSON reader (over 4,000 digits) becomes
  its abbreviated text, a NaN ``null``;
- is inert in a terminal: control characters stay escaped inside the JSON
  strings, C1 ones, DEL and the characters the app shows as escapes (the line separators, the
  bidirectional overrides, zero-width spaces, direction marks, a BOM, the tag characters) too, which
  JSON encoders leave raw;
- on the wire to the app, optionally, cuts strings longer than ``limit``
  characters to their first ones, naming each cut in the event's ``elided``
  field (``{"item.content": 52428800}``: a path of keys and indexes, each key
  percent-encoded) so the app shows a preview and can
  fetch the whole value; the journal never cuts.

Events are hot (several per turn, up to a flood of hundreds of thousands a
second), so the common case is one pass of a compiled encoder (orjson for an
event of strings and numbers, pydantic-core's for one that holds a message or a
structure) and one search over the bytes; only a line that may need one of the
fixes above is encoded again, value by value.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any
from urllib.parse import quote, unquote

import orjson
from pydantic_core import PydanticSerializationError, to_json

from flowtui.runtime.context import stable_repr
from flowtui.runtime.inert import INVISIBLE
from flowtui.runtime.messages import well_formed
from flowtui.runtime.request_lines import spliced
from flowtui.runtime.secrets import MARK, Redactor, redact, redact_streaming

MAX_INT_DIGITS = 4000
# What a line of JSON holds raw that a terminal would act on or draw as nothing: DEL and the C1 characters,
# and the invisible ones the app shows (runtime.inert: the line separators, the bidi overrides, zero-width
# spaces, a BOM, the tag characters...). Any of them: encode again, value by value.
_RAW_IN_JSON = re.compile("[\x7f-\x9f" + INVISIBLE + "]")
_DIGITS = re.compile(rb"[0-9]{%d}" % MAX_INT_DIGITS)
_INT_BITS = int(MAX_INT_DIGITS * 3.32)  # an int's bits past which it has more digits (~ digits * log2(10))


def _utf8_pattern(body: str) -> re.Pattern[bytes]:
    """The UTF-8 bytes of any character of a regex class's ``body`` (characters and ``a-b`` ranges), as a
    pattern on bytes: every event line is looked at, and decoding each to look took longer than the search."""
    points, i = [], 0
    while i < len(body):
        if body[i + 1:i + 2] == "-" and i + 2 < len(body):
            points += range(ord(body[i]), ord(body[i + 2]) + 1)
            i += 3
        else:
            points.append(ord(body[i]))
            i += 1
    last: dict[bytes, list[int]] = {}  # the bytes before each character's last, and the last bytes after them
    for point in points:
        encoded = chr(point).encode()
        last.setdefault(encoded[:-1], []).append(encoded[-1])
    return re.compile(b"|".join(_hex(prefix) + b"[" + _hex(ends) + b"]" for prefix, ends in last.items()))


def _hex(data: bytes | list[int]) -> bytes:
    return b"".join(b"\\x%02x" % b for b in data)


_RAW_IN_LINE = _utf8_pattern("\x80-\x9f" + INVISIBLE)  # (DEL is looked for apart)


def _inert(raw: bytes) -> bool:
    """Whether a line of JSON (or a part of one) may be written as it is (see the module docstring)."""
    return raw.isascii() and b"\x7f" not in raw and len(raw) < MAX_INT_DIGITS or not _needs_fix(raw)


def _needs_fix(raw: bytes) -> bool:
    return (b"\x7f" in raw or (not raw.isascii() and _RAW_IN_LINE.search(raw) is not None)
            or (len(raw) > MAX_INT_DIGITS and len(raw) - len(raw.translate(None, b"0123456789")) >= MAX_INT_DIGITS
                and _DIGITS.search(raw) is not None))


def encode_event(event: Any, redactor: Redactor, *, limit: int | None = None,
                 kept: dict[str, str] | None = None) -> bytes:
    """``event`` as one JSON line (UTF-8, no newline); see the module docstring.

    ``kept`` (with ``limit``) receives each string that was cut, whole, by its path."""
    global _LAST
    redactor.refresh()  # a provider made since may have handed over its credential
    # The journal, the wire to the app and a re-execution's check encode the same event: once,
    # unless the wire cuts it (a line no longer than the limit was not cut, and is the same line).
    last = _LAST
    if last[0] is event and last[1] == redactor.values and (limit is None or len(last[2]) <= limit):
        return last[2]
    raw, whole = _encode(event, redactor, limit, kept)
    if whole:
        _LAST = (event, redactor.values, raw)
    return raw


_LAST: tuple[Any, tuple[str, ...], bytes] = (None, (), b"")  # the last event encoded whole, its line


def _encode(event: Any, redactor: Redactor, limit: int | None, kept: dict[str, str] | None) -> tuple[bytes, bool]:
    """The line, and whether it is the whole event (nothing cut)."""
    fields = event.__dict__
    if fields.get("typed", 0) is None:  # a ctx.set's, but for a value its JSON is not: written only then (a
        fields = _without_typed(fields)  # journal of a flowtui before it has none, and is the same line)
    verdict = _scan(event, redactor)
    raw = None
    if verdict is _STRUCTURED:  # a chat's request: its history encoded and looked at once, not once a turn
        try:
            raw = spliced(fields, redactor, lambda part: _inert(part) and not redactor.may_hold(part),
                          lambda value: encode_data(_safe(value, redactor.values, None, {}, "", None)), limit)
        except (PydanticSerializationError, ValueError, TypeError):
            raw = None
        if raw is not None and (limit is None or len(raw) <= limit):
            return raw, True
    if verdict is not _DIRTY:
        try:
            raw = orjson.dumps(fields) if verdict is _FLAT else to_json(fields, fallback=stable_repr, inf_nan_mode="null")
        except (PydanticSerializationError, ValueError, TypeError):  # a lone surrogate, a huge int: value by value
            raw = None
    if raw is not None and (limit is None or len(raw) <= limit) and _inert(raw) \
            and (verdict is _FLAT or not redactor.may_hold(raw)):
        return raw, True
    data = event.model_dump(mode="python", warnings=False)
    if data.get("typed", 0) is None:
        data = _without_typed(data)
    elided: dict[str, int] = {}
    data = _safe(data, redactor.values, limit, elided, "", kept)
    if elided:
        data["elided"] = elided
    return encode_data(data), not elided


def _without_typed(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k != "typed"}


_OURS = frozenset({"seq", "ts", "run_id", "node_id", "parent_id", "type"})  # written by the runtime itself
_PAYLOAD: dict[type, tuple[str, ...]] = {}  # an event class's other fields: what may hold a credential
_PLAIN = frozenset({int, float, bool, type(None)})
# What _scan finds in an event's payload: only strings without a credential's mark and plain values
# (encoded by orjson, the fastest encoder); structures (a message, a dict: pydantic-core's encoder,
# then the whole line is looked at); a string that may hold a credential (redacted value by value).
_FLAT, _STRUCTURED, _DIRTY = "flat", "structured", "dirty"


def _scan(event: Any, redactor: Redactor) -> str:
    """Which of the three an event's payload is; its short strings are remembered (they repeat)."""
    cls = event.__class__
    keys = _PAYLOAD.get(cls)
    if keys is None:
        keys = _PAYLOAD[cls] = tuple(k for k in cls.model_fields if k not in _OURS)
    fields = event.__dict__
    seen = redactor.seen_clean
    verdict = _FLAT
    for key in keys:
        value = fields[key]
        kind = value.__class__
        if kind is str:
            if value not in seen and not redactor.clean_text(value):
                return _DIRTY
        elif kind is int and redactor.digits and (value.bit_length() > _INT_BITS
                                                  or any(d in str(value) for d in redactor.digits)):
            return _DIRTY  # (a credential of digits, kept as a number: written as it was)
        elif kind is float and redactor.digits and holds_digits(value, redactor.digits):
            return _DIRTY  # (float(token))
        elif kind not in _PLAIN:
            verdict = _STRUCTURED
    return verdict


def holds_digits(value: float, digits: Any) -> bool:
    """Whether a float holds a credential of digits: written in its repr (``8392019483721.0``), or made of it
    (``float(token)`` of 17 digits or more is written ``8.392019483721938e+19``: its digits never whole, the
    first sixteen of them in clear)."""
    text = repr(value)
    return any(d in text or (number := float(d)) == abs(value) and number != math.inf for d in digits)


def encode_data(data: Any) -> bytes:
    """JSON-shaped, already safe ``data`` as one inert line of JSON."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=stable_repr)
    if _RAW_IN_JSON.search(text):
        text = _RAW_IN_JSON.sub(_escaped, text)
    return text.encode("utf-8")


def _escaped(m: re.Match) -> str:
    """A character as a JSON escape (past U+FFFF, a tag character: its UTF-16 surrogate pair)."""
    c = ord(m.group(0))
    if c < 0x10000:
        return f"\\u{c:04x}"
    c -= 0x10000
    return f"\\u{0xD800 + (c >> 10):04x}\\u{0xDC00 + (c & 0x3FF):04x}"


def safe_data(value: Any, redactor: Redactor) -> Any:
    """A copy of ``value`` redacted and made encodable (for a snapshot, a cassette, a reply)."""
    redactor.refresh()
    return _safe(value, redactor.values, None, {}, "", None)


def _safe(value: Any, secrets: tuple[str, ...], limit: int | None, elided: dict[str, int], path: str,
          kept: dict[str, str] | None) -> Any:
    if isinstance(value, str):
        value = well_formed(value)
        if limit is not None and len(value) > limit:  # cut first: only what is sent is redacted
            elided[path] = len(value)
            if kept is not None:
                kept[path] = value
            return redact_streaming(value[:limit], secrets)  # a credential cut in two: its start hidden too
        return redact(value, secrets)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if abs(value).bit_length() > _INT_BITS:
            return f"<int of about {int(abs(value).bit_length() / 3.3219)} digits>"
        if secrets and (text := str(value)) != (hidden := redact(text, secrets)):
            return hidden  # (a credential of digits, kept as a number)
        return value
    if isinstance(value, float):
        if secrets and holds_digits(value, [s for s in secrets if s.isascii() and s.isdigit()]):
            return MARK  # (a credential of digits, kept as a float: 8392019483721.0 was written whole)
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = str(_safe(k, secrets, None, elided, path, None))
            out[key] = _safe(v, secrets, limit, elided, _join(path, key), kept)
        return out
    if isinstance(value, (list, tuple)):
        return [_safe(v, secrets, limit, elided, _join(path, i), kept) for i, v in enumerate(value)]
    if hasattr(value, "model_dump"):
        return _safe(value.model_dump(mode="python", warnings=False), secrets, limit, elided, path, kept)
    return _safe(stable_repr(value), secrets, limit, elided, path, kept)


def _join(path: str, key: Any) -> str:
    """A cut value's path: its keys (as written, redacted) and indexes joined by ``.``, each key
    percent-encoded (``.`` too), so any key names one place and a path has no space or bracket."""
    part = str(key) if isinstance(key, int) else quote(key, safe="").replace(".", "%2E")
    return f"{path}.{part}" if path else part


def path_keys(path: str) -> list[str]:
    """The keys and indexes (as text) of a cut value's path (see :func:`_join`)."""
    return [unquote(part) for part in path.split(".")]
