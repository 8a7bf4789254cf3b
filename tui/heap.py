"""Keep the garbage collector out of the app's frames.

While the app runs, automatic collection is off, and :meth:`Heap.tick` (from
the app's 100 Hz timer, between frames) runs the young collections: a
collection no longer lands in the middle of a frame and adds its
milliseconds to it.

A run's events and messages live as long as the run is on screen, and
CPython's full collection walks every tracked object: with a few hundred
thousand events each full pass froze the app for 50–150 ms. So what has
survived the young collections a few times over is handed to the permanent
generation (``gc.freeze``) instead of being walked again and again; it is
still freed by reference counting when the run is dropped, and a full
collection after thawing (:meth:`Heap.settle`) runs when a new run starts and
when the app goes idle after a busy spell, so cycles are not kept for long.
"""

from __future__ import annotations

import gc

MIDDLE_EVERY = 3  # ticks between collections of the middle generation
FREEZE_EVERY = 10  # middle collections between two hand-offs to the permanent generation


class Heap:
    def __init__(self) -> None:
        self._ticks = 0
        self._middle = 0  # middle collections since the last hand-off
        self._was_enabled = False
        self.handed_off = False  # something was frozen since the last settle

    def start(self) -> None:
        """Collections happen at :meth:`tick`, not on allocation."""
        self._was_enabled = gc.isenabled()
        gc.disable()

    def stop(self) -> None:
        if self._was_enabled:
            gc.enable()

    def tick(self) -> int:
        """Collect the young generation, and every third tick the middle one; returns which.

        By time, not by CPython's count: the count is allocations minus
        deallocations, so while a flood both renders new lines and drops old
        ones it stays low and the young generation grows unseen, until one
        collection walks all of it (26-42 ms measured). A tick's young
        collection covers what 10 ms left behind, a middle one what 30 ms did
        (a flood renders new lines all the time: each pass stays a few ms).
        """
        self._ticks += 1
        if self._ticks % MIDDLE_EVERY:
            gc.collect(0)
            return 0
        gc.collect(1)
        self._middle += 1
        if self._middle >= FREEZE_EVERY:  # instead of full passes: hand the survivors off
            self._middle = 0
            gc.freeze()
            self.handed_off = True
        return 1

    def idle_tick(self) -> int | None:
        """From the idle check: a tick only if CPython would collect by now (threads may allocate
        while the app is idle); an idle app with nothing allocating collects nothing."""
        if gc.get_count()[0] < gc.get_threshold()[0]:
            return None
        return self.tick()

    def settle(self) -> None:
        """Thaw, collect everything once, freeze what is alive: at a new run, and when the app
        has been idle a while after a busy spell (what was handed off and has died since, a
        closed dialog or a dismissed notification, is freed then, not at the next run)."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self._ticks = self._middle = 0
        self.handed_off = False
