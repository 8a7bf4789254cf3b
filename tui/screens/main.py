"""The main screen: a switchable left pane (conversation, model sees, event log, node tree),
the sidebar, and the control pane. It renders the session's RunView when the app flushes."""

from __future__ import annotations

import time
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer

from tui.widgets.blocks import Provisional
from tui.widgets.control import ControlPane
from tui.widgets.event_log import EventLog
from tui.widgets.message_list import MessageList
from tui.widgets.node_tree import NodeTree
from tui.widgets.sidebar import Sidebar

SLOW_PANES_S = 0.15
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
    _seen: tuple = (None, -1, ())
    _history: tuple = (None, -1)
    _streamed: Provisional | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            with ContentSwitcher(id="views", initial="conversation"):
                yield MessageList(id="conversation", empty_text="No messages yet.")
                yield MessageList(id="model-sees", empty_text="Nothing to send yet.")
                yield EventLog(id="events")
                yield NodeTree(id="nodes")
            yield Sidebar(id="sidebar")
        yield ControlPane(id="control")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#sidebar").border_title = "Memory · Tasks · State"
        self._title()

    # --- views -----------------------------------------------------------------
    @property
    def current_view(self) -> str:
        return self.query_one(ContentSwitcher).current or "conversation"

    def show_view(self, name: str) -> None:
        switcher = self.query_one(ContentSwitcher)
        switcher.current = name
        self._title()
        self.query_one(f"#{name}").focus()
        self.sync(self.app.session, force=True)  # type: ignore[attr-defined]

    def _title(self, extra: str = "") -> None:
        name = self.current_view
        keys = "  [1] conversation [2] model sees [3] events [4] nodes"
        self.query_one("#views").border_title = f"{VIEWS[name]}{extra}"
        self.query_one("#views").border_subtitle = keys

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

    def sync(self, session: Any, *, force: bool = False, loading: str | None = None) -> None:
        """Render the session's view; cheap when nothing changed."""
        view = session.view
        key = (view, view.events if view is not None else -1, tuple(session.breakpoints))
        if key == self._seen and not force:
            return
        now = time.monotonic()
        # The sidebar and status lines are small but costly to rebuild: at most ~6 times a second.
        self.stale = not force and now - self._slow_at < SLOW_PANES_S
        if not self.stale:
            self._seen = key
        if not self.stale:
            self._slow_at = now
            self.query_one(ControlPane).sync(view, session.breakpoints, loading=loading)
        if view is None:
            return
        if not self.stale:
            self.sidebar.sync(view)
        history_key = (view, view.history_resets)
        self.conversation.set_messages(view.history, reset=history_key != self._history,
                                       provisional=self._provisional(view))
        self._history = history_key
        current = self.current_view
        if current == "model-sees":
            seen = view.model_sees()
            widget = self.query_one("#model-sees", MessageList)
            labels = {}
            if view.prompt:
                labels[0] = "system · agent prompt"
            if len(seen) > len(view.history) + (1 if view.prompt else 0):
                labels[1 if view.prompt else 0] = "system · memory and tasks"
            widget.labels = labels
            widget.set_messages(seen, reset=True)
        elif current == "events":
            self.query_one(EventLog).set_events(session.events)
        elif current == "nodes":
            self.query_one(NodeTree).sync(view)
        n = len(view.history)
        self._title(f" ({n} message{'s' if n != 1 else ''})" if current == "conversation" else "")
