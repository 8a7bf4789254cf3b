"""Controlling a run: pause points, commands and breakpoints.

The engine awaits :meth:`Controller.checkpoint` at every pause point: before
each agent turn (``agent``), before each model call (``chat``), before each
tool execution (``tool``) and after each loop iteration (``loop_iteration``).
A tool listed in ``approve`` pauses before every call, whatever the mode
(reason ``approval``), until a person decides on it. A watchpoint that fired
(:mod:`~flowtui.runtime.watching`) pauses at the next pause point, whatever
the mode (reason ``watchpoint``; ``on_watch="stop"`` ends the run there
instead, for a run nobody drives); the pause names it and the event that made
it true. One that fires while the run is paused is said at once (the pause is
emitted again, naming it).
Commands (step, next turn, loop once, continue, pause, stop) only set what the
next checkpoint does, so the TUI, a headless script or a test drive a run the
same way. ``stop`` makes the next checkpoint raise :class:`RunStopped`; the run
then ends cleanly with status ``stopped``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from flowtui.runtime.events import RunPause, RunResume, WatchHit
from flowtui.runtime.watching import Watchpoints

# (end: the run's last steps are done; a pause there only when a watchpoint fired after the last pause point)
PointKind = Literal["agent", "chat", "tool", "loop_iteration", "end"]
Mode = Literal["run", "step", "next_turn", "loop_once", "pause"]
OnWatch = Literal["pause", "stop"]


class RunStopped(BaseException):
    """Raised at a checkpoint after ``stop()``; the engine ends the run as ``stopped``.

    A ``BaseException`` (like ``asyncio.CancelledError``) so that user code's
    ``except Exception`` (a tool, a hook) cannot swallow it. ``reason`` is what
    the run's end says (``stopped by user`` by default)."""

    def __init__(self, reason: str = "stopped by user") -> None:
        super().__init__(reason)
        self.reason = reason


class Terminated(RunStopped):
    """Raised inside whatever code is running when the worker is told to terminate: a tool or
    hook that never reaches a pause point is unwound, and the run ends as ``stopped``."""


class Signalled(BaseException):
    """Raised inside whatever code is running when something other than flowtui terminates the
    worker (``SIGTERM``): the run ends as ``failed``, saying which signal."""


class StopRequested(RunStopped):
    """Raised at the next unit of work after ``ctx.stop()``; ``origin`` is the code that asked
    (``tool:x``, ``hook:A.after_response``, ``until``). Only that run ends: a child's stop
    returns to its parent's tool like a finished child."""

    def __init__(self, origin: str) -> None:
        super().__init__(origin)
        self.origin = origin


@dataclass(frozen=True)
class PausePoint:
    kind: PointKind
    name: str
    node_id: str | None = None
    loops: tuple[str, ...] = ()  # node ids of the loops around this point, outermost first
    path: tuple[str, ...] = field(default=())
    decided: bool = False  # a tool call decided already (a re-execution made the recorded decision): not asked
    call_id: str | None = None  # before a tool: the id of its call


class Controller:
    """Decides, at each pause point, whether the run waits for a command."""

    def __init__(self, *, start_paused: bool = False, breakpoints: Iterable[str] = (),
                 approve: Iterable[str] = (), watch: Iterable[str] = (), on_watch: OnWatch = "pause") -> None:
        self._mode: Mode = "step" if start_paused else "run"
        self._reason = "start" if start_paused else "step"
        self._pause_reason = "pause"
        self._target_loops: frozenset[str] = frozenset()  # loop once: the loops around where it was asked
        self._stop = False
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.breakpoints: set[str] = set(breakpoints)
        # Tools whose every call waits for a person's decision ("all": every tool).
        self.approve: set[str] = set(approve)
        self.paused_at: PausePoint | None = None
        self._last: PausePoint | None = None
        self.paused_s = 0.0  # time the run has spent paused: node durations leave it out
        self._held_since: float | None = None  # when the pause under way began
        # Watchpoints (``watch.add(expr)``, ``watch.remove(expr)``); checked once the run is bound to them.
        self.watch = Watchpoints(self._watch_fired)
        for text in watch:
            self.watch.add(text)
        self.on_watch: OnWatch = on_watch
        self._fired: list[WatchHit] = []  # fired since the last pause point
        self._waiting: tuple = ()  # (emit, point, reason) of the pause the run waits at
        # A move (step, continue...) given while the run waits, until the run takes it: a pause given
        # before the run woke (a client's detach at once after) cancelled it, though it was answered ok
        self._moved: Mode | None = None
        self._stop_reason: str | None = None

    # --- the engine's side -------------------------------------------------
    async def checkpoint(self, point: PausePoint, emit) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
        self._last = point
        # Yield first: a command that arrived while user code held the loop (pause, stop) is
        # handled now, and decides this very pause point.
        await asyncio.sleep(0)
        if self._stop:
            raise self._stopped()
        fired = self._fired
        if fired:
            self._fired = []
        reason = self._should_pause(point)
        if fired and reason != "approval":  # a call waiting for a decision still says so
            reason = "watchpoint"
        if reason is None:
            return
        self.paused_at = point
        fields = dict(point=point.kind, name=point.name, reason=reason, path=list(point.path))
        if fired:
            fields["watch"] = fired
        emit(RunPause, **fields)
        if fired and self.on_watch == "stop":
            self.paused_at = None
            emit(RunResume, command="stop")
            raise RunStopped(watch_reason(fired))
        self._waiting = (emit, point, reason)
        assert self._wake is not None
        since = self._held_since = time.perf_counter()
        try:
            while True:
                self._wake.clear()
                await self._wake.wait()
                if self._stop:
                    self.paused_at = None
                    emit(RunResume, command="stop")
                    raise self._stopped()
                moved, self._moved = self._moved, None
                if moved is not None or self._mode != "pause":
                    break
        finally:
            self.paused_s += time.perf_counter() - since
            self._held_since = None
            self._waiting, self._moved = (), None
        self.paused_at = None
        command = moved or self._mode  # (a pause given since: the run pauses at the next pause point)
        emit(RunResume, command=command if command != "run" else "continue")

    def _stopped(self) -> RunStopped:
        return RunStopped(self._stop_reason) if self._stop_reason else RunStopped()

    @property
    def holds_at_end(self) -> bool:
        """The run's end is a pause point: a watchpoint fired since the last one (it would go unsaid), or a
        re-executed prefix ended after the last one (a fork there is left paused there, as the person was)."""
        return bool(self._fired) or (self._mode == "step" and self._reason == "resumed")

    @property
    def fired_unsaid(self) -> bool:
        """A watchpoint fired since the last pause point: a child workflow's end is one then (paused after
        it, its run had ended: nothing of it could be looked at or edited)."""
        return bool(self._fired)

    def _watch_fired(self, hit: WatchHit) -> None:
        """A watchpoint fired (called by the checker, as the event that did it is delivered)."""
        if self.paused_at is not None and self._waiting:  # an edit made while paused: say it now
            emit, point, reason = self._waiting
            emit(RunPause, point=point.kind, name=point.name, reason="approval" if reason == "approval"
                 else "watchpoint", path=list(point.path), watch=[hit])
            if self.on_watch == "stop":
                self._stop_reason = watch_reason([hit])
                self.stop()
            return
        self._fired.append(hit)

    def needs_approval(self, tool: str) -> bool:
        return tool in self.approve or "all" in self.approve

    def _should_pause(self, point: PausePoint) -> str | None:
        if point.kind == "tool" and self.approve and self.needs_approval(point.name) and not point.decided:
            return "approval"  # whatever the mode: a call of such a tool never runs undecided
        mode = self._mode
        if mode == "pause":
            return self._pause_reason
        if mode == "step":
            return self._reason
        if mode == "next_turn" and point.kind == "agent":
            return "next_turn"
        if mode == "loop_once" and point.kind == "loop_iteration":
            # The first of them to end an iteration: the innermost one still running (one that has just
            # ended its last iteration never ends another; the loop around it does)
            if not self._target_loops or point.node_id in self._target_loops:
                return "loop_once"
        if point.name in self.breakpoints and point.kind in ("agent", "tool", "loop_iteration"):
            return "breakpoint"
        return None

    # --- commands ------------------------------------------------------------
    @property
    def paused(self) -> bool:
        return self.paused_at is not None

    def held_s(self) -> float:
        """The time the run has spent paused until now, the pause under way included."""
        since = self._held_since
        return self.paused_s + (time.perf_counter() - since if since is not None else 0.0)

    @property
    def stopping(self) -> bool:
        return self._stop

    def step(self) -> None:
        """Run to the next pause point."""
        self._command("step", reason="step")

    def next_turn(self) -> None:
        """Run until the next agent turn is about to start."""
        self._command("next_turn")

    def loop_once(self) -> None:
        """Run until the innermost current loop finishes its iteration."""
        at = self.paused_at or self._last
        self._target_loops = frozenset(at.loops) if at else frozenset()
        self._command("loop_once")

    def resume(self) -> None:
        """Continue to the next breakpoint or the end."""
        self._command("run")

    def proceed(self) -> None:
        """Go on as the run was going (after a decision on a tool call that waited for approval): past the
        call to the next pause point when it was pausing (``p``); it waited there for ever. After a divergence
        (the call waited where a re-execution diverged), on live: deciding the call is how the person goes on
        (the divergence screen's continue asks about it first), and the next pause said "diverged" again."""
        if self._waiting and self._mode == "pause":
            if self._pause_reason == "diverged":
                self._command("run")
                return
            self._moved = "step"
        self._signal()

    def pause(self, reason: str = "pause") -> None:
        """Pause at the next pause point (``reason``: what the pause will say, e.g. ``diverged``)."""
        self._pause_reason = reason
        self._command("pause", wake=False)

    def resumed(self) -> None:
        """A re-executed prefix is over (``--resume-from``): a run that started paused pauses at the
        next pause point, and says why (``resumed``)."""
        if self._mode == "step" and self._reason == "start":
            self._reason = "resumed"

    def stop(self, reason: str | None = None) -> None:
        """End the run cleanly (status ``stopped``, ``reason`` or ``stopped by user``) at the next pause point."""
        if reason:
            self._stop_reason = reason
        self._stop = True
        self._signal()

    def toggle_breakpoint(self, name: str) -> bool:
        """Add or remove a breakpoint on an agent, tool or loop name; True when now set."""
        if name in self.breakpoints:
            self.breakpoints.discard(name)
            return False
        self.breakpoints.add(name)
        return True

    def _command(self, mode: Mode, *, reason: str | None = None, wake: bool = True) -> None:
        self._mode = mode
        if reason:
            self._reason = reason
        if wake:
            if self._waiting:
                self._moved = mode
            self._signal()

    def _signal(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is None or wake is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            wake.set()
        else:
            loop.call_soon_threadsafe(wake.set)


def watch_reason(fired: list[WatchHit]) -> str:
    """``watchpoint state.rodadas >= 2 fired at event #57 (state.rodadas = 2)``: why a run ended there."""
    hit = fired[0]
    where = f" in {hit.workflow}" if hit.workflow else ""
    more = f"; and {len(fired) - 1} more" if len(fired) > 1 else ""
    return f"watchpoint {hit.expr} fired at event #{hit.seq}{where}" + (f" ({hit.detail})" if hit.detail else "") + more
