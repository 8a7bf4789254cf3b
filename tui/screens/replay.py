"""The replay screen: the main screen's panes, read-only, with a position line instead of buttons."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Static

from flowtui.tui.screens.main import VIEWS
from flowtui.tui.widgets.control import STATUS_STYLES, status_text
from flowtui.tui.widgets.event_log import EventLog, summarize
from flowtui.tui.widgets.message_list import MessageList, show_model_sees
from flowtui.tui.widgets.node_tree import NodeTree
from flowtui.tui.shown import shown
from flowtui.tui.widgets.sidebar import Sidebar

BAR_WIDTH = 24


def position_text(k: int, n: int, ev: Any, source: str = "") -> Text:
    """``event 42/82 · node.start · runtime``, a small bar of where that is in the run, the journal's name."""
    text = Text()
    text.append(f"event {k}/{n}", "bold")
    if ev is None:
        text.append(" · before the first event", "dim")
    else:
        text.append(f" · {shown(ev.type)}", "bold #5fafff")
        text.append(f" · {shown(ev.origin)}", "bold #ffd75f" if ev.origin == "user" else "")
    done = round(BAR_WIDTH * k / n) if n else 0
    text.append("   ")
    text.append("━" * done, "#5fafff")
    text.append("─" * (BAR_WIDTH - done), "dim")
    if source:
        text.append(f"   replay of {shown(source)}", "dim")
    return text


def final_text(final: Any) -> Text:
    """The status the run ended with (or that it never ended)."""
    text = Text("   · run result: ", "dim")
    if final.status in ("running", "paused", "idle"):
        text.append("none (no run.end: it crashed or is still going)", "bold #d7af5f")
    else:
        text.append(shown(final.status_line()), STATUS_STYLES.get(final.status, ""))
    return text


def where_text(view: Any, ev: Any) -> Text:
    """Where the run is at this event, and what the event did."""
    text = Text()
    path = view.path()
    if path:
        text.append(shown(" › ".join(path)), "bold")
    elif view.status == "finished" and view.output is not None:
        text.append("output: ", "dim")
        text.append(shown(view.output).replace("\n", " "))
    else:
        text.append("—", "dim")
    if ev is not None:
        what = shown(summarize(ev)).replace("\n", " ⏎ ")
        if what:
            text.append("   ← ", "dim")
            text.append(what, "dim")
    text.truncate(400)
    return text


class ReplayScreen(Screen):
    """Conversation, model sees, event log and node tree as of one event of a recorded run."""

    DEFAULT_CSS = """
    ReplayScreen #position, ReplayScreen #status, ReplayScreen #where { height: 1; }
    """

    _history: tuple = (None, -1)

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            with ContentSwitcher(id="views", initial="conversation"):
                yield MessageList(id="conversation", empty_text="No messages yet at this event.")
                yield MessageList(id="model-sees", empty_text="Nothing to send yet.")
                yield EventLog(id="events")
                yield NodeTree(id="nodes")
            with Vertical(id="sidebar-box"):
                yield Sidebar(id="sidebar")
        with Vertical(id="control"):
            yield Static("", id="position")
            yield Static("", id="status")
            yield Static("", id="where")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#sidebar-box").border_title = "Memory · Tasks · State"

    @property
    def current_view(self) -> str:
        return self.query_one(ContentSwitcher).current or "conversation"

    def show_view(self, name: str) -> None:
        self.query_one(ContentSwitcher).current = name
        self.query_one(f"#{name}").focus()

    def sync(self, timeline: Any, k: int, view: Any, final: Any, *, source: str = "") -> None:
        """Render ``view`` (the state after event ``k``) in every pane."""
        ev = timeline.event(k)
        self.query_one("#position", Static).update(position_text(k, len(timeline), ev, source))
        status = status_text(view)
        status.append_text(final_text(final))
        self.query_one("#status", Static).update(status)
        self.query_one("#where", Static).update(where_text(view, ev))
        self.query_one(Sidebar).sync(view)
        history_key = (view, view.history_resets)
        self.query_one("#conversation", MessageList).set_messages(view.history,
                                                                  reset=history_key != self._history)
        self._history = history_key
        current = self.current_view
        if current == "model-sees":
            show_model_sees(self.query_one("#model-sees", MessageList), view)
        elif current == "events":
            self.query_one(EventLog).set_events(timeline.events[:k])
        elif current == "nodes":
            self.query_one(NodeTree).sync(view)
        n = len(view.history)
        views = self.query_one("#views")
        extra = f" ({n} message{'s' if n != 1 else ''})" if current == "conversation" else ""
        views.border_title = f"{VIEWS[current]}{extra}"
        views.border_subtitle = "  [1] conversation [2] model sees [3] events [4] nodes"
