"""Calling user code: sync or async, under the right origin.

Async functions are awaited; sync functions are called inline, on the run's
own thread: the run lives in its own process (:mod:`flowtui.runtime.worker`),
so a slow or stuck hook or tool holds up that process only, never the app,
and the client stops it however long it takes (see
:mod:`flowtui.runtime.channel`). No thread hop per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, NoReturn

from flowtui.runtime.bus import current_origin
from flowtui.runtime.errors import is_flow_code, shown_path

_IS_ASYNC: dict[Any, bool] = {}
_PLAIN = frozenset({bool, int, float, str})
# A process the flow's code forked (os.fork in a tool or hook) carries a copy of the run: one that came
# back into the run went on with it, running tools and hooks again, unseen. It ends when its code
# returns into the run instead; a fork made outside the run's code (a pool made before it) is no copy.
_forked_in_a_call = False


def _forked() -> None:
    global _forked_in_a_call
    _forked_in_a_call = current_origin.get() != "runtime"


os.register_at_fork(after_in_child=_forked)


def _leave_the_copy() -> None:
    for stream in (sys.stdout, sys.stderr):  # what the forked code printed, then nothing of the run
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def is_async(fn: Callable[..., Any]) -> bool:
    key = getattr(fn, "__func__", fn)
    try:
        return _IS_ASYNC[key]
    except KeyError:
        result = _IS_ASYNC[key] = inspect.iscoroutinefunction(fn)
        return result
    except TypeError:  # unhashable callable
        return inspect.iscoroutinefunction(fn)


async def call_user(fn: Callable[..., Any], args: Sequence[Any], *, origin: str,
                    kwargs: dict[str, Any] | None = None, then: Callable[[], None] | None = None) -> Any:
    """Call ``fn``; ``then()`` runs right after, still under ``origin`` (so the
    state changes it finds are attributed to this code)."""
    token = current_origin.set(origin)
    failed = False
    try:
        if is_async(fn):
            result = await (fn(*args, **kwargs) if kwargs else fn(*args))
        else:
            result = fn(*args, **kwargs) if kwargs else fn(*args)
        # What returns an awaitable is awaited, sync or async: `return self.runtime.run(Child, ...)`
        # without its await gave the model "<coroutine object ...>" as the tool's result. A hook
        # returns None most often, ``until`` a bool: neither can be awaited (isawaitable's check
        # against the Awaitable ABC is what a sync call costs most).
        if result is not None and type(result) not in _PLAIN and inspect.isawaitable(result):
            result = await result
        return result
    except asyncio.CancelledError as exc:
        failed = True
        raise_cancelled(exc, origin)
    except BaseException:
        failed = True
        raise
    finally:
        if _forked_in_a_call:  # returned or raised: either way, back into the run
            _leave_the_copy()
        try:
            if then is not None:
                if failed:  # the code's own error is the one said (then() refusing its state change too)
                    with contextlib.suppress(Exception):
                        then()
                else:
                    then()
        finally:
            current_origin.reset(token)


# What the origins without a name in them are, in words (the others: ``tool:x`` is ``tool x``).
_SAID = {"until": "the loop's until", "on_exhausted": "the loop's on_exhausted", "on_fail": "the loop's on_fail",
         "dispose": "a cleanup (ctx.on_dispose)", "budget": "the budget's on_exceeded"}
_SEND = ("call_model.<locals>.send", os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat.py"))


def origin_words(origin: str) -> str:
    """``tool:fetch`` is ``tool fetch``, ``hook:A.after_response`` ``hook A.after_response``,
    ``until`` ``the loop's until``."""
    return _SAID.get(origin) or origin.replace(":", " ", 1)


def running_code(frame: FrameType | None) -> tuple[str, str | None]:
    """What the run's code was inside when a signal landed in ``frame``, in words (``tool fetch``,
    ``hook A.after_response``, ``the model call of Escritor``; ``a tool or hook`` when no code of the
    flow's was found: the runtime's own), and the line of the flow's own files it was at
    (``flows/f.py:12 in execute``; None: none). An event a tool emits that cannot leave (the app far
    behind) holds the tool: said as the tool's."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    what, where = _code_in(frames)
    return what or "a tool or hook", where


def awaited_code(task: asyncio.Task | None) -> tuple[str | None, str | None]:
    """What the run's ``task`` awaits, said as :func:`running_code` says it (``the loop's until``, ``tool
    fetch``), with its line; (None, None) when no code of the flow's is awaited (the run is paused). In a
    parallel step the run awaits its branches gathered, which lead to no code: the first branch that awaits
    some is said (a stop said only "what it awaited was cancelled")."""
    found = _awaited_in(task)
    if found[0] is None and task is not None:
        for other in asyncio.all_tasks(task.get_loop()):
            if other is not task and not other.done() and (said := _awaited_in(other))[0] is not None:
                return said
    return found


def _awaited_in(task: asyncio.Task | None) -> tuple[str | None, str | None]:
    frames, coro = [], task.get_coro() if task is not None else None
    while coro is not None and len(frames) < 10_000:  # the coroutines awaiting each other, innermost last
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        if isinstance(coro, asyncio.Task):  # (a task it awaits: what that one awaits)
            coro = coro.get_coro()
    return _code_in(frames[::-1])


def _code_in(frames: list[FrameType]) -> tuple[str | None, str | None]:
    """(what, where) of the innermost code of the run's that ``frames`` (innermost first) are inside: what in
    words (None: the runtime's own code), where the flow's own line (None: none)."""
    where = None
    for frame in frames:
        code = frame.f_code
        if where is None and is_flow_code(code.co_filename):
            where = f"{shown_path(code.co_filename)}:{frame.f_lineno} in {code.co_name}"
        if code is _CALL_USER:
            return origin_words(frame.f_locals.get("origin", "runtime")), where
        if (code.co_qualname, code.co_filename) == _SEND:
            spec = frame.f_locals.get("spec")
            return (f"the model call of {spec.name}" if spec is not None else "a model call"), where
    return None, where


class CancelledInCode(RuntimeError):
    """A tool or hook raised ``CancelledError`` though nothing stopped the run (it awaited a task that
    was cancelled, or raised it itself): its failure, as any exception is, not the run's stop (the run
    ended "stopped (cancelled)", exit 0, the tool call left unanswered)."""

    def __init__(self, origin: str) -> None:
        super().__init__(f"{origin_words(origin)} raised CancelledError, and nothing stopped the run (a task "
                         "it awaited was cancelled?); catch it there, or let that task finish")


def raise_cancelled(exc: asyncio.CancelledError, origin: str) -> NoReturn:
    """Raise ``exc`` again when the run's task is being cancelled (a stop, the app quitting); else it
    came from the code of ``origin`` (``tool:x``, ``provider P``): :class:`CancelledInCode`."""
    task = asyncio.current_task()
    if task is None or task.cancelling():
        raise exc
    raise CancelledInCode(origin) from exc


# What a hook's return value replaces, and what None does: for the message when it returns something else.
_RETURNS = {
    "before_prompt": "the prompt as a str, or None to keep it",
    "before_tool": "a ToolCall to replace the call, or None to keep it",
    "after_response": "a str to replace ctx.output, or None to keep it",
    "after_tool": "a str or a ToolOutput to replace the tool's output, or None to keep it",
    "on_error": "a str to be the agent's reply, or None to let the error end the run",
    "run": "the agent's output as a str, or None",
}


def hook_text(fn: Callable[..., Any], agent: str, hook: str, value: Any) -> str:
    """A hook's return value that replaces a text. Anything but a str is refused, naming the hook:
    ``str()`` made the model's system prompt ``['x']`` of a list, a run's output ``True``."""
    if isinstance(value, str):
        return value
    refuse_returned(fn, agent, hook, value)


def refuse_returned(fn: Callable[..., Any], agent: str, hook: str, value: Any) -> NoReturn:
    """Raise the TypeError that says hook ``fn`` of ``agent`` returned what it may not, and what it may."""
    from flowtui.runtime.errors import safe_repr, shown_path
    from flowtui.runtime.markers import where

    file, line = where(fn)
    at = f" (defined at {shown_path(file)}:{line})" if file else ""
    shown = safe_repr(value)  # (one that cannot say itself failed the run with its own error, naming no hook)
    raise TypeError(f"{agent}.{hook} returned {type(value).__name__} {shown}{at}; return {_RETURNS[hook]}")


_CALL_USER = call_user.__code__
