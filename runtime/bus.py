"""Delivering events: one ordered stream per top-level run.

A :class:`Stream` numbers events and hands each to every sink in order. A
sink that raises is isolated: its first failure is reported to the other
sinks as a ``subscriber.error`` event (after the event it failed on), and the
run goes on. Events may be emitted from worker threads (sync user code runs
there), so numbering and delivery happen under a lock: ``seq`` order is
delivery order.

The node an event belongs to and its origin come from context variables set
by the engine, so user code (hooks, tools) never passes them along.
"""

from __future__ import annotations

import contextvars
import itertools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from flowtui.runtime.construct import build, builders
from flowtui.runtime.events import SubscriberError

Sink = Callable[[Any], None]

# (node_id, parent_id) of the node that is running in this task/thread.
current_node: contextvars.ContextVar[tuple[str | None, str | None]] = contextvars.ContextVar(
    "flowtui_node", default=(None, None)
)
# What is running: "runtime", "hook:Agent.after_response", "tool:name", "until", "user".
current_origin: contextvars.ContextVar[str] = contextvars.ContextVar(
    "flowtui_origin", default="runtime"
)


class ToolNotes:
    """What the tool call under way leaves on its node for people and for a re-execution (set per call, by
    runtime.tools: each branch of a parallel step has its own):

    - ``raised``: what the tool's own code (or a tool middleware) raised, its type and where (the model is told
      "Tool t failed: <message>"; the node said only that, even with --debug);
    - ``cleanups``: how many cleanups it registered on ``ctx``, the run's (ctx.on_dispose): a re-execution that
      serves the tool (which then registers none) knows the recorded run's cleanups it lacks.
    """

    __slots__ = ("ctx", "raised", "cleanups")

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.raised: list[str] = []
        self.cleanups = 0


tool_notes: contextvars.ContextVar[ToolNotes | None] = contextvars.ContextVar("flowtui_tool_notes", default=None)


# Events are built like the runtime's other objects: from a per-class template, without
# validation (every field comes from values the runtime checked). The name stays for callers.
build_event = build


def sink_name(sink: Sink) -> str:
    return getattr(sink, "__qualname__", None) or type(sink).__name__


class Stream:
    """The numbered event stream of one top-level run (its child runs share it).

    ``lock`` is reentrant and held while an event is numbered and delivered, so
    code that changes state and emits under it (``ctx.state``, ``ctx``, the
    workflow state) keeps the events in the order the changes happened, even
    from worker threads. An event emitted by a sink while it receives another
    is queued and delivered after the current one, in order.
    """

    def __init__(self, sinks: list[Sink]) -> None:
        self._sinks = sinks
        self._seq = 0
        self._node_ids = itertools.count(1)
        self._reported: set[int] = set()
        self.lock = threading.RLock()
        self._delivering = False
        self._queued: list[Any] = []
        self._leaving: list[Sink] = []  # removed while an event was delivered: they go once it has been
        # The thread the run runs on (set again as it starts): an event from another that says no origin
        # came from a thread the flow started (the runtime emits from none), whose context holds none of the
        # run's variables.
        self.thread = threading.get_ident()
        # Time spent handing events to the sinks (a journal redacting and writing a 50 MB result):
        # the debugger's, not the flow's, so node durations leave it out.
        self.delivery_s = 0.0

    def next_node_id(self) -> str:
        return f"n{next(self._node_ids)}"  # one step of a C counter: atomic, no lock needed

    @property
    def last_seq(self) -> int:
        return self._seq

    def add_sink(self, sink: Sink) -> None:
        """Deliver the next events to ``sink`` too (the watchpoints' checker, once one is set). The
        list is changed in place: the run's startup adds the subscribers an async setup made to it."""
        with self.lock:
            if sink not in self._sinks:
                self._sinks.append(sink)

    def remove_sink(self, sink: Sink) -> None:
        """Deliver no more events to ``sink`` (one that removes itself as it receives one: from the next)."""
        with self.lock:
            if self._delivering:  # (the list is being gone through)
                self._leaving.append(sink)
            elif sink in self._sinks:
                self._sinks.remove(sink)

    def _let_go(self) -> None:
        for sink in self._leaving:
            if sink in self._sinks:
                self._sinks.remove(sink)
        self._leaving.clear()

    def emit(self, cls: type, run_id: str, fields: dict[str, Any]) -> Any:
        """Number ``fields`` as an event of ``cls`` of run ``run_id`` and deliver it."""
        with self.lock:
            self._seq += 1
            fields["seq"] = self._seq
            fields["ts"] = time.time()
            fields["run_id"] = run_id
            event = builders[cls](fields)
            if self._delivering:  # emitted by a sink: after the event it is handling
                self._queued.append(event)
                return event
            self._delivering = True
            t0 = time.perf_counter()
            try:
                self._deliver(event)
                if self._leaving:
                    self._let_go()
                if self._queued:
                    self._drain()
            finally:
                self._delivering = False
                self.delivery_s += time.perf_counter() - t0
            return event

    def _drain(self) -> None:
        """Deliver what sinks emitted while they received an event, in order."""
        while self._queued:
            self._deliver(self._queued.pop(0))
            if self._leaving:
                self._let_go()

    def _deliver(self, event: Any) -> None:
        failed = None
        for sink in self._sinks:
            try:
                sink(event)
            except Exception as exc:  # a subscriber never breaks the run
                failed = (failed or []) + [(sink, exc)]
        if failed:
            for sink, exc in failed:
                self._report(sink, exc, event)

    def _report(self, bad: Sink, exc: Exception, event: Any) -> None:
        """Tell the other sinks, once per failing sink (it keeps receiving events). A failure on the run's
        last event is said on stderr: nothing follows run.end (a journal went on past it)."""
        if id(bad) in self._reported:
            return
        self._reported.add(id(bad))
        run_id = event.run_id
        if event.type == "run.end" and event.parent_id is None:
            from flowtui.runtime.secrets import redact, secret_values

            said = f"flowtui: subscriber {sink_name(bad)} raised on run.end: {type(exc).__name__}: {exc}"
            print(redact(said, secret_values()), file=sys.stderr, flush=True)
            return
        self._seq += 1
        report = build_event(SubscriberError, dict(
            seq=self._seq, ts=time.time(), run_id=run_id, node_id=None, parent_id=None,
            origin="runtime", subscriber=sink_name(bad), error=f"{type(exc).__name__}: {exc}",
        ))
        for sink in self._sinks:
            if sink is bad:
                continue
            try:
                sink(report)
            except Exception:
                pass  # reporting the report would never end


class Emitter:
    """Emits events for one run (a child run has its own emitter on its parent's stream).

    Once the run has ended (``close()``), late emits (say, from a worker
    thread of a cancelled tool that is still running) are dropped, so nothing
    follows ``run.end``.
    """

    __slots__ = ("stream", "run_id", "lock", "closed")

    def __init__(self, stream: Stream, run_id: str) -> None:
        self.stream = stream
        self.run_id = run_id
        self.lock = stream.lock
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def emit(self, cls: type, **fields: Any) -> Any:
        if self.closed:
            return None
        if "node_id" not in fields:
            fields["node_id"], fields["parent_id"] = current_node.get()
        if "origin" not in fields:
            origin = fields["origin"] = current_origin.get()
            if origin == "runtime" and threading.get_ident() != self.stream.thread:
                fields["origin"] = f"thread:{threading.current_thread().name}"
        return self.stream.emit(cls, self.run_id, fields)
