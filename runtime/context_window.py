"""``ContextWindow``: a middleware that keeps each model call within a token budget.

    app.use(ContextWindow(max_tokens=8000))

It drops the oldest turns of what a model call sends (never the agent's
prompt or the memory note at the top, never the latest turn) until the rest
fits. A turn is a user message, an assistant reply, or an assistant's tool
calls together with their results, so a tool result never loses its call.
``ctx.state.history`` keeps everything: only the request is trimmed, and the
chat node records it (``trimmed``: how many messages, by which middleware).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flowtui.runtime.errors import ConfigError
from flowtui.runtime.messages import Message, estimate_tokens


class ContextWindow:
    """Trims the oldest turns of every model call to fit ``max_tokens``.

    ``count_tokens(message) -> int`` counts one message (default:
    :func:`estimate_tokens`); give your model's tokenizer for exact counts.
    """

    def __init__(self, max_tokens: int, *, count_tokens: Callable[[Message], int] | None = None,
                 name: str = "ContextWindow") -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"ContextWindow(max_tokens={max_tokens!r}): must be a whole number of at least 1")
        if count_tokens is not None and not callable(count_tokens):
            raise ConfigError(f"ContextWindow(count_tokens={count_tokens!r:.40}): give a function of one message "
                              "that returns its tokens, e.g. count_tokens=lambda m: len(enc.encode(m.content))")
        self.max_tokens = max_tokens
        self.count_tokens = count_tokens or estimate_tokens
        self.name = name

    async def model(self, request: Any, call_next: Callable[[Any], Any]) -> Any:
        messages = fit(request.messages, self.max_tokens, self._count)
        if len(messages) != len(request.messages):
            request = request.model_copy(update={"messages": messages})
        return await call_next(request)

    def _count(self, message: Message) -> int | float:
        """``count_tokens(message)``, a number of tokens, or a TypeError naming it (a text it returned failed on
        ``int + str`` with no word of ContextWindow; one that raised failed the run with its bare error)."""
        try:
            n = self.count_tokens(message)
        except Exception as exc:
            raise ConfigError(f"{self.name}: count_tokens raised {type(exc).__name__}: {exc} for a {message.role} "
                              "message") from exc
        if isinstance(n, bool) or not isinstance(n, (int, float)) or not 0 <= n < float("inf"):
            raise TypeError(f"{self.name}: count_tokens returned {type(n).__name__} {n!r:.40} for a {message.role} "
                            "message, not its number of tokens (a whole number, 0 or more)")
        return n

    def __repr__(self) -> str:
        return f"ContextWindow(max_tokens={self.max_tokens})"


def fit(messages: list[Message], max_tokens: int, count: Callable[[Message], int]) -> list[Message]:
    """``messages`` without their oldest turns, so they fit ``max_tokens`` if they can."""
    top = 0
    while top < len(messages) and messages[top].role == "system":
        top += 1
    turns = _turns(messages[top:])
    sizes = [sum(count(m) for m in turn) for turn in turns]
    total = sum(count(m) for m in messages[:top]) + sum(sizes)
    first = 0
    while total > max_tokens and first < len(turns) - 1:  # the latest turn always goes
        total -= sizes[first]
        first += 1
    if first == 0:
        return messages
    return [*messages[:top], *(m for turn in turns[first:] for m in turn)]


def _turns(messages: list[Message]) -> list[list[Message]]:
    """Messages grouped so that tool results stay with the assistant message that called them."""
    turns: list[list[Message]] = []
    for m in messages:
        if m.role == "tool" and turns and turns[-1][0].role == "assistant" and turns[-1][0].tool_calls:
            turns[-1].append(m)
        else:
            turns.append([m])
    return turns
