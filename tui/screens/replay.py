"""The replay screen: the main screen's panes, read-only, with a position line instead of buttons."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from flowtui.tui.panes import PaneData
from flowtui.tui.screens.panes import PanesScreen, count_title
from flowtui.tui.shown import shown, shown_head, shown_line
from flowtui.tui.widgets.control import STATUS_STYLES, status_text, where_text
from flowtui.tui.widgets.keybar import KeyBar

BAR_WIDTH = 24


ORIGIN_CHARS = 40  # an event's origin is cut here on the position line


def position_text(k: int, n: int, ev: Any, source: str = "", *, width: int | None = None) -> Text:
    """``#57 · 42/82 · node.start · runtime`` (the event's number, as the event log and ``@K`` name it, and
    its place among the run's events), a small bar of where that is in the run, the journal's name.
    In ``width`` columns the bar goes first, then the name's start (its end says which file it is)."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if ev is None:
        text.append(f"0/{n}", "bold")
        text.append(" · before the first event", "dim")
    else:
        text.append(f"#{getattr(ev, 'seq', '?')} · {k}/{n}", "bold")
        text.append(f" · {shown(ev.type)}", "bold #5fafff")
        # (one row, cut: an origin of 100 characters from a journal made elsewhere left the row blank after it)
        text.append(f" · {shown_line(ev.origin, ORIGIN_CHARS)}", "bold #ffd75f" if ev.origin == "user" else "")
    name = f"   replay of {shown(source)}" if source else ""
    if width is None or text.cell_len + 3 + BAR_WIDTH + len(name) <= width:
        done = round(BAR_WIDTH * k / n) if n else 0
        text.append("   ")
        text.append("━" * done, "#5fafff")
        text.append("─" * (BAR_WIDTH - done), "dim")
    if name and width is not None and text.cell_len + len(name) > width:
        room = width - text.cell_len - len("   replay of …")
        name = f"   replay of …{shown(source)[-room:]}" if room >= 8 else ""
    text.append(name, "dim")
    return text


def final_text(final: Any) -> Text:
    """The status the run ended with (or that it never ended)."""
    text = Text("   · run result: ", "dim")
    if final.status in ("running", "paused", "idle"):
        text.append("none (no run.end: it crashed or is still going)", "bold #d7af5f")
    else:
        # one line, made safe as far as it can show: a reason of 500,000 line breaks was 500,000 lines to lay
        # out at every key
        text.append(shown_head(final.status_line(), 1_000).replace("\n", " ⏎ "), STATUS_STYLES.get(final.status, ""))
    return text


class Prefix(Sequence):
    """The first ``k`` of ``items``, without copying them (scrubbing a long journal stays cheap)."""

    def __init__(self, items: Sequence[Any], k: int) -> None:
        self.items, self.k = items, min(k, len(items))

    def __len__(self) -> int:
        return self.k

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.items[j] for j in range(*i.indices(self.k))]
        if not -self.k <= i < self.k:
            raise IndexError(i)
        return self.items[i % self.k]


class ReplayScreen(PanesScreen):
    """Conversation, model sees, event log and node tree as of one event of a recorded run."""

    DEFAULT_CSS = """
    ReplayScreen #position, ReplayScreen #status, ReplayScreen #where { height: 1; }
    """
    editable = False

    def __init__(self, hints: list[tuple[int, str, str, str]]) -> None:
        super().__init__()
        self.hints = hints
        self._at: tuple | None = None  # what sync() last drew

    def compose(self) -> ComposeResult:
        yield from self.compose_panes()
        with Vertical(id="control"):
            yield Static("", id="position")
            yield Static("", id="status")
            yield Static("", id="where")
        yield KeyBar(self.hints)

    def redraw(self) -> None:
        if self._at is not None:
            self.sync(*self._at[0], **self._at[1])

    def on_resize(self, event: Any) -> None:  # (and PanesScreen.on_resize)
        self.call_after_refresh(self.redraw)

    def sync(self, timeline: Any, k: int, view: Any, final: Any, *, source: str = "") -> None:
        """Render ``view`` (the state after event ``k``) in every pane."""
        self._at = ((timeline, k, view, final), {"source": source})
        width = self.query_one("#control").content_region.width or None
        ev = timeline.event(k)
        self.query_one("#position", Static).update(position_text(k, len(timeline), ev, source, width=width))
        status = status_text(view)
        status.append_text(final_text(final))
        if width is not None:
            status.truncate(width, overflow="ellipsis")
        self.query_one("#status", Static).update(status)
        self.query_one("#where", Static).update(where_text(view, event=ev, width=width))
        self.draw_sidebar(view)
        self.draw_panes(PaneData(view, Prefix(timeline.events, k)))
        self.set_pane_title(self._title_extra())

    def _title_extra(self) -> str:
        return count_title(self._at[0][2], self.current_view, room=self.title_room()) if self._at else ""
