"""Painting a line-rendered pane straight from its cached lines.

Textual styles every line a widget renders: a new strip per line per paint,
through which the app's colour filter then runs again. For a pane whose
lines are cached (the message list, the event log) and whose box is plain
(no border, padding, outline, tint or opacity), that was nine tenths of a
repaint. :class:`DirectLines` hands the compositor the cached lines instead:
widened to the pane with the same background, filtered, cropped — each step
cached on the line itself, so an unchanged line costs a few lookups.
Any other box falls back to Textual's own path. :func:`drop_oldest` trims
such a line cache when it is full.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from textual.geometry import Region
from textual.strip import Strip
from textual.style import Style


def _plain_box(widget) -> bool:  # type: ignore[no-untyped-def]
    styles = widget.styles
    return (not any(edge for edge, _ in styles.border) and not any(edge for edge, _ in styles.outline)
            and not any(styles.padding) and not styles.tint.a and styles.text_opacity == 1.0
            and widget.opacity == 1.0 and (not styles.has_rule("hatch") or styles.hatch == "none")
            and widget.border_title is None and widget.border_subtitle is None)


class DirectLines:
    """Mixin for a widget with a ``render_line`` that returns cached strips."""

    def render_lines(self, crop: Region) -> list[Strip]:
        if not _plain_box(self):
            return super().render_lines(crop)  # type: ignore[misc]
        base_background, background = self.background_colors  # type: ignore[attr-defined]
        inner = Style(background=base_background + background).rich_style
        width = self.region.width  # type: ignore[attr-defined]
        height = self.content_region.height  # type: ignore[attr-defined]
        filters = self.get_line_filters()  # type: ignore[attr-defined]
        render_line = self.render_line  # type: ignore[attr-defined]
        lines = []
        for y in crop.line_range:
            strip = render_line(y).adjust_cell_length(width, inner) if y < height else Strip.blank(width, inner)
            for line_filter in filters:
                strip = strip.apply_filter(line_filter, background)
            lines.append(strip)
        x1, x2 = crop.column_span
        if (x1, x2) != (0, width):
            lines = [strip.crop(x1, x2) for strip in lines]
        return lines


def drop_oldest(cache: dict[Any, Any], n: int, *alongside: dict[Any, Any]) -> None:
    """Drop the ``n`` entries put in ``cache`` longest ago (and the same keys from ``alongside``).

    A full line cache is trimmed a little at a time: clearing thousands of
    rendered lines at once freed tens of thousands of objects in one go, a
    60-90 ms freeze in the middle of a flood (bench/tui_bench.py).
    """
    for key in list(islice(cache, n)):
        del cache[key]
        for other in alongside:
            other.pop(key, None)


class QuietVirtualSize:
    """Mixin for a ``ScrollView`` whose content grows all the time (a run pouring messages in).

    ``virtual_size`` is a reactive with ``layout=True``: every change asks for a layout of the
    whole screen (measured: 25-45 ms at 160x48), once per redraw while a run floods the pane. When
    the scrollbar neither appears nor goes and the width stays, only this pane's scrolling changes:
    :meth:`grow_to` sets the size without the layout (public API: ``set_reactive``, the scrollbar's
    own reactives) and repaints the pane and its bar. Anything else takes Textual's usual path.
    """

    def grow_to(self, size: Any) -> None:
        from textual.widget import Widget

        current = self.virtual_size  # type: ignore[attr-defined]
        if size == current:
            return
        view = self.scrollable_content_region  # type: ignore[attr-defined]
        shown = self.show_vertical_scrollbar  # type: ignore[attr-defined]
        overflow = self.styles.overflow_y  # type: ignore[attr-defined]
        needed = overflow == "scroll" or (overflow == "auto" and size.height > view.height)
        # (shrunk below the view's bottom: Textual's path moves the view up, as setting it quietly did not, and
        # the pane showed blank rows, the blocks above it scrolled out of sight although they all fit)
        top = self.scroll_offset.y  # type: ignore[attr-defined]
        past = size.height < current.height and top + view.height > size.height
        if not self.is_mounted or size.width != current.width or needed != shown or past:  # type: ignore[attr-defined]
            self.virtual_size = size  # type: ignore[attr-defined]
            return
        self.set_reactive(Widget.virtual_size, size)  # type: ignore[attr-defined]
        if shown:
            bar = self.vertical_scrollbar  # type: ignore[attr-defined]
            bar.window_virtual_size = size.height
            bar.window_size = view.height
            bar.refresh()
        self.refresh()  # type: ignore[attr-defined]
