"""Edits made by a person on a paused run (the TUI's ``m``, ``e``, ``d``, ``u``...).

Every edit of the history keeps it a valid conversation
(:mod:`~flowtui.runtime.wellformed`): a promoted or deleted assistant message
takes its tool results along, a deleted tool result its call. Each says in
words what it did (the event's ``note``: ``promoted #3 → memory[2] (removed
#3, #4, #5)``).

Each edit goes through ``ctx.state.set`` or a state-field assignment, so it is
an ordinary event with origin ``user``: it shows in the log and the journal,
and the next model call sees it. Every edit can be undone (``undo``), which is
itself an event with origin ``user``.

A client only ever sees redacted text (credentials read ``[redacted]``), so a
text typed over one is given back the credentials it left untouched
(:func:`~flowtui.runtime.secrets.restore`): an edit loses nothing it did not change.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import typing
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, FailFast, TypeAdapter, ValidationError

from flowtui.runtime.bus import current_origin
from flowtui.runtime.compare import one_line
from flowtui.runtime.context import NON_FINITE_WORDS
from flowtui.runtime.errors import ConfigError
from flowtui.runtime.observe import field_type, is_type_fault, jsonable, set_noted
from flowtui.runtime.pending import (
    KeyGivenTwice, NumberRefused, PendingCall, decide, edited, maker_of, parse_arguments, strict_json,
)
from flowtui.runtime.secrets import redact, restore, secret_values
from flowtui.runtime.wellformed import HistoryCheck, problems, removal, results_of

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run


class Editor:
    """Applies a person's edits to one run's ``ctx.state`` and workflow state."""

    def __init__(self, run: "Run") -> None:
        self._run = run
        self._undo: list[tuple[str, list[tuple[str, str, Any]]]] = []  # (what the edit did, how to put it back)
        self._mark = -1  # stream position right after the last edit or undo
        self._decided: str | None = None  # the last edit was this decision on a call (no undo goes past it)

    # --- history -------------------------------------------------------------
    def promote(self, index: int, text: str | None = None) -> None:
        """Move history message ``index`` into memory (``text`` edited by hand, if given). The
        tool results that answer its calls leave the history with it."""
        self._begin()
        history = list(self._run.state.history)
        msg = _at(history, index, "history")
        if msg.role != "assistant":
            raise ConfigError(f"history message {index} is a {msg.role} message; only assistant replies "
                              "can be promoted to memory")
        item = msg.content if text is None else _restore(text, msg.content)
        if not item.strip():
            raise ConfigError("the promoted text is empty; type what memory should hold")
        gone = [index, *results_of(history, index)]
        self._keeps_pending(history, gone)
        self._stays_valid(history, _without(history, gone))
        before = self._snapshot("history", "memory")
        promoted = f"promoted #{index} → memory[{len(self._run.state.memory)}]"
        with _as_user():  # (two events, each saying its part: the log showed one line twice)
            self._run.state.set("history", _without(history, gone), origin="user",
                                note=f"{promoted} (removed {_numbers(gone)})")
            self._run.state.append("memory", item, origin="user", note=f"{promoted} (added)")
        self._done(before, promoted)

    def delete_message(self, index: int, *, with_call: bool = True) -> list[int]:
        """Delete history message ``index``; returns the indices that left. An assistant message
        takes its tool results along; a tool result takes its call along (``with_call``: the
        call leaves the assistant message, which leaves too when nothing else is left in it)."""
        self._begin()
        history = list(self._run.state.history)
        msg = _at(history, index, "history")
        before = self._snapshot("history")
        gone, maker = removal(history, index, with_call=with_call)
        note = f"deleted #{index}"
        if maker is not None:
            caller = history[maker]
            calls = tuple(c for c in caller.tool_calls if c.id != msg.tool_call_id) if msg.tool_call_id else \
                caller.tool_calls[1:]
            history[maker] = caller.model_copy(update={"tool_calls": calls})
            note += f" and its call in #{maker}"
        self._keeps_pending(history, gone)
        self._stays_valid(list(self._run.state.history), _without(history, gone))
        if len(gone) > 1:
            note += f" (removed {_numbers(gone)})"
        with _as_user():
            self._run.state.set("history", _without(history, gone), origin="user", note=note)
        self._done(before, f"deleted #{index}")
        return gone

    def edit_message(self, index: int, content: str) -> None:
        self._begin()
        history = list(self._run.state.history)
        msg = _at(history, index, "history")
        before = self._snapshot("history")
        new = _restore(content, msg.content)
        if not new.strip() and msg.role in ("user", "assistant") and not msg.tool_calls:  # (a call's may be)
            raise ConfigError(f"message {index} would be empty, which models' APIs refuse ({msg.role} messages "
                              "need text); type what it should say, or delete it (d)")
        if new == msg.content:
            raise ConfigError(f"message {index} is unchanged: nothing recorded (type a change, or Escape)")
        history[index] = msg.model_copy(update={"content": new})
        with _as_user():
            self._run.state.set("history", history, origin="user",
                                note=f"edited #{index}: {_change(msg.content, new)}")
        self._done(before, f"edited #{index}")

    # --- the pending tool call -------------------------------------------------
    def edit_call(self, text: str) -> dict[str, Any]:
        """Replace the arguments of the tool call the run is paused before (``text``: a JSON
        object, checked against the tool's schema). The assistant message that made the call
        changes too, so the model sees the call as edited."""
        pending = self._pending()
        args = parse_arguments(self._run, pending, _restore(text, json.dumps(pending.call.args, ensure_ascii=False)))
        self._begin()
        old = pending.call
        if json.dumps(args, sort_keys=True) == json.dumps(old.args, sort_keys=True):  # (as JSON: true is not 1)
            raise ConfigError(f"the arguments of the call of {old.name} are unchanged: nothing recorded "
                              "(type a change, or Escape)")
        history = list(self._run.state.history)
        found = maker_of(history, old)
        if found is None:
            raise ConfigError(f"no message in the history makes call {old.id} any more; undo the edit that "
                              "removed it (u)")
        at, place = found
        calls = list(history[at].tool_calls)
        new = old.model_copy(update={"args": args})
        calls[place] = new
        history[at] = history[at].model_copy(update={"tool_calls": tuple(calls)})
        before = [*self._snapshot("history"), ("call", "", old)]
        with _as_user():
            self._run.state.set("history", history, origin="user",
                                note=f"edited call {old.id} of {old.name} in #{at}: "
                                     f"{_change(_json(old.args), _json(args))}")
        pending.call = new
        edited(self._run, pending, old)
        self._done(before, f"edited call {old.id} of {old.name}")
        return args

    def decide(self, decision: str, reason: str = "") -> None:
        """Approve or deny the pending tool call, then go on as the run was going."""
        pending = self._pending()
        if decision not in ("approve", "deny"):
            raise ConfigError(f"a decision is 'approve' or 'deny', not {decision!r}")
        decide(self._run, pending, "approved" if decision == "approve" else "denied", reason.strip())
        self._undo.clear()  # the run goes on: nothing before this can be undone
        self._decided = f"{'approved' if decision == 'approve' else 'denied'} {pending.call.name}"
        controller = self._run.controller
        if controller is not None:
            controller.proceed()

    def _keeps_pending(self, history: list, gone: list[int]) -> None:
        """The message that makes the calls the run is answering stays: the call it is paused before, or
        calls whose tools are running (a child workflow the run is paused inside): their results would
        answer a call no message makes, and the next model call would fail."""
        pending = self._run.pending
        found = maker_of(history, pending.call) if pending is not None else None
        if found is not None and found[0] in gone:
            raise ConfigError(f"history[{found[0]}] makes {pending.call.id}, the call the run is paused before; "
                              "step past it first (or deny it, when the run asks for approval: it then leaves an "
                              "error result)")
        if self._run.open_calls is not None:  # its turn is answering its calls
            check = HistoryCheck()
            check.feed(history, 0, final=False)
            if check.open and check.maker in gone:
                calls = ", ".join(str(k) for k in check.open if isinstance(k, str)) or "its calls"
                raise ConfigError(f"history[{check.maker}] makes {calls}, whose tool is still running (the run "
                                  "is paused inside it, or in another branch); its result will answer it: step "
                                  "past it first")

    @staticmethod
    def _stays_valid(before: list, after: list) -> None:
        """An edit leaves the history no less a valid conversation than it was (deleting a tool result
        without its call left the call unanswered, and the next model call failed)."""
        was, now = problems(before), problems(after)
        if len(now) > len(was):
            new = next((p for p in now if p not in was), now[-1])
            raise ConfigError(f"the history would no longer be a valid conversation: {new}; delete the tool "
                              "result with its call (with_call true), or the message that makes it")

    def _pending(self) -> PendingCall:
        """The call the run is paused before. (A parallel step's branch may have one waiting for its turn to
        pause while another branch is paused: that call is not the one the pause shows.)"""
        pending = self._run.pending
        controller = self._run.controller
        at = controller.paused_at if controller is not None else None
        if pending is None or at is None or at.call_id != pending.call.id:
            raise ConfigError("the run is not paused before a tool call; step to one first (s, or the step command)")
        return pending

    # --- memory and tasks ------------------------------------------------------
    def set_item(self, bucket: str, index: int, text: str) -> None:
        """Replace item ``index`` of ``memory`` or ``tasks``."""
        _not_blank(text, bucket, f"d deletes {bucket}[{index}]")
        self._begin()
        items = list(self._run.state.get(bucket))
        old = _at(items, index, bucket)
        before = self._snapshot(bucket)
        items[index] = _restore(text, old)
        if items[index] == old:
            raise ConfigError(f"{bucket}[{index}] is unchanged: nothing recorded (type a change, or Escape)")
        with _as_user():
            self._run.state.set(bucket, items, origin="user",
                                note=f"edited {bucket}[{index}]: {_change(old, items[index])}")
        self._done(before, f"edited {bucket}[{index}]")

    def delete_item(self, bucket: str, index: int) -> None:
        self._begin()
        items = list(self._run.state.get(bucket))
        old = _at(items, index, bucket)
        before = self._snapshot(bucket)
        del items[index]
        with _as_user():
            self._run.state.set(bucket, items, origin="user", note=f"deleted {bucket}[{index}]: {_quote(old)}")
        self._done(before, f"deleted {bucket}[{index}]")

    def add_item(self, bucket: str, text: str) -> None:
        _not_blank(text, bucket, "type what it should say")
        self._begin()
        before = self._snapshot(bucket)
        added = f"added {bucket}[{len(self._run.state.get(bucket))}]"
        with _as_user():
            self._run.state.append(bucket, text, origin="user", note=f"{added}: {_quote(text)}")
        self._done(before, added)

    # --- workflow state ------------------------------------------------------
    def set_field(self, name: str, text: str) -> Any:
        """Set workflow-state field ``name`` from typed ``text``, strictly validated against its
        type (the rules a snapshot's fields follow: ``true`` is not an ``int``, ``2.0`` is not
        one either, ``"3"`` is not a number).

        The text is read as JSON (``3``, ``true``, ``[1, 2]``, ``"x"``), else as plain text (a
        string). Raises ``ConfigError`` (a ``ValueError``) naming the field, its type and the text
        for a value its type refuses, and for one equal to what the field holds: an edit that
        changes nothing is not recorded, so it is not reported as set either. A value that is set
        is always an event with origin ``user``.
        """
        self._begin()
        obj = self._run.workflow_state
        if obj is None:
            raise ConfigError(f"workflow {self._run.spec.name} has no state to edit")
        cls = self._run.spec.state
        observer = self._run.observer
        if observer is None or name not in observer.fields:
            known = ", ".join(observer.fields) if observer is not None else "none"
            raise ConfigError(f"{cls.__name__} has no field {name!r} (its fields: {known})")
        old = getattr(obj, name)
        # The client showed the field as text (a str as it is, else its JSON), credentials [redacted]:
        # the ones left untouched go back, or saving a field unchanged would write "[redacted]" into it.
        held = jsonable(old)
        shown = held if isinstance(held, str) else json.dumps(held, ensure_ascii=False)
        restored = _restore(text, shown)
        # the text as shown, saved untouched, is no edit: read again it was not always the value (a Decimal
        # of 30 digits read as a float, the text "7" of a str | int field as the number, bytes as their
        # description), and the run's value changed though the person changed nothing
        value = old if restored == shown else _typed(cls, name, restored)
        if restored == shown or _json(held) == _json(jsonable(value)):  # (a tuple typed as its list: no
            # event could say it, the observer sees the same JSON)
            raise ConfigError(f"{cls.__name__}.{name} is already {_shown_value(old)}: unchanged, nothing recorded "
                              "(type a different value, or Escape)")
        stream = self._run.emitter.stream
        mark = stream.last_seq
        with _as_user():
            setattr(obj, name, value)
            # reported now, whatever way the state class takes assignments (another field a thread of the
            # flow changed in place to what its class refuses is put back here: this edit stands all the same)
            with contextlib.suppress(TypeError, ValueError):
                observer.check()
        if stream.last_seq == mark:  # the state class kept what it held (a validator of its own), or took
            with _as_user(), contextlib.suppress(Exception):  # what no event tells apart (1 for 1.0):
                setattr(obj, name, old)  # what the person is told was kept is what the run holds
            raise ConfigError(f"{cls.__name__}.{name} kept {_shown_value(getattr(obj, name))}: the state class "
                              f"did not take {text!r}; nothing recorded")
        self._done([("field", name, old)], f"set {name}")
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
        ``ConfigError`` then (the next edit forgets the older ones).
        """
        if not self._undo and self._decided is not None:  # (it said "Nothing to undo", the edits counted 1)
            raise ConfigError(f"the last edit was a decision ({self._decided}): it sent the run on, and a decision "
                              "cannot be undone; fork (f) from before it to decide again")
        if not self._undo:
            resume = self._run.root.resume
            if resume is not None and resume.made_again:  # (it said "Nothing to undo", the status counting them)
                raise ConfigError(f"nothing to undo: the edits before were made again from the journal this run "
                                  f"re-executes ({one_line(str(resume.recorded.path))}), and only one made since it "
                                  "went live can be undone; fork (f) from before an edit to make it otherwise")
            return False
        if self._moved_on():  # (said again at each undo: cleared, the next one said "nothing to undo")
            raise ConfigError("the run has gone on since the last edit; undo works only before it continues")
        what, entries = self._undo.pop()
        with _as_user():
            for i, (kind, name, value) in enumerate(entries):
                if kind == "bucket":  # (a later part of one undo says so: a fork at K never splits it)
                    self._run.state.set(name, value, origin="user",
                                        note=f"undone: {what} ({name} as before it{', with the above' * bool(i)})")
                elif kind == "call":
                    pending = self._run.pending
                    if pending is not None:  # said as an edit back, so a re-execution makes it again
                        now, pending.call = pending.call, value
                        edited(self._run, pending, now, reason="undone")
                else:
                    set_noted(self._run.workflow_state, self._run.observer, name, value,
                              f"undone: {what} ({name} as before it)")
        self._mark = self._run.emitter.stream.last_seq
        return True

    def _begin(self) -> None:
        if self._moved_on():
            self._undo.clear()  # older edits sit before turns the run has taken since

    def _done(self, undo: list[tuple[str, str, Any]], what: str) -> None:
        self._undo.append((what, undo))
        self._decided = None
        self._mark = self._run.emitter.stream.last_seq

    def _snapshot(self, *buckets: str) -> list[tuple[str, str, Any]]:
        return [("bucket", b, list(self._run.state.get(b))) for b in buckets]


def _non_finite(value: Any) -> Any:
    """JSON as the app shows a value: the words a NaN or an infinity is said in, as those floats."""
    if isinstance(value, str):
        return NON_FINITE_WORDS.get(value, value)
    if isinstance(value, list):
        return [_non_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _non_finite(v) for k, v in value.items()}
    return value


def _typed(cls: type, name: str, text: str) -> Any:
    """``text`` typed for field ``name`` of state class ``cls``, validated in pydantic's strict
    mode: as JSON first, then as a plain string (which a ``str``, ``Literal``, date or enum field
    takes unquoted). Raises ``ConfigError`` naming the field, its type and the text."""
    tp = field_type(cls, name)
    info = getattr(cls, "model_fields", {}).get(name)
    if info is not None and info.metadata:  # Field(ge=0, max_length=3...): checked as well
        tp = Annotated[(tp, *info.metadata)]
    long = len(text) > FAIL_FAST_CHARS
    adapter = _adapter(tp, fail_fast=long)
    not_json = None  # why the text is no JSON
    try:
        json.loads(text)
    except ValueError as exc:
        is_json, not_json = False, exc
    except RecursionError:  # (said as Python's own "maximum recursion depth exceeded while decoding")
        raise ConfigError(f"{cls.__name__}.{name}: the text is nested too deeply to be read as JSON; "
                          f"type a value of type {_type_name(field_type(cls, name))}") from None
    else:
        is_json = True
    try:
        value = adapter.validate_json(text if is_json else json.dumps(text), strict=True)
    except ValidationError as exc:
        error = exc
    else:
        if is_json and not _holds_decimal(tp):  # read as JSON (a text field takes the text as it is)
            _as_typed(cls, name, text)
        if is_json and (dropped := next(_dropped(json.loads(text), value, ()), None)):
            # a key the class does not have (a misspelt one) was dropped by pydantic, in silence, and the
            # field it was meant for kept its default: the edit said set, and was not what was typed
            path, owner, known = dropped
            raise ConfigError(f"{cls.__name__}.{name}: {'.'.join(map(str, (name, *path)))}: {owner} takes no key "
                              f"{path[-1]!r} (it takes {', '.join(known) or 'none'}); nothing was set")
        # a JSON number is read through a float: 0.1000000000000000000001 was 0.1, in a list too; its
        # digits as a text are the Decimal's own
        if is_json and _holds_decimal(tp):
            exact = _exact_decimals(json.loads(text, parse_float=Decimal), value)
            if exact is not _SAME:
                with contextlib.suppress(ValidationError):
                    return adapter.validate_json(json.dumps(exact, default=float), strict=True)
        return value
    if is_json and ('"NaN"' in text or 'Infinity"' in text):  # a float the run said in words, as shown
        try:
            return adapter.validate_json(json.dumps(_non_finite(json.loads(text))), strict=True)
        except ValidationError:
            pass
    if is_json:  # `true`, `12` typed in a text field are text
        try:
            return adapter.validate_json(json.dumps(text), strict=True)
        except ValidationError:
            pass
    if not is_json and text.strip().lstrip("-").isdigit():  # (past Python's 4,300 digits, no JSON: said why)
        _as_typed(cls, name, text.strip())
    # its first faults, at their place, and the text's start: a list of 3,000 numbers pasted into a
    # list[str] was quoted whole with 3,000 faults, and the dialog's buttons went off screen
    faults = error.errors()
    reason = "; ".join(f"{'.'.join(map(str, e['loc'])) + ': ' if e['loc'] else ''}{e['msg']}" for e in faults[:3])
    reason += f"; and {len(faults) - 3:,} more" if len(faults) > 3 else ""
    reason += "; a text this long is checked up to its first fault" if long else ""
    # JSON as typed (`11`, `"3"`, `[1, 2]`: quoting 11 as '11' made a number read as a text); other
    # text quoted, its control characters escaped
    shown = text if is_json and len(text) <= 60 and text.isprintable() and text == text.strip() \
        else repr(text) if len(text) <= 60 else repr(text[:57]) + f"… ({len(text):,} characters)"
    tname = _type_name(field_type(cls, name))
    if not_json is not None and text.lstrip()[:1] in ("[", "{"):  # JSON meant, and mistyped: said as such (it
        # was read as a text, and refused as "Input should be a valid array")
        raise ConfigError(f"{cls.__name__}.{name} is {tname}: {shown} is not JSON ({not_json}); type a value of "
                          f"type {tname} as JSON")
    if not any(is_type_fault(str(e["type"])) for e in faults):  # (-1 for Field(ge=0) is an int all right)
        raise ConfigError(f"{cls.__name__}.{name} is {tname}: {shown} refused ({reason}); type a value it accepts")
    raise ConfigError(f"{cls.__name__}.{name} is {tname}: {shown} refused ({reason}); type a value of "
                      f"type {tname} (read as JSON and checked strictly: true is not an int, 2.0 is not one)")


def _as_typed(cls: type, name: str, text: str) -> None:
    """Refuse JSON read as another value than typed, or one a journal cannot hold (``strict_json``): a key
    twice was set as the last one, 1e400 as infinity, in silence; 4,001 nines were set, journaled as
    ``<int of about 4001 digits>``, and a fork then failed on that text."""
    try:
        strict_json(text)
    except KeyGivenTwice as exc:
        raise ConfigError(f"{cls.__name__}.{name}: the key {exc.key!r} is given twice; give each key once "
                          "(JSON keeps only the last)") from None
    except NumberRefused as exc:
        raise ConfigError(f"{cls.__name__}.{name}: {exc}") from None


def _dropped(given: Any, made: Any, at: tuple[Any, ...]) -> Any:
    """Each key of the JSON ``given`` that the value ``made`` from it has no field for (a model or a
    dataclass that ignores extra keys): (its path, the class, the class's fields). Only where the keys a
    class takes are its fields' names or plain aliases: not a root model, a model validator that reads the
    keys first (it may rename them), alias choices or paths, or a pydantic dataclass (its own config)."""
    if isinstance(given, dict) and _plain_keys(made):
        if isinstance(made, BaseModel):
            config = type(made).model_config
            if config.get("extra") in ("allow", "ignore"):  # (said so by the class: not pydantic's default)
                return
            by_name = config.get("populate_by_name") or config.get("validate_by_name")
            fields = {}  # each key it takes (a field's alias; its name too where taken) -> the field
            for field, info in type(made).model_fields.items():
                alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
                fields.update({key: field for key in (alias, field if by_name or not alias else None) if key})
        else:
            fields = {f.name: f.name for f in dataclasses.fields(made)}
        for key, inner in given.items():
            if key not in fields:
                yield (*at, key), type(made).__name__, list(fields)
                return
            yield from _dropped(inner, getattr(made, fields[key], None), (*at, key))
    elif isinstance(given, list) and isinstance(made, (list, tuple)) and len(given) == len(made):
        for i, (inner, item) in enumerate(zip(given, made)):
            yield from _dropped(inner, item, (*at, i))
    elif isinstance(given, dict) and isinstance(made, dict):
        for key, inner in given.items():
            if key in made:
                yield from _dropped(inner, made[key], (*at, key))
            elif key.lstrip("-").isdigit() and int(key) in made:  # (dict[int, Sub]: JSON's keys are text)
                yield from _dropped(inner, made[int(key)], (*at, key))


def _plain_keys(made: Any) -> bool:
    """Whether ``made`` is a model or a dataclass whose keys are its fields (see :func:`_dropped`)."""
    from pydantic import RootModel

    if isinstance(made, BaseModel):
        cls = type(made)
        before = any(d.info.mode in ("before", "wrap") for d in cls.__pydantic_decorators__.model_validators.values())
        odd = any(info.validation_alias is not None and not isinstance(info.validation_alias, str)
                  for info in cls.model_fields.values())
        return not (isinstance(made, RootModel) or before or odd)
    return dataclasses.is_dataclass(made) and not isinstance(made, type) \
        and not hasattr(type(made), "__pydantic_fields__")


# A text longer than this is checked up to its first fault: a list of 3,000,000 numbers set into a
# list[str] field held 3 GB in the run's process (a fault of pydantic's per item, and their messages;
# 20,000 characters make at most 10,000 of them, a few MB).
FAIL_FAST_CHARS = 20_000


_SAME = object()


def _exact_decimals(raw: Any, value: Any) -> Any:
    """``raw`` (the typed JSON, its numbers read as Decimals) with the numbers ``value`` holds as Decimals
    given as their text, the digits typed; ``_SAME`` when it holds none (a set's items have no place)."""
    if isinstance(value, Decimal) and isinstance(raw, (Decimal, int)) and not isinstance(raw, bool):
        return str(raw)
    if isinstance(raw, list) and isinstance(value, (list, tuple)) and len(raw) == len(value):
        pairs = list(zip(range(len(raw)), raw, value))
    elif isinstance(raw, dict) and isinstance(value, dict) and len(raw) == len(value):
        pairs = [(key, item, held) for (key, item), held in zip(raw.items(), value.values())]
    elif isinstance(raw, dict) and not isinstance(value, dict) and value is not None:  # a model, a dataclass
        names = {(info.alias or name): name for name, info in getattr(type(value), "model_fields", {}).items()}
        pairs = [(key, item, getattr(value, names.get(key, key), None)) for key, item in raw.items()]
    else:
        return _SAME
    exact = {key: _exact_decimals(item, held) for key, item, held in pairs}
    if all(new is _SAME for new in exact.values()):
        return _SAME
    if isinstance(raw, list):
        return [item if exact[i] is _SAME else exact[i] for i, item in enumerate(raw)]
    return {key: item if exact[key] is _SAME else exact[key] for key, item in raw.items()}


def _holds_decimal(tp: Any, seen: frozenset = frozenset()) -> bool:
    """Whether a value of type ``tp`` may hold a Decimal (in a list, a dict, a model's field...): only then
    is a set_field's JSON read a second time for its digits."""
    if tp is Decimal:
        return True
    if id(tp) in seen:
        return False
    seen = seen | {id(tp)}
    if any(_holds_decimal(arg, seen) for arg in typing.get_args(tp)):
        return True
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return any(_holds_decimal(info.annotation, seen) for info in tp.model_fields.values())
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        with contextlib.suppress(Exception):  # (hints that do not resolve: none looked at)
            return any(_holds_decimal(hint, seen) for hint in typing.get_type_hints(tp).values())
    return False


def _adapter(tp: Any, *, fail_fast: bool) -> TypeAdapter:
    """The validator of ``tp``; ``fail_fast``: one that stops at the first fault of a list, set, tuple
    or dict (a type of another kind has no items to stop among)."""
    if fail_fast:
        try:
            return TypeAdapter(Annotated[tp, FailFast()])
        except Exception:  # pydantic: "Unable to apply constraint 'fail_fast'" to a str, an int, a model
            pass
    return TypeAdapter(tp)


def _type_name(tp: Any) -> str:
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_])", "", str(tp))  # `date | None`, not `datetime.date | None`


def _shown_value(value: Any) -> str:
    text = json.dumps(jsonable(value), ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


class _as_user:
    """Attribute events (the state-field ones included) to the person."""

    def __enter__(self) -> None:
        self._token = current_origin.set("user")

    def __exit__(self, *exc: object) -> None:
        current_origin.reset(self._token)


def _restore(edited: str, original: str) -> str:
    return restore(edited, original, secret_values())


def _without(items: list, gone: list[int]) -> list:
    drop = set(gone)
    return [item for i, item in enumerate(items) if i not in drop]


def _numbers(indices: list[int]) -> str:
    return ", ".join(f"#{i}" for i in indices)


def _json(args: Any) -> str:
    return json.dumps(args, ensure_ascii=False, sort_keys=True)


def _quote(text: str, width: int = 40) -> str:
    """A short quote of ``text`` for an edit's note: one line, cut in the middle when long. Redacted
    before the cut: a credential's end left after it would look like no credential any more."""
    one = " ".join(redact(text, secret_values()).split())
    if len(one) > width:
        one = one[: width // 2 - 1] + "…" + one[-(width // 2 - 1):]
    return f'"{one}"'


def _change(old: str, new: str, width: int = 40) -> str:
    """``"old" → "new"``, each quoted as :func:`_quote` does; two long texts around where they differ (a
    word changed in the middle of a long message was said as two identical quotes of its start and end)."""
    a, b = (" ".join(redact(t, secret_values()).split()) for t in (old, new))
    if a == b:  # (two quotes alike said nothing of the edit)
        return (f"{_quote(old, width)} → {_quote(new, width)} (changed in what a quote does not show: its spacing, "
                "or a credential)")
    if len(a) <= width and len(b) <= width:
        return f"{_quote(old, width)} → {_quote(new, width)}"
    shorter = min(len(a), len(b))
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), shorter)  # the start both have
    tail = next((i for i, (x, y) in enumerate(zip(reversed(a), reversed(b)))  # the end both have, after it
                 if x != y or i >= shorter - same), shorter - same)
    start = max(0, same - 12)

    def around(t: str) -> str:
        end = min(len(t), len(t) - tail + 12)
        part = t[start:end]
        if len(part) > width:
            part = part[: width // 2 - 1] + "…" + part[-(width // 2 - 1):]
        return f'"{"…" * (start > 0)}{part}{"…" * (end < len(t))}"'

    return f"{around(a)} → {around(b)}"


def _not_blank(text: str, bucket: str, instead: str) -> None:
    """A blank memory item or task says nothing to the model (a blank line in its note): refused."""
    if not text.strip():
        raise ConfigError(f"a {bucket} item cannot be blank; {instead}")


def _at(items: list, index: int, bucket: str) -> Any:
    if not 0 <= index < len(items):
        raise ConfigError(f"{bucket} has no item {index} (it holds {len(items)})")
    return items[index]
