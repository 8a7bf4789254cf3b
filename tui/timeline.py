"""A recorded run as a timeline: the state at event ``k`` is the fold of the events before it.

``view_at(k)`` folds ``events[:k]`` into a :class:`runtime.fold.RunView` — the
same class the live app renders — starting from the nearest checkpoint (a
copy of the view kept every ``every`` events, more apart in a journal of
more than 50,000), so scrubbing a long journal never refolds it from the start. Nothing here imports textual.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Any

CHECKPOINT_EVERY = 500
# At most about this many checkpoints: each is a copy of the view, whose history grows with the run, so a
# fixed spacing made a journal's cost grow as its square (200,000 history messages: 6 s and 650 MB).
MAX_CHECKPOINTS = 100


class Timeline:
    """The events of one run, with the RunView at any position ``0 <= k <= len(events)``."""

    def __init__(self, events: Iterable[Any], *, every: int = CHECKPOINT_EVERY) -> None:
        from flowtui.runtime.fold import RunView

        self.events: list[Any] = list(events)
        self.every = max(every, 1, len(self.events) // MAX_CHECKPOINTS)
        self._checkpoints: dict[int, Any] = {0: RunView()}
        self._view: Any = None  # the last view handed out, at self._at (mutated when stepping forward)
        self._at = -1
        self.agent_starts = [i + 1 for i, ev in enumerate(self.events)
                             if ev.type == "node.start" and ev.kind == "agent"]

    def __len__(self) -> int:
        return len(self.events)

    def view_at(self, k: int) -> Any:
        """The view after the first ``k`` events. Stepping forward reuses (and changes) the last view."""
        k = max(0, min(k, len(self.events)))
        if self._view is not None and self._at <= k and k - self._at <= self.every:
            view, at = self._view, self._at
        else:
            at = max(c for c in self._checkpoints if c <= k)
            view = self._checkpoints[at].clone()
        self._fold(view, at, k)
        self._view, self._at = view, k
        return view

    def _fold(self, view: Any, start: int, end: int) -> None:
        events, every, checkpoints = self.events, self.every, self._checkpoints
        i = start
        while i < end:
            stop = min(end, (i // every + 1) * every)
            view.apply_many(events[i:stop])
            i = stop
            if i % every == 0 and i not in checkpoints:
                checkpoints[i] = view.clone()

    def after(self, seq: int) -> int:
        """The position just after event number ``seq`` (the ``#seq`` the event log shows and ``@K``
        names): how many events are numbered up to it. A number the journal leaves out (a streamed
        reply's fragments are not journaled) gives the position after the event before it."""
        return bisect_right([getattr(ev, "seq", 0) for ev in self.events], seq)

    def event(self, k: int) -> Any | None:
        """The event that position ``k`` has just applied (``None`` at 0)."""
        return self.events[k - 1] if 0 < k <= len(self.events) else None

    def next_agent(self, k: int) -> int | None:
        """The position just after the next ``node.start`` of an agent (its turn begins)."""
        i = bisect_right(self.agent_starts, k)
        return self.agent_starts[i] if i < len(self.agent_starts) else None

    def previous_agent(self, k: int) -> int | None:
        i = bisect_left(self.agent_starts, k)
        return self.agent_starts[i - 1] if i > 0 else None
