"""Edits made by a person on a paused run (the TUI's ``m``, ``e``, ``d``, ``u``...).

Each edit goes through ``ctx.state.set`` or a state-field assignment, so it is
an ordinary event with origin ``user``: it shows in the log and the journal,
and the next model call sees it. Every edit can be undone (``undo``), which is
itself an event with origin ``user``.

A client only ever sees redacted text (credentials read ``[redacted]``), so a
text typed over one is given back the credentials it left untouched
(:func:`~flowtui.runtime.secrets.restore`): an edit loses nothing it did not change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowtui.runtime.bus import current_origin
from flowtui.runtime.errors import ConfigError
from flowtui.runtime.observe import coerce
from flowtui.runtime.secrets import restore, secret_values

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run


class Editor:
    """Applies a person's edits to one run's ``ctx.state`` and workflow state."""

    def __init__(self, run: "Run") -> None:
        self._run = run
        self._undo: list[list[tuple[str, str, Any]]] = []
        self._mark = -1  # stream position right after the last edit or undo

    # --- buckets -------------------------------------------------------------
    def promote(self, index: int, text: str | None = None) -> None:
        """Move history message ``index`` into memory (``text`` edited by hand, if given)."""
        self._begin()
        history = list(self._run.state.history)
        msg = _at(history, index, "history")
        if msg.role != "assistant":
            raise ConfigError(f"history message {index} is a {msg.role} message; only assistant replies "
                              "can be promoted to memory")
        item = msg.content if text is None else _restore(text, msg.content)
        if not item.strip():
            raise ConfigError("the promoted text is empty; type what memory should hold")
        before = self._snapshot("history", "memory")
        del history[index]
        with _as_user():
            self._run.state.set("history", history, origin="user")
            self._run.state.append("memory", item, origin="user")
        self._done(before)

    def edit_message(self, index: int, content: str) -> None:
        self._begin()
        history = list(self._run.state.history)
        msg = _at(history, index, "history")
        before = self._snapshot("history")
        history[index] = msg.model_copy(update={"content": _restore(content, msg.content)})
        with _as_user():
            self._run.state.set("history", history, origin="user")
        self._done(before)

    def set_item(self, bucket: str, index: int, text: str) -> None:
        """Replace item ``index`` of ``memory`` or ``tasks``."""
        self._begin()
        items = list(self._run.state.get(bucket))
        old = _at(items, index, bucket)
        before = self._snapshot(bucket)
        items[index] = _restore(text, old)
        with _as_user():
            self._run.state.set(bucket, items, origin="user")
        self._done(before)

    def delete_item(self, bucket: str, index: int) -> None:
        self._begin()
        items = list(self._run.state.get(bucket))
        _at(items, index, bucket)
        before = self._snapshot(bucket)
        del items[index]
        with _as_user():
            self._run.state.set(bucket, items, origin="user")
        self._done(before)

    def add_item(self, bucket: str, text: str) -> None:
        self._begin()
        before = self._snapshot(bucket)
        with _as_user():
            self._run.state.append(bucket, text, origin="user")
        self._done(before)

    # --- workflow state ------------------------------------------------------
    def set_field(self, name: str, text: str) -> Any:
        """Set workflow-state field ``name`` from typed ``text``, validated against its type.

        Raises ``ValueError`` (with the reason) for a value its type refuses.
        """
        self._begin()
        obj = self._run.workflow_state
        if obj is None:
            raise ConfigError(f"workflow {self._run.spec.name} has no state to edit")
        cls = self._run.spec.state
        if self._run.observer is None or name not in self._run.observer.fields:
            raise ConfigError(f"{cls.__name__} has no field {name!r}")
        value = coerce(cls, name, text)
        old = getattr(obj, name)
        with _as_user():
            setattr(obj, name, value)
        self._done([("field", name, old)])
        return value

    # --- undo ----------------------------------------------------------------
    @property
    def can_undo(self) -> bool:
        return bool(self._undo) and not self._moved_on()

    def _moved_on(self) -> bool:
        """True when the run emitted anything since the last edit (it went on)."""
        return self._run.emitter.stream.last_seq != self._mark

    def undo(self) -> bool:
        """Revert the last edit; False when there is none.

        Only while the run has not moved on since: restoring a bucket as it was
        would otherwise throw away the turns that came after. Raises
        ``ConfigError`` then (and forgets the older edits).
        """
        if not self._undo:
            return False
        if self._moved_on():
            self._undo.clear()
            raise ConfigError("the run has gone on since the last edit; undo works only before it continues")
        entries = self._undo.pop()
        with _as_user():
            for kind, name, value in entries:
                if kind == "bucket":
                    self._run.state.set(name, value, origin="user")
                else:
                    setattr(self._run.workflow_state, name, value)
        self._mark = self._run.emitter.stream.last_seq
        return True

    def _begin(self) -> None:
        if self._moved_on():
            self._undo.clear()  # older edits sit before turns the run has taken since

    def _done(self, undo: list[tuple[str, str, Any]]) -> None:
        self._undo.append(undo)
        self._mark = self._run.emitter.stream.last_seq

    def _snapshot(self, *buckets: str) -> list[tuple[str, str, Any]]:
        return [("bucket", b, list(self._run.state.get(b))) for b in buckets]


class _as_user:
    """Attribute events (the state-field ones included) to the person."""

    def __enter__(self) -> None:
        self._token = current_origin.set("user")

    def __exit__(self, *exc: object) -> None:
        current_origin.reset(self._token)


def _restore(edited: str, original: str) -> str:
    return restore(edited, original, secret_values())


def _at(items: list, index: int, bucket: str) -> Any:
    if not 0 <= index < len(items):
        raise ConfigError(f"{bucket} has no item {index} (it holds {len(items)})")
    return items[index]
