"""What ``@agent``, ``@tool`` and ``@workflow`` refuse at import, each saying what to write: a
decorator on what it does not decorate, a hook that could never be called as written (not
callable, needing more than flowtui passes, a generator), a provider the engine cannot await.
A mistake found here is a load error naming the class; found mid-run, it would be a bare
``TypeError``."""

from __future__ import annotations

import inspect
from typing import Any

from flowtui.runtime.errors import ConfigError
from flowtui.runtime.markers import where
from flowtui.runtime.providers.base import Provider

HOOKS = ("before_prompt", "before_tool", "after_tool", "after_response", "on_error")


def check_class(obj: Any, decorator: str, how: str) -> None:
    """``decorator`` is put on a class; on anything else, say where and what to write."""
    if isinstance(obj, type):
        return
    name = getattr(obj, "__name__", None) or repr(obj)
    file, line = where(obj)
    at = f"{file}:{line}: " if file and line else ""
    kind = "a function" if inspect.isfunction(obj) or inspect.ismethod(obj) else type(obj).__name__
    raise ConfigError(f"{at}{decorator} decorates a class, and {name} is {kind}: write `class {name}:` {how}")


def check_hooks(cls: type) -> None:
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
        check_returns(getattr(cls, hook), f"@agent {cls.__name__}: {hook}", "its value (a str, or None)")


def check_returns(fn: Any, who: str, what: str) -> None:
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


def check_provider(provider: Any, agent: str) -> None:
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
