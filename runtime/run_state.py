"""What the fold keeps of each node and of each run (:mod:`runtime.fold` folds events into them).

A :class:`NodeView` is one node of the run tree as its events left it; a
:class:`RunState` is one run's own panes (a child workflow's run has its own):
its ``ctx.state`` buckets with where each item came from, workflow state,
``ctx`` and prompt.
"""

from __future__ import annotations

import copy
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

from flowtui.runtime.messages import Message


@dataclass
class NodeView:
    id: str
    kind: str
    name: str
    parent_id: str | None
    run_id: str
    status: str = "running"  # running, ok, error, stopped
    # The run ended while this node was still open (a crash, a kill, a stop): it never sent its
    # own node.end, so run.end closed it with the run's status (``error`` for a failed run).
    unfinished: bool = False
    duration_ms: float | None = None
    error: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    iterations_done: int = 0
    # A loop's current iteration: the one running, or the one just finished while the run is
    # paused after it (the next one starts when something inside the loop does). The runtime's
    # path says the same: ``loop 2/5`` from the start of iteration 2 until iteration 3 starts.
    iteration: int = 1
    loop: Any = None  # a loop: the ctx.loop it set last, and that event's seq
    loop_seq: int = 0

    @property
    def label(self) -> str:
        if self.kind == "loop":
            total = self.data.get("max_iterations", "?")
            if total is None:  # a loop with max_iterations=math.inf
                total = "∞"
            done = self.data.get("iterations", self.iterations_done)
            if self.status == "running":
                return f"{self.name} {self.iteration}/{total}"
            if self.status in ("error", "stopped") and isinstance(done, int):  # ended inside an iteration:
                return f"{self.name} {max(done, self.iteration)}/{total}"  # that one, as the path said
            return f"{self.name} {done}/{total}"
        return self.name


class RunState:
    """One run's own panes: its ``ctx.state`` buckets, workflow state, ``ctx`` and prompt. A
    child workflow started by a tool is a run of its own, under that tool's node."""

    __slots__ = ("run_id", "workflow", "file", "parent_node", "parent_run", "status", "history", "history_resets",
                 "memory", "tasks", "state", "data", "last_changed", "ctx", "prompt", "last_chat",
                 "history_from", "memory_from", "tasks_from", "prompt_from", "budget", "edited_out")

    def __init__(self, run_id: str | None = None, workflow: str | None = None) -> None:
        self.run_id, self.workflow = run_id, workflow
        self.file: str | None = None
        self.parent_node: str | None = None  # the tool node that started it (a child run)
        self.parent_run: str | None = None
        self.status = "running"
        self.history: list[Message] = []
        self.history_resets = 0  # bumps when history is replaced whole (not appended)
        self.memory: list[str] = []
        self.tasks: list[str] = []
        self.state: dict[str, Any] = {}
        self.data: dict[str, Any] = {}  # ctx.data: the run's own data, never sent to the model
        self.last_changed: str | None = None
        self.ctx: dict[str, Any] = {}
        self.prompt: str | None = None
        self.last_chat: str | None = None  # the latest chat node: the one whose request is kept whole
        # Provenance: for each item of a bucket, the event that put it there and its origin.
        self.history_from: list[tuple[int, str]] = []
        self.memory_from: list[tuple[int, str]] = []
        self.tasks_from: list[tuple[int, str]] = []
        self.prompt_from: tuple[int, str] | None = None
        self.budget: dict[str, Any] | None = None  # the budget's limits and mode, from run.start
        # what a person's edits took out of a bucket, by item: where each came from, for an undo that brings it back
        self.edited_out: dict[Any, tuple[tuple[Any, tuple[int, str]], ...]] = {}

    def clone(self) -> "RunState":
        twin = RunState.__new__(RunState)
        for name in RunState.__slots__:
            value = getattr(self, name)
            setattr(twin, name, copy.copy(value) if isinstance(value, (list, dict)) else value)
        return twin

    def bucket(self, name: str) -> list:
        return {"history": self.history, "memory": self.memory, "tasks": self.tasks}[name]

    def carry(self, bucket: str, items: list, ev: Any) -> None:
        """A bucket replaced whole by ``ev``: items that were there already keep where they came
        from (matched in order: each item takes the first equal old one after the last matched),
        the others come from ``ev``. Old items are found through an index, so replacing a
        bucket of n items with m others costs n + m lookups, not n times m comparisons."""
        old, origins = self.bucket(bucket), getattr(self, f"{bucket}_from")
        at: dict[Any, list[int]] = {}  # item -> its positions in the old bucket
        for k, item in enumerate(old[:len(origins)]):
            at.setdefault(_key(item), []).append(k)
        kept, j, used = [], 0, set()
        undone = (getattr(ev, "note", None) or "").startswith("undone:")  # (an undo: an item it brings back came
        # from where it did)
        for item in items:
            places = at.get(_key(item), ())
            i = bisect_left(places, j)
            k = next((places[n] for n in range(i, len(places)) if old[places[n]] == item), None)
            if k is not None:
                kept.append(origins[k])
                used.add(k)
                j = k + 1
            else:
                kept.append((undone and self._brought_back(item)) or (ev.seq, ev.origin))
        if ev.origin == "user" and not undone:
            for k, item in enumerate(old[:len(origins)]):
                if k not in used:
                    self._took_out(item, origins[k])
        setattr(self, f"{bucket}_from", kept)

    def _took_out(self, item: Any, origin: tuple[int, str]) -> None:
        """Remember where ``item``, which a person's edit took out, came from (the latest few of each item,
        of the latest items: an undo brings back what the last edits took)."""
        key = _key(item)
        out = self.edited_out
        out[key] = (*out.pop(key, ())[-(EDITED_OUT_EACH - 1):], (item, origin))  # (tuples: a clone shares them)
        if len(out) > EDITED_OUT_ITEMS:
            del out[next(iter(out))]

    def _brought_back(self, item: Any) -> tuple[int, str] | None:
        """Where ``item``, which an undo brings back, came from: the latest such item taken out."""
        key = _key(item)
        taken = self.edited_out.get(key, ())
        for n in range(len(taken) - 1, -1, -1):
            if taken[n][0] == item:
                self.edited_out[key] = taken[:n] + taken[n + 1:]
                return taken[n][1]
        return None


EDITED_OUT_EACH = 8  # copies of one item taken out by edits whose origin is remembered
EDITED_OUT_ITEMS = 1000  # items taken out by edits whose origins are remembered (the latest)


def _key(item: Any) -> Any:
    """What an item is indexed by: a text itself, a message by its role and content (equal
    messages share them; the few that share them and differ are told apart by comparing)."""
    if isinstance(item, str):
        return item
    return (getattr(item, "role", None), str(getattr(item, "content", item)))


