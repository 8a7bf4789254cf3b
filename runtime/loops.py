"""Loops and parallel blocks: the step combinators at run time.

A loop runs its body at least once and stops on the first of: ``until`` true,
``max_iterations`` reached (``on_exhausted``), ``max_fails`` tool failures in
a row (``on_fail`` hears of each failure as it happens, in :mod:`runtime.tools`),
``ctx.stop()``, a budget, or the stop command; ``ctx.loop.stopped_by`` says
which. ``math.inf`` turns a ceiling off.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import math
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, NoReturn

from flowtui.runtime.budget import BudgetStop
from flowtui.runtime.construct import builders
from flowtui.runtime.context import LoopInfo, branch_loop, own_loops
from flowtui.runtime.control import RunStopped, StopRequested
from flowtui.runtime.errors import BudgetExceededError
from flowtui.runtime.invoke import call_user
from flowtui.runtime.nodes import FailCounter, NodeScope, fail_counter, loops_var
from flowtui.runtime.steps import LoopSpec, ParallelSpec

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run


async def run_loop(run: "Run", spec: LoopSpec) -> None:
    """``spec``'s steps again and again, at least once, until one of its stops."""
    ctx = run.ctx
    ceiling = spec.max_iterations
    shown = None if ceiling == math.inf else ceiling  # events are JSON: no infinity
    # A ceiling loop() accepts: ctx.loop is built without validation (a LoopSpec made by hand is not).
    trusted = type(ceiling) is int or (type(ceiling) is float and ceiling == math.inf)
    with NodeScope(run, "loop", spec.name, data={"max_iterations": shown, "until": spec.until is not None}) as scope:
        fails = FailCounter(on_fail=spec.on_fail, max_fails=spec.max_fails)
        tokens = (fail_counter.set(fails), loops_var.set(loops_var.get() + (scope.id,)))
        i, done, stopped_by = 0, 0, None  # iterations begun, and ended (a stop may come inside one)
        _set_loop(ctx, trusted, shown, iterations=0, max_iterations=ceiling)  # (read in its first iteration)
        try:
            while True:
                i += 1
                scope.relabel(f"{spec.name} {i}/{shown or '∞'}")
                for step in spec.steps:
                    await run.step(step)
                    if fails.count >= spec.max_fails:
                        break
                done = i
                _set_loop(ctx, trusted, shown, iterations=i, max_iterations=ceiling)
                run.check_stop()  # ctx.stop() in the last turn: no pause, no until
                if run.pauses:
                    await run.pause("loop_iteration", spec.name)
                if fails.count >= spec.max_fails:
                    stopped_by = "fails"
                    break
                if spec.until is not None and await _until(run, spec):
                    run.check_stop()  # until called ctx.stop(): the stop is what ended the loop
                    stopped_by = "until"
                    break
                if i >= ceiling:
                    stopped_by = "exhausted"
                    _set_loop(ctx, trusted, shown, iterations=i, exhausted=True, max_iterations=ceiling,
                              stopped_by="exhausted")
                    if spec.on_exhausted is not None:
                        await _call(run, spec.on_exhausted, (ctx, i)[:run.plans.arity(spec.on_exhausted)],
                                    "on_exhausted")
                    break
                if run.gate_needed():
                    await run.gate()
        except (BudgetStop, BudgetExceededError):  # (mode="raise": the budget's error, which fails the run)
            stopped_by = "budget"
            raise
        except RunStopped as exc:
            stopped_by = "stop" if isinstance(exc, StopRequested) else "stopped"
            raise
        finally:
            fail_counter.reset(tokens[0])
            loops_var.reset(tokens[1])
            scope.data.update(iterations=done, stopped_by=stopped_by)
            if stopped_by not in (None, "exhausted"):  # (exhausted: set before on_exhausted was called)
                _set_loop(ctx, trusted, shown, iterations=done, exhausted=stopped_by == "exhausted",
                          max_iterations=ceiling, stopped_by=stopped_by)
            if stopped_by is not None:
                ended = (ctx.get("loop"), loops_var.get())
                object.__setattr__(ctx, "_ended_loop", ended)  # (read where no task of the run's says its own)
                _note(ctx, ended[0], ended)


def _set_loop(ctx: Any, trusted: bool, shown_ceiling: int | None, **fields: Any) -> None:
    """``ctx.loop``. A trusted one is built without validation, with its event value (what
    ``model_dump(mode="json")`` gives: the ceiling shown as ``None`` when there is none)."""
    if not trusted:
        info = LoopInfo(**fields)
        ctx._set("loop", info, origin="runtime")
    else:
        info = builders[LoopInfo](fields)
        ctx._set("loop", info, origin="runtime", shown={
            "iterations": info.iterations, "exhausted": info.exhausted, "max_iterations": shown_ceiling,
            "stopped_by": info.stopped_by})
    mine = own_loops(ctx)
    _note(ctx, info, mine[2] if mine is not None else None)


# [ctx, the loop set last, the loop ended last] by the branches of the parallel step running now: once it is
# over, its task's own (a branch with no loop, or a parallel step nested in a branch, takes no sibling's)
_in_parallel: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("flowtui_parallel", default=None)


def in_parallel() -> bool:
    """Whether the code running is in a branch of a parallel step."""
    return _in_parallel.get() is not None


def _note(ctx: Any, info: Any, ended: Any) -> None:
    """``ctx.loop`` and the loop ended last, as this task (a branch of a parallel step) reads them."""
    branch_loop.set((ctx, info, ended))
    held = _in_parallel.get()
    if held is not None and held[0] is ctx:
        held[1:] = [info, ended]


async def _until(run: "Run", spec: LoopSpec) -> bool:
    args = (run.ctx, run.workflow_state) if run.plans.until_arity(spec) >= 2 else (run.ctx,)
    said = await _call(run, spec.until, args, "until")
    if type(said) is bool or not callable(said):  # (a value is taken as Python takes it: `a and b` is no bool)
        return bool(said)
    # A function is true: `until=lambda ctx: until_answered` (the helper, not its answer) stopped the loop
    # after one iteration, with no word of why.
    _refuse_until(spec, said)


def _refuse_until(spec: LoopSpec, said: Any) -> NoReturn:
    from flowtui.runtime.errors import shown_path
    from flowtui.runtime.markers import where

    file, line = where(spec.until)
    at = f" (defined at {shown_path(file)}:{line})" if file else ""
    if inspect.isfunction(said) or inspect.ismethod(said) or inspect.isbuiltin(said):
        name = getattr(said, "__qualname__", None) or said.__name__
        shown = f"<function {name}> (a function, not called? write {name}(ctx))"
    else:  # (a class, a functools.partial: no name to call it by)
        shown = f"{type(said).__name__} {said!r:.60} (something to call, not a condition)"
    raise TypeError(f"until of loop {spec.name!r} returned {shown}{at}; return True to stop, False to go on")


def _call(run: "Run", fn: Any, args: tuple, origin: str) -> Awaitable[Any]:
    """Loop callbacks run inline: they decide, they should not wait (await the result)."""
    return call_user(fn, args, origin=origin, then=run.check_state)


async def run_parallel(run: "Run", spec: ParallelSpec) -> None:
    """``spec``'s steps concurrently on the same ``ctx`` (the last writer of ctx.output wins; ctx.loop
    is each branch's own: see ``branch_loop``)."""
    ctx = run.ctx
    held = [ctx, None, None]
    with NodeScope(run, "parallel", spec.name):
        token = _in_parallel.set(held)  # (the branches' tasks hold it: they are made with this context)
        try:
            tasks = [asyncio.ensure_future(run.step(s)) for s in spec.steps]
        finally:
            _in_parallel.reset(token)
        try:
            await asyncio.gather(*tasks)
        except (StopRequested, BudgetStop):  # ctx.stop() or a budget reached in one branch: the others end
            # after their unit of work, as the run does (a model call under way was cancelled: paid for, and
            # counted nowhere); the first to raise something else is raised
            ended = await asyncio.gather(*tasks, return_exceptions=True)
            failed = next((e for e in ended if isinstance(e, BaseException)
                           and not isinstance(e, (StopRequested, BudgetStop))), None)
            if failed is not None:
                raise failed from None
            raise
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            if held[1] is not None:  # after the step, the most recent loop is the one its branches set last
                _note(ctx, held[1], held[2])
