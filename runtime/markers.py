"""Parameter markers and the injection plans built from them.

``State()``, ``Context()`` and ``Input()`` mark what a constructor or an
``execute`` method wants, either as a default (``s: S = State()``) or inside
``Annotated[S, State()]``. Plans are computed once, when the workflow is
bootstrapped, so a marker that cannot be satisfied fails before the run
starts, naming the class and the parameter.
"""

from __future__ import annotations

import inspect
import typing
from typing import Annotated, Any, Literal, get_args, get_origin

from flowtui.runtime.errors import InjectionError

Want = Literal["state", "ctx", "input", "runtime", "field"]  # field: one argument of a function tool


class _Marker:
    kind: Want

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class State(_Marker):
    """Inject the run's workflow state instance."""

    kind = "state"


class Context(_Marker):
    """Inject the run's ``ctx`` (tool ``execute`` only: constructors run before ``ctx`` exists)."""

    kind = "ctx"


class Input(_Marker):
    """Inject a tool's validated arguments."""

    kind = "input"


def where(obj: Any) -> tuple[str | None, int | None]:
    """(file, line) where a class or function is defined, for error messages."""
    try:
        target = inspect.unwrap(obj)
        return inspect.getsourcefile(target), inspect.getsourcelines(target)[1]
    except (TypeError, OSError):
        return None, None


def is_marker(value: Any) -> bool:
    """``State()``, or ``State`` written without its parentheses (taken as the same)."""
    return isinstance(value, _Marker) or (isinstance(value, type) and issubclass(value, _Marker)
                                          and value is not _Marker)


def marker_of(param: inspect.Parameter, hint: Any) -> Want | None:
    if is_marker(param.default):
        return param.default.kind
    if get_origin(hint) is Annotated:
        for meta in get_args(hint)[1:]:
            if isinstance(meta, _Marker) or (isinstance(meta, type) and issubclass(meta, _Marker)):
                return meta.kind
    return None


def type_hints(fn: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:
        return getattr(fn, "__annotations__", {}) or {}


def _params(fn: Any, *, skip_self: bool = True) -> list[inspect.Parameter]:
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return params[1:] if skip_self else params


def constructor_plan(cls: type, *, has_state: bool, lacks_state: str, runtime_type: type) -> list[tuple[str, Want]]:
    """What ``cls.__init__`` wants, as ``[(param, kind)]``; raises InjectionError (``lacks_state``: what a
    ``State()`` is told when the run has none, :attr:`WorkflowSpec.lacks_state`)."""
    if cls.__init__ is object.__init__:
        return []
    file, line = where(cls)
    plan: list[tuple[str, Want]] = []
    hints = type_hints(cls.__init__)
    for p in _params(cls.__init__):
        hint = hints.get(p.name)
        kind = marker_of(p, hint)
        base = get_args(hint)[0] if get_origin(hint) is Annotated else hint
        if kind is None and base is runtime_type:
            kind = "runtime"
        if kind == "ctx":
            raise InjectionError(
                f"Context() in __init__ parameter {p.name!r}: agents and tools are built when the run "
                "starts, before its ctx exists. Take ctx in a hook or in execute() instead",
                file=file, line=line, cls=cls.__name__)
        if kind == "input":
            raise InjectionError(
                f"Input() in __init__ parameter {p.name!r}: tool arguments reach execute(), not the constructor",
                file=file, line=line, cls=cls.__name__)
        if kind == "state" and not has_state:
            raise InjectionError(f"State() in __init__ parameter {p.name!r}{lacks_state}",
                                 file=file, line=line, cls=cls.__name__)
        if kind is None:
            if p.default is inspect.Parameter.empty:
                state = f"if it is the workflow state, mark it {p.name}: YourState = State()"
                runtime = (f"if it runs child workflows, annotate it {p.name}: {runtime_type.__name__} (from "
                           f"flowtui import {runtime_type.__name__})")
                raise InjectionError(
                    f"__init__ parameter {p.name!r} has no default, and flowtui makes {cls.__name__} with no "
                    f"arguments: give it a default (a key or setting read from the environment, say), or, "
                    + (f"{runtime}; or, {state}" if p.name == "runtime" else f"{state}; or, {runtime}"),
                    file=file, line=line, cls=cls.__name__)
            continue
        plan.append((p.name, kind))
    return plan


def execute_plan(fn: Any, *, owner: str, schema: type | None, has_state: bool, lacks_state: str,
                 skip_self: bool = True, tool: str | None = None) -> list[tuple[str, Want]]:
    """What a tool's ``execute`` (or tool function) wants; with no markers its one parameter gets
    the arguments. ``skip_self`` drops the first parameter (an unbound method); ``tool``: the tool's name,
    for the function it could be written as."""
    file, line = where(fn)
    hints = type_hints(fn)
    params = _params(fn, skip_self=skip_self)
    label = f"{getattr(fn, '__name__', 'execute')}()"
    plan: list[tuple[str, Want]] = []
    marked = [(p, marker_of(p, hints.get(p.name))) for p in params]
    for p, kind in marked:
        if kind is None and _is_ctx(hints.get(p.name)):  # it would get its default (None), or the arguments
            raise InjectionError(f"{label} parameter {p.name!r} is annotated AgentContext but not marked; to "
                                 f"receive the run's ctx, write {p.name}: AgentContext = Context()",
                                 file=file, line=line, cls=owner)
    if not any(kind for _, kind in marked):
        if len(params) == 1:
            _check_input(params[0], hints, schema, label, file, line, owner, tool)
            return [(params[0].name, "input")]
        required = [p.name for p in params if p.default is inspect.Parameter.empty]
        if not params or not required:
            return []
        for p in params:  # execute(self, n: int, m: int) with no schema=: that is what to say, not markers
            if _plain(hints.get(p.name)):
                _check_input(p, hints, schema, label, file, line, owner, tool)
        raise InjectionError(
            f"{label} takes {len(params)} parameters without markers ({', '.join(p.name for p in params)}); "
            "the tool's arguments come in one of them, a model of its schema= marked Input(); mark the "
            "others Context() or State()",
            file=file, line=line, cls=owner)
    inputs = [p for p, kind in marked if kind == "input"]
    if len(inputs) > 1:
        raise InjectionError(
            f"{label} marks {len(inputs)} parameters Input() ({', '.join(p.name for p in inputs)}); one gets the "
            "tool's arguments, as a model of its schema= (args.x, args.y)",
            file=file, line=line, cls=owner)
    for p in inputs:
        _check_input(p, hints, schema, label, file, line, owner, tool)
    for p, kind in marked:
        if kind is None:
            base = hints.get(p.name)
            if schema is not None and base is schema:
                kind = "input"
            elif p.default is not inspect.Parameter.empty:
                continue
            else:  # (execute(self, n: int, ctx=Context()) with no schema=: said as such, not as a marker)
                if _plain(hints.get(p.name)):
                    _check_input(p, hints, schema, label, file, line, owner, tool)
                raise InjectionError(
                    f"{label} parameter {p.name!r} has no marker; use Input(), Context() or State()",
                    file=file, line=line, cls=owner)
        if kind == "state" and not has_state:
            raise InjectionError(f"State() in {label} parameter {p.name!r}{lacks_state}",
                                 file=file, line=line, cls=owner)
        plan.append((p.name, kind))
    return plan


def _is_ctx(hint: Any) -> bool:
    from flowtui.runtime.context import AgentContext

    return (get_args(hint)[0] if get_origin(hint) is Annotated else hint) is AgentContext


def _check_input(p: inspect.Parameter, hints: dict[str, Any], schema: type | None, label: str,
                 file: str | None, line: int | None, owner: str, tool: str | None = None) -> None:
    """The parameter that gets the arguments, annotated with a model, and no schema= given: the model
    would be told the tool takes none, and the parameter would get a dict."""
    from pydantic import BaseModel

    hint = hints.get(p.name)
    hint = get_args(hint)[0] if get_origin(hint) is Annotated else hint
    if schema is None and isinstance(hint, type) and issubclass(hint, BaseModel):
        raise InjectionError(
            f"{label} parameter {p.name!r} is annotated {hint.__name__}, but the tool has no schema=: the model "
            f"would be told it takes no arguments, and {p.name} would be a dict; add schema={hint.__name__} to "
            "@tool(...)",
            file=file, line=line, cls=owner)
    if schema is None and hint is not None and not _a_mapping(hint):  # execute(self, question: str)
        name = getattr(hint, "__name__", None) or repr(hint)
        raise InjectionError(
            f"{label} parameter {p.name!r} is annotated {name}, but the tool has no schema=: the model would be "
            f"told it takes no arguments, and {p.name} would be the arguments' dict. Declare them: schema=AModel "
            f"in @tool(...) and {p.name}: AModel = Input() (args.x), or write the tool as a function whose "
            f"parameters are its arguments (@tool, def {tool or owner.lower()}({p.name}: {name}))",
            file=file, line=line, cls=owner)


def _plain(hint: Any) -> bool:
    """A JSON-like type (``int``, ``str``, ``list[str]``): an argument the model would fill, not a state
    class that lacks its State() marker."""
    import dataclasses

    from pydantic import BaseModel

    hint = get_args(hint)[0] if get_origin(hint) is Annotated else hint
    return hint is not None and not (isinstance(hint, type) and (issubclass(hint, BaseModel)
                                                                 or dataclasses.is_dataclass(hint)))


def _a_mapping(hint: Any) -> bool:
    """``dict``, ``dict[str, Any]``, ``Mapping``, ``Any``: what the arguments' dict may be annotated."""
    import collections.abc

    return hint in (Any, object, dict) or get_origin(hint) in (dict, collections.abc.Mapping) \
        or hint is collections.abc.Mapping


def positional_arity(fn: Any) -> int:
    """How many positional arguments ``fn`` accepts (a large number for ``*args``)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return 99
    n = 0
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            return 99
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    return n
