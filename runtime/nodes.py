"""Nodes of the run tree and the bookkeeping around them.

:class:`NodeScope` emits ``node.start``/``node.end`` around a block of work and
makes it the current node (context variables, so concurrent steps and worker
threads each see their own). Shared by the engine, agent turns and tools.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import TYPE_CHECKING, Any

from flowtui.runtime.budget import BudgetStop
from flowtui.runtime.bus import current_node
from flowtui.runtime.control import RunStopped
from flowtui.runtime.errors import describe_error
from flowtui.runtime.events import NodeEnd, NodeStart

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run

# Labels of the nodes around the running code, for "where the run is".
path_var: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("flowtui_path", default=())
# Node ids of the loops around the running code, outermost first.
loops_var: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("flowtui_loops", default=())


class FailCounter:
    """Tool failures inside the innermost loop: ``count`` in a row (a success resets it), ``total``
    in all; ``on_fail`` is that loop's callback, called after each failure."""

    __slots__ = ("count", "total", "on_fail", "max_fails")

    def __init__(self, *, on_fail: Any = None, max_fails: int | float = 0) -> None:
        self.count = 0
        self.total = 0
        self.on_fail = on_fail
        self.max_fails = max_fails


fail_counter: contextvars.ContextVar[FailCounter | None] = contextvars.ContextVar("flowtui_fails", default=None)


class NodeScope:
    """Emits ``node.start``/``node.end`` around a block and makes it the current node."""

    __slots__ = ("run", "kind", "name", "label", "data", "status", "error", "id", "parent", "_t0", "_paused0",
                 "_delivered0", "_tokens")

    def __init__(self, run: "Run", kind: str, name: str, *, label: str | None = None,
                 data: dict[str, Any] | None = None) -> None:
        self.run, self.kind, self.name = run, kind, name
        self.label = label or name
        self.data = data if data is not None else {}
        self.status = "ok"
        self.error: str | None = None

    def __enter__(self) -> "NodeScope":
        run = self.run
        emitter = run.emitter
        self.id = node_id = f"n{next(emitter.stream._node_ids)}"  # Stream.next_node_id, inline
        self.parent = parent = current_node.get()[0]
        emitter.emit(NodeStart, node_id=node_id, parent_id=parent, kind=self.kind, name=self.name,
                     data=dict(self.data))
        self._tokens = (current_node.set((node_id, parent)), path_var.set(path_var.get() + (self.label,)))
        controller = run.controller
        self._paused0 = controller.paused_s if controller is not None else 0.0
        self._delivered0 = emitter.stream.delivery_s
        self._t0 = time.perf_counter()
        return self

    def relabel(self, label: str) -> None:
        path_var.set(path_var.get()[:-1] + (label,))

    def __exit__(self, exc_type, exc, tb) -> None:
        # Neither the time spent paused inside the node nor the time its events took to reach the
        # sinks (the journal, the app) is its duration.
        controller = self.run.controller
        paused = controller.paused_s - self._paused0 if controller is not None else 0.0
        delivered = self.run.emitter.stream.delivery_s - self._delivered0
        ms = max(time.perf_counter() - self._t0 - paused - delivered, 0.0) * 1000
        path_var.reset(self._tokens[1])
        current_node.reset(self._tokens[0])
        if exc is not None:
            if isinstance(exc, (RunStopped, BudgetStop, asyncio.CancelledError)):
                self.status = "stopped"
            else:
                self.status = "error"
                self.error = describe_error(exc)
        self.run.emitter.emit(NodeEnd, node_id=self.id, parent_id=self.parent, kind=self.kind, name=self.name,
                              status=self.status, duration_ms=round(ms, 3), error=self.error, data=self.data)
