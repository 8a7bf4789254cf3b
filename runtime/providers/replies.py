"""The reply shapes fakes accept: a string, or ``{"content": ..., "tool_calls": [{"name", "args"}]}``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runtime.errors import ConfigError
from runtime.messages import ToolCall
from runtime.providers.base import ChatReply


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
