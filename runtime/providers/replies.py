"""Replies: the shapes fakes accept (a string, or ``{"content": ..., "tool_calls": [{"name", "args"}]}``),
and :func:`model_reply`, how a model's raw answer becomes a :class:`ChatReply` (litellm's responses
and scripted replies alike)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from difflib import get_close_matches
from typing import Any

from flowtui.runtime.construct import builders
from flowtui.runtime.errors import ConfigError, safe_repr
from flowtui.runtime.messages import ARGS_ARE_JSON, ToolCall, args_fault
from flowtui.runtime.providers.base import ChatReply, ChatRequest, Usage, finish_reply

# ("arguments" is how OpenAI names them; "id" a call's id, which the engine gives anyway)
_CALL_KEYS = ("name", "args", "arguments", "id")
_ARGS_ALIASES = ("parameters", "params", "input", "kwargs")  # what other APIs call the arguments


def split_reply(reply: Any, *, where: str) -> tuple[str, list[dict[str, Any]]]:
    """(content, [{"name", "args"}]) from a reply in any accepted shape."""
    if isinstance(reply, str):
        return reply, []
    if isinstance(reply, ChatReply):
        return reply.content, [{"name": c.name, "args": c.args} for c in reply.tool_calls]
    if isinstance(reply, Mapping):
        unknown = set(reply) - {"content", "tool_calls"}
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)} in a reply; "
                              "a reply has 'content' and 'tool_calls'")
        calls = []
        listed = reply.get("tool_calls") or []
        # ("registrar" was read letter by letter: "tool_calls[0] needs a 'name'")
        if not isinstance(listed, (list, tuple)):
            raise ConfigError(f"{where}: tool_calls is {type(listed).__name__} {safe_repr(listed)}, not a list of "
                              "calls; write tool_calls = [{ name = \"tool\", args = { ... } }]")
        for i, call in enumerate(listed):
            if not isinstance(call, Mapping) or "name" not in call:
                raise ConfigError(f"{where}: tool_calls[{i}] needs a 'name' (and 'args')")
            # (a misspelled `arg = {...}` was dropped: the tool was called with {} and failed, or ran wrongly)
            unknown = [str(k) for k in call if k not in _CALL_KEYS]
            if unknown:
                meant = next(((key, "args" if key.lower() in _ARGS_ALIASES else close[0]) for key in unknown
                              if key.lower() in _ARGS_ALIASES
                              or (close := get_close_matches(key, ("args", "name"), n=1))), None)
                raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)} in tool_calls[{i}] (tool "
                                  f"{safe_repr(call['name'], 40)}); "
                                  + (f"did you mean {meant[1]!r} for {meant[0]!r}? " if meant else "")
                                  + "a tool call has 'name' and 'args'")
            args = call.get("args", call.get("arguments", {}))
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{where}: tool_calls[{i}].args is not valid JSON: {exc}") from None
            if args is None:
                args = {}
            if not isinstance(args, Mapping):
                raise ConfigError(f"{where}: tool_calls[{i}].args is {type(args).__name__} {safe_repr(args)}, not the "
                                  f"call's arguments; write args = {{ name = value, ... }}")
            if not isinstance(call["name"], str):
                raise ConfigError(f"{where}: tool_calls[{i}].name is {type(call['name']).__name__} "
                                  f"{safe_repr(call['name'], 40)}, not a tool's name; write name = \"tool\"")
            fault = args_fault(args)
            if fault is not None:
                raise ConfigError(f"{where}: tool_calls[{i}] ({safe_repr(call['name'], 40)}): {fault}; {ARGS_ARE_JSON}")
            calls.append({"name": call["name"], "args": dict(args)})
        content = reply.get("content")
        if content is not None and not isinstance(content, str):  # (3 was played as the text "3", unsaid)
            raise ConfigError(f"{where}: content is {type(content).__name__} {safe_repr(content, 40)}, not text; "
                              "write it as a string (content = \"...\")")
        return content or "", calls
    raise ConfigError(f"{where}: a reply must be a string or a mapping with 'content'/'tool_calls', "
                      f"got {type(reply).__name__}")


def to_reply(reply: Any, *, where: str) -> ChatReply:
    """A ChatReply from any accepted shape (the engine finishes it: think blocks, rescue, ids)."""
    if isinstance(reply, ChatReply):
        return reply
    content, calls = split_reply(reply, where=where)
    tool_calls = [ToolCall(name=c["name"], args=c["args"]) for c in calls]
    if type(content) is str:  # what validation would keep as is: built without it
        return builders[ChatReply]({"content": content, "tool_calls": tool_calls})
    return ChatReply(content=content, tool_calls=tool_calls)


def model_reply(request: ChatRequest, raw_content: str, native_calls: list[ToolCall], *, rescue: bool,
                reasoning: str | None = None, prompt_tokens: int = 0, completion_tokens: int = 0,
                model: Any = None, finish_reason: str | None = None) -> ChatReply:
    """A model's raw answer as a finished :class:`ChatReply` (see
    :func:`~runtime.providers.base.finish_reply`). Cost is left at 0: the provider fills it in."""
    raw = ChatReply(content=raw_content, tool_calls=native_calls, reasoning=reasoning,
                    usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
                    model=model if isinstance(model, str) else None, finish_reason=finish_reason)
    return finish_reply(request, raw, rescue=rescue)
