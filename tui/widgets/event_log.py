"""The event log: every event of the run, one line each, rendered only when on screen."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from flowtui.runtime.events import end_note
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
    "dispose": Style(color="#ff5f5f"),
}
USER_STYLE = Style(color="#ffd75f", bold=True)
_CACHE_LIMIT = 4000  # formatted lines kept
_EVICT_BATCH = 200  # dropped together when the cache is full (oldest first)
DIM = Style(dim=True)
CURSOR_STYLE = Style(reverse=True)
SUMMARY_CHARS = 1_000  # an event's description is cut here (wider than any screen)
SEQ_DIGITS = 6  # the seq column: "    42 ", wider once a run passes 999,999 events
TYPE_MIN, TYPE_MAX = 12, 21  # "workflow_state.change" is 21
ORIGIN_MIN, ORIGIN_MAX = 8, 26


def _node(ev: Any) -> str:
    extra = f" {ev.status} {ev.duration_ms:.1f} ms" if ev.type == "node.end" else ""
    if ev.type == "node.end" and ev.kind == "chat" and isinstance(ev.data, dict) and ev.data.get("usage_estimated"):
        extra += " · tokens estimated: the reply said no usage"
    note = end_note(ev) if ev.type == "node.end" else None
    if note:
        extra += " · " + note
    return f"{ev.kind} {ev.name}{extra}"


def _append(ev: Any) -> str:
    if ev.note:  # a person's edit says what it did
        return ev.note
    item = ev.item
    text = item if isinstance(item, str) else f"{item.role}: {item.content}"
    return f"{ev.bucket} += {text}"


def _decision(ev: Any) -> str:
    if ev.decision == "edited":
        return f"{'undid the edit of' if ev.reason == 'undone' else 'edited'} the call of {ev.tool}: " \
               f"{_edited(ev.before, ev.args)}"
    return f"{ev.decision} the call of {ev.tool}" + (f": {ev.reason}" if ev.reason else "")


def _end(ev: Any) -> str:
    return f"{ev.status}" + (f": {ev.error}" if ev.error else "") + (f" ({ev.reason})" if ev.reason else "")


# event type -> its one-line description; every type of flowtui.runtime.events has one (a test says so)
SUMMARIES: dict[str, Callable[[Any], str]] = {
    "run.start": lambda ev: f"{ev.workflow} input={_j(ev.input)}",
    "run.end": _end,
    "node.start": _node,
    "node.end": _node,
    "state.append": _append,
    "state.set": lambda ev: ev.note or f"{ev.bucket} = [{len(ev.items)} item{'s' * (len(ev.items) != 1)}]",
    "workflow_state.change": lambda ev: (f"{ev.note}: " if getattr(ev, "note", None) else "")
                                        + f"{ev.path}: {_j(ev.old)} → {_j(ev.new)}",
    "ctx.set": lambda ev: f"ctx.{ev.name} = {_j(ev.value)}",
    "run.pause": lambda ev: f"{ev.reason}: {ev.point} {ev.name}",
    "run.resume": lambda ev: ev.command,
    "tool.decision": _decision,
    # never the text: a credential split over fragments would show in pieces
    "chat.delta": lambda ev: f"+{len(ev.text)} characters streamed" if ev.text else
    "a piece streamed, held back by the run (it may begin a credential: said with the next pieces)",
    "chat.attempt": lambda ev: f"attempt {ev.attempt}: {ev.error}"
                               + (f"; retrying in {ev.retry_in_s:.1f} s" if ev.retry_in_s is not None else ""),
    "subscriber.error": lambda ev: f"{ev.subscriber}: {ev.error}",
    "dispose.error": lambda ev: f"cleanup {ev.cleanup} raised: {ev.error}",
    "run.diverged": lambda ev: f"from the journal at event #{ev.at} ({ev.path}): " + "; ".join(
        f"{d.field}: {d.why}" if d.why else d.field for d in ev.differences),
}


def whole(ev: Any, line: bytes | None) -> tuple[str, Any]:
    """(title, the event as JSON, or the line's text when it is no JSON) for showing an event whole:
    the line as the run sent it, or the event of a journal (both redacted when they were written)."""
    title = f"event #{ev.seq} {ev.type}" if hasattr(ev, "seq") else f"line {getattr(ev, 'line', '?')}: not an event"
    if line is not None:
        try:
            return title, json.loads(line)
        except ValueError:
            return title, line.decode("utf-8", "replace")
    if hasattr(ev, "model_dump"):
        return title, ev.model_dump(mode="json")
    data = getattr(ev, "data", None)  # a journal's line that is no valid event: what it holds, beside why
    if isinstance(data, dict) and data:
        return f"{title}: {getattr(ev, 'reason', 'not a valid event')}", data
    return title, str(getattr(ev, "reason", ev))


def summarize(ev: Any) -> str:
    """A short, one-line description of an event's payload."""
    describe = SUMMARIES.get(ev.type)
    if describe is not None:
        return describe(ev)
    reason = getattr(ev, "reason", None)  # a journal line that is not a valid event (runtime.journal.Invalid)
    return f"line {ev.line}: {reason}" if reason and hasattr(ev, "line") else ""


def columns(width: int, digits: int = SEQ_DIGITS) -> tuple[int, int, int]:
    """Widths of the type and origin columns and of the description, for a pane ``width`` cells wide
    whose seq column holds ``digits``.

    The description takes what is left: type and origin get at most what their longest usual
    values need and shrink (origin first) so the description keeps about half the pane.
    """
    rest = width - digits - 3  # a space after the seq, the type and the origin
    type_w = max(TYPE_MIN, min(TYPE_MAX, rest // 4))
    origin_w = max(ORIGIN_MIN, min(ORIGIN_MAX, rest // 5))
    return type_w, origin_w, max(rest - type_w - origin_w, 0)


def _parse(line: bytes, i: int) -> Any:
    from flowtui.runtime.journal import Invalid, Skipped, parse_line

    ev = parse_line(line, i + 1)
    return Invalid(i + 1, ev.reason) if isinstance(ev, Skipped) else ev


_SEQ = re.compile(rb'"seq":(\d+)')


def seq_of(item: Any) -> int:
    """The sequence number of an event, or of its JSON line (read without parsing the line)."""
    if isinstance(item, bytes):
        found = _SEQ.search(item, 0, 40)
        return int(found.group(1)) if found else 0
    return getattr(item, "seq", 0)


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _edited(before: Any, after: Any) -> str:
    """The arguments an edit changed, each as it was and as it is, cut short: the whole of both, the old
    first, were cut at the line's end, and an edit and its undo read the same."""
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return f"{_cut(_j(before))} → {_cut(_j(after))}"
    changed = [key for key in {**before, **after} if before.get(key, _NONE) != after.get(key, _NONE)]
    return "; ".join(f"{key} " + ("removed" if key not in after else f"= {_cut(_j(after[key]))}" if key not in before
                                  else f"{_cut(_j(before[key]))} → {_cut(_j(after[key]))}")
                     for key in changed) or "the same arguments"


_NONE = object()


def _cut(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _j(value: Any) -> str:
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return json.dumps(value, ensure_ascii=False, default=repr)


class EventLog(DirectLines, QuietVirtualSize, ScrollView, can_focus=True):
    """A virtual view over a run's events; follows the tail unless scrolled up.

    The live app hands it the lines the worker sent (bytes: a million of them
    cost the garbage collector nothing) and only the rows on screen are parsed;
    the replay hands it events already parsed. A cursor row (``↑`` ``↓``, a click)
    picks an event; ``enter`` opens it whole (:class:`Opened`)."""

    BINDINGS = [
        Binding("up", "move(-1)", show=False), Binding("down", "move(1)", show=False),
        Binding("home", "move_to(0)", show=False), Binding("end", "move_to(-1)", show=False),
        Binding("pageup", "page(-1)", show=False), Binding("pagedown", "page(1)", show=False),
        Binding("enter", "open", "Open the event", show=False),
    ]

    class Opened(Message):
        """``enter`` on an event: ``line`` is its JSON line (the live app) or None, ``event`` the event."""

        def __init__(self, event: Any, line: bytes | None) -> None:
            super().__init__()
            self.event, self.line = event, line

        def whole(self) -> tuple[str, Any]:
            """(title, value) for :class:`flowtui.tui.screens.decide.EventScreen`."""
            return whole(self.event, self.line)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._events: Sequence[Any] = []
        self._lines: dict[int, Strip] = {}
        self._columns = columns(80)
        self._digits = SEQ_DIGITS
        self.cursor: int | None = None  # None: on the last event, following the tail

    @property
    def events(self) -> Sequence[Any]:
        """What the log shows: the run's events (or their lines) so far."""
        return self._events

    def set_events(self, events: Sequence[Any]) -> None:
        """Show ``events`` (events, or their JSON lines; a new list means a new run)."""
        at_end = self.scroll_offset.y >= self.max_scroll_y - 1
        if events is not self._events:
            self._events = events
            self._lines.clear()
            self.cursor = None
        digits = max(SEQ_DIGITS, len(str(seq_of(events[-1])))) if events else SEQ_DIGITS
        if digits != self._digits:  # past 999,999 events: the seq column widens, every line is drawn again
            self._digits, self._columns = digits, columns(self.size.width or 80, digits)
            self._lines.clear()
        self.grow_to(Size(0, len(events)))  # lines are cut to the pane: nothing to scroll sideways
        if at_end:
            self.scroll_end(animate=False, immediate=True, force=True, x_axis=False)
        self.refresh()

    @property
    def cursor_row(self) -> int:
        """The event under the cursor (the last one while following the tail; -1: none)."""
        n = len(self._events)
        return n - 1 if self.cursor is None else min(self.cursor, n - 1)

    def _set_cursor(self, i: int) -> None:
        n = len(self._events)
        if not n:
            return
        i = max(0, min(i, n - 1))
        self.cursor = None if i == n - 1 else i  # back on the last event: follow the tail again
        top, height = self.scroll_offset.y, max(self.size.height, 1)
        if i < top:
            self.scroll_to(y=i, animate=False, immediate=True)
        elif i >= top + height:
            self.scroll_to(y=i - height + 1, animate=False, immediate=True)
        self.refresh()

    def show_seq(self, seq: int) -> bool:
        """Put the cursor on event ``seq`` (False: the log does not hold it)."""
        events = self._events
        lo, hi = 0, len(events)
        while lo < hi:  # events come in order of their sequence numbers
            mid = (lo + hi) // 2
            if seq_of(events[mid]) < seq:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(events) and seq_of(events[lo]) == seq:
            self._set_cursor(lo)
            return True
        return False

    def action_move(self, delta: int) -> None:
        self._set_cursor(self.cursor_row + delta)

    def action_move_to(self, i: int) -> None:
        self._set_cursor(i if i >= 0 else len(self._events) - 1)

    def action_page(self, direction: int) -> None:
        self._set_cursor(self.cursor_row + direction * max(self.size.height - 1, 1))

    def on_click(self, event: Click) -> None:
        self._set_cursor(self.scroll_offset.y + event.y)

    def action_open(self) -> None:
        i = self.cursor_row
        if i < 0:
            return
        item = self._events[i]
        line = item if isinstance(item, bytes) else None
        self.post_message(self.Opened(_parse(item, i) if line is not None else item, line))

    def _format(self, i: int) -> Strip:
        strip = self._lines.get(i)
        if strip is None:
            ev = self._events[i]
            if isinstance(ev, bytes):
                ev = _parse(ev, i)
            kind = ev.type.split(".")[0]
            user = ev.origin == "user"
            type_w, origin_w, _ = self._columns
            segs = [Segment(f"{ev.seq:>{self._digits}} ", DIM),
                    Segment(f"{_fit(shown(ev.type), type_w):<{type_w}} ", TYPE_STYLES.get(kind, Style())),
                    Segment(f"{_fit(shown(ev.origin), origin_w):<{origin_w}} ", USER_STYLE if user else DIM),
                    Segment(shown(_fit(summarize(ev), SUMMARY_CHARS)).replace("\n", " ⏎ "))]
            strip = Strip(segs)
            if len(self._lines) >= _CACHE_LIMIT:
                drop_oldest(self._lines, _EVICT_BATCH)
            self._lines[i] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        width, base = self.size.width, self.rich_style
        if columns(width, self._digits) != self._columns:  # a new width: the columns move, every line is drawn again
            self._columns = columns(width, self._digits)
            self._lines.clear()
        i = self.scroll_offset.y + y
        if i >= len(self._events):
            if not self._events and y == 0:
                return Strip([Segment("  No events yet.", base + DIM)]).crop_extend(0, width, base)
            return Strip.blank(width, base)
        strip = self._format(i)
        seen = self.scrollable_content_region.width or width  # (the scrollbar, when there is one, takes a column)
        if strip.cell_length > seen:  # cut where the pane ends: said with … (a word cut off read as whole)
            strip = Strip([*strip.crop(0, seen - 1), Segment("…", DIM)])
        strip = strip.apply_style(base).crop_extend(0, width, base)
        if i == self.cursor_row and self.has_focus:
            strip = strip.apply_style(CURSOR_STYLE)
        return strip

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
