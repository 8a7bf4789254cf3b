"""The main screen: a switchable left pane (conversation, model sees, event log, node tree),
the sidebar, and the control pane. It renders the run client's RunView when the app flushes."""

from __future__ import annotations

import time
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer

from flowtui.tui.widgets.blocks import Provisional
from flowtui.tui.widgets.control import ControlPane
from flowtui.tui.widgets.message_list import MessageList, show_model_sees
from flowtui.tui.widgets.sidebar import Sidebar

SLOW_PANES_S = 0.15
TITLE_EVERY_S = 1.0
VIEWS = {
    "conversation": "Conversation",
    "model-sees": "What the model sees",
    "events": "Event log",
    "nodes": "Node tree",
}


class MainScreen(Screen):
    """Where a run is watched and driven."""

    stale = False  # the slow panes are behind the view: the next flush redraws them
    _slow_at = 0.0
    _seen_fast: tuple = (None, -2, ())
    _seen_slow: tuple = (None, -2, ())
    _last = "slow"
    _history: tuple = (None, -1)
    _streamed: Provisional | None = None
    _titled = ""  # the message count the left pane's title shows
    _titled_at = 0.0
    _title_behind = False

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            with ContentSwitcher(id="views", initial="conversation"):
                yield MessageList(id="conversation", empty_text="No messages yet.")
                # The other views are mounted on first show (fewer widgets before the first paint).
            with Vertical(id="sidebar-box"):
                yield Sidebar(id="sidebar")
        yield ControlPane(id="control")
        yield Footer()  # its keys are composed after the first paint (when the screen's bindings are known)

    def complete(self) -> None:
        """Mount what the first paint does without: the control pane's buttons."""
        self.query_one(ControlPane).add_buttons()

    ready = False  # composed and mounted: sync() draws from now on

    def on_mount(self) -> None:
        self.query_one("#sidebar-box").border_title = "Memory · Tasks · State"
        self._title()
        self.ready = True

    # --- views -----------------------------------------------------------------
    @property
    def current_view(self) -> str:
        return self.query_one(ContentSwitcher).current or "conversation"

    def show_view(self, name: str) -> None:
        switcher = self.query_one(ContentSwitcher)
        if not switcher.query_children(f"#{name}"):
            switcher.mount(_make_view(name))
        switcher.current = name
        self._title()
        self.call_after_refresh(self._focus_view, name)
        self.sync(self.app.client, force=True)  # type: ignore[attr-defined]

    def _focus_view(self, name: str) -> None:
        if self.current_view == name:
            self.query_one(f"#{name}").focus()

    def _title(self, extra: str = "") -> None:
        name = self.current_view
        keys = "  [1] conversation [2] model sees [3] events [4] nodes"
        self.query_one("#views").border_title = f"{VIEWS[name]}{extra}"
        self.query_one("#views").border_subtitle = keys
        self._titled, self._titled_at = extra, time.monotonic()

    @property
    def conversation(self) -> MessageList:
        return self.query_one("#conversation", MessageList)

    @property
    def sidebar(self) -> Sidebar:
        return self.query_one(Sidebar)

    # --- projection ------------------------------------------------------------
    def _provisional(self, view: Any) -> Provisional | None:
        """The streamed reply so far, as a block after the history (the same object while it is unchanged)."""
        text = view.streaming
        if not text:
            self._streamed = None
        elif self._streamed is None or self._streamed.content != text:
            self._streamed = Provisional(text, view.streaming_agent)
        return self._streamed

    def sync(self, client: Any, *, force: bool = False, loading: str | None = None) -> None:
        """Render the client's view; cheap when nothing changed.

        The panes are two groups redrawn on alternate calls while events pour in
        (each redraw then costs one group's repaint, not the whole screen's): the
        left view, and the slow panes (sidebar, status lines, title; at most
        every ``SLOW_PANES_S``). ``force`` redraws both now.
        """
        if not self.ready or not self.is_attached or not self.app.is_running:
            return  # not composed yet, or the app is quitting: the panes may not be there
        view = client.view
        key = (view, view.events if view is not None else -1, tuple(client.breakpoints), client.stopping, loading)
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
            self._sync_slow(client, view, loading)
        if fast_behind:
            self._seen_fast, self._last = key, "fast"
            self._sync_fast(client, view)
        self.stale = key != self._seen_fast or key != self._seen_slow or self._title_behind

    def _sync_slow(self, client: Any, view: Any, loading: str | None) -> None:
        self.query_one(ControlPane).sync(view, client.breakpoints, loading=loading,
                                         stopping=client.stopping and client.active)
        if view is None:
            return
        self.sidebar.sync(view)
        n = len(view.history)
        title = f" ({n} message{'s' if n != 1 else ''})" if self.current_view == "conversation" else ""
        # A new title repaints the whole left pane (its border): while a run pours messages in,
        # the count moves on at most once a second.
        changed = title != self._titled
        self._title_behind = (changed and view.status == "running"
                              and time.monotonic() - self._titled_at < TITLE_EVERY_S)
        if changed and not self._title_behind:
            self._title(title)

    def _sync_fast(self, client: Any, view: Any) -> None:
        if view is None:
            return
        history_key = (view, view.history_resets)
        self.conversation.set_messages(view.history, reset=history_key != self._history,
                                       provisional=self._provisional(view))
        self._history = history_key
        current = self.current_view
        if current == "model-sees":
            show_model_sees(self.query_one("#model-sees", MessageList), view)
        elif current == "events":
            self.query_one("#events").set_events(client.lines)  # type: ignore[attr-defined]
        elif current == "nodes":
            self.query_one("#nodes").sync(view)  # type: ignore[attr-defined]


def _make_view(name: str) -> Any:
    """A left-pane view other than the conversation (imported and built when first shown)."""
    if name == "model-sees":
        return MessageList(id="model-sees", empty_text="Nothing to send yet.")
    if name == "events":
        from flowtui.tui.widgets.event_log import EventLog

        return EventLog(id="events")
    if name == "nodes":
        from flowtui.tui.widgets.node_tree import NodeTree

        return NodeTree(id="nodes")
    raise ValueError(f"no view named {name!r}")
