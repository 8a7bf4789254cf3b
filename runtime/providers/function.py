"""``FunctionProvider``: a model simulated by a function of yours."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from flowtui.runtime.errors import ConfigError
from flowtui.runtime.messages import Message
from flowtui.runtime.providers.base import ChatReply, ChatRequest, Provider
from flowtui.runtime.providers.replies import to_reply


class FunctionProvider(Provider):
    """Calls ``handler(messages, tools)`` (sync or async) for each model call.

    ``messages`` is the turn's ``list[Message]`` (agent prompt first, then
    ``ctx.state.to_messages()``), ``tools`` the OpenAI-style function schemas.
    It returns a string, ``{"content": ..., "tool_calls": [{"name", "args"}]}``
    or a ``ChatReply``. A sync handler runs inline: it stands in for a model,
    so keep it quick.

    Subclass with a ``handler`` method, or pass the function.
    """

    def __init__(self, handler: Callable[[list[Message], list[dict[str, Any]]], Any] | None = None) -> None:
        fn = handler if handler is not None else getattr(self, "handler", None)
        if fn is None:
            raise TypeError("FunctionProvider needs a handler: FunctionProvider(fn) or a subclass with handler()")
        try:
            inspect.signature(fn).bind(None, None)
        except TypeError:  # it cannot take (messages, tools): said now, not at the first model call
            name = getattr(fn, "__qualname__", None) or repr(fn)
            raise ConfigError(f"FunctionProvider: the handler {name}{inspect.signature(fn)} must take "
                              "(messages, tools): the turn's messages and the tools' schemas") from None
        except ValueError:  # a builtin without a signature: trust it
            pass
        self._fn = fn
        self._async = inspect.iscoroutinefunction(fn)

    async def complete(self, request: ChatRequest) -> ChatReply:
        out = self._fn(request.messages, request.tools)
        if self._async or (type(out) is not str and inspect.isawaitable(out)):  # str: the usual answer
            out = await out
        return to_reply(out, where=f"FunctionProvider for {request.agent}")
