"""The one module that touches litellm, and only on first use.

``import litellm`` takes seconds and, left alone, fetches a model price map
from the network and prints help banners on errors (which would tear a
terminal UI). :func:`load_litellm` imports it once, offline and silenced.
Everything else here converts between flowtui's types and litellm's
OpenAI-shaped dicts and responses.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import warnings
from types import ModuleType
from typing import Any

from flowtui.runtime.messages import Message, ToolCall
from flowtui.runtime.providers.base import RAW_ARGUMENTS_KEY, ChatReply, ChatRequest
from flowtui.runtime.providers.replies import model_reply

__all__ = [
    "RAW_ARGUMENTS_KEY",
    "load_litellm",
    "parse_response",
    "to_openai_messages",
]

_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm")


async def aload_litellm() -> ModuleType:
    """:func:`load_litellm` from async code: the first import (seconds) runs in a
    worker thread, so the event loop (and the app drawn on it) keeps answering."""
    if load_litellm.cache_info().currsize:
        return load_litellm()
    return await asyncio.to_thread(load_litellm)


@functools.cache
def load_litellm() -> ModuleType:
    """Import litellm once: offline price map, no banners, no log output."""
    # Use the price map shipped in the package; without this litellm downloads it.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    # "Give Feedback / Get Help" and "Provider List" prints are gated by this.
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    if hasattr(litellm, "suppress_startup_output"):
        litellm.suppress_startup_output = True
    for name in _LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.addHandler(logging.NullHandler())
        logger.setLevel(logging.CRITICAL)
        logger.propagate = False
    # Warnings go to stderr, which a full-screen app does not own: drop
    # litellm's own and the pydantic ones its types trigger on first use.
    warnings.filterwarnings("ignore", module=r"litellm(\..*)?$")
    warnings.filterwarnings("ignore", category=UserWarning, message=r".*`ReadOnly` qualifier")
    warnings.filterwarnings("ignore", category=UserWarning, message=r"Pydantic serializer warnings")
    return litellm


# --------------------------------------------------------------------------- requests


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as OpenAI chat dicts.

    Assistant tool calls get JSON-string ``arguments``; tool results get the
    ``tool_call_id`` of the call they answer. Calls without an id get a
    stable one, and tool results without one are paired with the earliest
    unanswered call (of the same tool name when possible), because every
    OpenAI-compatible API rejects a tool message that answers no call.
    """
    out: list[dict[str, Any]] = []
    pending: list[tuple[str, str]] = []  # (id, name) of calls not yet answered
    for i, msg in enumerate(messages):
        if msg.role == "assistant":
            d: dict[str, Any] = {"role": "assistant", "content": msg.content}
            if msg.tool_calls:
                pending = []
                calls = []
                for j, call in enumerate(msg.tool_calls):
                    call_id = call.id or f"call_{i}_{j}"
                    pending.append((call_id, call.name))
                    calls.append({"id": call_id, "type": "function",
                                  "function": {"name": call.name,
                                               "arguments": json.dumps(call.args)}})
                d["tool_calls"] = calls
                # Some providers reject "" next to tool calls; null is the API's own form.
                if not msg.content:
                    d["content"] = None
            out.append(d)
        elif msg.role == "tool":
            call_id = msg.tool_call_id
            if call_id is None:
                call_id = _pair(pending, msg.tool_name) or f"call_{i}_orphan"
            else:
                pending = [p for p in pending if p[0] != call_id]
            out.append({"role": "tool", "tool_call_id": call_id, "content": msg.content})
        else:
            out.append({"role": msg.role, "content": msg.content})
    return out


def _pair(pending: list[tuple[str, str]], name: str | None) -> str | None:
    for k, (call_id, call_name) in enumerate(pending):
        if name is None or call_name == name:
            del pending[k]
            return call_id
    if pending:
        return pending.pop(0)[0]
    return None


# --------------------------------------------------------------------------- responses


def parse_response(resp: Any, request: ChatRequest, *, rescue: bool) -> ChatReply:
    """A litellm ``ModelResponse`` as a :class:`ChatReply` (see :func:`model_reply`)."""
    choice = resp.choices[0] if getattr(resp, "choices", None) else None
    message = getattr(choice, "message", None)
    # Providers that return reasoning separately (deepseek, o-series via litellm).
    extra_reasoning = getattr(message, "reasoning_content", None)
    usage = getattr(resp, "usage", None)
    return model_reply(
        request, getattr(message, "content", None) or "",
        [_native_call(c) for c in (getattr(message, "tool_calls", None) or [])],
        rescue=rescue, reasoning=extra_reasoning if isinstance(extra_reasoning, str) else None,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        model=getattr(resp, "model", None))


def _native_call(call: Any) -> ToolCall:
    fn = getattr(call, "function", None)
    name = getattr(fn, "name", None) or ""
    raw = getattr(fn, "arguments", None)
    if isinstance(raw, dict):
        args: dict[str, Any] = raw
    elif not raw or not str(raw).strip():
        args = {}
    else:
        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError):
            parsed = None
        args = parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: str(raw)}
    return ToolCall(name=name, args=args, id=getattr(call, "id", None))
