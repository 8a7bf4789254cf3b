"""The conversation's value types: what flows between the model, tools and hooks.

All are pydantic models. ``Message`` is frozen: the history is changed through
``ctx.state.set``/``append`` (which emit events), never by editing a message in
place; use ``msg.model_copy(update={...})`` to derive an edited one.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """A call the model asked for: tool ``name`` with ``args`` (already parsed JSON)."""

    model_config = ConfigDict(frozen=True)

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class Message(BaseModel):
    """One turn of the conversation, as the model sees it."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_name: str | None = None
    tool_call_id: str | None = None
    is_error: bool = False
    agent: str | None = Field(
        default=None, description="the agent whose turn produced it; for people, never sent to the model")
    reasoning: str | None = Field(
        default=None, description="the model's <think> text, kept for people; never sent back to the model")


def system_message(content: str) -> Message:
    """``Message(role="system", content=content)``, shared: an agent's prompt is the same text turn
    after turn, and a message is frozen, so each text is validated once (the last 128 kept)."""
    if type(content) is str:
        return _system_message(content)
    return Message(role="system", content=content)  # refused as it always was


@lru_cache(maxsize=128)
def _system_message(content: str) -> Message:
    return Message(role="system", content=content)


class ToolOutput(BaseModel):
    """What a tool may return instead of a plain string, e.g. to flag an error."""

    content: str
    is_error: bool = False


class ToolResult(BaseModel):
    """What ``after_tool`` receives: the call and what came of it."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    output: str
    is_error: bool = False


def estimate_tokens(message: Message) -> int:
    """A message's size in tokens, estimated: about four characters a token, plus a little per message.
    The one estimate of the runtime and the app: a reply that says no usage (a ``FunctionProvider``'s, a
    scripted one), "what the model sees", ``prompt.tokens`` and ``ContextWindow`` all count with it."""
    calls = json.dumps([c.model_dump(mode="json") for c in message.tool_calls]) if message.tool_calls else ""
    return (len(message.content) + len(calls) + 3) // 4 + 4


def well_formed(text: str) -> str:
    """``text`` as UTF-8 can carry it: a lone surrogate is U+FFFD (a pair written as two halves joins)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def well_formed_call(call: ToolCall) -> ToolCall:
    """``call`` with its arguments and id as UTF-8 can carry them (``well_formed`` in each string, keys too);
    the same object when they are already."""
    args = _well_formed_value(call.args)
    call_id = call.id if call.id is None else well_formed(call.id)
    if args is call.args and call_id is call.id:
        return call
    return call.model_copy(update={"args": args, "id": call_id})


def _well_formed_value(value: Any) -> Any:
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, dict):
        items = [(_well_formed_value(k), _well_formed_value(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items())):
            return value
        return dict(items)
    if isinstance(value, (list, tuple)):
        new = [_well_formed_value(v) for v in value]
        return value if all(a is b for a, b in zip(new, value)) else type(value)(new)
    return value


ARGS_ARE_JSON = ("a model's tool-call arguments are JSON: give text, numbers, True/False, None, and lists and dicts "
                 "with text keys (a date as its text)")
MAX_ARGS_DEPTH = 500  # (what is read deeper is walked by recursive code: the encoder's, the tool's validation)


def args_fault(args: Any) -> str | None:
    """What in a tool call's ``args`` a model could not have sent, said with its place (``args['when'] is
    date``, ``args['a'][0] is args['a'] again (a cycle)``); None when it is all JSON data. A flow's own stand-in
    for the model can return anything: an object whose repr raised, or a dict holding itself, failed the run
    inside the runtime (a RecursionError, and events lost on their way to the app)."""
    on_path: dict[int, Any] = {}  # the containers being walked -> their place (a cycle comes back to one)
    todo: list[tuple[Any, Any, int]] = [(args, "args", 0)]
    while todo:
        value, place, depth = todo.pop()
        if value is _LEAVE:
            del on_path[place]
            continue
        if isinstance(value, (str, int, float)) or value is None:
            continue
        if not isinstance(value, (dict, list, tuple)):
            return f"{_place(place)} is {type(value).__name__}"
        if id(value) in on_path:
            return f"{_place(place)} is {_place(on_path[id(value)])} again (a cycle)"
        if depth >= MAX_ARGS_DEPTH:
            return f"{_place(place)} is nested deeper than {MAX_ARGS_DEPTH} levels"
        on_path[id(value)] = place
        todo.append((_LEAVE, id(value), 0))
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    return f"{_place(place)} has the key {type(key).__name__} {_key(key)}, not text"
                todo.append((item, (place, key), depth + 1))
        else:
            todo.extend((item, (place, i), depth + 1) for i, item in enumerate(value))
    return None


_LEAVE = object()  # (args_fault: the walk is done with a container)


def _place(place: Any) -> str:
    """A place as Python writes it (``args['a'][0]``); built from its (parent, key) pairs only when said."""
    keys = []
    while isinstance(place, tuple):
        place, key = place
        keys.append(f"[{_key(key)}]")
    keys.reverse()
    if len(keys) > 8:  # (one nested 500 levels deep)
        keys[4:-3] = ["…"]
    return place + "".join(keys)


def _key(key: Any) -> str:
    from flowtui.runtime.errors import safe_repr

    return safe_repr(key, 40)
