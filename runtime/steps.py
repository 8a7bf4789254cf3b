"""Step combinators (``loop``, ``parallel``) and the stop helpers.

A step is an ``@agent`` class, a ``loop(...)`` or a ``parallel([...])``; they nest.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flowtui.runtime.context import own_loops
from flowtui.runtime.errors import ConfigError
from flowtui.runtime.nodes import loops_var


@dataclass(frozen=True)
class LoopSpec:
    steps: tuple[Any, ...]
    until: Callable[..., Any] | None
    max_iterations: int | float  # math.inf: no ceiling
    max_fails: int | float
    on_exhausted: Callable[..., Any] | None
    on_fail: Callable[..., Any] | None
    name: str


@dataclass(frozen=True)
class ParallelSpec:
    steps: tuple[Any, ...]
    name: str


@dataclass(frozen=True)
class FailInfo:
    """What ``on_fail(ctx, info)`` receives after every failed tool call inside a loop.

    ``consecutive`` counts the failures since the last success (the loop stops
    when it reaches ``max_fails``); ``total`` every failure of this loop.
    """

    tool: str
    error: str
    consecutive: int
    total: int
    max_fails: int | float


def loop(steps: list[Any], until: Callable[..., Any] | None = None, *, max_iterations: int | float = 10,
         max_fails: int | float = 5, on_exhausted: Callable[..., Any] | None = None,
         on_fail: Callable[..., Any] | None = None, name: str = "loop", **unknown: Any) -> LoopSpec:
    """Run ``steps`` again and again: at least once, until ``until(ctx[, s])`` is true.

    Stops at ``max_iterations`` (then ``on_exhausted(ctx, n)``) or when
    ``max_fails`` tool calls in a row have failed. ``on_fail(ctx, info)`` is
    called after *every* failed tool call, with a :class:`FailInfo`, so it can
    warn early. ``math.inf`` turns either brake off (``until`` and the budget
    remain).
    """
    from flowtui.runtime.checks import check_name, refuse_unknown

    check_name(name, "loop(...)", blank=False)
    refuse_unknown(f"{name}(...)", unknown, loop)
    steps = listed(steps, f"{name}(steps=...)", "steps")
    if not steps:
        raise ConfigError(f"{name}(steps=[...]) is empty; give it the agents it repeats: {name}(steps=[MyAgent], "
                          "until=...)")
    if until is not None and not callable(until):
        raise ConfigError(f"{name}(until={until!r}): until is a function of (ctx) or (ctx, s) that says when "
                          f"to stop, e.g. until=lambda ctx, s: s.aprovado")
    for param, value, takes in (("on_exhausted", on_exhausted, "(ctx, n)"), ("on_fail", on_fail, "(ctx, info)")):
        if value is not None and not callable(value):
            raise ConfigError(f"{name}({param}={value!r:.60}): {param} is a function of {takes}, called by "
                              f"the loop")
    max_iterations = _brake(name, "max_iterations", max_iterations)
    max_fails = _brake(name, "max_fails", max_fails)
    return LoopSpec(steps, until, max_iterations, max_fails, on_exhausted, on_fail, name)


def _brake(loop_name: str, param: str, value: Any) -> int | float:
    """A whole number of at least 1, or ``math.inf`` (no limit); anything else is refused now,
    not when the loop first reaches it."""
    if isinstance(value, float) and value == math.inf:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise ConfigError(f"{loop_name}(..., {param}={value!r}): must be a whole number of at least 1, "
                      f"or math.inf for no limit")


def parallel(steps: list[Any], *more: Any, name: str = "parallel") -> ParallelSpec:
    """Run ``steps`` concurrently on the same context; the last writer of ``ctx.output``/``ctx.turn`` wins."""
    from flowtui.runtime.checks import check_name

    check_name(name, "parallel(...)", blank=False)
    if more:
        shown = ", ".join(getattr(s, "__name__", None) or "..." for s in (steps, *more))
        raise ConfigError(f"{name}(...) takes its steps as one list: write {name}([{shown}])")
    steps = listed(steps, f"{name}(...)", "steps")
    if not steps:
        raise ConfigError(f"{name}([...]) is empty; give it the agents it runs at once: {name}([AgentA, AgentB])")
    return ParallelSpec(steps, name)


def listed(value: Any, where_: str, param: str) -> tuple[Any, ...]:
    """``value`` given where a list is expected: a list or tuple passes; one item alone is refused,
    saying how to write it (``steps=A`` for ``steps=[A]``)."""
    if isinstance(value, (list, tuple)):
        return tuple(value)
    name = getattr(value, "__name__", None) or repr(value)
    raise ConfigError(f"{where_}: {param}= takes a list, not {name} alone; write {param}=[{name}]")


_CALLED = object()  # a stop helper called with no ctx: until=until_answered() at import


def _called_bare(helper: str) -> ConfigError:
    return ConfigError(f"{helper}() was called with no ctx: give the function itself, until={helper} "
                       f"(no parentheses); the loop calls it with ctx after every iteration")


def turn_of(ctx: Any = _CALLED):
    """``ctx.turn``, or ``None`` before the first turn."""
    if ctx is _CALLED:
        raise _called_bare("turn_of")
    return ctx.get("turn")


def called_tool(ctx: Any = _CALLED) -> bool:
    """True when the last turn called a tool."""
    if ctx is _CALLED:
        raise _called_bare("called_tool")
    turn = ctx.get("turn")
    return bool(turn and turn.called_tool)


def until_answered(ctx: Any = _CALLED) -> bool:
    """True when the last turn called no tool: the model answered."""
    if ctx is _CALLED:
        raise _called_bare("until_answered")
    turn = ctx.get("turn")
    return turn is not None and not turn.called_tool


def was_exhausted(ctx: Any = _CALLED) -> bool:
    """True when the most recent loop stopped at its ``max_iterations``: in an outer loop's ``until``, the
    inner loop that ended in its iteration (``ctx.loop`` is the outer loop's own by then), else ``ctx.loop``'s."""
    if ctx is _CALLED:
        raise _called_bare("was_exhausted")
    mine = own_loops(ctx)  # (a branch of a parallel step: its own, not its sibling's)
    ended = mine[2] if mine is not None else getattr(ctx, "_ended_loop", None)
    if ended is not None:
        running = loops_var.get()
        if running and running[-1] in ended[1]:  # it ended inside the loop running now
            return bool(ended[0].exhausted)
    info = ctx.get("loop")
    return bool(info and info.exhausted)
