"""The sidebar: memory items, tasks, the workflow state's fields, ``ctx``, turn, loop and budget.

A cursor picks the memory item, task or state field to edit (``e``) or
delete (``d``); headers and ``ctx`` rows are skipped by the cursor.
"""

from __future__ import annotations

import itertools
import json
import textwrap
from typing import Any

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.events import Click, Resize
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from flowtui.tui.shown import shown, shown_line
from flowtui.tui.widgets.paint import DirectLines, QuietVirtualSize

RUNTIME_CTX = ("turn", "output", "loop", "budget")
BUCKET_ROWS = 60  # memory items or tasks listed at once (the latest, or where the cursor went), the rest counted
FIELD_ROWS = 20  # a state field's first items listed, past which the sidebar says how many more


def _shown(text: str) -> str:
    """A name or label from the run, on its row (a tab or line break never reaches the terminal)."""
    return shown(text).replace("\n", " ⏎ ").replace("\t", "⇥")


def _short(value: Any, limit: int = 200) -> str:
    return shown_line(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr),
                      limit)


def _value(value: Any, limit: int = 200) -> str:
    """A state field's or a ctx value's text: a string as it is, but quoted where it would read as a value
    of another type, or as nothing: "null" and None both read null, "123" and 123 both 123, "" and "  "
    were blank."""
    if isinstance(value, str) and _reads_as_another(value):
        return shown_line(json.dumps(value, ensure_ascii=False), limit)
    return _short(value, limit)


def _reads_as_another(text: str) -> bool:
    if not text or text[0].isspace() or text[-1].isspace() or text[0] in '"[{':  # (a list, an object, a string)
        return True
    if len(text) > 400 or text[0] not in "-0123456789tfnNI":  # (NaN and Infinity: how the journal writes them)
        return False
    try:
        return not isinstance(json.loads(text), str)
    except ValueError:
        return False


# ctx.loop.stopped_by in words where its value alone says little: ctx.stop(), or the stop command (x)
_STOPPED_BY = {"stop": "ctx.stop()", "stopped": "the stop command"}

WRAPPED_ROWS = 4  # rows the turn, the loop or the budget may take on a narrow sidebar (then cut)


def bucket_window(count: int, start: int | None) -> int:
    """The first item of a bucket of ``count`` the sidebar lists: from ``start`` (None: the latest)."""
    latest = max(0, count - BUCKET_ROWS)
    return latest if start is None else min(max(start, 0), latest)


def sidebar_rows(view: Any, width: int = 42, *, editable: bool = True,
                 starts: dict[str, int] | None = None) -> list[tuple[str | None, Text]]:
    """(id, text) per row; id is ``memory:i``, ``tasks:i`` or ``field:name`` for editable rows.
    ``editable``: say how to edit (not in a replay). ``starts``: the first item listed of a bucket
    the cursor moved back in (by default its latest items are)."""
    rows: list[tuple[str | None, Text]] = []
    starts = starts or {}

    def section(title: str, count: int | None = None) -> None:
        text = Text(_shown(title), "bold #87afd7")  # a workflow's name comes from the run: shown inert
        if count is not None:
            text.append(f" ({count})", "dim")
        rows.append((None, text))

    def empty(what: str) -> None:
        rows.append((None, Text(f"  {what}", "dim italic")))

    def items(bucket: str, values: list[str], mark: str) -> None:
        # A bucket of thousands lists a window of its items (a redraw stays short): the latest, or
        # where the cursor went (it moves the window, item by item or to the first with home).
        start = bucket_window(len(values), starts.get(bucket))
        end = min(len(values), start + BUCKET_ROWS)
        if start:
            rows.append((None, Text(f"  … {start:,} earlier (↑ or home)", "dim italic")))
        for i in range(start, end):
            rows.append((f"{bucket}:{i}", Text.assemble((f"{i + 1:>2} ", "dim"), mark, _short(values[i]))))
        if end < len(values):
            rows.append((None, Text(f"  … {len(values) - end:,} later (↓ or end)", "dim italic")))

    def wrapped(label: str, said: str) -> None:
        """The turn, the loop and the budget on as many rows as they take (at 80 columns one row said
        "loop 4 of 50 iteration…", "budget 4 of 4 chat cal…"), up to four, the rest indented (a long
        name broken inside, not split by a space), the last cut with "…" when more would follow."""
        text = label + said
        lines = [text] if len(text) <= width else textwrap.wrap(
            text, width, subsequent_indent="    ", max_lines=WRAPPED_ROWS, placeholder=" …", break_on_hyphens=False)
        for i, line in enumerate(lines):
            row = Text(line)
            if i == 0:
                row.stylize("bold", 0, len(label))
            rows.append((None, row))

    def more(name: str, count: int) -> None:
        # A field of 50,000 items drew a row each, at every redraw: each key took seconds.
        if count > FIELD_ROWS:
            rows.append((f"field:{name}", Text(f"    … {count - FIELD_ROWS:,} more (o opens the field whole)",
                                               "dim italic")))

    section("Memory", len(view.memory))
    items("memory", view.memory, "")
    if not view.memory:
        empty("empty")
    section("Tasks", len(view.tasks))
    items("tasks", view.tasks, "☐ ")
    if not view.tasks:
        empty("none — a adds one" if editable else "none")
    if view.state:
        section(f"State · {view.workflow or ''}".rstrip(" ·"))
        for name, value in view.state.items():
            changed = name == view.last_changed
            mark = ("● ", "bold #ffd75f") if changed else ("  ", "")
            name_style = "bold #ffd75f" if changed else "bold"
            if isinstance(value, list) and value:
                rows.append((f"field:{name}", Text.assemble(mark, (_shown(name), name_style),
                                                            (f" [{len(value)}]", "dim"))))
                for j, item in enumerate(value[:FIELD_ROWS]):
                    rows.append((f"field:{name}", Text.assemble("    ", (f"{j} ", "dim"), _value(item))))
                more(name, len(value))
            elif isinstance(value, dict) and value:
                rows.append((f"field:{name}", Text.assemble(mark, (_shown(name), name_style))))
                for key, item in itertools.islice(value.items(), FIELD_ROWS):
                    said = _shown(str(key)) if key else '""'  # (a key is text: only an empty one read as nothing)
                    rows.append((f"field:{name}", Text.assemble("    ", (f"{said}: ", "dim"), _value(item))))
                more(name, len(value))
            else:
                rows.append((f"field:{name}", Text.assemble(mark, (_shown(name), name_style), " = ", _value(value))))
    user = (item for item in view.ctx.items() if item[0] not in RUNTIME_CTX)
    section("ctx")
    data = view.data or {}  # ctx.data: the run's own data (never sent to the model), read-only
    for key, value in itertools.islice(data.items(), FIELD_ROWS):
        rows.append((None, Text.assemble(("  data", "bold"), (f"[{_shown(json.dumps(key, ensure_ascii=False))}]",
                                                              "bold"), " = ", _value(value, 120))))
    if len(data) > FIELD_ROWS:
        rows.append((None, Text(f"  … {len(data) - FIELD_ROWS:,} more in ctx.data", "dim italic")))
    # (a run setting 100,000 names on ctx drew a row each at every redraw: each key took seconds)
    for name, value in itertools.islice(user, FIELD_ROWS):
        rows.append((None, Text.assemble((f"  {_shown(name)}", "bold"), " = ", _value(value, 120))))
    unshown = len(view.ctx) - sum(k in view.ctx for k in RUNTIME_CTX) - FIELD_ROWS
    if unshown > 0:
        rows.append((None, Text(f"  … {unshown:,} more on ctx (the event log has each ctx.set)", "dim italic")))
    turn = view.ctx.get("turn")
    if isinstance(turn, dict):
        tool = f" · tool {turn.get('tool_name')}" + (" ✗" if turn.get("tool_error") else "") \
            if turn.get("called_tool") else ""
        wrapped("  turn", _shown(f" {turn.get('agent')}{tool}"))
    loop = view.loop_shown() if hasattr(view, "loop_shown") else view.ctx.get("loop")
    if isinstance(loop, dict):
        by = loop.get("stopped_by")  # (its values "stop" and "stopped" read "stopped by stopped")
        stopped = f" · stopped by {_STOPPED_BY.get(by, by)}" if by else ""
        ceiling = loop.get("max_iterations", "?")
        ceiling = "∞" if ceiling is None else ceiling  # max_iterations=math.inf (events are JSON: null)
        done = f" {loop.get('iterations', 0)} of {ceiling} iterations done{stopped}"
        wrapped("  loop", _shown(done))
    budget, limits = view.ctx.get("budget"), getattr(view, "budget", None)
    if isinstance(budget, dict) or isinstance(limits, dict):  # (limits: from the run's start, before any use)
        used = budget_used(budget if isinstance(budget, dict) else {}, limits if isinstance(limits, dict) else None)
        wrapped("  budget", " " + _shown(used))
    if "output" in view.ctx and view.ctx["output"] is not None:
        rows.append((None, Text.assemble(("  output", "bold"), " = ", _value(view.ctx["output"], 120))))
    if not view.ctx and not data:
        empty("nothing set yet")
    for _, text in rows:  # one line per row: the full text is one `e` away
        text.truncate(width, overflow="ellipsis")
    return rows


def _money(v: float) -> str:
    return f"${v:.4f}" if v < 1 else f"${v:,.2f}"


# ctx.budget's fields as the sidebar says them, in this order (a count is said only once there is one)
_USED = {"chat_calls": lambda n: f"{n} chat call{'s' * (n != 1)}",
         "tool_calls": lambda n: f"{n} tool call{'s' * (n != 1)}",
         "tokens": lambda n: f"{n:,} tokens", "cost_usd": _money,
         "duration_s": lambda v: f"{v:.1f} s"}


# ctx.budget's fields against their limits (run.start's ``budget``): ``4 of 20 chat calls``
_LIMITED = {"chat_calls": ("max_chat_calls", lambda n, most: f"{n:,} of {most:,} chat call{'s' * (most != 1)}"),
            "tool_calls": ("max_tool_calls", lambda n, most: f"{n:,} of {most:,} tool call{'s' * (most != 1)}"),
            "tokens": ("max_tokens", lambda n, most: f"{n:,} of {most:,} tokens"),
            "cost_usd": ("max_cost_usd", lambda v, most: f"{_money(v)} of ${most:,.2f}" if most >= 0.01
                         else f"{_money(v)} of {_money(most)}"),
            "duration_s": ("max_duration_s", lambda v, most: f"{v:.1f} of {most:.1f} s")}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def budget_used(budget: dict[str, Any], limits: dict[str, Any] | None = None) -> str:
    """``4 chat calls · 2 tool calls · 313 tokens · $0.0012 · 4.3 s``: what the run has spent (it said
    ``duration_s 4.268842, chat_calls 4, ...``); against the budget's limits when they are known
    (``4 of 20 chat calls``), from the run's start, before anything was spent. A field of another
    name or type (a journal from elsewhere) is said as it is."""
    limits = limits or {}
    parts = []
    for key in [*(k for k in _USED if k in budget or _number(limits.get(_LIMITED[k][0]))),
                *(k for k in budget if k not in _USED)]:
        value, say = budget.get(key), _USED.get(key)
        limit_key, against = _LIMITED.get(key, (None, None))
        most = limits.get(limit_key) if limit_key else None
        if against is not None and _number(most) and (value is None or _number(value)):
            if value is None and key == "duration_s":  # (nothing spent yet: no time measured either)
                parts.append(f"at most {most:.1f} s")
            else:
                parts.append(against(value or 0, most))
        elif value in (None, 0) and key != "duration_s":
            continue
        elif say is not None and _number(value):
            parts.append(say(value))
        else:
            parts.append(f"{key} {value}")
    if limits.get("mode") == "raise":
        parts.append("raises when reached")
    return " · ".join(parts) or "nothing used"


def _segments(text: Text, console: Console) -> list[Segment]:
    """One row's segments (``Text.render`` leaves out the text's own style when it has no spans)."""
    if not text.spans and text.style:
        return [Segment(text.plain, console.get_style(text.style))]
    return list(text.render(console))


class Sidebar(DirectLines, QuietVirtualSize, ScrollView, can_focus=True):
    """Memory, tasks, state and ctx, one row per line, with a cursor over the editable rows.

    Drawn line by line (``render_line``) from a cache of rendered rows: when a
    value changes while the run pours events in, only the lines whose text
    changed are repainted, not the whole pane.
    """

    COMPONENT_CLASSES = {"sidebar--cursor"}
    DEFAULT_CSS = """
    Sidebar > .sidebar--cursor {
        background: $block-cursor-blurred-background;
    }
    Sidebar:focus > .sidebar--cursor {
        color: $block-cursor-foreground;
        background: $block-cursor-background;
        text-style: $block-cursor-text-style;
    }
    """
    BINDINGS = [
        Binding("up", "move(-1)", "Previous", show=False),
        Binding("down", "move(1)", "Next", show=False),
        Binding("home", "move_to(0)", "First", show=False),
        Binding("end", "move_to(-1)", "Last", show=False),
        Binding("enter", "source", "Show where it came from", show=False,
                tooltip="A memory item or task: the event that put it there, in the event log"),
    ]

    def action_source(self) -> None:
        """``enter`` on a memory item or task: the event that put it there, shown in the event log."""
        from flowtui.tui.widgets.message_list import MessageList

        row, view = self.highlighted_id, self._view
        kind, _, key = (row or "").partition(":")
        if view is None or kind not in ("memory", "tasks"):
            return
        origins = getattr(view.shown, f"{kind}_from")
        i = int(key)
        if 0 <= i < len(origins):
            self.post_message(MessageList.JumpToEvent(origins[i][0]))

    def __init__(self, *, id: str | None = None, editable: bool = True) -> None:
        super().__init__(id=id)
        self.editable = editable
        self._rows: list[tuple[str | None, Text]] = []
        self._keys: list[tuple] = []  # what each row shows, to find the rows that changed
        self._strips: dict[int, Strip] = {}  # rendered rows, the base style applied
        self._renders: dict[tuple, Strip] = {}  # the same, by what a row shows: rows that move keep theirs
        self._style: tuple[Style, Style] | None = None  # (base, cursor) the cache was drawn with
        self._highlighted: int | None = None
        self._view: Any = None  # the RunView last shown (rows are built again from it on a resize)
        # bucket -> the first item listed, once the cursor moved past the latest window (of this run)
        self._starts: dict[str, int] = {}

    # --- data ----------------------------------------------------------------
    def sync(self, view: Any) -> None:
        if getattr(view, "run_id", None) != getattr(self._view, "run_id", None):
            self._starts.clear()  # another run: its latest items
        self._view = view
        width = self._text_width()
        rows = sidebar_rows(view, width, editable=self.editable, starts=self._starts) if view is not None else []
        keys = [(rid, text.plain, tuple(text.spans), text.style) for rid, text in rows]
        if keys == self._keys:
            return
        old, self._rows, self._keys = self._keys, rows, keys
        if len(old) == len(keys) and all(a[0] == b[0] for a, b in zip(old, keys)):
            # The same rows with new text (a ctx value, a state field): repaint just those lines.
            top, height = self.scroll_offset.y, self.size.height
            for y, (a, b) in enumerate(zip(old, keys)):
                if a != b:
                    self._strips.pop(y, None)
                    if top <= y < top + height:
                        self.refresh(Region(0, y - top, self.size.width, 1))
            return
        keep = self.highlighted_id
        self._strips.clear()
        ids = self.ids
        self._highlighted = ids.index(keep) if keep is not None and keep in ids else self._first_selectable()
        self.grow_to(Size(width, len(rows)))
        self.refresh()

    def _text_width(self) -> int:
        return max(self.scrollable_content_region.width or 44, 20)

    @property
    def ids(self) -> list[str | None]:
        """Each row's id (``None`` for rows that cannot be picked: headers, ctx)."""
        return [rid for rid, _ in self._rows]

    @property
    def highlighted(self) -> int | None:
        return self._highlighted

    @highlighted.setter
    def highlighted(self, index: int | None) -> None:
        if index is not None and not (0 <= index < len(self._rows) and self._rows[index][0] is not None):
            return
        old, self._highlighted = self._highlighted, index
        for y in (old, index):
            self._strips.pop(y, None)  # type: ignore[arg-type]
        if index is not None:
            self.scroll_to_region(Region(0, index, 1, 1), animate=False, immediate=True, force=True)
        self.refresh()

    @property
    def highlighted_id(self) -> str | None:
        """``memory:i``, ``tasks:i`` or ``field:name`` under the cursor."""
        i = self._highlighted
        return self._rows[i][0] if i is not None and 0 <= i < len(self._rows) else None

    def select_id(self, row_id: str) -> bool:
        """Put the cursor on the row ``row_id`` (a memory item or task outside the listed window
        moves the window to it); False when there is none."""
        if row_id not in self.ids and not self._show_item(row_id):
            return False
        self.highlighted = self.ids.index(row_id)
        return True

    def _show_item(self, row_id: str) -> bool:
        """Move the window of a bucket so it lists ``memory:i`` or ``tasks:i``; False: no such item."""
        kind, _, key = row_id.partition(":")
        if kind not in ("memory", "tasks") or self._view is None or not key.isdigit():
            return False
        count, i = len(getattr(self._view, kind)), int(key)
        if not 0 <= i < count:
            return False
        start = bucket_window(count, self._starts.get(kind))
        if i < start:
            start = i
        elif i >= start + BUCKET_ROWS:
            start = i - BUCKET_ROWS + 1
        if start >= count - BUCKET_ROWS:
            self._starts.pop(kind, None)  # the latest window again: it follows new items
        else:
            self._starts[kind] = start
        self.sync(self._view)
        return row_id in self.ids

    def _first_selectable(self) -> int | None:
        return next((i for i, (rid, _) in enumerate(self._rows) if rid is not None), None)

    # --- keys and mouse ----------------------------------------------------------
    def action_move(self, delta: int) -> None:
        kind, _, key = (self.highlighted_id or "").partition(":")
        if kind in ("memory", "tasks") and self._view is not None:
            j = int(key) + delta  # the next item of the bucket, listed or not
            if 0 <= j < len(getattr(self._view, kind)) and f"{kind}:{j}" not in self.ids:
                self.select_id(f"{kind}:{j}")
                return
        ids, i = self.ids, self._highlighted
        if i is None:
            self.highlighted = self._first_selectable()
            return
        j = i + delta
        while 0 <= j < len(ids) and ids[j] is None:
            j += delta
        if 0 <= j < len(ids):
            self.highlighted = j

    def action_move_to(self, where: int) -> None:
        view = self._view
        if view is not None:
            if where == 0:  # the very first item, however many the window leaves out
                first = next((kind for kind in ("memory", "tasks") if getattr(view, kind)), None)
                if first is not None and self.select_id(f"{first}:0"):
                    return
            elif self._starts:
                self._starts.clear()  # the last row: every bucket's latest items
                self.sync(view)
        picks = [i for i, rid in enumerate(self.ids) if rid is not None]
        if picks:
            self.highlighted = picks[where]

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)  # inside the border and padding, or None
        if offset is not None:
            self.highlighted = self.scroll_offset.y + offset.y

    def on_focus(self) -> None:
        self._style = None  # the cursor's style depends on focus
        self.refresh()

    def on_blur(self) -> None:
        self._style = None
        self.refresh()

    def on_resize(self, event: Resize) -> None:
        if self._rows:
            self._keys = []  # truncated to the old width: build and render the rows again
            self._strips.clear()
            self.sync(self._view)

    # --- rendering -------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        style = (self.rich_style, self.get_component_rich_style("sidebar--cursor"))
        if style != self._style:
            self._style = style
            self._strips.clear()
            self._renders.clear()
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        base, cursor = self._style or (self.rich_style, Style())
        width = self.scrollable_content_region.width
        line = self.scroll_offset.y + y
        strip = self._strips.get(line)
        if strip is None:
            if line >= len(self._rows):
                return Strip.blank(width, base)
            text = self._rows[line][1]
            selected = line == self._highlighted
            key = (self._keys[line], selected, width) if line < len(self._keys) else None
            strip = self._renders.get(key) if key is not None else None
            if strip is None:
                style = base + cursor if selected else base
                strip = Strip(_segments(text, self.app.console), text.cell_len).crop_extend(0, width, style) \
                    .apply_style(style)
                if key is not None:
                    if len(self._renders) > 4 * BUCKET_ROWS:
                        self._renders.clear()
                    self._renders[key] = strip
            self._strips[line] = strip
        return strip
