"""The main screen: the left pane (a view of :data:`flowtui.tui.panes.PANES`), the sidebar, the control
pane and the key bar. It renders the run client's RunView when the app flushes."""

from __future__ import annotations

import time
from typing import Any

from textual.app import ComposeResult
from textual.widgets import Tree

from flowtui.tui.actions import key_hints
from flowtui.tui.panes import PaneData
from flowtui.tui.screens.panes import PanesScreen, count_title
from flowtui.tui.widgets.control import ControlPane
from flowtui.tui.widgets.keybar import KeyBar

SLOW_PANES_S = 0.15
TITLE_EVERY_S = 1.0


class MainScreen(PanesScreen):
    """Where a run is watched and driven."""

    stale = False  # the slow panes are behind the view: the next flush redraws them
    _slow_at = 0.0
    _seen_fast: tuple = (None, -2, ())
    _seen_slow: tuple = (None, -2, ())
    _last = "slow"
    _titled = ""  # the message count the left pane's title shows
    _titled_at = 0.0
    _title_behind = False
    ready = False  # composed and mounted: sync() draws from now on
    looking: tuple[Any, int] | None = None  # (a Timeline of the run's events, k): the panes show event k

    def compose(self) -> ComposeResult:
        yield from self.compose_panes()
        actions = self.app.actions  # type: ignore[attr-defined]
        yield ControlPane(actions, id="control")
        yield KeyBar(key_hints(actions))

    def complete(self) -> None:
        """Mount what the first paint does without: the control pane's buttons."""
        self.query_one(ControlPane).add_buttons()

    def on_mount(self) -> None:  # (PanesScreen.on_mount runs too: Textual calls each class's handler)
        self.ready = True

    def on_screen_resume(self) -> None:
        """A dialog closed: what the pause asks (a call waiting for approval) and a dialog held back
        is asked now, not at the next event (a run waiting on it sends none)."""
        self.app.at_pause()  # type: ignore[attr-defined]

    def redraw(self) -> None:
        self.sync(self.app.client, force=True)  # type: ignore[attr-defined]

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        """The node tree's cursor picks the run the panes show (a child workflow's, or its parent's)
        until the run moves on."""
        view = self.app.client.view  # type: ignore[attr-defined]
        node = event.node.data
        if view is None or node is None or not event.control.has_focus:
            return
        run = node.run_id if node.run_id in view.runs else None
        if run != view.focus:
            view.focus = run
            self.redraw()

    def set_pane_title(self, extra: str = "") -> None:
        super().set_pane_title(extra)
        self._titled, self._titled_at = extra, time.monotonic()

    def _title_extra(self) -> str:
        client = self.app.client  # type: ignore[attr-defined]
        return count_title(client.view, self.current_view, self._counted(client, client.view), self.title_room())

    def _counted(self, client: Any, view: Any) -> Any:
        """The run's own token count of what the model sees, for the live run (not a look back)."""
        return client.tokens.of(view) if view is client.view else None

    # --- projection ------------------------------------------------------------
    def sync(self, client: Any, *, force: bool = False, loading: str | None = None) -> None:
        """Render the client's view; cheap when nothing changed.

        The panes are two groups redrawn on alternate calls while events pour in
        (each redraw then costs one group's repaint, not the whole screen's): the
        left view, and the slow panes (sidebar, status lines, title; at most
        every ``SLOW_PANES_S``). ``force`` redraws both now.
        """
        if not self.ready or not self.is_attached or not self.app.is_running:
            return  # not composed yet, or the app is quitting: the panes may not be there
        view, lines = client.view, client.lines
        stopping = self.app.stopping_text()  # type: ignore[attr-defined]
        if client.detached is not None:  # attached, and let go: the run goes on where it is served
            loading = f"● detached: {client.detached} (flowtui attach again to see the run)"
        if self.looking is not None:  # the panes show the run as it was at event k; the run goes on
            timeline, k = self.looking
            view, lines = timeline.view_at(k), lines.prefix(k)
            event = timeline.event(k)
            loading = (f"◂ looking back: event {k}/{len(client.lines)}"
                       + (f" · {event.type}" if event is not None else "")
                       + f" · the run is {client.view.status} · ← → move, esc: back to the live run")
        key = (view, view.events if view is not None else -1, tuple(client.breakpoints), tuple(client.watches),
               stopping, loading)
        fast_behind = force or key != self._seen_fast
        slow_behind = force or key != self._seen_slow or self._title_behind
        if fast_behind and slow_behind and not force:
            slow_due = time.monotonic() - self._slow_at >= SLOW_PANES_S
            if slow_due and self._last == "fast":
                fast_behind = False
            else:
                slow_behind = False
        elif slow_behind and not force and time.monotonic() - self._slow_at < SLOW_PANES_S:
            slow_behind = False
        if slow_behind:
            self._slow_at = time.monotonic()
            self._seen_slow, self._last = key, "slow"
            self._sync_slow(client, view, loading, stopping, force=force)
        if fast_behind:
            self._seen_fast, self._last = key, "fast"
            if view is not None:
                self.draw_panes(PaneData(view, lines, self._counted(client, view)))
                if self.current_view == "model-sees" and view is client.view:
                    self.app.ask_tokens()  # type: ignore[attr-defined]
        self.stale = key != self._seen_fast or key != self._seen_slow or self._title_behind

    def _sync_slow(self, client: Any, view: Any, loading: str | None, stopping: str | None, *,
                   force: bool = False) -> None:
        control = self.query_one(ControlPane)
        control.sync(view, client.breakpoints, loading=loading, stopping=stopping, watches=client.watches)
        self.query_one(KeyBar).dim(control.idle)
        if view is None:
            return
        self.draw_sidebar(view)
        title = count_title(view, self.current_view, self._counted(client, view), self.title_room())
        # A new title repaints the whole left pane (its border): while a run pours messages in,
        # the count moves on at most once a second (unless everything is to be drawn now).
        changed = title != self._titled
        self._title_behind = (changed and not force and view.status == "running"
                              and time.monotonic() - self._titled_at < TITLE_EVERY_S)
        if changed and not self._title_behind:
            self.set_pane_title(title)
