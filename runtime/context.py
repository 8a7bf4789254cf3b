"""``ctx``: the run's context, carried through every step.

Your own fields live here (``ctx.tentativas = ctx.get("tentativas", 0) + 1``)
next to the ones the runtime writes: ``turn``, ``output``, ``loop`` and
``budget``. Every set emits a ``ctx.set`` event. The conversation the model
sees is ``ctx.state``; ``ctx.data`` is the run's read-only data
(``app.run(data=...)``), which the model never sees.
"""

from __future__ import annotations

import contextvars
import marshal
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields, is_dataclass
from itertools import compress
from operator import not_
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_serializer
from pydantic_core import to_json, to_jsonable_python

from flowtui.runtime.bus import current_origin, tool_notes
from flowtui.runtime.conversation import ConversationState
from flowtui.runtime.errors import ADDRESS, ConfigError
from flowtui.runtime.events import CtxSet

_MISSING = object()
_RESERVED = frozenset({"state", "get", "run_id", "fields", "data", "stop", "on_dispose"})
# Fields only the runtime writes: the app and until_answered & co. rely on their shape.
_RUNTIME_WRITES = {"turn": "the summary of the last turn", "loop": "the most recent loop's progress",
                   "budget": "the run's usage against its budget"}
_RUNTIME_SETS = {"turn": "after each turn", "loop": "as a loop starts and after each of its iterations",
                 "budget": "as a run with a budget starts, and after each model call or tool"}


# (ctx, its loop as this task last set it, the loop that last ended in it and the loops around that one): the
# branches of a parallel step share ctx, and a loop's own until and hooks read the loop of their branch, not
# the loop of whichever branch last wrote ctx.loop (an until that awaited read its sibling's iterations, and
# ended its loop on them). Set, never reset: the most recent loop is the one that ended, once it has.
branch_loop: contextvars.ContextVar[tuple[Any, Any, Any] | None] = contextvars.ContextVar("flowtui_loop",
                                                                                         default=None)


def own_loops(ctx: Any) -> tuple[Any, Any, Any] | None:
    """``branch_loop`` when this task set it for ``ctx`` (a child workflow's run has a ctx of its own)."""
    mine = branch_loop.get()
    return mine if mine is not None and mine[0] is ctx else None


def _runtime_writes(name: str) -> str:
    return (f"ctx.{name} is written by the runtime ({_RUNTIME_WRITES[name]}): read it, and keep a value "
            f"of yours under another name (ctx.my_{name} = ...)")


def _reserved(name: str) -> str:
    return (f"ctx.{name} is reserved; pick another field name"
            + (" (the conversation is changed with ctx.state.append/set)" if name == "state" else "")
            + (" (ctx.data is the run's read-only data, given as app.run(data=...))" if name == "data" else ""))


# Methods a mapping or a store has and ctx has not: called on ctx, they are no field to set first.
_NO_METHOD = frozenset({"set", "put", "update", "setdefault", "append", "set_field", "setattr"})


class TurnInfo(BaseModel):
    """Summary of the last agent turn (``ctx.turn``)."""

    model_config = ConfigDict(frozen=True)

    agent: str
    called_tool: bool = False
    tool_name: str | None = None
    tool_error: bool = False
    tool_call_source: Literal["native", "rescued"] | None = None
    response: str = ""


class LoopInfo(BaseModel):
    """The most recent loop (``ctx.loop``); ``stopped_by`` is None while it runs.

    ``stopped_by``: ``until``, ``exhausted`` (``max_iterations``), ``fails``
    (``max_fails``), ``budget``, ``stop`` (``ctx.stop()``) or ``stopped`` (the
    stop command). ``max_iterations`` is ``math.inf`` for a loop without a
    ceiling (``None`` in events: JSON has no infinity).
    """

    model_config = ConfigDict(frozen=True)

    iterations: int = 0
    exhausted: bool = False
    max_iterations: int | float | None = 0
    stopped_by: Literal["until", "exhausted", "fails", "budget", "stop", "stopped"] | None = None

    @field_serializer("max_iterations")
    def _no_ceiling_as_none(self, value: int | float | None) -> int | None:
        return None if value is None or value == math.inf else int(value)


def check_data_arg(data: Any) -> dict[str, Any]:
    """``run(data=...)`` as a plain dict: a mapping with ``str`` keys, or ``None``."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"run(data=...) must be a mapping such as {{'conta_id': 'acme'}}, "
                          f"got {type(data).__name__}")
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise ConfigError(f"run(data=...): keys must be str, got {bad[0]!r}")
    return dict(data)


def jsonable(value: Any, fallback: Callable[[Any], Any] | None = None) -> Any:
    """A JSON-safe copy of ``value`` for an event (unknown objects become their repr, or ``fallback``'s).

    Showing a value must never change what the flow does: a one-shot iterator (a generator) is
    described, not consumed, and a value that cannot be copied (a circular list, bytes that are
    not text, a ``__repr__`` that raises, nesting past the serializer's depth) is described
    instead of failing the flow's assignment."""
    if isinstance(value, Iterator):
        return _described(value, _ITERATOR)
    try:
        if value.__class__ not in _PLAIN and _holds_iterator(value):  # (the serializer would have run it to its
            value = _iterators_described(value)  # end: the flow found its generator empty, in a dict or a list too)
        out = to_jsonable_python(value, fallback=fallback or stable_repr)
    except Exception as exc:  # noqa: BLE001 (any failure of showing it is the debugger's to absorb)
        return _described(value, f"not shown: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    if out.__class__ is float:
        return out if math.isfinite(out) else _NON_FINITE[str(out)]
    if out.__class__ is dict and isinstance(value, dict) and len(out) < len(value):  # {1: "x", "1": "y"}
        return _described(value, "not shown: some of its keys are one key as JSON text, and a value would be lost")
    if isinstance(value, (set, frozenset)):  # in one order: a set's is its strings' hash order, which each
        _sort(out)  # process draws anew (a re-execution diverged, and diff saw changes, at random)
    if isinstance(out, (list, dict)) and _may_hold_non_finite(out):
        return _finite(out)
    return out


_ITERATOR = "an iterator, shown without being consumed"
_PLAIN = frozenset({str, int, float, bool, type(None), bytes})
_SEQUENCES = (list, tuple, set, frozenset)


def _holds_iterator(value: Any) -> bool:
    """Whether ``value`` holds a one-shot iterator anywhere the serializer looks (in a list, a dict's
    values, a model's or a dataclass's fields), which serializing would consume."""
    try:  # only Python's own types (dicts, lists, texts, numbers...): marshal, in one pass of C, takes nothing else,
        marshal.dumps(value)  # no iterator among them (a table of 100,000 rows: 17 ms, where the walk took 220)
        return False
    except Exception:  # noqa: BLE001 (an object of another class somewhere in it: walked)
        pass
    todo, seen = [value], set()
    while todo:
        item = todo.pop()
        cls = item.__class__
        if cls is dict:
            inside = item.values()
        elif cls is list or cls is tuple:
            inside = item
        elif isinstance(item, Iterator):
            return True
        elif (inside := _inside(item)) is None:
            continue
        if id(item) in seen:  # (a cycle: the serializer refuses it)
            continue
        seen.add(id(item))
        # its items that are not plain values, picked in one pass of C (a table of rows: no loop of Python per cell)
        todo.extend(compress(inside, map(not_, map(_PLAIN.__contains__, map(type, inside)))))
    return False


def _inside(item: Any) -> Any:
    """What the serializer walks into in ``item`` (its items, values or fields); None for what it does not."""
    if isinstance(item, dict):
        return item.values()
    if isinstance(item, _SEQUENCES):
        return item
    if isinstance(item, BaseModel):
        return item.__dict__.values()
    if is_dataclass(item) and not isinstance(item, type):  # (a field left unset, init=False: not there)
        return [value for f in fields(item) if (value := getattr(item, f.name, _UNSET)) is not _UNSET]
    return None


_UNSET = object()


def _iterators_described(value: Any, depth: int = 0) -> Any:
    """``value`` with each iterator in it described, not consumed (containers copied; a model as its fields)."""
    if isinstance(value, Iterator):
        return _described(value, _ITERATOR)
    if depth > 200 or value.__class__ in _PLAIN:  # (deeper: left to the serializer, which describes it whole)
        return value
    if isinstance(value, dict):
        return {k: _iterators_described(v, depth + 1) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return {k: _iterators_described(v, depth + 1) for k, v in value.__dict__.items()}
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _iterators_described(getattr(value, f.name), depth + 1) for f in fields(value)
                if hasattr(value, f.name)}
    if isinstance(value, _SEQUENCES):
        return [_iterators_described(v, depth + 1) for v in value]
    return value


def _sort(items: list[Any]) -> None:
    """A set's items (as JSON) in one order: of one kind, as Python orders them (a set of texts at the
    speed of a plain sort), else by :func:`_json_order`."""
    kinds = {item.__class__ for item in items}
    if kinds == {str} or (kinds and kinds <= {int, float} and all(item == item for item in items)):
        items.sort()
    else:
        items.sort(key=_json_order)


def _json_order(item: Any) -> tuple[int, Any]:
    """A set's items in one order, whatever their types: strings, then numbers, then the others by their JSON."""
    if item.__class__ is str:
        return 0, item
    if item.__class__ in (int, float) and item == item:  # (a NaN is no number to sort by)
        return 1, item
    return 2, to_json(item).decode()


def _reads_back(value: Any, shown: Any) -> bool:
    """Whether ``shown``, a value's JSON form, is that value again (a list: compared deep, item by item of
    the same class: an enum of ints or strings, carried as itself and written as its value, equals its
    value, in a list too)."""
    if shown is value:
        return value.__class__ in _SCALARS or value.__class__ is float
    try:
        return _same(shown, value)
    except Exception:  # noqa: BLE001 (an array's == is an array, whose truth raises; a list nested too deep)
        return False


def _same(shown: Any, value: Any) -> bool:
    if shown.__class__ is not value.__class__:
        return False
    if value.__class__ is list:
        return len(shown) == len(value) and all(map(_same, shown, value))
    if value.__class__ is dict:
        return len(shown) == len(value) and all(
            _same(k, j) and _same(a, b) for (k, a), (j, b) in zip(shown.items(), value.items()))
    return bool(shown == value)


def output_text(value: Any) -> str | None:
    """``ctx.output`` as a run's output is said (``run.end``, ``flowtui run``'s stdout, a child's result
    to its parent's tool): text as it is, anything else as JSON (an object with none, as its description).
    A dict left in it made a ``run.end`` no reader took: the run hung, its end never heard."""
    if value is None or isinstance(value, str):
        return value
    shown = jsonable(value)
    return shown if isinstance(shown, str) else to_json(shown).decode()


# A NaN or an infinity is said as "NaN", "Infinity", "-Infinity": JSON has no word for them, and the
# null they were written as showed a score gone NaN as no score at all (and, NaN being unequal to
# itself, as a change of the field at every check).
NON_FINITE_WORDS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_NON_FINITE = {str(number): word for word, number in NON_FINITE_WORDS.items()}  # "nan" -> "NaN": str(float) -> word


def _may_hold_non_finite(out: list | dict) -> bool:
    """Whether a JSON-able structure may hold a NaN or an infinity (one pass of a compiled encoder;
    a text that says NaN or Infinity says maybe)."""
    try:
        raw = to_json(out, inf_nan_mode="constants")
    except Exception:  # noqa: BLE001 (a lone surrogate: looked at value by value)
        return True
    return b"NaN" in raw or b"Infinity" in raw


def _finite(out: Any) -> Any:
    if out.__class__ is float:
        return out if math.isfinite(out) else _NON_FINITE[str(out)]
    if isinstance(out, list):
        return [_finite(v) for v in out]
    if isinstance(out, dict):
        return {k: _finite(v) for k, v in out.items()}
    return out


# the names flow files were imported under (runtime.loader), each with its file's own name
FLOW_MODULES: dict[str, str] = {}


def stable_repr(value: Any) -> str:
    """``repr(value)`` without the memory address Python's default repr names (``<Foo object at
    0x7f…>`` is ``<Foo object>``): it differs from run to run, so a re-execution or a diff of two
    runs would see a change where there is none. A class of the flow file is named by the file
    (``revisao.Foo``), not the module name it was imported under (``flowtui_flow_revisao_1.Foo``)."""
    text = ADDRESS.sub("", repr(value))
    for module, stem in FLOW_MODULES.items():
        if module in text:
            text = text.replace(f"{module}.", f"{stem}.")
    return text


def _described(value: Any, why: str) -> str:
    try:
        text = stable_repr(value)
    except Exception:  # noqa: BLE001
        text = f"<{type(value).__name__}>"
    return f"{text[:200]}{'…' if len(text) > 200 else ''} ({why})"


# What flowtui writes in place of a value it cannot show: _described's "b'\xff' (not shown: ...)",
# "... (an iterator, ...)" and a state value's "<lock object> (no JSON form)", the encoder's
# "<int of about 5000 digits>" (runtime.encoding). A snapshot holding one refuses it as a value.
DESCRIBED = re.compile(r" \(not shown: \w+|\(an iterator, shown without being consumed\)$| \(no JSON form\)$"
                       r"|^<int of about \d+ digits>$")


def no_json_form(value: Any) -> str:
    """A workflow-state value that has no JSON form (a lock, a socket), as its events carry it: its repr, marked
    so that a snapshot leaves it out (written as its repr, it came back as that text, unsaid)."""
    return _described(value, "no JSON form")


def json_text(value: Any) -> str:
    """``value`` as the model reads it where a text is due (the first user turn, a memory item): a text as
    it is, else JSON as an event carries it (a set as a list, bytes as their text), not Python's own text
    (``{'x': 1}``, ``None``, ``{1, 2}``); a value JSON cannot carry at all (bytes that are no text) as
    Python writes it."""
    import json

    if isinstance(value, str):
        return value
    shown = jsonable(value)
    if isinstance(shown, str):
        return shown if not DESCRIBED.search(shown) else stable_repr(value)
    return json.dumps(shown, ensure_ascii=False)


class RunData(Mapping):
    """``ctx.data``: the run's own data, read-only; changing it says what to do instead."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any]) -> None:
        self._items = dict(items)

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return repr(self._items)

    def _refuse(self, *_: Any) -> None:
        raise TypeError("ctx.data is the run's read-only data (given as app.run(data=...) or flowtui run --data); "
                        "keep a value of yours on ctx (ctx.my_value = ...) or in the workflow state")

    __setitem__ = __delitem__ = _refuse


class AgentContext:
    """The type of ``ctx``. Reading an unset field raises ``AttributeError``."""

    def __init__(self, state: ConversationState, emit, *, run_id: str, lock: Any = None,
                 data: Mapping[str, Any] | None = None) -> None:
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "_lock", lock if lock is not None else threading.RLock())
        object.__setattr__(self, "run_id", run_id)
        object.__setattr__(self, "_fields", {})
        object.__setattr__(self, "_emit", emit)
        # The run's own data (app.run(data=...)): for your code, never for the model.
        object.__setattr__(self, "data", RunData(data or {}))
        object.__setattr__(self, "_stop_by", None)  # who called ctx.stop(), once someone did
        # (ctx.loop as the most recent loop to end left it, the ids of the loops around that one): what
        # was_exhausted reads in an outer loop's until, which runs once the outer loop set ctx.loop
        object.__setattr__(self, "_ended_loop", None)
        object.__setattr__(self, "_disposers", [])
        object.__setattr__(self, "_state_fields", frozenset())  # the workflow state's (set by the run)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: i.e. for fields.
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "loop" and (found := self.get("loop", _MISSING)) is not _MISSING:
            return found
        try:
            return self._fields[name]
        except KeyError:
            if name in _RUNTIME_WRITES:  # (not to be set: say when the runtime does)
                raise AttributeError(f"ctx has no field {name!r} yet: the runtime sets it {_RUNTIME_SETS[name]}; "
                                     f"read it with ctx.get({name!r}, default)") from None
            if name in _NO_METHOD:  # (ctx.set("x", v) was told to set a field named set)
                raise AttributeError(
                    f"ctx has no {name}(): assign a field instead, ctx.x = value (read it back with ctx.x or "
                    f"ctx.get('x', default)); the conversation changes with ctx.state.append/set") from None
            if name in self._state_fields:  # (until=lambda s: s.total: one parameter gets ctx, not the state)
                raise AttributeError(
                    f"ctx has no field {name!r}, the workflow state has: read it there, from the state given "
                    f"second to until (until=lambda ctx, s: s.{name} ...; a one-parameter until gets ctx) or as "
                    f"a hook's or tool's s: State() parameter") from None
            raise AttributeError(
                f"ctx has no field {name!r}; set it first (ctx.{name} = ...) "
                f"or read it with ctx.get({name!r}, default)"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _RUNTIME_WRITES:
            raise AttributeError(_runtime_writes(name))
        if name in _RESERVED or name.startswith("_"):
            raise AttributeError(_reserved(name))
        self._set(name, value, origin=None)

    def __delattr__(self, name: str) -> None:
        if name in _RUNTIME_WRITES:
            raise AttributeError(_runtime_writes(name))
        if name in _RESERVED or name.startswith("_"):  # (del ctx.data said "ctx has no field 'data'")
            raise AttributeError(_reserved(name))
        if name not in self._fields:
            raise AttributeError(f"ctx has no field {name!r}")
        with self._lock:
            del self._fields[name]
            self._emit(CtxSet, name=name, value=None)

    def _set(self, name: str, value: Any, *, origin: str | None, shown: dict[str, Any] | None = None) -> None:
        """Set field ``name``; ``shown`` is the value as the event carries it, when the runtime
        made it along with the value (``ctx.turn``, ``ctx.loop``: no dump needed)."""
        fields = {"name": name}
        if shown is not None:
            fields["value"] = shown
        elif value.__class__ in _SCALARS:
            fields["value"] = value
        else:
            fields["value"] = shown = _event_value(value)
            if origin is None and not _reads_back(value, shown):  # (the flow's own code set it)
                fields["typed"] = type(value).__name__
        if origin:
            fields["origin"] = origin
        with self._lock:  # the change and its event together
            self._fields[name] = value
            self._emit(CtxSet, **fields)

    def _starts_with(self, name: str, value: Any) -> None:
        """The value a runtime field holds as the run starts, which ``run.start`` says (no ``ctx.set``)."""
        self._fields[name] = value

    def stop(self) -> None:
        """End the run gracefully after the current unit of work, with the output so far.

        Call it from a tool, a hook or ``until``. A tool's turn still finishes
        (its other tool calls are answered as not run, ``after_response`` runs);
        then the run ends with status ``stopped``, the enclosing loop with
        ``ctx.loop.stopped_by == "stop"``.
        """
        if self._stop_by is None:
            object.__setattr__(self, "_stop_by", current_origin.get())

    def on_dispose(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """Run ``fn()`` (sync or async) when the run ends, whatever the outcome.

        Cleanups run last registered first; one that raises is reported (a
        ``dispose.error`` event) and the others still run. Returns ``fn``, so
        it also works as a decorator.
        """
        if not callable(fn):
            raise TypeError(f"ctx.on_dispose(fn): fn must be callable, got {fn!r}")
        if self._disposers is None:  # one that added another each time ran until the process was killed
            raise RuntimeError("ctx.on_dispose: the run's cleanups are running; a cleanup cannot add another "
                               "(do that work in the cleanup itself)")
        self._disposers.append(fn)
        notes = tool_notes.get()
        if notes is not None and notes.ctx is self:  # (a child workflow's ctx: its own run's cleanups)
            notes.cleanups += 1
        return fn

    def get(self, name: str, default: Any = None) -> Any:
        """The field ``name``, or ``default`` when it was never set (``loop``: in a branch of a parallel
        step, the most recent loop of that branch)."""
        if name == "loop" and (mine := own_loops(self)) is not None:
            return mine[1]
        return self._fields.get(name, default)

    @property
    def fields(self) -> dict[str, Any]:
        """A copy of every field set so far (yours and the runtime's; ``loop``: as :meth:`get` reads it)."""
        mine = own_loops(self)
        return dict(self._fields) if mine is None else {**self._fields, "loop": mine[1]}

    def __repr__(self) -> str:
        return f"<ctx run={self.run_id} fields={sorted(self._fields)}>"


_SCALARS = frozenset({str, int, bool, type(None)})  # carried by an event as they are (a float: if finite)


def _event_value(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return jsonable(value)

