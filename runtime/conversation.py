"""``ctx.state``: the conversation with the model, in three buckets.

``history`` (``Message`` turns), ``memory`` (durable ``str`` items, one
``system`` message at the top) and ``tasks`` (``str`` items, a note inside that
system message). Reads return read-only sequences; every change goes through
:meth:`ConversationState.append` / :meth:`ConversationState.set`, which emit
``state.append`` / ``state.set`` events.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, overload

from flowtui.runtime.construct import TEXT_OR_NONE, bad_fields
from flowtui.runtime.events import StateAppend, StateSet
from flowtui.runtime.messages import (
    ARGS_ARE_JSON, Message, ToolCall, args_fault, estimate_tokens, system_message, well_formed, well_formed_call,
)
from flowtui.runtime.wellformed import HistoryCheck

BUCKETS = ("history", "memory", "tasks")


class Snapshot(Sequence):
    """A read-only, O(1) view of a bucket as it was when read.

    Buckets only ever grow at the end in place (``append``); ``set`` installs
    a new list. So a view remembering the list and its length at read time is a
    true snapshot without copying.
    """

    __slots__ = ("_items", "_n")

    def __init__(self, items: list, n: int) -> None:
        self._items = items
        self._n = n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> tuple: ...
    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self._items[: self._n][i])
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("bucket index out of range")
        return self._items[i]

    def __iter__(self):
        items = self._items
        for i in range(self._n):
            yield items[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"({', '.join(repr(x) for x in self)})"

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("ctx.state's buckets are read-only views, so every change is an event: change one with "
                        "ctx.state.append(bucket, item) or ctx.state.set(bucket, items)")

    append = extend = insert = remove = pop = clear = __setitem__ = __delitem__ = __iadd__ = _read_only


def memory_items(memory: str | Iterable[str] | Mapping[str, Any] | None) -> list[str]:
    """Initial memory from ``app.run(memory=...)``.

    A string is one item; a list gives one item each; a mapping gives one item
    per key, written ``key: value`` (e.g. ``{"plano": "pro"}`` → ``"plano: pro"``), a value
    other than a string as JSON (``{"prefs": {"ok": True}}`` → ``prefs: {"ok": true}``, not
    Python's ``{'ok': True}``).
    """
    if memory is None:
        return []
    if isinstance(memory, str):
        return [memory]
    if isinstance(memory, Mapping):
        from flowtui.runtime.context import json_text  # (it imports this module)

        # (a set was Python's own text of it, {1, 3}, as JSON has no word for it)
        return [f"{k}: {json_text(v)}" for k, v in memory.items()]
    if not isinstance(memory, Iterable) or isinstance(memory, (bytes, bytearray)):
        raise TypeError(f"run(memory=...) must be a str, a list of str or a mapping such as {{'plano': 'pro'}}, "
                        f"got {type(memory).__name__} {memory!r:.60}")
    items = list(memory)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(
                f"run(memory=...): item {i} is {type(item).__name__}; memory items must be str "
                "(or pass a mapping, which becomes 'key: value' items)"
            )
    return items


def system_note(memory: Sequence[str], tasks: Sequence[str]) -> str | None:
    """The text of the system message that carries memory and tasks."""
    parts = list(memory)
    if tasks:
        parts.append("Tasks:\n" + "\n".join(f"- {t}" for t in tasks))
    return "\n\n".join(parts) if parts else None


def model_messages(prompt: str | None, memory: Sequence[str], tasks: Sequence[str],
                   history: Sequence[Message]) -> list[Message]:
    """What a model call sends (before middlewares): the agent's prompt as the first ``system``
    message, memory and tasks as one ``system`` note, then the history. The one function
    behind both a turn's request and "what the model sees"."""
    messages = [system_message(prompt)] if prompt else []
    note = system_note(memory, tasks)
    if note is not None:
        messages.append(system_message(note))
    messages.extend(history)
    return messages


class ConversationState:
    """``ctx.state`` of one run."""

    __slots__ = ("_buckets", "_emit", "_lock", "_check", "_checked", "_ids", "_tokens")

    def __init__(self, emit, *, memory: list[str] | None = None, lock: Any = None) -> None:
        self._buckets: dict[str, list] = {"history": [], "memory": list(memory or []), "tasks": []}
        self._emit = emit
        # The stream's lock: a change and its event happen together, so threads cannot reorder them.
        self._lock = lock if lock is not None else threading.RLock()
        self._check = HistoryCheck()
        self._checked: list | None = None  # the history list _check has read (a set installs a new one)
        self._ids: tuple[list | None, int, set[str]] = (None, 0, set())  # (list read, up to, call ids there)
        self._tokens: tuple[list | None, int, int] = (None, 0, 0)  # (list read, up to, tokens estimated there)

    # reads -------------------------------------------------------------
    @property
    def history(self) -> Sequence[Message]:
        items = self._buckets["history"]
        return Snapshot(items, len(items))

    @property
    def memory(self) -> Sequence[str]:
        items = self._buckets["memory"]
        return Snapshot(items, len(items))

    @property
    def tasks(self) -> Sequence[str]:
        items = self._buckets["tasks"]
        return Snapshot(items, len(items))

    def _assigned(self, value: Any) -> None:
        raise AttributeError("ctx.state's buckets cannot be assigned: write ctx.state.set(bucket, items) (an "
                             "event records it), e.g. ctx.state.set(\"tasks\", [])")

    history = history.setter(_assigned)
    memory = memory.setter(_assigned)
    tasks = tasks.setter(_assigned)

    def _history_length(self) -> int:
        """``len(self.history)``, for the runtime: without making the read-only view."""
        return len(self._buckets["history"])

    def get(self, bucket: str) -> Sequence[Any]:
        items = self._bucket(bucket)
        return Snapshot(items, len(items))

    # writes ------------------------------------------------------------
    def append(self, bucket: str, item: Any, *, origin: str | None = None, note: str | None = None) -> None:
        """Add ``item`` at the end of ``bucket`` (a ``Message`` for history, a ``str`` otherwise).
        ``note`` says in words what an edit did (the app's event log shows it)."""
        items = self._bucket(bucket)
        _check_item(bucket, item, None)
        item = _carried(item)
        fields = {"bucket": bucket, "item": item}
        if origin:
            fields["origin"] = origin
        if note:
            fields["note"] = note
        with self._lock:
            items = self._buckets[bucket]
            items.append(item)
            self._emit(StateAppend, **fields)

    def set(self, bucket: str, items: Iterable[Any], *, origin: str | None = None, note: str | None = None) -> None:
        """Replace ``bucket`` whole, e.g. ``set("history", history[:-1])``."""
        self._bucket(bucket)
        if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
            raise TypeError(
                f"ctx.state.set({bucket!r}, ...): expected a sequence of "
                f"{'Message' if bucket == 'history' else 'str'}, got {type(items).__name__}"
            )
        new = list(items)
        for i, item in enumerate(new):
            _check_item(bucket, item, i)
            new[i] = _carried(item)
        fields = {"bucket": bucket, "items": list(new)}
        if origin:
            fields["origin"] = origin
        if note:
            fields["note"] = note
        with self._lock:
            self._buckets[bucket] = new
            self._emit(StateSet, **fields)

    # projection --------------------------------------------------------
    def to_messages(self, *, prompt: str | None = None) -> list[Message]:
        """What the model sees: memory/tasks as one system message, then history; with
        ``prompt``, the agent's prompt first (exactly a turn's request before middlewares)."""
        b = self._buckets
        return model_messages(prompt, b["memory"], b["tasks"], b["history"])

    def counted_messages(self, *, prompt: str | None = None) -> tuple[list[Message], int]:
        """:meth:`to_messages`, and their size in tokens as :func:`estimate_tokens` estimates it (a reply
        that says no usage is counted so, as the app's "what the model sees" and ``prompt.tokens`` count
        it). The history's are added up as it grows (its messages are frozen), again when it was replaced
        (``set``): a long run pays for its new messages only."""
        items = self._buckets["history"]
        read, upto, tokens = self._tokens
        if items is not read or len(items) < upto:
            upto, tokens = 0, 0
        for m in items[upto:]:
            tokens += estimate_tokens(m)
        self._tokens = (items, len(items), tokens)
        messages = self.to_messages(prompt=prompt)
        for m in messages[:len(messages) - len(items)]:  # the prompt and the memory-and-tasks note
            tokens += estimate_tokens(m)
        return messages, tokens

    def history_problems(self) -> list[str]:
        """Why ``history`` is not a valid conversation for a provider (empty: it is). Checks only
        what was appended since the last time, unless the history was replaced (``set``)."""
        items = self._buckets["history"]
        if items is not self._checked or len(items) < self._check.seen:
            self._check, self._checked = HistoryCheck(), items
        return self._check.feed(items, self._check.seen, final=True)

    def call_ids(self) -> set[str]:
        """The ids of the tool calls the history holds, whoever put them there (a turn, an agent's own
        run(), a hook, an edit). Read as the history grows, again when it was replaced (``set``)."""
        items = self._buckets["history"]
        read, upto, ids = self._ids
        if items is not read or len(items) < upto:
            upto, ids = 0, set()
        for m in items[upto:]:
            if m.role == "assistant" and m.tool_calls:
                ids.update(c.id for c in m.tool_calls if c.id)
        self._ids = (items, len(items), ids)
        return ids

    def _bucket(self, bucket: str) -> list:
        try:
            return self._buckets[bucket]
        except (KeyError, TypeError):
            raise ValueError(
                f"ctx.state has no bucket {bucket!r}; the buckets are 'history', 'memory' and 'tasks'"
            ) from None

    def __repr__(self) -> str:
        b = self._buckets
        return f"<ctx.state history={len(b['history'])} memory={len(b['memory'])} tasks={len(b['tasks'])}>"


def _carried(item: Any) -> Any:
    """``item`` as the journal carries it and a JSON request can: a lone surrogate (a tool's
    ``os.fsdecode`` of a file name that is no UTF-8) as U+FFFD. A provider of the flow's own was sent the
    surrogate, while the journal and the panes said U+FFFD."""
    if isinstance(item, str):  # (a StrEnum's member, a str of the flow's own class: as the text it is)
        return well_formed(item if item.__class__ is str else str.__str__(item))
    update: dict[str, Any] = {}
    text = item.content
    if text.__class__ is str and not text.isascii() and (fixed := well_formed(text)) is not text:
        update["content"] = fixed
    if item.tool_calls:  # (their arguments too: a provider of the flow's own is sent them back)
        calls = tuple(well_formed_call(c) for c in item.tool_calls)
        if any(c is not f for c, f in zip(item.tool_calls, calls)):
            update["tool_calls"] = calls
    if update:
        from flowtui.runtime.construct import copy_with

        return copy_with(item, update)
    return item


_ROLES = frozenset(("system", "user", "assistant", "tool"))
_OPTIONAL_TEXT = ("tool_name", "tool_call_id", "agent", "reasoning")


def _check_item(bucket: str, item: Any, index: int | None) -> None:
    where = f"item {index} " if index is not None else ""
    if bucket == "history":
        if not isinstance(item, Message):
            raise TypeError(
                f"ctx.state bucket 'history': {where}is {type(item).__name__}; history holds "
                "Message(role=..., content=...) items"
            )
        fields = item.__dict__
        if fields.get("content").__class__ is not str or fields.get("role") not in _ROLES \
                or not isinstance(fields.get("tool_calls"), (tuple, list)) \
                or fields.get("is_error").__class__ is not bool \
                or not TEXT_OR_NONE.issuperset(map(type, map(fields.get, _OPTIONAL_TEXT))):
            wrong = bad_fields(item)  # (Message.model_construct, model_copy(update=...): not validated; what they
            if wrong is not None:  # held broke the events that carry the history, and the journal stopped)
                raise TypeError(f"ctx.state bucket 'history': {where}is a Message whose {wrong} (model_construct and "
                                "model_copy do not validate: give each field a value of its type)")
        for call in item.tool_calls:  # (a cycle in them failed the run with a RecursionError, said nowhere)
            fault = args_fault(call.args) if isinstance(call, ToolCall) else None
            if fault is not None:
                raise TypeError(f"ctx.state bucket 'history': {where}has a tool call {call.name!r:.40} whose {fault}; "
                                f"{ARGS_ARE_JSON}")
    elif not isinstance(item, str):
        raise TypeError(
            f"ctx.state bucket {bucket!r}: {where}is {type(item).__name__}; {bucket} holds str items"
        )
