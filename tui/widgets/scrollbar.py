"""A vertical scrollbar that repaints only when what it draws changes.

Textual's scrollbar repaints whenever the pane's virtual height or scroll
position changes. While a run pours messages into a long conversation both
change every redraw, yet the thumb (one cell at the bottom) stays where it
is; repainting it anyway was a third of each redraw. The bar below keeps the
last thumb it drew: a plain repaint that would draw the same one is skipped,
and one asked for by an in-between state is served from the last lines.
"""

from __future__ import annotations

from math import ceil

from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.strip import Strip

_EIGHTHS = len(ScrollBarRender.VERTICAL_BARS)


class SteadyScrollBar(ScrollBar):
    _drawn: tuple | None = None  # what the bar looked like when last drawn
    _lines: tuple | None = None  # (key, lines) of that drawing

    def _look(self) -> tuple:
        """What the bar would draw now: the thumb in eighths of a cell, its size, hover/grab, colours."""
        size = self.size.height if self.vertical else self.size.width
        virtual, window, position = self.window_virtual_size, self.window_size, self.position
        thumb: tuple = ()
        if window and size and virtual and size != virtual:  # the arithmetic of ScrollBarRender.render_bar
            thumb_size = max(1, window / (virtual / size))
            offset = (size - thumb_size) * (position / (virtual - window)) if virtual != window else 0
            start = int(offset * _EIGHTHS)
            thumb = (start, start + ceil(thumb_size * _EIGHTHS))
        styles = self.parent.styles if self.parent is not None else self.styles
        return (thumb, self.size, self.thickness, self.mouse_over, self.grabbed, styles.scrollbar_background,
                styles.scrollbar_color, styles.scrollbar_background_hover, styles.scrollbar_color_hover,
                styles.scrollbar_background_active, styles.scrollbar_color_active)

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False,
                recompose: bool = False) -> "SteadyScrollBar":
        if not (regions or layout or recompose) and self._drawn is not None and self._look() == self._drawn:
            return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def render_lines(self, crop: Region) -> list[Strip]:
        # A repaint asked for by an in-between state (the pane's height grew, its scroll position
        # not yet moved) can arrive when the bar looks the same again: draw it from the last lines.
        key = (self._look(), crop, tuple(self.get_line_filters()))
        if self._lines is not None and key == self._lines[0]:
            return self._lines[1]
        lines = super().render_lines(crop)
        self._drawn, self._lines = key[0], (key, lines)
        return lines


class SteadyScrollbars:
    """Mixin for a ``ScrollView``: a :class:`SteadyScrollBar`, and a virtual size set without a layout."""

    def set_virtual_size(self, size: Size) -> None:
        """A new virtual size without a layout pass of the screen.

        Assigning ``virtual_size`` asks for a layout of the whole screen, then a
        full-screen repaint: tens of ms at 160x48, once per redraw while messages
        pour in. The size is only this pane's business: set it quietly, update the
        scrollbar (a layout happens only if the scrollbar appears or goes) and
        repaint this pane.
        """
        if not self.is_mounted or not self.container_size:  # type: ignore[attr-defined]
            self.virtual_size = size  # type: ignore[attr-defined]
            return
        self.set_reactive(ScrollView.virtual_size, size)  # type: ignore[attr-defined]
        self._scroll_update(size)  # type: ignore[attr-defined]
        self.refresh()  # type: ignore[attr-defined]

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        # Widget.vertical_scrollbar with the bar's class swapped (textual is pinned exactly).
        if self._vertical_scrollbar is None:  # type: ignore[attr-defined]
            thickness = self.scrollbar_size_vertical  # type: ignore[attr-defined]
            bar = SteadyScrollBar(vertical=True, name="vertical", thickness=thickness)
            bar.display = False
            self._vertical_scrollbar = bar
            self.app._start_widget(self, bar)  # type: ignore[attr-defined]
        return self._vertical_scrollbar  # type: ignore[attr-defined]
