"""Watching the workflow state object for changes.

One state instance is made per run from the class the workflow declares (a
pydantic model, a dataclass or a plain class). Changes are found two ways:

- attribute assignment (``s.aprovado = True``) is seen as it happens: the run
  gets an instance of a cached subclass whose ``__setattr__`` reports;
- in-place changes of containers (``s.problemas.append(...)``) are found by
  comparing each field with a JSON snapshot at every runtime boundary (after
  every hook, tool, ``until`` and step): :meth:`StateObserver.check`. A pydantic
  class validates a field changed so, and a refused change is put back.

Both emit ``workflow_state.change`` with the field path and old/new values.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import json
import threading
import typing
from collections import deque
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from flowtui.runtime.bus import current_origin
from flowtui.runtime.context import jsonable as _jsonable, no_json_form
from flowtui.runtime.errors import ConfigError
from flowtui.runtime.events import WorkflowStateChange

# Values whose JSON cannot change while a field holds them (not float: NaN is not equal to itself).
_IMMUTABLE = frozenset({bool, int, str})
_NOTHING = object()

# id(state instance) -> its observer, while its run lives.
_OBSERVERS: dict[int, "StateObserver"] = {}
# Per thread: the state instances whose class's validators are running (see assign_validated).
_validating = threading.local()
_SUBCLASSES: dict[type, type] = {}
_LOCK = threading.Lock()


def _observed_subclass(cls: type) -> type:
    with _LOCK:
        sub = _SUBCLASSES.get(cls)
        if sub is not None:
            return sub

        typed = _typed_fields(cls)
        # the fields an assignment may name: a dataclass's, and a pydantic model's (pydantic refuses another
        # with a ValueError of its own, which named no field meant); None: any (a plain class, extra="allow")
        declared, refused = None, AttributeError
        if dataclasses.is_dataclass(cls):
            declared = {f.name for f in dataclasses.fields(cls)}
        elif isinstance(cls, type) and issubclass(cls, BaseModel) and cls.model_config.get("extra") != "allow":
            declared, refused = set(cls.model_fields), ValueError

        def __setattr__(self, name: str, value: Any) -> None:
            obs = _OBSERVERS.get(id(self))
            if obs is None or name.startswith("_"):
                super(sub, self).__setattr__(name, value)
                return
            if declared is not None and name not in declared:
                if not hasattr(getattr(cls, name, None), "__set__"):
                    raise refused(_not_a_field(cls, name, declared))
                # a property's setter: set as usual, and the fields it sets are the changes (it is no field)
                super(sub, self).__setattr__(name, value)
                return
            exact = typed.get(name, _NOTHING)
            if exact is _NOTHING or value.__class__ is exact or id(self) in getattr(_validating, "ids", ()):
                # (an assignment by the class's own validator, while one runs: set as pydantic sets it
                # without validate_assignment; validating it again ran that validator again, for ever)
                super(sub, self).__setattr__(name, value)
            else:  # checked against the field's type as it is set, not when a snapshot is read back
                assign_validated(self, cls, name, value)
            obs.assigned(name, getattr(self, name, value))

        sub = type(cls.__name__, (cls,), {
            "__setattr__": __setattr__, "__module__": cls.__module__,
            "__qualname__": cls.__qualname__, "__doc__": cls.__doc__,
        })
        _SUBCLASSES[cls] = sub
        return sub


def _not_a_field(cls: type, name: str, declared: set[str]) -> str:
    """A dataclass or pydantic state set an attribute it does not declare: a misspelled field, most
    likely (its snapshot could not be read back, nor its change be told from a new field)."""
    import difflib

    close = difflib.get_close_matches(name, sorted(declared), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (f"{cls.__name__} has no field {name!r}; {hint}its fields are {', '.join(sorted(declared)) or 'none'} "
            f"(declare it in the class; a value that is not the workflow's state: start its name with _)")


def _typed_fields(cls: type) -> dict[str, Any]:
    """The fields of a pydantic state class whose assignment flowtui checks (pydantic does not, unless
    the class says ``validate_assignment``): field -> its type when that is a plain scalar type (a
    value of exactly that type needs no check), else None (validated by the class's own validator)."""
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls.model_config.get("validate_assignment"):
        return {}
    scalars = (bool, int, float, str)
    found = cls.__pydantic_decorators__
    if found.model_validators or found.root_validators:  # they see every assignment
        return dict.fromkeys(cls.model_fields)
    checked = {name for d in [*found.field_validators.values(), *found.validators.values()] for name in d.info.fields}
    # a field with a validator of its own, or constraints (Field(ge=0), Annotated[int, AfterValidator(f)]),
    # is validated even when the value has its type: 5 is an int its validator may refuse
    return {name: info.annotation if info.annotation in scalars and not info.metadata and name not in checked
            and "*" not in checked else None
            for name, info in cls.model_fields.items()}


# Pydantic's error types that say a value is not of the field's type (others: a constraint, a validator)
_TYPE_ERRORS = frozenset({"is_instance_of", "is_subclass_of", "literal_error", "enum", "union_tag_invalid",
                          "missing", "none_required", "arguments_type", "callable_type", "json_invalid"})


def is_type_fault(kind: str) -> bool:
    """Pydantic's error ``kind`` says the value is not of the field's type (not that a constraint or a
    validator refused a value of it)."""
    return kind.endswith(("_type", "_parsing")) or kind in _TYPE_ERRORS


def assign_validated(obj: Any, cls: type, name: str, value: Any, *, found: str | None = None) -> None:
    """Set field ``name`` of ``obj`` to ``value`` as ``validate_assignment`` would (an int field set to
    "3" holds 3); a value its type refuses raises, naming the field, its type and the value (``found``:
    when a change made in place was found, for a field checked as if assigned its own value)."""
    before = obj.__dict__.get(name, _NOTHING)
    ids = _validating.__dict__.setdefault("ids", set())
    outer = id(obj) not in ids
    ids.add(id(obj))
    try:
        cls.__pydantic_validator__.validate_assignment(obj, name, value)
    except ValidationError as exc:
        if before is not _NOTHING:  # a model validator that refused it ran after the value was set
            obj.__dict__[name] = before
        error = exc.errors()[0]
        why = error.get("msg", "refused")
        if not is_type_fault(str(error.get("type", ""))):  # a validator or a constraint said no
            how = "refused" if found is None else f"changed in place ({found}) to"
            raise ValueError(f"state field {cls.__name__}.{name} {how} {value!r:.80}: "
                             f"{why.removeprefix('Value error, ').removeprefix('Assertion failed, ')}") from None
        shown = _type_name(cls.model_fields[name].annotation)
        where = "" if found is None else f" (changed in place, {found})"
        raise TypeError(f"state field {cls.__name__}.{name}{where} is declared {shown}, and {value!r:.80} is not one "
                        f"({why}); {'assign' if found is None else 'keep'} a value of that type, or change the "
                        "field's type") from None
    except Exception as exc:  # a validator raising something else (TypeError comparing values it did not expect)
        if found is None:
            raise  # from the assignment in the user's code: its traceback says where
        if before is not _NOTHING:
            obj.__dict__[name] = before
        raise ValueError(f"state field {cls.__name__}.{name} changed in place ({found}) to {value!r:.80}: "
                         f"its validator raised {type(exc).__name__}: {exc}") from None
    finally:
        if outer:
            ids.discard(id(obj))


def _type_name(annotation: Any) -> str:
    return annotation.__name__ if isinstance(annotation, type) else str(annotation).replace("typing.", "")


def make_state(cls: type) -> Any:
    """A fresh, observable instance of ``cls``; no mutable default is shared."""
    sub = _observed_subclass(cls)
    try:
        obj = sub()
    except ValidationError as exc:  # a field without a default, or a default its type refuses
        faults = "; ".join(f"{'.'.join(map(str, e['loc'])) or cls.__name__}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"state class {cls.__name__} must be constructible with no arguments, and is not "
                          f"({faults}); give every field a default of its type") from None
    except Exception as exc:
        raise ConfigError(
            f"state class {cls.__name__} must be constructible with no arguments "
            f"(give every field a default): {type(exc).__name__}: {exc}"
        ) from None
    if isinstance(obj, BaseModel) and cls not in _DEFAULTS_CHECKED:
        _check_defaults(cls, obj)
    if not (isinstance(obj, BaseModel) or dataclasses.is_dataclass(obj)):
        # A plain class's `problemas = []` lives on the class: give this run its own copy.
        for name in _class_attrs(cls):
            if name not in vars(obj):
                value = getattr(cls, name)
                if isinstance(value, (list, dict, set, bytearray)) or hasattr(value, "__dict__"):
                    object.__setattr__(obj, name, copy.deepcopy(value))
    return obj


_DEFAULTS_CHECKED: set[type] = set()


def _check_defaults(cls: type, obj: BaseModel) -> None:
    """Pydantic does not validate a default: ``rodadas: int = Field(-1, ge=0)`` made a state whose run
    wrote a snapshot its class then refused, and ``= "many"`` failed in a hook that never named it."""
    try:
        cls.__pydantic_validator__.validate_python({name: getattr(obj, name) for name in cls.model_fields})
    except ValidationError as exc:
        faults = "; ".join(f"{'.'.join(map(str, e['loc'])) or cls.__name__}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"state class {cls.__name__}: a default its own fields refuse ({faults}); give every "
                          "field a default of its type") from None
    _DEFAULTS_CHECKED.add(cls)


def _class_attrs(cls: type) -> list[str]:
    names: list[str] = []
    for klass in reversed(cls.__mro__[:-1]):
        for name in list(getattr(klass, "__annotations__", {})) + list(vars(klass)):
            if name.startswith("_") or name in names:
                continue
            raw = inspect.getattr_static(klass, name, None)
            if isinstance(raw, (staticmethod, classmethod, property)) or inspect.isfunction(raw):
                continue
            if name in vars(klass) or name in getattr(klass, "__annotations__", {}):
                names.append(name)
    return names


def state_fields(obj: Any) -> list[str]:
    """The field names of a state instance, in declaration order."""
    if isinstance(obj, BaseModel):
        return list(type(obj).model_fields)
    if dataclasses.is_dataclass(obj):
        return [f.name for f in dataclasses.fields(obj)]
    names = [n for n in _class_attrs(type(obj)) if hasattr(obj, n)]
    names += [n for n in vars(obj) if not n.startswith("_") and n not in names]
    return names


def field_type(cls: type, name: str) -> Any:
    """The declared type of field ``name`` of state class ``cls`` (Any when undeclared)."""
    if issubclass(cls, BaseModel):
        info = cls.model_fields.get(name)
        return info.annotation if info else Any
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        hints = {}
    if name in hints:
        return hints[name]
    default = getattr(cls, name, None)
    return type(default) if default is not None else Any


def coerce(cls: type, name: str, text: str) -> Any:
    """Parse ``text`` typed by a person into a value for field ``name``.

    JSON is tried first (``[1, 2]``, ``true``, ``"x"``), then the raw text, each
    validated against the field's type. Raises ``ValueError`` with the reason.
    """
    tp = field_type(cls, name)
    adapter = TypeAdapter(tp)
    try:
        return adapter.validate_json(text)
    except ValidationError:
        pass
    try:
        return adapter.validate_python(text)
    except ValidationError as exc:
        reason = "; ".join(e["msg"] for e in exc.errors())
        tname = getattr(tp, "__name__", str(tp))
        raise ValueError(f"{cls.__name__}.{name} is {tname}: {text!r} refused ({reason})") from None


def jsonable(value: Any) -> Any:
    """A state field's value as its events carry it: one with no JSON form marked as such (see
    :func:`~flowtui.runtime.context.no_json_form`)."""
    return _jsonable(value, no_json_form)


def set_noted(obj: Any, observer: "StateObserver | None", name: str, value: Any, note: str | None) -> None:
    """``setattr(obj, name, value)`` on a run's workflow state, its change said with ``note``."""
    if observer is None or note is None:
        setattr(obj, name, value)
        return
    observer.note = note
    try:
        setattr(obj, name, value)
        with contextlib.suppress(TypeError, ValueError):
            observer.check()  # (a state class that takes assignments its own way: reported now, with the note)
    finally:
        observer.note = None


class StateObserver:
    """Reports changes of one run's state instance as events."""

    def __init__(self, obj: Any, emit, *, lock: Any = None) -> None:
        self.obj = obj
        self._emit = emit
        self.note: str | None = None  # said on the changes reported while it is set (a person's undo)
        self._lock = lock if lock is not None else threading.RLock()
        self.fields = state_fields(obj)
        self._snap = {f: jsonable(getattr(obj, f, None)) for f in self.fields}
        # Fields whose snapshot was taken of an immutable value (an int, a str...): while the field
        # still holds that very object its JSON is the snapshot, so check() need not make it again.
        self._kept: dict[str, Any] = {}
        for f in self.fields:
            self._keep(f, getattr(obj, f, None))
        _OBSERVERS[id(obj)] = self

    def snapshot(self) -> dict[str, Any]:
        return dict(self._snap)

    def _keep(self, name: str, value: Any) -> None:
        if value is None or type(value) in _IMMUTABLE:
            self._kept[name] = value
        else:
            self._kept.pop(name, None)

    def assigned(self, name: str, value: Any) -> None:
        new = value if value is None or type(value) in _IMMUTABLE else jsonable(value)  # those are JSON
        with self._lock:
            if name not in self._snap:
                self.fields.append(name)
            elif new == self._snap[name]:
                return
            old = self._snap.get(name)
            self._snap[name] = new
            self._keep(name, value)
            if self.note is None:
                self._emit(WorkflowStateChange, path=name, old=old, new=new)
            else:
                self._emit(WorkflowStateChange, path=name, old=old, new=new, note=self.note)

    def check(self) -> None:
        """Compare every field with the snapshot; emit one event per changed field."""
        obj, snap, kept = self.obj, self._snap, self._kept
        for name in self.fields:
            if getattr(obj, name, None) is not kept.get(name, _NOTHING):
                break
        else:  # every field holds the very immutable value its snapshot was made of: nothing to compare
            return
        first_refusal = None
        with self._lock:
            for name in self.fields:
                value = getattr(obj, name, None)
                if value is kept.get(name, _NOTHING):
                    continue
                new = jsonable(value)
                old = snap[name]
                if new == old:
                    self._keep(name, value)
                    continue
                refused, put_back = self._refusal(name, value, old)
                first_refusal = first_refusal or refused
                if put_back:
                    continue  # as it was: nothing to report
                if refused is None:  # as the class made it: "3" appended to a list[int] is 3
                    value = obj.__dict__.get(name, value)
                    new = jsonable(value)
                    if new == old:  # (a validator that made it what it was)
                        self._keep(name, value)
                        continue
                self._keep(name, value)
                snap[name] = new
                if self.note is None:
                    self._emit(WorkflowStateChange, path=name, old=old, new=new)
                else:
                    self._emit(WorkflowStateChange, path=name, old=old, new=new, note=self.note)
        if first_refusal is not None:  # the other fields' changes are reported all the same
            raise first_refusal

    def _refusal(self, name: str, value: Any, old: Any) -> tuple[Exception | None, bool]:
        """(the error a pydantic state class gives for field ``name`` changed in place to ``value``, and
        whether the field is put back), as assigning the field its own value again would check it
        (``s.tags.append("BAD")`` against a validator, ``s.nums.append("x")`` to a ``list[int]``): the
        class's validators run on the run's state (a model validator deriving another field updates
        it), and the field keeps the very object it holds (code holding it goes on changing the
        state's; with the contents the class made of it when it converted any, else with the very
        objects inside it too). On a refusal the field is put back to ``old``, its snapshot, when the
        class takes that: in place, for a list, deque, dict or set. (None, False) when the class takes
        the value. A model held in a field is taken as it is, as pydantic takes one assigned
        (``s.sub.x = -1`` is not checked against ``Sub``'s constraints); a frozen class or field is
        not checked (it takes no assignment)."""
        obj = self.obj
        cls = type(obj)
        if not isinstance(obj, BaseModel) or cls.model_config.get("frozen"):
            return None, False
        info = cls.model_fields.get(name)
        if info is None or info.frozen:
            return None, False
        found = _found_after(current_origin.get())
        try:
            assign_validated(obj, cls, name, value, found=found)
        except (TypeError, ValueError) as exc:
            refused: Exception = exc
        else:  # taken: in the very object it holds, with what the class converted ("3" in a list[int] is 3)
            made = obj.__dict__.get(name)
            try:
                same = made is value or made == value
            except Exception:  # (an __eq__ of the user's own that raises)
                same = False
            if same:  # nothing converted: the object and the ones inside it, as the code holds them
                obj.__dict__[name] = value
            else:
                _into(obj, name, value)
            return None, False
        put_back = _put_back(obj, cls, name, value, old)
        done = f"put back to {old!r:.80}" if put_back else "kept: the value it had cannot be rebuilt from its record"
        return type(refused)(f"{refused} ({done})"), put_back

    def detach(self) -> None:
        if _OBSERVERS.get(id(self.obj)) is self:
            del _OBSERVERS[id(self.obj)]


def _found_after(origin: str) -> str:
    """Who had just run when a change in place was found (not always who made it: a thread may have)."""
    kind, _, name = origin.partition(":")
    if kind in ("hook", "tool", "middleware"):
        return f"found as {kind} {name} returned"
    if kind in ("until", "on_fail", "on_exhausted"):
        return f"found as {kind} returned"
    return {"budget": "found as the budget's on_exceeded returned", "dispose": "found as a cleanup returned",
            "user": "found after an edit"}.get(kind, "found after the last step")


def _put_back(obj: BaseModel, cls: type, name: str, value: Any, old: Any) -> bool:
    """Field ``name`` of ``obj``, which holds ``value``, rebuilt from ``old``, its JSON record: validated
    as an assignment, or as JSON (a strict class takes a set only as a JSON array); False when the
    class takes neither. A list, deque, dict or set is put back in place: code holding it (``self.items =
    s.items``) goes on changing the state's, never a copy nobody watches."""
    try:
        cls.__pydantic_validator__.validate_assignment(obj, name, old)
    except Exception:
        try:
            fresh = cls.model_validate_json(json.dumps({name: old}), by_alias=False, by_name=True)
        except Exception:
            return False
        obj.__dict__[name] = fresh.__dict__[name]
    _into(obj, name, value)
    return True


def _into(obj: BaseModel, name: str, held: Any) -> None:
    """Field ``name`` of ``obj``, just validated into a new object, back in ``held``, the object it held
    before, with the new contents (a list, deque, dict or set of the same type): code holding it goes
    on changing the state's."""
    made = obj.__dict__.get(name)
    if made is held or type(made) is not type(held):
        return
    if isinstance(held, (list, deque)):
        held.clear()
        held.extend(made)
    elif isinstance(held, (dict, set)):
        held.clear()
        held.update(made)
    else:
        return
    obj.__dict__[name] = held
