"""The key bar: the bottom line, the keys that matter, the most important first.

As many keys as the width holds, in order of importance (:attr:`ActionSpec.rank`), then written
left to right in that order; ``? keys`` and ``^p palette`` stay at the right edge whatever the
width, so the way to every other key is always on screen. At 160 columns every key fits.
A key that does nothing now (a run key once the run has ended) stays in its place, dimmed, as its
button is disabled. A click runs the key's action, as the key would.
"""

from __future__ import annotations

from rich.text import Text
from textual.events import Click, Resize
from textual.widget import Widget

PINNED = ("help",)  # drawn at the right edge, always
SEP = "  "


def _length(hints: list[tuple[str, str, str]]) -> int:
    """Cells taken by ``hints`` drawn side by side."""
    return sum(len(k) + 1 + len(label) for k, label, _ in hints) + len(SEP) * max(len(hints) - 1, 0)


class KeyBar(Widget):
    """One line of ``key label`` pairs; :data:`PINNED` actions and the palette at the right."""

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-description-foreground;
    }
    KeyBar > .keybar--key {
        color: $footer-key-foreground;
        text-style: bold;
    }
    """
    COMPONENT_CLASSES = {"keybar--key"}
    ALLOW_SELECT = False

    def __init__(self, hints: list[tuple[int, str, str, str]], *, palette: bool = True) -> None:
        """``hints``: (rank, keys, label, action), most important first (:func:`actions.key_hints`)."""
        super().__init__()
        self.hints = list(hints)
        self.palette = palette
        self._spans: list[tuple[int, int, str]] = []  # (x0, x1, action) of what is drawn
        self.dimmed: frozenset[str] = frozenset()  # the actions that do nothing now

    def dim(self, actions: frozenset[str]) -> None:
        """Draw the keys of ``actions`` dimmed (they do nothing now), the others as keys."""
        if actions != self.dimmed:
            self.dimmed = actions
            self.refresh()

    def shown_hints(self, width: int) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
        """(left, right): the hints drawn at ``width`` cells, in importance order; right is pinned."""
        right = [(k, label, action) for _, k, label, action in self.hints if action in PINNED]
        if self.palette:
            right.append(("^p", "palette", "command_palette"))
        used = _length(right) + 1 + len(SEP)  # a space at each end, and room between the sides
        left: list[tuple[str, str, str]] = []
        for _, k, label, action in self.hints:
            if action in PINNED:
                continue
            if used + _length(left + [(k, label, action)]) > width:
                break
            left.append((k, label, action))
        return left, right

    def render(self) -> Text:
        width = self.size.width
        key_style = self.get_component_rich_style("keybar--key")
        left, right = self.shown_hints(width)
        text = Text(" ", no_wrap=True, overflow="crop")
        spans: list[tuple[int, int, str]] = []

        def put(hints: list[tuple[str, str, str]]) -> None:
            for i, (k, label, action) in enumerate(hints):
                if i:
                    text.append(SEP)
                x0 = text.cell_len
                dimmed = action in self.dimmed
                text.append(k, "dim" if dimmed else key_style)
                text.append(f" {label}", "dim" if dimmed else "")
                spans.append((x0, text.cell_len, action))

        put(left)
        text.append(" " * max(width - text.cell_len - _length(right) - 1, len(SEP)))
        put(right)
        self._spans = spans
        return text

    def on_resize(self, event: Resize) -> None:
        self.refresh()

    async def on_click(self, event: Click) -> None:
        for x0, x1, action in self._spans:
            if x0 <= event.x < x1 and action:
                await self.app.run_action(action)
                return
