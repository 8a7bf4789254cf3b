"""What a well-formed history is, for the providers: one rule, used by the runtime and the app.

A history is a valid conversation when every ``tool`` message answers a tool
call that the latest assistant message made, each call is answered once, and
every call is answered before the next ``user`` or ``assistant`` turn (what
OpenAI-style APIs require: they refuse anything else with a 400).

- The runtime checks the history before every model call
  (:class:`HistoryCheck`, incremental: a history that only grew is checked
  from where it was last seen), so history written by user code that breaks
  the rule fails the call with :class:`~flowtui.runtime.errors.ConversationError`
  naming the message at fault, never with a provider's 400.
- Every edit the app offers keeps the rule: promoting or deleting an
  assistant message takes its tool results with it (:func:`results_of`),
  deleting a tool result takes its call too (:func:`call_of`).
- The app shows :func:`problems` of the history at the pause before a call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def problems(history: Sequence[Any], *, name: str = "history") -> list[str]:
    """Everything that keeps ``history`` from being a valid conversation, one sentence each
    (``history[4] answers call_0, which no assistant message makes``); empty when it is valid.
    ``name`` is what the messages are called in the sentences."""
    return HistoryCheck(name).feed(history, 0, final=True)


class HistoryCheck:
    """The rule, checked a message at a time; it remembers where it stopped, so a history that
    only grew since is checked from there (a long run pays for its new messages only).

    A call or a tool result without an id is paired the way the providers pair it: with the
    earliest open call (of the same tool when there is one)."""

    __slots__ = ("name", "open", "maker", "seen", "answered", "found")

    def __init__(self, name: str = "history") -> None:
        self.name = name
        self.open: dict[Any, str] = {}  # the latest assistant message's calls not answered yet -> tool name
        self.answered: set[str] = set()  # that message's calls answered already
        self.maker: int | None = None  # index of that assistant message
        self.seen = 0  # how many messages were checked
        self.found: list[str] = []  # the problems of those messages

    def feed(self, history: Sequence[Any], start: int, *, final: bool) -> list[str]:
        """Check ``history[start:]`` and return every problem found so far; with ``final``, a call
        left unanswered at the end is one too."""
        found = self.found
        for i in range(start, len(history)):
            msg = history[i]
            role = msg.role
            if role == "tool":
                call_id = msg.tool_call_id
                key = call_id if call_id is not None else self._pair(msg.tool_name)
                if key is not None and key in self.open:
                    del self.open[key]
                    if call_id is not None:
                        self.answered.add(call_id)
                elif call_id is not None and call_id in self.answered:
                    found.append(f"{self.name}[{i}] answers {call_id} a second time")
                else:
                    what = call_id or "a call"
                    found.append(f"{self.name}[{i}] answers {what}, which no assistant message makes"
                                 + ("" if self.maker is None else f" (the one before it, {self.name}[{self.maker}], "
                                                                 f"makes {self._calls() or 'none left open'})"))
                continue
            if self.open:
                found.append(self._unanswered(i))
            self.open, self.answered, self.maker = {}, set(), None
            if role == "assistant" and msg.tool_calls:
                self.maker = i
                for k, call in enumerate(msg.tool_calls):
                    self.open[call.id if call.id is not None else (i, k)] = call.name
        self.seen = len(history)
        if final and self.open:
            return [*found, self._unanswered(None)]
        return list(found)

    def _pair(self, tool: str | None) -> Any:
        for key, name in self.open.items():
            if name == tool:
                return key
        return next(iter(self.open), None)

    def _calls(self) -> str:
        return ", ".join(sorted(str(k) for k in self.open if isinstance(k, str)) + sorted(self.answered))

    def _unanswered(self, at: int | None) -> str:
        calls = ", ".join(k if isinstance(k, str) else f"a call to {name}" for k, name in self.open.items())
        where = f"before {self.name}[{at}]" if at is not None else "at the end"
        return f"{self.name}[{self.maker}] makes {calls}, which no tool message answers {where}"


def results_of(history: Sequence[Any], index: int) -> list[int]:
    """The indices of the tool messages that answer the calls of assistant message ``index``."""
    msg = history[index]
    if msg.role != "assistant" or not msg.tool_calls:
        return []
    ids = {call.id for call in msg.tool_calls}
    out = []
    for j in range(index + 1, len(history)):
        other = history[j]
        if other.role != "tool":
            break
        if other.tool_call_id in ids or other.tool_call_id is None:
            out.append(j)
    return out


def call_of(history: Sequence[Any], index: int) -> int | None:
    """The index of the assistant message whose call tool message ``index`` answers (None: none)."""
    call_id = history[index].tool_call_id
    for j in range(index - 1, -1, -1):
        msg = history[j]
        if msg.role == "assistant":
            answers = call_id is None or any(call.id == call_id for call in msg.tool_calls)
            return j if msg.tool_calls and answers else None
        if msg.role != "tool":
            return None
    return None


def removal(history: Sequence[Any], index: int, *, with_call: bool = True) -> tuple[list[int], int | None]:
    """What deleting history message ``index`` takes along so the rest stays a valid conversation:
    (the indices that leave, sorted; the assistant message that only loses a call, or None).

    An assistant message takes its tool results; a tool result takes its call (``with_call``),
    and the assistant message that made it when nothing else is left in it."""
    gone, trimmed = [index, *results_of(history, index)], None
    msg = history[index]
    maker = call_of(history, index) if msg.role == "tool" and with_call else None
    if maker is not None:
        caller = history[maker]
        if len(caller.tool_calls) > 1 or caller.content.strip():
            trimmed = maker
        else:
            gone.append(maker)
    return sorted(gone), trimmed
