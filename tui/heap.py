"""Keep the garbage collector out of the app's frames.

While the app runs, automatic collection is off, and :meth:`Heap.tick` (from
the app's 100 Hz timer, between frames) runs the young collections CPython
would have run by then, by the same volumes: a collection no longer lands in
the middle of a frame and adds its milliseconds to it.

A run's events and messages live as long as the run is on screen, and
CPython's full collection walks every tracked object: with a few hundred
thousand events each full pass froze the app for 50–150 ms. So what has
survived the young collections a few times over is handed to the permanent
generation (``gc.freeze``) instead of being walked again and again; it is
still freed by reference counting when the run is dropped, and each new run
starts with one full collection after thawing (:meth:`Heap.settle`), so
cycles are not kept past their run.
"""

from __future__ import annotations

import gc


class Heap:
    def __init__(self) -> None:
        self._young = 0  # objects through young collections since the last middle one
        self._middle = 0  # middle collections since the last hand-off
        self._was_enabled = False

    def start(self) -> None:
        """Collections happen at :meth:`tick`, not on allocation."""
        self._was_enabled = gc.isenabled()
        gc.disable()

    def stop(self) -> None:
        if self._was_enabled:
            gc.enable()

    def tick(self) -> int | None:
        """Run the collection that is due, if any; returns its generation."""
        count = gc.get_count()[0]
        threshold0, threshold1, threshold2 = gc.get_threshold()
        if count < threshold0:
            return None
        # CPython collects generation 1 after `threshold1` collections of `threshold0` new objects;
        # between ticks more than that piles up, so the count is of objects, not collections.
        self._young += count
        if self._young < threshold0 * threshold1:
            gc.collect(0)
            return 0
        self._young = 0
        gc.collect(1)
        self._middle += 1
        if self._middle >= threshold2:  # where CPython would walk everything: hand the survivors off
            self._middle = 0
            gc.freeze()
        return 1

    def settle(self) -> None:
        """At a load or a new run: thaw, collect everything once, freeze what is alive."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self._young = self._middle = 0
