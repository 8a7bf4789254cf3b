"""Middlewares and plugins: code of yours around every model call and tool call of an app's runs.

    app.use(mw)          # or @workflow(..., middlewares=[mw])

A middleware is any object with some of:

- ``async tool(invocation, call_next) -> ToolOutput``: around each tool call.
  ``invocation`` is a :class:`ToolInvocation`; ``await call_next(invocation)``
  runs the rest (later middlewares, then the tool) and returns its
  :class:`ToolOutput`. Return your own ``ToolOutput(content=..., is_error=True)``
  to deny the call (the model reads it), pass a changed invocation on
  (``invocation.replace(args=...)``), or call ``call_next`` again to retry.
- ``async model(request, call_next) -> ChatReply``: around each model call,
  with the :class:`~runtime.providers.base.ChatRequest` the agent built;
  pass a changed one on with ``request.model_copy(update={...})``.
- ``setup(app)``: once, when it is registered (an async one is awaited before
  the app's next run starts); ``dispose()``: when the app closes (``await app.aclose()``,
  ``async with app``, or the end of ``flowtui run``).
- ``name``: shown in events (defaults to the class name).

The first registered is the outermost. Sync methods work too: a sync
``tool``/``model`` returns ``call_next(...)`` (an awaitable) or a value, and
runs inline, so keep it quick. Use :class:`Middleware` for the inline case.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flowtui.runtime.bus import current_origin
from flowtui.runtime.errors import ConfigError, FlowtuiError, cleanup_failed
from flowtui.runtime.invoke import call_user, is_async

HOOKS = ("tool", "model", "setup", "dispose")

Layer = tuple[str, Callable[..., Any]]  # (middleware name, its tool or model method)


@dataclass(frozen=True)
class ToolInvocation:
    """A tool call on its way to the tool, as tool middlewares see it."""

    name: str
    args: dict[str, Any]
    agent: str
    ctx: Any  # the run's AgentContext
    call_id: str | None = None

    def replace(self, **changes: Any) -> "ToolInvocation":
        """A copy with ``changes`` (e.g. ``invocation.replace(args={...})``) to pass on."""
        return dataclasses.replace(self, **changes)


class Middleware:
    """A middleware from functions: ``Middleware(name="audit", tool=fn, model=fn)``.

    ``tool(invocation, call_next)`` and ``model(request, call_next)`` as
    described in this module; ``setup(app)`` and ``dispose()`` optional.
    """

    def __init__(self, *, name: str = "middleware", tool: Callable[..., Any] | None = None,
                 model: Callable[..., Any] | None = None, setup: Callable[..., Any] | None = None,
                 dispose: Callable[..., Any] | None = None, **unknown: Any) -> None:
        from flowtui.runtime.checks import check_name, refuse_unknown

        refuse_unknown(f"Middleware(name={name!r}, ...)", unknown, Middleware)  # (tools= for tool=)
        check_name(name, f"Middleware(name={name!r:.40}, ...)", blank=False)  # (the journal's origins say it)
        for hook, fn in (("tool", tool), ("model", model), ("setup", setup), ("dispose", dispose)):
            if fn is not None and not callable(fn):
                raise ConfigError(f"Middleware(name={name!r}, {hook}=...): must be a function, got {fn!r}")
        if tool is None and model is None and setup is None and dispose is None:
            raise ConfigError(f"Middleware(name={name!r}): give at least one of tool=, model=, setup=, dispose=")
        self.name, self.tool, self.model, self.setup, self.dispose = name, tool, model, setup, dispose

    def __repr__(self) -> str:
        return f"Middleware(name={self.name!r})"


def middleware_name(mw: Any) -> str:
    return str(getattr(mw, "name", None) or type(mw).__name__)


def check_middleware(mw: Any, *, where: str = "app.use(...)") -> None:
    """Refuse what cannot be a middleware, saying what one looks like."""
    if isinstance(mw, type):
        raise ConfigError(f"{where}: {mw.__name__} is a class; pass an instance, e.g. {mw.__name__}(...)")
    try:  # (one raising was a traceback of flowtui's own at load, or at the run's start from Python)
        getattr(mw, "name", None)
    except Exception as exc:
        raise ConfigError(f"{where}: {type(mw).__name__}.name raised {type(exc).__name__}: {exc}; a middleware's "
                          "name is a str, said in its events' origin (or leave it out: the class's name)") from None
    if not any(callable(getattr(mw, hook, None)) for hook in HOOKS):
        own = type(mw).__module__ != "builtins"  # (a text's strip() is no misspelled setup())
        for hook in HOOKS:  # one set to a value, and no hook at all: said as such (a value beside a hook is the
            # middleware's own: self.model = "openai/gpt-4o-mini" next to a tool() method)
            value = getattr(mw, hook, None)
            if own and value is not None:
                raise ConfigError(f"{where}: {middleware_name(mw)}.{hook} is {type(value).__name__} {value!r:.40}, "
                                  f"not a method; define it as {hook}({', '.join(('self', *PARAMETERS[hook]))})")
        shown = _shown(mw)
        methods = [m for m in dir(mw) if own and not m.startswith("_") and callable(getattr(mw, m, None))]
        close = next((f"; did you mean {hook}() for its {m}()?" for m in methods
                      if (hook := next(iter(difflib.get_close_matches(m, HOOKS, n=1)), None))), "")
        raise ConfigError(f"{where}: {shown} is not a middleware: it needs at least one of "
                          "tool(invocation, call_next), model(request, call_next), setup(app), dispose()"
                          f"{close or '; or use Middleware(name=..., tool=..., model=...)'}")
    for hook, params in PARAMETERS.items():  # (a wrong one failed at the first call, with no line)
        fn = getattr(mw, hook, None)
        if not callable(fn):
            continue
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # (a builtin without one: taken as it is)
            continue
        try:
            signature.bind(*params)
        except TypeError:
            said = ", ".join(params)
            own = ", ".join(("self", *params)) if inspect.ismethod(fn) else said  # (the method as it is written)
            raise ConfigError(f"{where}: {middleware_name(mw)}.{hook}{signature} cannot be called as {hook}({said}); "
                              f"define it as {hook}({own})" if not isinstance(mw, Middleware) else
                              f"{where}: Middleware {middleware_name(mw)}'s {hook}= function {signature} cannot be "
                              f"called as {hook}({said}); give a function of ({said})") from None


def _shown(mw: Any) -> str:
    """A middleware as a message names it: its own repr, cut; else its class, called (the default repr named the
    flow's module as flowtui loads it: <flowtui_flow_mw_1.Audit object at 0x…>)."""
    if type(mw).__repr__ is object.__repr__:
        return f"{type(mw).__name__}()"
    said = repr(mw)
    return said if len(said) <= 80 else said[:79] + "…"


def check_once(mw: Any, used: Sequence[Any], where: str) -> None:
    """Refuse ``mw`` when it is one of ``used`` (this app's middlewares so far): the same object twice was
    set up twice, wrapped each call twice (a change made twice) and disposed twice."""
    at = next((i for i, other in enumerate(used) if other is mw), None)
    if at is not None:
        raise ConfigError(f"{where}: {_shown(mw)} is already in use (the middleware #{at + 1}); a middleware is set "
                          "up, wraps each call and is disposed once: register it once (another instance, with a name "
                          "of its own, to wrap the calls twice)")


# What each hook is called with (a method's self aside).
PARAMETERS = {"tool": ("invocation", "call_next"), "model": ("request", "call_next"), "setup": ("app",), "dispose": ()}


def layers(middlewares: Sequence[Any], hook: str) -> list[Layer]:
    """The ``hook`` methods of ``middlewares``, outermost first."""
    return [(middleware_name(mw), fn) for mw in middlewares if callable(fn := getattr(mw, hook, None))]


async def through(chain: list[Layer], value: Any, innermost: Callable[[Any], Awaitable[Any]], *,
                  on_pass: Callable[[str, Any, Any], None] | None = None,
                  returned: Callable[[str, Any], None] | None = None) -> Any:
    """``value`` through each layer, then ``innermost``. ``on_pass(name, received, passed)`` hears
    what each middleware handed on (to record a changed request); ``returned(name, result)`` what each
    returned (to refuse what is not the reply, naming the middleware that returned it)."""
    if not chain:  # no middleware: nothing to wrap, and the origin already is the caller's
        return await innermost(value)
    origin = current_origin.get()

    async def at(i: int, current: Any) -> Any:
        if i == len(chain):
            token = current_origin.set(origin)  # the provider or tool is not the middleware's code
            try:
                return await innermost(current)
            finally:
                current_origin.reset(token)
        name, fn = chain[i]
        made: list[Any] = []  # what call_next returned: a coroutine to await

        def call_next(passed: Any) -> Any:
            if on_pass is not None:
                on_pass(name, current, passed)
            made.append(step := at(i + 1, passed))
            return step

        try:
            result = await call_user(fn, (current, call_next), origin=f"middleware:{name}")
        except Exception as exc:
            _unawaited(made, name, fn, exc)
            raise
        _unawaited(made, name, fn)
        if returned is not None:
            returned(name, result)
        return result

    return await at(0, value)


def _unawaited(made: list[Any], name: str, fn: Any, exc: BaseException | None = None) -> None:
    """Refuse a middleware that called ``call_next`` and neither awaited nor returned what it gave: a sync
    one that read the reply (``call_next(request).content``: "'coroutine' object has no attribute
    'content'") or dropped it (Python's own "coroutine ... was never awaited" warning, raw)."""
    left = [step for step in made if inspect.getcoroutinestate(step) == inspect.CORO_CREATED]
    for step in left:
        step.close()  # (never run: nothing to undo, and no warning)
    hook = getattr(fn, "__name__", "hook")
    if not left or (exc is not None and not isinstance(exc, (AttributeError, TypeError))):
        return  # (its own error, a guard's PermissionError, is the one said; a coroutine used as the reply
        # raises AttributeError or TypeError: 'coroutine' object is not subscriptable)
    if is_async(fn):
        raise TypeError(f"middleware {name}: {hook}() neither awaited nor returned what call_next(...) gave: "
                        "`return await call_next(...)`, or return a reply of its own without calling it") from exc
    raise TypeError(f"middleware {name}: {hook}() used what call_next(...) returned without awaiting it: a sync "
                    f"{hook}() can only return call_next(...) as it is; to read the reply, make it `async def "
                    f"{hook}(...)` and `await call_next(...)`") from exc


class Plugins:
    """An app's middlewares, outermost first, and their life cycle: ``setup`` once when added
    (an async one awaited before the first run), ``dispose`` once, last added first."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._pending: list[tuple[Any, Awaitable[Any]]] = []  # async setups not awaited yet, with their middleware
        self._failed: ConfigError | None = None  # an async setup that raised: every run of the app fails with it
        self._lock: asyncio.Lock | None = None
        self._disposed = False

    @property
    def disposed(self) -> bool:
        return self._disposed

    def add(self, mw: Any, app: Any) -> None:
        check_middleware(mw)
        check_once(mw, self.items, "app.use(...)")
        self.items.append(mw)
        setup = getattr(mw, "setup", None)
        if callable(setup):
            try:
                result = setup(app)
            except FlowtuiError:
                raise
            except Exception as exc:  # a flow file's plugin: a load error naming it, not a traceback
                raise ConfigError(f"{middleware_name(mw)}.setup(app) raised {type(exc).__name__}: {exc}") from exc
            if inspect.isawaitable(result):
                self._pending.append((mw, result))

    async def start(self) -> None:
        if self._failed is not None:  # (not set up: a run through it would use what it never made)
            raise self._failed
        if not self._pending:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # two runs starting at once await each setup once
            while self._pending:
                mw, setup = self._pending.pop(0)
                try:
                    await setup
                except FlowtuiError:
                    raise
                except Exception as exc:  # named as a sync one's is at load
                    self._failed = ConfigError(f"{middleware_name(mw)}.setup(app) raised {type(exc).__name__}: {exc}")
                    raise self._failed from exc

    async def dispose_all(self) -> list[tuple[str, BaseException]]:
        """Call every ``dispose()`` (sync or async), last added first; returns the failures."""
        if self._disposed:
            return []
        self._disposed = True
        failed = []
        for mw in reversed(self.items):
            dispose = getattr(mw, "dispose", None)
            if not callable(dispose):
                continue
            try:
                await call_user(dispose, (), origin=f"middleware:{middleware_name(mw)}")
            except BaseException as exc:
                if not cleanup_failed(exc):
                    raise
                failed.append((f"{middleware_name(mw)}.dispose", exc))
        return failed
