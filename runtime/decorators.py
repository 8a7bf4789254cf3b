"""``@agent``, ``@tool`` and ``@workflow``: class decorators that attach a spec.

They check what can be checked at import (the prompt file exists, the schema is
a pydantic model, ``execute`` exists) and leave the rest (injection plans) to
``bootstrap``, which sees the whole workflow.
"""

from __future__ import annotations

import inspect
import sys
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flowtui.runtime.errors import ConfigError, PromptNotFoundError
from flowtui.runtime.markers import where
from flowtui.runtime.middleware import check_middleware
from flowtui.runtime.providers.base import Provider
from flowtui.runtime.steps import listed
from flowtui.runtime.tool_forms import REPLAY_MODES, SPEC_ATTR, ToolSpec, as_tool, function_tool

HOOKS = ("before_prompt", "before_tool", "after_tool", "after_response", "on_error")


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


def _caller_file(depth: int = 2) -> str | None:
    return sys._getframe(depth).f_code.co_filename


def _looks_like_path(prompt: str) -> bool:
    return "\n" not in prompt and (prompt.startswith(("./", "../", "/")) or prompt.endswith((".md", ".txt")))


def agent(*, provider: Any, prompt: str = "", tools: list[type] | tuple[type, ...] = (),
          sampling: dict[str, Any] | None = None, name: str | None = None):
    """Declare an agent: one model call per step, plus the tool calls it asks for.

    ``prompt`` is a path relative to the file that defines the agent (read now),
    or the prompt text itself. ``provider`` is a provider class (built with no
    arguments, once per run), an instance (forked per run), or a function of
    no arguments that returns a provider, called once per run (per-tenant keys
    and clients: ``provider=lambda: LiteLLMProvider(api_key=...)``).
    """
    defining_file = _caller_file()

    def wrap(cls: type) -> type:
        _check_class(cls, "@agent", "(its hooks and __init__ as methods)")
        _check_provider(provider, cls.__name__)
        tools_ = listed(tools, f"@agent(tools=...) of {cls.__name__}", "tools")
        _check_hooks(cls)
        text, path = prompt, None
        if prompt and _looks_like_path(prompt):
            base = Path(defining_file).parent if defining_file else Path.cwd()
            path = (base / prompt).resolve()
            if not path.is_file():
                file, line = where(cls)
                raise PromptNotFoundError(
                    f"prompt file not found: {path} (prompt={prompt!r} is relative to the file "
                    "that defines the agent); create it or fix the path",
                    file=file or defining_file, line=line, cls=cls.__name__)
            text = path.read_text(encoding="utf-8").strip()
        specs = tuple(as_tool(t, agent=cls.__name__) for t in tools_)
        seen: dict[str, Any] = {}
        for t in specs:
            if t.name in seen:
                raise ConfigError(f"{cls.__name__}: two tools are named {t.name!r} ({seen[t.name]!r} and "
                                  f"{t.target!r}); give one another name=")
            seen[t.name] = t.target
        spec = AgentSpec(
            cls=cls, name=name or cls.__name__, provider=provider, prompt=text,
            tools=specs, sampling=dict(sampling or {}),
            hooks=frozenset(h for h in HOOKS if callable(getattr(cls, h, None))),
            takes_over=callable(getattr(cls, "run", None)),
            prompt_file=str(path) if path is not None else None,
        )
        setattr(cls, SPEC_ATTR, spec)
        return cls

    return wrap


def _check_class(obj: Any, decorator: str, how: str) -> None:
    """``decorator`` is put on a class; on anything else, say where and what to write."""
    if isinstance(obj, type):
        return
    name = getattr(obj, "__name__", None) or repr(obj)
    file, line = where(obj)
    at = f"{file}:{line}: " if file and line else ""
    kind = "a function" if inspect.isfunction(obj) or inspect.ismethod(obj) else type(obj).__name__
    raise ConfigError(f"{at}{decorator} decorates a class, and {name} is {kind}: write `class {name}:` {how}")


def _check_hooks(cls: type) -> None:
    """A hook name bound to something that cannot be called (``after_response = "UPPER"``, a
    property) would be skipped in silence: refuse it, naming the agent and the hook. An async
    ``__init__`` would make a coroutine, not the agent."""
    if inspect.iscoroutinefunction(getattr(cls, "__init__", None)):
        raise ConfigError(f"@agent {cls.__name__}: __init__ is async, and Python cannot await a constructor; "
                          "make it a plain def (set-up that awaits belongs in before_prompt)")
    for hook in (*HOOKS, "run"):
        found = inspect.getattr_static(cls, hook, None)
        if found is None:
            continue
        if isinstance(found, property) or not callable(getattr(cls, hook, None)):
            what = "a property" if isinstance(found, property) else f"{type(found).__name__} {found!r}"
            raise ConfigError(f"@agent {cls.__name__}: {hook} is {what}, not a method; flowtui calls "
                              f"{hook} as a method: write def {hook}(self, ...)")
        _check_takes(cls, hook, found)
        _check_returns(getattr(cls, hook), f"@agent {cls.__name__}: {hook}", "its value (a str, or None)")


def _check_returns(fn: Any, who: str, what: str) -> None:
    """A generator function (``yield`` in a hook or tool) returns a generator, never the value it
    yields: the model would be sent ``<generator object ...>``."""
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise ConfigError(f"{who} yields, so calling it makes a generator, not a result: return {what} "
                          "instead (join the pieces it yields)")


# What flowtui passes each hook (a hook may take fewer: the first ones are passed).
HOOK_ARGS = {"before_prompt": ("prompt", "ctx"), "before_tool": ("call", "ctx"), "after_tool": ("result", "ctx"),
             "after_response": ("response", "ctx"), "on_error": ("error", "ctx"), "run": ("input", "ctx")}


def _check_takes(cls: type, hook: str, found: Any) -> None:
    """A hook that needs more than flowtui passes would fail at its first call, mid-run: said at import."""
    try:
        params = list(inspect.signature(getattr(cls, hook)).parameters.values())
    except (TypeError, ValueError):  # no signature to read: trust it
        return
    if inspect.isfunction(found) and params:  # a plain method: its first parameter is the agent
        params = params[1:]
    required = [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                                             p.POSITIONAL_OR_KEYWORD)]
    keyword = [p.name for p in params if p.default is p.empty and p.kind is p.KEYWORD_ONLY]
    passed = HOOK_ARGS[hook]
    extra = required[len(passed):] + keyword
    if extra:
        raise ConfigError(f"@agent {cls.__name__}: {hook} needs {', '.join(extra)}, which flowtui does not pass: "
                          f"it calls {hook}({', '.join(passed)}); give {extra[0]} a default or take it out")


def _check_provider(provider: Any, agent: str) -> None:
    if isinstance(provider, Provider) or (isinstance(provider, type) and issubclass(provider, Provider)):
        cls = provider if isinstance(provider, type) else type(provider)
        if not inspect.iscoroutinefunction(cls.complete):
            raise ConfigError(f"{agent}: @agent(provider={cls.__name__}): {cls.__name__}.complete must be "
                              "async def complete(self, request) (the engine awaits it)")
        return
    what = ("must be a Provider class or instance (e.g. ScriptedProvider, FunctionProvider, "
            "LiteLLMProvider) or a function of no arguments returning one")
    if isinstance(provider, type) or not callable(provider):
        raise ConfigError(f"{agent}: @agent(provider=...) {what}, got {provider!r}")
    try:
        required = [p.name for p in inspect.signature(provider).parameters.values()
                    if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        required = []
    if required:
        raise ConfigError(f"{agent}: @agent(provider=...) {what}; this function needs {', '.join(required)}")


def tool(target: Any = None, /, *, name: str | None = None, description: str = "",
         schema: type[BaseModel] | None = None, replay: str = "serve"):
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
    if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise ConfigError(f"@tool({getattr(target, '__name__', name or '')}): schema= must be a pydantic "
                          f"BaseModel subclass, got {schema!r}")
    if replay not in REPLAY_MODES:
        raise ConfigError(f"@tool({getattr(target, '__name__', name or '')}): replay= is 'serve' (the "
                          f"default: a re-execution serves the recorded result) or 'rerun', not {replay!r}")

    def wrap(obj: Any) -> Any:
        if isinstance(obj, type):
            if not callable(getattr(obj, "execute", None)):
                raise ConfigError(f"@tool class {obj.__name__} has no execute() method")
            _check_returns(obj.execute, f"@tool class {obj.__name__}: execute", "the result (a str, or a value "
                           "made JSON)")
            spec = ToolSpec(target=obj, form="class", name=name or obj.__name__,
                            description=description or (obj.__doc__ or "").strip(), schema=schema, replay=replay)
        elif inspect.isfunction(obj):
            _check_returns(obj, f"@tool {obj.__name__}", "the result (a str, or a value made JSON)")
            spec = function_tool(obj, name=name, description=description, schema=schema, replay=replay)
        else:
            raise ConfigError(f"@tool decorates a class with execute() or a function, not {obj!r}")
        setattr(obj, SPEC_ATTR, spec)
        return obj

    return wrap(target) if target is not None else wrap


def workflow(*, steps: list[Any], state: type | None = None, name: str | None = None,
             middlewares: list[Any] | tuple[Any, ...] = ()):
    """Declare a workflow: its ``steps``, the class of its typed ``state``, and the
    ``middlewares`` every app made from it uses (``app.use`` each, in order, before yours)."""
    defining_file = _caller_file()

    def wrap(cls: type) -> type:
        _check_class(cls, "@workflow", "under @workflow(steps=[...]) (its body may be just pass)")
        steps_ = listed(steps, f"@workflow {cls.__name__}", "steps")
        if not steps_:
            raise ConfigError(f"@workflow {cls.__name__}: steps=[...] is empty")
        if state is not None and not isinstance(state, type):
            raise ConfigError(f"@workflow {cls.__name__}: state= takes the state's class, not an instance "
                              f"({type(state).__name__}(...)); write state={type(state).__name__}")
        for mw in middlewares:
            check_middleware(mw, where=f"@workflow(middlewares=[...]) of {cls.__name__}")
        setattr(cls, SPEC_ATTR, WorkflowSpec(cls=cls, name=name or cls.__name__, state=state,
                                             steps=steps_, file=defining_file,
                                             middlewares=tuple(middlewares)))
        _DEFINED.add(cls)
        return cls

    return wrap


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
