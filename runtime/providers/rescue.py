"""Rescue tool calls that a model wrote as text, and strip reasoning blocks.

Local models often "call" a tool by writing JSON into their reply instead of
using the API's native tool calls. :func:`find_tool_calls` finds such calls in
``<tool_call>…</tool_call>`` tags, fenced code blocks and bare JSON objects,
in any of the usual envelopes::

    {"name": ..., "arguments": {...}}          {"name": ..., "parameters": {...}}
    {"tool": ..., "args": {...}}               {"function": {"name": ..., "arguments": "..."}}

with arguments either an object or a JSON string. Only names the agent
actually has count, so prose that happens to contain JSON is left alone.

Pure Python, no litellm: the parser is used on every reply and tested with
hypothesis. Neither function ever raises on any input text.
"""

from __future__ import annotations

import json
import re
from typing import Any

from flowtui.runtime.messages import ToolCall

__all__ = ["find_tool_calls", "strip_think"]

# Keys that may hold a tool's name / its arguments, in order of preference.
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARGS_KEYS = ("arguments", "parameters", "args", "input", "params")

_TAG_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL | re.IGNORECASE)
# ``` or ~~~ fences, with any info string (json, tool_call, none ...).
_FENCE_RE = re.compile(r"(`{3,}|~{3,})[^\n`]*\n(.*?)\n?\1", re.DOTALL)
_THINK_RE = re.compile(r"<(think|thinking)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN_RE = re.compile(r"<(think|thinking)>", re.IGNORECASE)
_THINK_CLOSE_RE = re.compile(r"</(think|thinking)>", re.IGNORECASE)
_BLANKS_RE = re.compile(r"\n{3,}")

# Scanning every "{" of a huge reply for JSON is quadratic; past this many
# failed starts the text is clearly not a tool call.
_MAX_JSON_STARTS = 500
_DECODER = json.JSONDecoder()


def strip_think(text: str) -> tuple[str, str | None]:
    """Split ``<think>…</think>`` (or ``<thinking>``) blocks out of ``text``.

    Returns ``(content, reasoning)``; ``reasoning`` is ``None`` when there was
    none. Also handles the two truncated forms models produce: a reply that
    starts inside the block (only ``</think>`` present, the opening tag was in
    the prompt template) and one cut off before ``</think>``.
    """
    if not isinstance(text, str) or "think" not in text.lower():
        return (text if isinstance(text, str) else "", None)
    parts: list[str] = []

    # Reasoning before a lone closing tag (the opening tag was in the template).
    first_close = _THINK_CLOSE_RE.search(text)
    first_open = _THINK_OPEN_RE.search(text)
    if first_close and (first_open is None or first_close.start() < first_open.start()):
        parts.append(text[: first_close.start()])
        text = text[first_close.end():]

    def _take(m: re.Match[str]) -> str:
        parts.append(m.group(2))
        return ""

    text = _THINK_RE.sub(_take, text)

    # An opening tag never closed: the rest of the reply is reasoning.
    dangling = _THINK_OPEN_RE.search(text)
    if dangling:
        parts.append(text[dangling.end():])
        text = text[: dangling.start()]

    if not parts:
        return text, None
    reasoning = "\n\n".join(p.strip() for p in parts if p.strip())
    return _tidy(text), (reasoning or None)


def find_tool_calls(text: str, tool_names: frozenset[str]) -> tuple[list[ToolCall], str]:
    """Find tool calls written as text; return ``(calls, remaining_text)``.

    Looks, in this order, at ``<tool_call>`` tags, fenced code blocks and bare
    JSON objects. A block counts only if every call in it names a tool in
    ``tool_names``; the text of counted blocks is removed from the returned
    text, everything else is kept as it was. Never raises.
    """
    if not text or not tool_names or not isinstance(text, str):
        return [], text if isinstance(text, str) else ""
    try:
        return _find(text, frozenset(tool_names))
    except Exception:  # a parser for untrusted text must not take the run down
        return [], text


# --------------------------------------------------------------------------- internals


def _find(text: str, names: frozenset[str]) -> tuple[list[ToolCall], str]:
    calls: list[ToolCall] = []

    def _block(m: re.Match[str], group: int) -> str:
        found = _calls_in_block(m.group(group), names)
        if found:
            calls.extend(found)
            return "\n"
        return m.group(0)

    text = _TAG_RE.sub(lambda m: _block(m, 1), text)
    text = _FENCE_RE.sub(lambda m: _block(m, 2), text)
    found, text = _bare_json(text, names)
    calls.extend(found)
    return calls, (_tidy(text) if calls else text)


def _calls_in_block(block: str, names: frozenset[str]) -> list[ToolCall]:
    """Calls in a tag or fence body: one JSON value (object or list), or several
    objects one after another (one per line, as some models write them)."""
    values = _json_values(block)
    if values is None:
        return []
    calls: list[ToolCall] = []
    for value in values:
        found = _calls_in_value(value, names)
        if not found:
            return []
        calls.extend(found)
    return calls


def _json_values(block: str) -> list[Any] | None:
    """All JSON values in ``block`` back to back, or None if anything else is there."""
    values: list[Any] = []
    pos, end = 0, len(block)
    while True:
        while pos < end and block[pos] in " \t\r\n,":
            pos += 1
        if pos >= end:
            return values or None
        try:
            value, pos = _DECODER.raw_decode(block, pos)
        except (ValueError, RecursionError):
            return None
        values.append(value)


def _bare_json(text: str, names: frozenset[str]) -> tuple[list[ToolCall], str]:
    calls: list[ToolCall] = []
    kept: list[str] = []
    pos = 0
    tries = 0
    while tries < _MAX_JSON_STARTS:
        start = _next_json_start(text, pos)
        if start < 0:
            break
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            tries += 1
            kept.append(text[pos:start + 1])
            pos = start + 1
            continue
        found = _calls_in_value(value, names)
        kept.append(text[pos:start] if found else text[pos:end])
        calls.extend(found)
        pos = end
    kept.append(text[pos:])
    return calls, "".join(kept)


def _next_json_start(text: str, pos: int) -> int:
    """Index of the next ``{`` or ``[`` at or after ``pos``, or -1."""
    a, b = text.find("{", pos), text.find("[", pos)
    if a < 0:
        return b
    if b < 0:
        return a
    return min(a, b)


def _calls_in_value(value: Any, names: frozenset[str]) -> list[ToolCall]:
    """Calls in one decoded JSON value: an envelope, a list of them, or an
    OpenAI-style ``{"tool_calls": [...]}``. All or nothing."""
    if isinstance(value, list):
        if not value:
            return []
        out: list[ToolCall] = []
        for item in value:
            found = _calls_in_value(item, names) if isinstance(item, dict) else []
            if not found:
                return []
            out.extend(found)
        return out
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("tool_calls"), list) and not _name_of(value):
        return _calls_in_value(value["tool_calls"], names)
    call = _envelope(value, names)
    return [call] if call else []


def _name_of(obj: dict[str, Any]) -> str | None:
    for key in _NAME_KEYS:
        v = obj.get(key)
        if isinstance(v, str):
            return v
    return None


def _envelope(obj: dict[str, Any], names: frozenset[str]) -> ToolCall | None:
    call_id = obj.get("id") if isinstance(obj.get("id"), str) else None
    fn = obj.get("function")
    if isinstance(fn, dict):  # {"type": "function", "function": {"name", "arguments"}}
        inner = _envelope(fn, names)
        if inner is not None and call_id and inner.id is None:
            inner = inner.model_copy(update={"id": call_id})
        return inner
    name = _name_of(obj)
    if name is None or name not in names:
        return None
    args: Any = {}
    for key in _ARGS_KEYS:
        if key in obj:
            args = obj[key]
            break
    if isinstance(args, str):  # arguments as a JSON string, as the OpenAI API sends them
        if not args.strip():
            args = {}
        else:
            try:
                args = json.loads(args)
            except (ValueError, RecursionError):
                return None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return None
    return ToolCall(name=name, args=args, id=call_id)


def _tidy(text: str) -> str:
    return _BLANKS_RE.sub("\n\n", text).strip()
