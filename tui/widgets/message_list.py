"""A virtual list of messages: only the blocks on screen are rendered.

Used for the conversation pane and for "what the model sees". Each block's
height starts as a cheap estimate and becomes exact once the block is
rendered; offsets are prefix sums rebuilt from the first changed block, so
10,000 messages paint, scroll and append without re-rendering the others
(the ``render_line`` technique of toolong and textual's ``Log``).

A reply still streaming in is a provisional tail below the last message: it
is not selectable and is re-rendered alone as text arrives.

Text can be selected with the mouse and copied (``ctrl+c``), with Textual's own
selection: each line carries its place in the list (``Strip.apply_offsets``), the
selection is drawn over the lines it covers, and :meth:`MessageList.get_selection`
reads the selected lines' text back (the role gutter left out).
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.events import Click, Resize
from textual.geometry import Offset, Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.selection import Selection
from textual.strip import Strip

from flowtui.tui.widgets.blocks import STREAMING_CHARS, Provisional, estimate_heights, is_collapsible, render_block
from flowtui.tui.widgets.paint import DirectLines, QuietVirtualSize, drop_oldest

CURSOR_STYLE = Style(bgcolor="#1f3347")
GUTTER = 2  # "▌ ": the role's mark before every line of a block (not part of a selection)
_CACHE_LIMIT = 1500  # rendered blocks kept
_EVICT_BATCH = 50  # dropped together when the cache is full (oldest first)


class MessageList(DirectLines, QuietVirtualSize, ScrollView, can_focus=True):
    """Messages as blocks, with a selection cursor (up/down, home/end) and collapsible tool blocks."""

    BINDINGS = [
        Binding("up", "cursor(-1)", "Previous", show=False),
        Binding("down", "cursor(1)", "Next", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("enter", "enter", "Expand", show=False, tooltip="Expand or collapse the block (what the model "
                "sees: show the event that put it there)"),
        Binding("space", "toggle", "Expand", show=False, tooltip="Expand or collapse the block"),
        # what the model sees opens its own blocks whole (the note of memory and tasks too); in the
        # conversation the app's ``o`` does (check_action lets the key through to it)
        Binding("o", "open_whole", "Open whole", show=False, tooltip="Open the block's whole text in the pager"),
    ]

    class JumpToEvent(Message):
        """``enter`` on a block whose event is known: show event ``seq`` in the event log."""

        def __init__(self, seq: int) -> None:
            super().__init__()
            self.seq = seq

    class CursorMoved(Message):
        """The selection moved to message ``index`` (-1: none)."""

        def __init__(self, widget: "MessageList", index: int) -> None:
            super().__init__()
            self.widget = widget
            self.index = index

    def __init__(self, *, empty_text: str = "No messages yet.", id: str | None = None, markdown: bool = True) -> None:
        super().__init__(id=id)
        self.empty_text = empty_text
        self.markdown = markdown  # an assistant's text drawn as Markdown where that hides nothing (else as sent)
        self.labels: dict[int, str] = {}  # optional header label per index ("agent prompt")
        self.tags: dict[int, str] = {}  # optional right-hand tag per index (default "#index")
        self.short_tags: dict[int, str] = {}  # the tag where it does not fit ("#22 · ~45 tok")
        self.opens_own = False  # ``o`` opens this list's block under the cursor (not the conversation's)
        self.note: tuple[int, tuple, tuple] | None = None  # the memory-and-tasks note: (index, memory, tasks)
        self.sources: dict[int, int] = {}  # the event behind each block: enter opens it in the event log
        self._messages: list[Any] = []
        self._heights: list[int] = []
        self._offsets: list[int] = [0]
        self._dirty_from = 0
        self._cache: dict[int, list[Strip]] = {}  # rendered blocks, the base style already applied
        self._raw: dict[int, list[Strip]] = {}  # the same blocks unstyled (for the cursor)
        self._width = 0
        self._expanded: set[int] = set()
        self.cursor = -1
        self._base = Style()
        self._cursor_style = CURSOR_STYLE
        self._provisional: Any = None  # a streaming reply shown after the last message
        self._tail: list[Strip] | None = None
        self._run_key: tuple = (None, -1)  # the run's view and history resets last shown (show_run)

    # --- data ----------------------------------------------------------------
    @property
    def messages(self) -> list[Any]:
        return self._messages

    def set_messages(self, messages: list[Any], *, reset: bool = False, provisional: Any = None) -> None:
        """Show ``messages``; without ``reset`` only the new tail is added (the rest is kept).

        ``provisional``: a message still arriving (a streamed reply), shown after the others.
        """
        old = len(self._messages)
        following = self.cursor >= old - 1
        width = self._measure_width()
        tail_changed = provisional is not self._provisional
        if tail_changed:
            self._provisional, self._tail = provisional, None
        if reset or len(messages) < old:
            self._messages = list(messages)
            self._heights = estimate_heights(self._messages, width)
            self._forget()
            self._expanded.clear()
            self._dirty_from = 0
        elif len(messages) > old:
            new = messages[old:]
            self._messages.extend(new)
            self._heights.extend(estimate_heights(new, width))
            self._dirty_from = min(self._dirty_from, old)
        elif tail_changed:
            self._update_size()
            if following:
                self.scroll_end(animate=False, immediate=True, force=True, x_axis=False)
            self.refresh()
            return
        else:
            return
        n = len(self._messages)
        if following or self.cursor >= n:
            self.cursor = n - 1
        self._update_size()
        if following:
            self._measure_range(n - 1, -1, self.size.height or 24)
            self._update_size()
            self.scroll_end(animate=False, immediate=True, force=True, x_axis=False)
        self.post_message(self.CursorMoved(self, self.cursor))
        self.refresh()

    def show_run(self, view: Any) -> None:
        """A run's history, and the reply streaming in after it; the whole history again only when
        it was replaced (another run, a ``state.set``), else just the new tail."""
        text = view.streaming_tail(STREAMING_CHARS)  # what the block draws, its end: not megabytes
        streamed = self._provisional
        if not text:
            streamed = None
        elif streamed is None or streamed.length != view.streaming_length or streamed.content != text \
                or streamed.cut != view.streaming_cut:
            streamed = Provisional(text, view.streaming_agent, length=view.streaming_length, cut=view.streaming_cut)
        # (the same object while unchanged: no repaint)
        key = (view, view.history_resets)
        self.set_messages(view.history, reset=key != self._run_key, provisional=streamed)
        self._run_key = key

    # --- geometry --------------------------------------------------------------
    def _measure_width(self) -> int:
        """The width blocks are rendered at (costly to ask Textual: once per update, not per line)."""
        width = max(self.scrollable_content_region.width or self.size.width, 20)
        if width != self._width:
            self._width = width
            self._forget()
            self._tail = None
        return width

    def _forget(self) -> None:
        """Drop every rendered block (new width, new style, new messages)."""
        self._cache.clear()
        self._raw.clear()

    def _content_width(self) -> int:
        return self._width or self._measure_width()

    def _ensure_offsets(self) -> None:
        start = self._dirty_from
        n = len(self._heights)
        if start >= n and len(self._offsets) == n + 1:
            return
        base = self._offsets[start] if start < len(self._offsets) else 0
        del self._offsets[start + 1:]
        self._offsets.extend(accumulate(self._heights[start:], initial=base))
        del self._offsets[start + 1]  # ``initial`` repeated the base
        self._dirty_from = n

    def _update_size(self) -> None:
        self._ensure_offsets()
        size = Size(self._content_width(), self._offsets[-1] + len(self._tail_strips()))
        self.grow_to(size)

    def _tail_strips(self) -> list[Strip]:
        if self._provisional is None:
            return []
        if self._tail is None:
            base = self._base
            self._tail = [s.apply_style(base) for s in render_block(
                self.app.console, self._provisional, len(self._messages), self._content_width(),
                expanded=True, provisional=True)]
        return self._tail

    def _block(self, i: int) -> list[Strip]:
        strips = self._cache.get(i)
        if strips is None:
            if len(self._cache) >= _CACHE_LIMIT:
                drop_oldest(self._cache, _EVICT_BATCH, self._raw)
            raw = render_block(self.app.console, self._messages[i], i, self._content_width(),
                               expanded=i in self._expanded, label=self.labels.get(i), tag=self.tags.get(i),
                               short_tag=self.short_tags.get(i),
                               expand_key="space" if i in self.sources else "enter",  # enter shows its event
                               composed=self.note is not None and i == self.note[0], markdown=self.markdown)
            base = self._base
            strips = [s.apply_style(base) for s in raw]
            self._cache[i] = strips
            self._raw[i] = raw  # the cursor's style goes under the segments' own, like the base
            if len(strips) != self._heights[i]:
                self._heights[i] = len(strips)
                self._dirty_from = min(self._dirty_from, i)
        return strips

    def _measure_range(self, start: int, step: int, lines: int) -> None:
        """Render blocks from ``start`` (forwards or backwards) until ``lines`` lines are covered."""
        i, covered, n = start, 0, len(self._messages)
        while 0 <= i < n and covered < lines:
            covered += len(self._block(i))
            i += step

    def _index_at(self, line: int) -> int:
        return bisect_right(self._offsets, line) - 1

    # --- rendering -------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        base = self.rich_style  # computed once per paint, not once per line
        if base != self._base:
            self._base, self._cursor_style = base, base + CURSOR_STYLE
            self._forget()
            self._tail = None
        self._measure_width()
        if self._messages:
            for _ in range(3):  # exact heights for what is on screen, then the offsets agree
                self._ensure_offsets()
                top = self.scroll_offset.y
                first = max(self._index_at(top), 0)
                before = self._dirty_from
                self._measure_range(first, 1, self.size.height)
                if self._dirty_from == before:
                    break
                self._update_size()
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self._content_width()
        base = self._base
        line = self.scroll_offset.y + y
        n = len(self._messages)
        if n == 0 and self._provisional is None:
            if y == 1:
                return Strip([Segment("  " + self.empty_text, base + Style(dim=True))]).crop_extend(0, width, base)
            return Strip.blank(width, base)
        strip = self._line(line)
        if strip is None:
            return Strip.blank(width, base)
        selection = self.text_selection
        span = selection.get_span(line) if selection is not None else None
        return self._selectable(strip if span is None else self._selected(strip, span), line)

    def _line(self, line: int, *, styled: bool = True) -> Strip | None:
        """Line ``line`` of the list (the cursor's style on the selected block's lines)."""
        self._ensure_offsets()
        end = self._offsets[-1]
        if line >= end:
            tail = self._tail_strips()
            k = line - end
            return tail[k] if k < len(tail) else None
        i = self._index_at(line)
        strips = self._block(i)
        k = line - self._offsets[i]
        if k >= len(strips):
            return None
        if i == self.cursor and styled:
            raw = self._raw.get(i) or strips
            return raw[k].apply_style(self._cursor_style)
        return strips[k]  # already the pane's width and style

    # --- text selection -------------------------------------------------------------
    @staticmethod
    def _selectable(strip: Strip, line: int) -> Strip:
        """``strip`` marked with where its characters are (what Textual's selection reads): the text
        from 0, the gutter before it negative (cached on the strip: the same line costs nothing)."""
        return strip.apply_offsets(-GUTTER, line)

    def _selected(self, strip: Strip, span: tuple[int, int]) -> Strip:
        """``strip`` with the characters ``span`` of its text drawn as selected."""
        chars = strip.text[GUTTER:]
        start, end = span
        start, end = max(start, 0), len(chars) if end == -1 else max(end, 0)
        x0, x1 = GUTTER + cell_len(chars[:start]), GUTTER + cell_len(chars[:end])
        style = self.screen.get_component_rich_style("screen--selection")
        parts = strip.divide([x0, x1, strip.cell_length])
        return Strip.join([parts[0], parts[1].apply_style(style), *parts[2:]])

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The selected text: the lines it covers, each without its gutter and trailing blanks."""
        self._ensure_offsets()
        last = self._offsets[-1] + len(self._tail_strips()) - 1
        if last < 0:
            return None
        start, stop = selection  # a press on the gutter is before the text's first character
        selection = Selection(start and Offset(max(start.x, 0), start.y), stop and Offset(max(stop.x, 0), stop.y))
        first = start.y if start is not None else 0
        end = min(stop.y if stop is not None else last, last)
        lines = [""] * first
        for line in range(first, end + 1):
            strip = self._line(line, styled=False)
            lines.append(strip.text[GUTTER:].rstrip() if strip is not None else "")
        return selection.extract("\n".join(lines)), "\n"

    def on_resize(self, event: Resize) -> None:
        old = self._width
        width = self._measure_width()
        if width != old:
            self._heights = estimate_heights(self._messages, width)
            self._dirty_from = 0
        # Shown again (another view had it hidden while it was filled), or at a new width: at the end it was
        # scrolled to, as the blocks there are drawn. It stayed past it, the pane showing blank rows; or the end
        # was placed by guessed heights, and view 2 first showed with the agent prompt above the top.
        if self.cursor == len(self._messages) - 1 and (width != old or self.scroll_offset.y > self.max_scroll_y):
            self._measure_range(len(self._messages) - 1, -1, self.size.height or 24)
            self._update_size()
            self.scroll_end(animate=False, immediate=True, force=True, x_axis=False)
        elif width != old:
            self._update_size()

    # --- cursor ----------------------------------------------------------------
    def select(self, index: int, *, scroll: bool = True) -> None:
        """Put the cursor on block ``index`` and scroll it into view (``scroll=False``: the view stays
        where it is, the block being on screen already)."""
        n = len(self._messages)
        if n == 0:
            return
        index = max(0, min(index, n - 1))
        self.cursor = index
        self._block(index)
        self._update_size()
        top, bottom = self._offsets[index], self._offsets[index + 1]
        scroll_y, height = self.scroll_offset.y, self.size.height
        if scroll and top < scroll_y:
            self.scroll_to(y=top, animate=False, immediate=True, force=True)
        elif scroll and bottom > scroll_y + height:
            self.scroll_to(y=min(top, bottom - height), animate=False, immediate=True, force=True)
        self.post_message(self.CursorMoved(self, index))
        self.refresh()

    def action_cursor(self, delta: int) -> None:
        self.select((self.cursor if self.cursor >= 0 else 0) + delta)

    def action_cursor_to(self, index: int) -> None:
        self.select(len(self._messages) - 1 if index < 0 else index)

    def action_page(self, direction: int) -> None:
        if not self._messages:
            return
        self._ensure_offsets()
        target = self.scroll_offset.y + direction * max(self.size.height - 1, 1)
        target = max(0, min(target, self._offsets[-1] - 1))
        self.scroll_to(y=target, animate=False, immediate=True, force=True)
        # the block at that line is on screen: it takes the cursor and the view stays (snapping to
        # its top would keep a block taller than the screen from being paged through)
        self.select(self._index_at(target), scroll=False)

    def action_enter(self) -> None:
        seq = self.sources.get(self.cursor)
        if seq is not None:
            self.post_message(self.JumpToEvent(seq))
        else:
            self.action_toggle()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "open_whole":
            return self.opens_own  # else the key goes on to the app's open_whole (the conversation's cursor)
        return True

    def action_open_whole(self) -> None:
        """The whole text of the block under the cursor in the pager: a block draws its first lines
        only (:data:`flowtui.tui.widgets.blocks.BLOCK_LINES`), this is the rest of it."""
        i = self.cursor
        if not 0 <= i < len(self._messages):
            self.app.notify("Put the cursor on a message to open it.", severity="warning")
            return
        app: Any = self.app
        if self.note is not None and self.note[0] == i:
            app.run_worker(self._open_note(*self.note[1:]), group="command", exit_on_error=False)
        else:
            app.run_worker(app._open_whole(self._messages[i].content), group="command", exit_on_error=False)

    async def _open_note(self, memory: tuple, tasks: tuple) -> None:
        """The memory-and-tasks note as the model is sent it: built again from its items, each item
        cut on its way to the app fetched whole from the run first."""
        from flowtui.runtime.conversation import system_note
        from flowtui.tui.app import page
        from flowtui.tui.client import cut_in

        app: Any = self.app

        async def whole(item: str) -> str:
            cut = cut_in(item)
            if cut is None:
                return item
            whole, _ = await app.client.fetch(cut[0], cut[1])
            return item if whole is None else whole  # else the cut text, which says so

        memory = [await whole(item) for item in memory]
        tasks = [await whole(item) for item in tasks]
        await page(app, system_note(memory, tasks) or "")

    def action_toggle(self) -> None:
        i = self.cursor
        if not (0 <= i < len(self._messages)) or not is_collapsible(self._messages[i]):
            return
        self._expanded.symmetric_difference_update({i})
        self._cache.pop(i, None)
        self._raw.pop(i, None)
        self._block(i)
        self._update_size()
        self.refresh()

    def on_click(self, event: Click) -> None:
        if not self._messages:
            return
        self._ensure_offsets()
        line = self.scroll_offset.y + event.y
        if line < self._offsets[-1]:
            self.select(self._index_at(line))
