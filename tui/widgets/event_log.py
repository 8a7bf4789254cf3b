"""The event log: every event of the run, one line each, rendered only when on screen."""

from __future__ import annotations

import json
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from flowtui.tui.shown import shown
from flowtui.tui.widgets.paint import DirectLines, QuietVirtualSize, drop_oldest

TYPE_STYLES = {
    "run": Style(color="#af87d7", bold=True),
    "node": Style(color="#5fafff"),
    "state": Style(color="#87d787"),
    "workflow_state": Style(color="#d7af5f"),
    "ctx": Style(color="#87afaf"),
    "chat": Style(color="#808080"),
    "subscriber": Style(color="#ff5f5f"),
}
USER_STYLE = Style(color="#ffd75f", bold=True)
_CACHE_LIMIT = 4000  # formatted lines kept
_EVICT_BATCH = 200  # dropped together when the cache is full (oldest first)
DIM = Style(dim=True)
SUMMARY_CHARS = 1_000  # an event's description is cut here (wider than any screen)


def summarize(ev: Any) -> str:
    """A short, one-line description of an event's payload."""
    t = ev.type
    if t in ("node.start", "node.end"):
        extra = f" {ev.status} {ev.duration_ms:.1f} ms" if t == "node.end" else ""
        return f"{ev.kind} {ev.name}{extra}"
    if t == "state.append":
        item = ev.item
        text = item if isinstance(item, str) else f"{item.role}: {item.content}"
        return f"{ev.bucket} += {text}"
    if t == "state.set":
        return f"{ev.bucket} = [{len(ev.items)} items]"
    if t == "workflow_state.change":
        return f"{ev.path}: {_j(ev.old)} → {_j(ev.new)}"
    if t == "ctx.set":
        return f"ctx.{ev.name} = {_j(ev.value)}"
    if t == "run.pause":
        return f"{ev.reason}: {ev.point} {ev.name}"
    if t == "run.resume":
        return ev.command
    if t == "run.start":
        return f"{ev.workflow} input={_j(ev.input)}"
    if t == "run.end":
        return f"{ev.status}" + (f": {ev.error}" if ev.error else "") + (f" ({ev.reason})" if ev.reason else "")
    if t == "chat.delta":  # never the text: a credential split over fragments would show in pieces
        return f"+{len(ev.text)} characters streamed"
    if t == "chat.attempt":
        return f"attempt {ev.attempt}: {ev.error}"
    if t == "subscriber.error":
        return f"{ev.subscriber}: {ev.error}"
    if t == "run.diverged":
        return f"from the journal at event #{ev.at} ({ev.path}): " + "; ".join(
            f"{d.field}: {d.why}" if d.why else d.field for d in ev.differences)
    reason = getattr(ev, "reason", None)  # a journal line that is not a valid event (runtime.journal.Invalid)
    return f"line {ev.line}: {reason}" if reason and hasattr(ev, "line") else ""


def _parse(line: bytes, i: int) -> Any:
    from flowtui.runtime.journal import Invalid, Skipped, parse_line

    ev = parse_line(line, i + 1)
    return Invalid(i + 1, ev.reason) if isinstance(ev, Skipped) else ev


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _j(value: Any) -> str:
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return json.dumps(value, ensure_ascii=False, default=repr)


class EventLog(DirectLines, QuietVirtualSize, ScrollView, can_focus=True):
    """A virtual view over a run's events; follows the tail unless scrolled up.

    The live app hands it the lines the worker sent (bytes: a million of them
    cost the garbage collector nothing) and only the rows on screen are parsed;
    the replay hands it events already parsed."""

    BINDINGS = [
        Binding("up", "scroll_up", show=False), Binding("down", "scroll_down", show=False),
        Binding("home", "scroll_home", show=False), Binding("end", "scroll_end", show=False),
        Binding("pageup", "page_up", show=False), Binding("pagedown", "page_down", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._events: list[Any] = []
        self._lines: dict[int, Strip] = {}

    def set_events(self, events: list[Any]) -> None:
        """Show ``events`` (events, or their JSON lines; a new list means a new run)."""
        at_end = self.scroll_offset.y >= self.max_scroll_y - 1
        if events is not self._events:
            self._events = events
            self._lines.clear()
        self.grow_to(Size(self.size.width, len(events)))
        if at_end:
            self.scroll_end(animate=False, immediate=True, force=True, x_axis=False)
        self.refresh()

    def _format(self, i: int) -> Strip:
        strip = self._lines.get(i)
        if strip is None:
            ev = self._events[i]
            if isinstance(ev, bytes):
                ev = _parse(ev, i)
            kind = ev.type.split(".")[0]
            user = ev.origin == "user"
            segs = [Segment(f"{ev.seq:>6} ", DIM), Segment(f"{shown(ev.type):<22}", TYPE_STYLES.get(kind, Style())),
                    Segment(f"{_fit(shown(ev.origin), 26):<26} ", USER_STYLE if user else DIM),
                    Segment(shown(_fit(summarize(ev), SUMMARY_CHARS)).replace("\n", " ⏎ "))]
            strip = Strip(segs)
            if len(self._lines) >= _CACHE_LIMIT:
                drop_oldest(self._lines, _EVICT_BATCH)
            self._lines[i] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        width, base = self.size.width, self.rich_style
        i = self.scroll_offset.y + y
        if i >= len(self._events):
            if not self._events and y == 0:
                return Strip([Segment("  No events yet.", base + DIM)]).crop_extend(0, width, base)
            return Strip.blank(width, base)
        return self._format(i).apply_style(base).crop_extend(0, width, base)
