"""What the live app's screen and the replay's share: the left pane (one view of the registry at a
time, :data:`flowtui.tui.panes.PANES`) and the sidebar, drawn from the same :class:`PaneData`."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import ContentSwitcher

from flowtui.tui.panes import PANES, PaneData, keys_line, pane
from flowtui.tui.typeahead import KeysPassed
from flowtui.tui.widgets.sidebar import Sidebar

SIDEBAR_TITLE = "Memory · Tasks · State"


class PanesScreen(KeysPassed, Screen):
    """The left pane and the sidebar; subclasses add what goes below them and call :meth:`draw_panes`."""

    editable = True  # the sidebar says how to edit (the replay's does not: a journal is history)

    def compose_panes(self) -> ComposeResult:
        first = PANES[0]
        with Horizontal(id="body"):
            with ContentSwitcher(id="views", initial=first.name):
                yield first.make()  # the others are mounted when first shown (fewer widgets before the first paint)
            with Vertical(id="sidebar-box"):
                yield Sidebar(id="sidebar", editable=self.editable)

    def on_mount(self) -> None:
        self.query_one("#sidebar-box").border_title = SIDEBAR_TITLE
        self.set_pane_title()

    # --- which pane ------------------------------------------------------------
    @property
    def current_view(self) -> str:
        return self.query_one(ContentSwitcher).current or PANES[0].name

    def pane_widget(self, name: str) -> Any | None:
        """The widget of pane ``name``, or None while it has never been shown."""
        found = self.query_one(ContentSwitcher).query_children(f"#{name}")
        return found.first() if found else None

    def show_view(self, name: str) -> None:
        """Switch the left pane to ``name`` (built on first use), focus it and draw it."""
        switcher = self.query_one(ContentSwitcher)
        if self.pane_widget(name) is None:
            switcher.mount(pane(name).make())
        switcher.current = name
        self.set_pane_title()
        self.call_after_refresh(self._focus_view, name)
        self.redraw()

    def _focus_view(self, name: str) -> None:
        if self.current_view == name:
            widget = self.pane_widget(name)
            if widget is not None:
                widget.focus()

    def redraw(self) -> None:
        """Draw every pane now (after a switch); the subclass knows from what."""

    # --- from one pane to another ---------------------------------------------------
    def on_message_list_jump_to_event(self, message: Any) -> None:
        """``enter`` on a block of what the model sees (or a memory item): its event, in the event log."""
        self.show_view("events")
        self.call_after_refresh(self._show_seq, message.seq)

    def _show_seq(self, seq: int) -> None:
        log = self.pane_widget("events")
        if log is None or not log.show_seq(seq):
            self.app.notify(f"Event #{seq} is not in the log.", severity="warning")

    def on_event_log_opened(self, message: Any) -> None:
        """``enter`` on an event: the event whole."""
        from flowtui.tui.screens.decide import EventScreen

        self.app.push_screen(EventScreen(*message.whole()))

    # --- drawing -----------------------------------------------------------------
    def draw_panes(self, data: PaneData) -> None:
        """The panes kept up to date while hidden, and the one on screen."""
        current = self.current_view
        for p in PANES:
            if p.always or p.name == current:
                widget = self.pane_widget(p.name)
                if widget is not None:
                    p.update(widget, data)

    def draw_sidebar(self, view: Any) -> None:
        self.query_one(Sidebar).sync(view)

    @property
    def sidebar(self) -> Sidebar:
        return self.query_one(Sidebar)

    @property
    def conversation(self) -> Any:
        """The conversation pane (a MessageList)."""
        return self.query_one("#conversation")

    def set_pane_title(self, extra: str = "") -> None:
        """``Conversation (3 messages)`` above, the pane keys below (short when the pane is narrow)."""
        views = self.query_one("#views")
        title = f"{pane(self.current_view).title}{extra}"
        views.border_title = title
        views.border_subtitle = keys_line(views.size.width - 4 if views.size.width else None)

    def on_resize(self, event: Resize) -> None:
        self.call_after_refresh(self.set_pane_title, self._title_extra())

    def _title_extra(self) -> str:
        return ""

    def title_room(self) -> int | None:
        """Columns the left pane's border title has (None before the first layout)."""
        width = self.query_one("#views").size.width
        return width - 4 if width else None


def count_title(view: Any, current: str, counted: Any = None, room: int | None = None) -> str:
    """`` (3 messages)`` after the conversation's title; `` (5 messages, ~812 tokens, estimate)`` after
    what the model sees, or with ``counted`` (the run's own count) `` (5 messages, 790 tokens,
    gpt-4o-mini tokenizer)``. Where the title and it exceed ``room`` columns, the short form:
    `` (5 msgs, ~812 tok)`` (``~``: an estimate; without it, the model's own count)."""
    if view is None or current not in ("conversation", "model-sees"):
        return ""
    return _count(view, current, counted, room) + _other_run(view)


def _other_run(view: Any) -> str:
    """`` · CoordenadorWorkflow``: the run the node tree put in the panes, when it is not the one the run is
    at (nothing said which run was shown, and edits went to it)."""
    from textual.markup import escape

    from flowtui.tui.shown import shown

    at = view.pause.run_id if view.pause is not None else view.run_id
    run = view.shown
    if view.focus is None or run.run_id == at or not run.workflow:
        return ""
    return f" · {escape(shown(run.workflow))}"


def _count(view: Any, current: str, counted: Any, room: int | None) -> str:
    if current == "model-sees":
        from textual.markup import escape

        from flowtui.tui.shown import shown
        from flowtui.tui.tokens import total_size

        seen = view.model_sees()
        n = len(seen)
        size = total_size(seen, counted)
        # a model middleware may send otherwise (the first block says how the last call went)
        before = " before middlewares" if view.model_middlewares or view.last_sent() else ""
        long = f" ({n} message{'s' if n != 1 else ''}{before}, {escape(shown(size))})"
        if room is None or len(pane(current).title) + len(long) <= room:
            return long
        return (f" ({n} msg{'s' if n != 1 else ''}{' *' if before else ''}, "
                f"{escape(shown(size.split(', ')[0].replace(' tokens', ' tok')))})")
    n = len(view.history)
    return f" ({n} message{'s' if n != 1 else ''})"
