"""Replies: the shapes fakes accept (a string, or ``{"content": ..., "tool_calls": [{"name", "args"}]}``),
and :func:`model_reply`, how a model's raw answer becomes a :class:`ChatReply` (litellm's responses
and scripted replies alike)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from flowtui.runtime.errors import ConfigError
from flowtui.runtime.messages import ToolCall
from flowtui.runtime.providers.base import ChatReply, ChatRequest, Usage
from flowtui.runtime.providers.rescue import find_tool_calls, strip_think


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
        for i, call in enumerate(reply.get("tool_calls") or []):
            if not isinstance(call, Mapping) or "name" not in call:
                raise ConfigError(f"{where}: tool_calls[{i}] needs a 'name' (and 'args')")
            args = call.get("args", call.get("arguments", {}))
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{where}: tool_calls[{i}].args is not valid JSON: {exc}") from None
            calls.append({"name": str(call["name"]), "args": dict(args or {})})
        return str(reply.get("content") or ""), calls
    raise ConfigError(f"{where}: a reply must be a string or a mapping with 'content'/'tool_calls', "
                      f"got {type(reply).__name__}")


def to_reply(reply: Any, *, where: str) -> ChatReply:
    """A ChatReply built directly (no litellm), for FunctionProvider."""
    if isinstance(reply, ChatReply):
        return reply
    content, calls = split_reply(reply, where=where)
    return ChatReply(
        content=content,
        tool_calls=[ToolCall(name=c["name"], args=c["args"]) for c in calls],  # the engine numbers them
        tool_call_source="native" if calls else None,
    )


def model_reply(request: ChatRequest, raw_content: str, native_calls: list[ToolCall], *, rescue: bool,
                reasoning: str | None = None, prompt_tokens: int = 0, completion_tokens: int = 0,
                model: Any = None) -> ChatReply:
    """A model's answer as a :class:`ChatReply`.

    ``<think>`` blocks move from the content to ``reasoning`` (after any the
    provider sent apart). Native tool calls win; without them and with
    ``rescue`` on, calls written as text (restricted to ``request.tool_names``)
    are rescued and cut from the content. Calls without an id get
    ``call_<turn>_<i>``, so a replayed conversation is byte-identical to the
    recorded one. Cost is left at 0: the provider fills it in.
    """
    content, think = strip_think(raw_content)
    if reasoning and reasoning.strip():
        think = reasoning.strip() + ("\n\n" + think if think else "")
    calls, source = native_calls, "native" if native_calls else None
    if not calls and rescue and request.tool_names:
        calls, content = find_tool_calls(content, request.tool_names)
        source = "rescued" if calls else None
    calls = [c if c.id else c.model_copy(update={"id": f"call_{request.turn}_{i}"}) for i, c in enumerate(calls)]
    return ChatReply(content=content, tool_calls=calls, tool_call_source=source, reasoning=think,
                     usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
                     model=model if isinstance(model, str) else None)
