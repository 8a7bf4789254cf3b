"""``@agent``, ``@tool`` and ``@workflow``: class decorators that attach a spec.

They check what can be checked at import (the prompt file exists, the schema is
a pydantic model, ``execute`` exists; :mod:`flowtui.runtime.checks` holds the rest
of what they refuse) and leave the injection plans to ``bootstrap``, which sees
the whole workflow.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from typing_extensions import is_typeddict  # (typing's own misses typing_extensions.TypedDict, which 3.11 needs)

from flowtui.runtime.budget import Budget
from flowtui.runtime.checks import (
    HOOKS, check_class, check_hooks, check_name, check_provider, check_returns, check_sampling, refuse_in_order,
    refuse_unknown,
)
from flowtui.runtime.errors import ConfigError, FlowLoadError, PromptNotFoundError
from flowtui.runtime.files import not_a_file, not_text
from flowtui.runtime.markers import where
from flowtui.runtime.middleware import check_middleware, check_once
from flowtui.runtime.steps import listed
from flowtui.runtime.tool_forms import REPLAY_MODES, SPEC_ATTR, ToolSpec, as_tool, check_tool_name, function_tool



@dataclass(frozen=True)
class AgentSpec:
    cls: type
    name: str
    provider: Any  # a Provider subclass, an instance, or a function returning one
    prompt: str
    tools: tuple[ToolSpec, ...]
    sampling: dict[str, Any]
    hooks: frozenset[str]
    takes_over: bool  # defines run(self, input, ctx)
    prompt_file: str | None = None  # the file the prompt was read from (a re-execution names it)


@dataclass(frozen=True)
class WorkflowSpec:
    cls: type
    name: str
    state: type | None
    steps: tuple[Any, ...]
    file: str | None = field(default=None)
    middlewares: tuple[Any, ...] = ()
    budget: Any = None  # the Budget a run of it has unless run(budget=...) gives one
    run_of: str | None = None  # the agent whose run(Agent, ...) made it (it has no @workflow of its own)

    @property
    def lacks_state(self) -> str:
        """What a step asking for ``State()`` is told, after its parameter's name, when the run has no state."""
        if self.run_of is not None:
            return f"; give the agent a state: run({self.run_of}, ..., state=YourStateClass)"
        return f", but workflow {self.name} declares no state; add state=YourStateClass to @workflow(...)"


def _caller_file(depth: int = 2) -> str | None:
    return sys._getframe(depth).f_code.co_filename


def _looks_like_path(prompt: str) -> bool:
    return "\n" not in prompt and (prompt.startswith(("./", "../", "/")) or prompt.endswith((".md", ".txt")))


_REQUIRED: Any = object()  # a parameter not given (said by name, not as Python's TypeError)


def agent(*_given: Any, provider: Any = _REQUIRED, prompt: str | os.PathLike = "",
          tools: list[type] | tuple[type, ...] = (), sampling: dict[str, Any] | None = None,
          name: str | None = None, **unknown: Any):
    """Declare an agent: one model call per step, plus the tool calls it asks for.

    ``prompt`` is a path relative to the file that defines the agent (read now; a
    ``Path`` is always one), or the prompt text itself. ``provider`` is a provider class (built with no
    arguments, once per run), an instance (forked per run), or a function of
    no arguments that returns a provider, called once per run (per-tenant keys
    and clients: ``provider=lambda: LiteLLMProvider(api_key=...)``).
    """
    if _given:
        refuse_in_order("@agent", _given, "provider=..., prompt=...")
    refuse_unknown("@agent(...)", unknown, agent)
    defining_file = _caller_file()

    def wrap(cls: type) -> type:
        check_class(cls, "@agent", "(its hooks and __init__ as methods)")
        check_name(name, f"@agent(...) of {cls.__name__}")
        if provider is _REQUIRED:
            raise ConfigError(f"@agent(...) of {cls.__name__} needs provider=, the model it calls (e.g. "
                              "provider=LiteLLMProvider(model='openai/gpt-4o-mini'))")
        check_provider(provider, cls.__name__)
        tools_ = listed(tools, f"@agent(tools=...) of {cls.__name__}", "tools")
        check_hooks(cls)
        sampling_ = check_sampling(sampling, f"@agent(...) of {cls.__name__}")
        if not isinstance(prompt, (str, os.PathLike)):
            raise ConfigError(f"@agent(prompt=...) of {cls.__name__} takes the prompt's text, or the path of a "
                              f"file that holds it, not {type(prompt).__name__} {prompt!r:.60}")
        text, path = prompt, None
        if isinstance(prompt, os.PathLike) or (prompt and _looks_like_path(prompt)):
            base = Path(defining_file).parent if defining_file else Path.cwd()
            path = (base / prompt).resolve()
            text = _prompt_text(path, prompt, cls, defining_file)
        specs = tuple(as_tool(t, agent=cls.__name__) for t in tools_)
        seen: dict[str, Any] = {}
        for t in specs:
            if t.name in seen:
                if seen[t.name] is t.target:
                    raise ConfigError(f"@agent(tools=...) of {cls.__name__} lists the tool {t.name!r} twice; "
                                      "list it once")
                raise ConfigError(f"{cls.__name__}: two tools are named {t.name!r} ({_named(seen[t.name])} and "
                                  f"{_named(t.target)}); give one another name=")
            seen[t.name] = t.target
        spec = AgentSpec(
            cls=cls, name=name or cls.__name__, provider=provider, prompt=text,
            tools=specs, sampling=sampling_,
            hooks=frozenset(h for h in HOOKS if callable(getattr(cls, h, None))),
            takes_over=callable(getattr(cls, "run", None)),
            prompt_file=str(path) if path is not None else None,
        )
        setattr(cls, SPEC_ATTR, spec)
        return cls

    return wrap


def _named(target: Any) -> str:
    """A tool's target as a message names it: ``function search (tools.py:12)``."""
    file, line = where(target)
    kind = "class" if isinstance(target, type) else "function" if inspect.isfunction(target) else "object"
    shown = getattr(target, "__qualname__", None) or type(target).__name__
    return f"{kind} {shown}" + (f" ({Path(file).name}:{line})" if file and line else "")


def tool(*_given: Any, name: str | None = None, description: str = "",
         schema: type[BaseModel] | None = None, replay: str = "serve", **unknown: Any):
    """Declare a tool: a class with ``execute`` (sync or async) and a pydantic ``schema``,
    or a function (``@tool`` or ``@tool(name=...)``) whose parameters are its schema.

    The description defaults to the docstring (for a function, the text before
    its ``Args:`` section, whose lines describe the parameters). A decorated
    function stays an ordinary function you can call in a test.

    ``replay``: what a re-execution against a journal (``--resume-from``) does with the
    tool's recorded calls. ``"serve"`` (the default): the tool is not run, its recorded
    result is served (a tool may have side effects); ``"rerun"``: it runs again and its
    new result is checked against the recorded one (for a tool whose result depends on
    the world, to see the difference).
    """
    target = _given[0] if len(_given) == 1 and not isinstance(_given[0], str) else None  # (@tool alone: the def)
    if _given and target is None:  # (@tool("e"): its name, given in order; Python's TypeError for two values)
        refuse_in_order("@tool", _given, f"name={_given[0]!r}, description=..." if isinstance(_given[0], str)
                        else "name=..., description=...")
    refuse_unknown("@tool(...)", unknown, tool)
    check_name(name, f"@tool({getattr(target, '__name__', '...')})")
    if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise ConfigError(f"@tool({getattr(target, '__name__', name or '')}): schema= must be a pydantic "
                          f"BaseModel subclass, got {schema!r}")
    if name is not None:  # given empty, it fell back to the function's name unsaid
        check_tool_name(name, f"@tool(name={name!r})")
    if replay not in REPLAY_MODES:
        raise ConfigError(f"@tool({getattr(target, '__name__', name or '')}): replay= is 'serve' (the "
                          f"default: a re-execution serves the recorded result) or 'rerun', not {replay!r}")

    def wrap(obj: Any) -> Any:
        if not isinstance(description, str):
            raise ConfigError(f"@tool {getattr(obj, '__name__', name or '')}: description= is the text the model "
                              f"reads about the tool, not {type(description).__name__} {description!r:.60}")
        if isinstance(obj, type):
            if not callable(getattr(obj, "execute", None)):
                from difflib import get_close_matches

                methods = [n for n, v in vars(obj).items() if callable(v) and not n.startswith("__")]
                close = get_close_matches("execute", methods, n=1, cutoff=0.7)
                raise ConfigError(f"@tool class {obj.__name__} has no execute() method"
                                  + (f"; did you mean {close[0]}? rename it execute" if close else
                                     ": flowtui calls execute(self, ...) with the model's arguments"))
            check_returns(obj.execute, f"@tool class {obj.__name__}: execute", "the result (a str, or a value "
                           "made JSON)")
            spec = ToolSpec(target=obj, form="class", name=name or obj.__name__,
                            description=description or (obj.__doc__ or "").strip(), schema=schema, replay=replay)
        elif inspect.isfunction(obj):
            check_returns(obj, f"@tool {obj.__name__}", "the result (a str, or a value made JSON)")
            spec = function_tool(obj, name=name, description=description, schema=schema, replay=replay)
        else:
            raise ConfigError(f"@tool decorates a class with execute() or a function (def), not {_not_a_tool(obj)}")
        check_tool_name(spec.name, f"@tool {obj.__name__}")
        setattr(obj, SPEC_ATTR, spec)
        return obj

    return wrap(target) if target is not None else wrap


def _not_a_tool(obj: Any) -> str:
    """What ``obj`` is, given to ``@tool``, and what to write instead."""
    if isinstance(obj, (classmethod, staticmethod)):
        kind = type(obj).__name__
        return (f"a {kind}: put @tool above a function of the module (def {obj.__func__.__name__}(...)), or make "
                "a tool class whose execute() calls it")
    if isinstance(obj, functools.partial) or inspect.ismethod(obj):
        what = "functools.partial" if isinstance(obj, functools.partial) else "bound method"
        of = getattr(getattr(obj, "func", None) or getattr(obj, "__func__", None), "__name__", "?")
        return (f"a {what} of {of}: its parameters are no schema of its own; write a function (def) with the "
                "parameters the model gives, that calls it")
    return f"{type(obj).__name__} {obj!r:.60}"


def workflow(*_given: Any, steps: list[Any] = _REQUIRED, state: type | None = None,
             name: str | None = None, middlewares: list[Any] | tuple[Any, ...] = (), budget: Any = None,
             **unknown: Any):
    """Declare a workflow: its ``steps``, the class of its typed ``state``, the ``middlewares``
    every app made from it uses (``app.use`` each, in order, before yours), and the ``budget`` its
    runs have unless ``run(budget=...)`` gives another (so a run from the app has one too)."""
    if _given:
        refuse_in_order("@workflow", _given, "steps=[...]")
    refuse_unknown("@workflow(...)", unknown, workflow)
    defining_file = _caller_file()

    def wrap(cls: type) -> type:
        check_class(cls, "@workflow", "under @workflow(steps=[...]) (its body may be just pass)")
        check_name(name, f"@workflow(...) of {cls.__name__}")
        if steps is _REQUIRED:
            raise ConfigError(f"@workflow(...) of {cls.__name__} needs steps=, the agents it runs in order "
                              "(e.g. steps=[Writer, loop(steps=[Reviewer], until=until_answered)])")
        steps_ = listed(steps, f"@workflow {cls.__name__}", "steps")
        if not steps_:
            raise ConfigError(f"@workflow {cls.__name__}: steps=[...] is empty; give it the agents it runs, in "
                              "order: steps=[MyAgent]")
        if state is not None and (not isinstance(state, type) or state.__module__ == "builtins"):
            raise ConfigError(f"@workflow {cls.__name__}: {_state_advice(state)}")
        if state is not None and is_typeddict(state):  # (its instances are dicts: vars() failed on one at import)
            raise ConfigError(f"@workflow {cls.__name__}: state={state.__name__} is a TypedDict, whose instances "
                              f"are plain dicts with no fields to assign (s.n = ...); declare it as a pydantic "
                              f"model (or a @dataclass), every field with a default:\n  class {state.__name__}"
                              f"(BaseModel):{_typed_fields(state)}")
        for i, mw in enumerate(middlewares):
            check_middleware(mw, where=f"@workflow(middlewares=[...]) of {cls.__name__}")
            check_once(mw, middlewares[:i], f"@workflow(middlewares=[...]) of {cls.__name__}")
        if budget is not None and not isinstance(budget, Budget):
            raise ConfigError(f"@workflow {cls.__name__}: budget= takes a Budget(...), such as "
                              f"Budget(max_chat_calls=20), not {type(budget).__name__}")
        setattr(cls, SPEC_ATTR, WorkflowSpec(cls=cls, name=name or cls.__name__, state=state,
                                             steps=steps_, file=defining_file,
                                             middlewares=tuple(middlewares), budget=budget))
        _DEFINED.add(cls)
        return cls

    return wrap


def _state_advice(state: Any) -> str:
    """What to write for a ``state=`` that is no state class: an instance, or a built-in type (``dict``
    has no fields to declare, so ``s.n`` fails the first hook that reads it)."""
    kind = state if isinstance(state, type) else type(state)
    if kind.__module__ != "builtins":
        return f"state= takes the state's class, not an instance ({kind.__name__}(...)); write state={kind.__name__}"
    fields = "".join(f"\n    {key}: {_field_of(value)}" for key, value in state.items()
                     if isinstance(key, str) and key.isidentifier()) if isinstance(state, dict) else ""
    given = kind.__name__ if isinstance(state, type) else f"a {kind.__name__} ({state!r:.40})"
    return (f"state= takes a class that declares the workflow's fields, not {given}; declare one and give it:"
            f"\n  class MyState(BaseModel):{fields or chr(10) + '    rounds: int = 0'}\n  @workflow(state=MyState, ...)")


def _prompt_text(path: Path, prompt: Any, cls: type, defining_file: str | None) -> str:
    """The text of an agent's prompt file; a file that is no UTF-8 text, or a folder, is a load error
    naming it (a folder was "not found", a binary file a UnicodeDecodeError naming no file)."""
    file, line = where(cls)
    at = {"file": file or defining_file, "line": line, "cls": cls.__name__}
    if path.is_dir():
        try:
            inside = sorted(f.name for f in path.iterdir() if f.is_file() and f.suffix in (".md", ".txt"))
        except OSError:  # (a folder it may not list: said all the same)
            inside = []
        named = f"prompt={str(Path(prompt) / inside[0])!r}" if inside else "the prompt file in it"
        raise PromptNotFoundError(f"prompt file {path} is a folder, not a file; name the file: {named}", **at)
    if path.exists() and (why := not_a_file(path, "a prompt file")):  # (a pipe was "not found"; read, it may never end)
        raise FlowLoadError(f"prompt file {path} {why}; name a file", **at)
    if not path.is_file():
        raise PromptNotFoundError(
            f"prompt file not found: {path} (prompt={prompt!r} is relative to the file "
            "that defines the agent); create it or fix the path", **at)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FlowLoadError(f"prompt file {path}: cannot read it: {exc.strerror or exc}", **at) from None
    try:
        text = data.decode("utf-8-sig")  # (a BOM, as Notepad saves, is no prompt text)
    except UnicodeDecodeError as exc:
        raise FlowLoadError(f"prompt file {path}: {not_text(data, exc)}; or give prompt= another file", **at) from None
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()  # (newlines as read_text reads them)


def _typed_fields(cls: type) -> str:
    """A TypedDict's fields as a model's, to paste (``n: int = 0``; a type with no empty value: ``= None``)."""
    lines = []
    for key, kind in getattr(cls, "__annotations__", {}).items():
        shown = (kind.__name__ if isinstance(kind, type) else getattr(kind, "__forward_arg__", None)
                 or str(kind).replace("typing_extensions.", "").replace("typing.", ""))
        shown = re.sub(r"^(?:Not)?Required\[(.*)\]$", r"\1", shown)  # (a TypedDict's marks: no model takes them)
        empty = _EMPTY.get(shown.split("[")[0].strip())  # (a written annotation is a ForwardRef: read its name)
        if empty is not None:
            lines.append(f"\n    {key}: {shown} = {empty!r}")
        else:
            lines.append(f"\n    {key}: {shown}{'' if 'None' in shown or 'Optional' in shown else ' | None'} = None")
    return "".join(lines) or "\n    rounds: int = 0"


_EMPTY = {"int": 0, "float": 0.0, "str": "", "bool": False, "list": [], "dict": {}, "set": set(), "tuple": ()}


def _field_of(value: Any) -> str:
    """``int = 0``: a field declared for a dict's value, to paste (a long value: its type's empty one)."""
    if value is None:
        return "str | None = None"
    shown = repr(value)
    if len(shown) > 40:
        try:
            shown = repr(type(value)())
        except Exception:  # noqa: BLE001 (a type with no empty value)
            return f"{type(value).__name__}"
    return f"{type(value).__name__} = {shown}"


# Every @workflow class defined in this process (while it lives): what a watchpoint may name as
# a child workflow (``PesquisaWorkflow: state.fontes >= 2``) or whose tools it may count.
_DEFINED: "weakref.WeakSet[type]" = weakref.WeakSet()


def defined_workflows() -> list[WorkflowSpec]:
    """The specs of the @workflow classes defined so far (a flow file's, and what it imports)."""
    return [spec for cls in list(_DEFINED) if isinstance(spec := spec_of(cls), WorkflowSpec)]


def tools_of(spec: WorkflowSpec) -> set[str]:
    """The names of the tools the agents of ``spec`` offer (loops and parallel steps walked)."""
    names: set[str] = set()
    seen: set[int] = set()

    def visit(step: Any) -> None:
        if id(step) in seen:
            return
        seen.add(id(step))
        inner = getattr(step, "steps", None)
        if isinstance(inner, (list, tuple)) and spec_of(step) is None:  # loop(...) or parallel([...])
            for s in inner:
                visit(s)
            return
        aspec = spec_of(step)
        if isinstance(aspec, AgentSpec):
            names.update(t.name for t in aspec.tools)

    for step in spec.steps:
        visit(step)
    return names


def spec_of(obj: Any) -> Any:
    return getattr(obj, SPEC_ATTR, None) if isinstance(obj, type) or inspect.isfunction(obj) else None
