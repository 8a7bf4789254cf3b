"""Step combinators (``loop``, ``parallel``) and the stop helpers.

A step is an ``@agent`` class, a ``loop(...)`` or a ``parallel([...])``; they nest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flowtui.runtime.errors import ConfigError


@dataclass(frozen=True)
class LoopSpec:
    steps: tuple[Any, ...]
    until: Callable[..., Any] | None
    max_iterations: int
    max_fails: int
    on_exhausted: Callable[..., Any] | None
    on_fail: Callable[..., Any] | None
    name: str


@dataclass(frozen=True)
class ParallelSpec:
    steps: tuple[Any, ...]
    name: str


@dataclass(frozen=True)
class FailInfo:
    """What ``on_fail(ctx, info)`` receives when ``max_fails`` consecutive tool failures stop a loop."""

    fails: int
    tool_name: str | None
    error: str


def loop(steps: list[Any], until: Callable[..., Any] | None = None, *, max_iterations: int = 10,
         max_fails: int = 5, on_exhausted: Callable[..., Any] | None = None,
         on_fail: Callable[..., Any] | None = None, name: str = "loop") -> LoopSpec:
    """Run ``steps`` again and again: at least once, until ``until(ctx[, s])`` is true.

    Stops at ``max_iterations`` (then ``on_exhausted(ctx, n)``) or after
    ``max_fails`` consecutive tool failures (then ``on_fail(ctx, info)``).
    """
    if not steps:
        raise ConfigError(f"{name}(steps=[...]) is empty")
    if max_iterations < 1:
        raise ConfigError(f"{name}(max_iterations={max_iterations}): must be at least 1")
    if max_fails < 1:
        raise ConfigError(f"{name}(max_fails={max_fails}): must be at least 1")
    return LoopSpec(tuple(steps), until, max_iterations, max_fails, on_exhausted, on_fail, name)


def parallel(steps: list[Any], *, name: str = "parallel") -> ParallelSpec:
    """Run ``steps`` concurrently on the same context; the last writer of ``ctx.output``/``ctx.turn`` wins."""
    if not steps:
        raise ConfigError(f"{name}([...]) is empty")
    return ParallelSpec(tuple(steps), name)


def turn_of(ctx: Any):
    """``ctx.turn``, or ``None`` before the first turn."""
    return ctx.get("turn")


def called_tool(ctx: Any) -> bool:
    """True when the last turn called a tool."""
    turn = ctx.get("turn")
    return bool(turn and turn.called_tool)


def until_answered(ctx: Any) -> bool:
    """True when the last turn called no tool: the model answered."""
    turn = ctx.get("turn")
    return turn is not None and not turn.called_tool


def was_exhausted(ctx: Any) -> bool:
    """True when the most recent loop stopped at its ``max_iterations``."""
    info = ctx.get("loop")
    return bool(info and info.exhausted)
