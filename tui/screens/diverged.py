"""A re-executed run (``--resume-from``) did otherwise than its journal: where, what, and what next."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from flowtui.runtime.divergence import EVENT_FIELDS, edits_left, numbered_now
from flowtui.tui.shown import shown

REPORT_ROWS = 20  # the report's height at most; it scrolls past that
KEYS = "esc: look around first (the run waits; c continues live, x stops it)"
KEYS_MORE = "↑↓ scroll · esc: look first (the run waits; c continues, x stops)"  # (one line at 80 columns)


def _value(value: Any) -> str:
    """A value as the report shows it; a CRLF as ``\\r\\n`` (drawn, it is a line end like a newline: two
    values differing only in their line ends showed the same)."""
    return shown(value.replace("\r\n", "\\r\\n") if isinstance(value, str)
                 else json.dumps(value, ensure_ascii=False, default=repr))


def _pair(recorded: str, now: str) -> Table:
    table = Table(box=None, expand=True, show_edge=False, padding=(0, 2, 0, 2), show_header=False)
    table.add_column("recorded", ratio=1, overflow="fold")
    table.add_column("now", ratio=1, overflow="fold")
    table.add_row(Text(recorded), Text(now))  # Text: a table's str cells would be read as markup
    return table


def side_by_side(ev: Any) -> Group:
    """The recorded event and what the code did now, then each difference: its field (and why),
    then the recorded value and the value now, in two columns."""
    head = Table(box=None, expand=True, show_edge=False, padding=(0, 2, 0, 2))
    head.add_column("recorded", ratio=1, overflow="fold", header_style="bold")
    head.add_column("now", ratio=1, overflow="fold", header_style="bold")
    head.add_row(Text(shown(ev.recorded)), Text(shown(ev.current) + numbered_now(ev)))
    parts: list[Any] = [head]
    for d in ev.differences:
        if d.field in EVENT_FIELDS:  # another event altogether: the two lines above say which
            parts.append(Text(shown(d.why or "the code did another thing here"), "italic"))
            continue
        parts.append(Text.assemble((shown(d.field), "bold"), (f": {shown(d.why)}" if d.why else "", "italic")))
        parts.append(_pair(_value(d.recorded), _value(d.now)))
    return Group(*parts)


class DivergedScreen(ModalScreen[str | None]):
    """The run waits at the first pause point after it diverged from its journal: nothing live
    has happened yet. Dismisses with ``continue`` (go on live from here), ``cancel`` (stop the
    run) or None (look around first: the run stays paused)."""

    keeps_notices = True  # opened by the run, not a key: what was said before it still stands

    BINDINGS = [
        Binding("c", "choose('continue')", "Continue live", id="diverged.continue",
                tooltip="Go on live from here: the model and the tools are called from now on"),
        Binding("x", "choose('cancel')", "Cancel", id="diverged.cancel", tooltip="Stop the run here"),
        Binding("escape,q", "choose(None)", "Look first", id="diverged.close",  # (q as the help's and an event's)
                tooltip="Close this; the run stays paused (c continues, x stops)"),
        # the report scrolls from the keys wherever the focus is (on a button, at first): at 80x24 the
        # values that differ were below its fold, and nothing said how to see them
        Binding("down", "scroll_report(1)", "Scroll down", show=False),
        Binding("up", "scroll_report(-1)", "Scroll up", show=False),
        Binding("pagedown", "scroll_report(5)", "Page down", show=False),
        Binding("pageup", "scroll_report(-5)", "Page up", show=False),
    ]

    def __init__(self, diverged: Any) -> None:
        super().__init__()
        self.diverged = diverged

    def compose(self) -> ComposeResult:
        ev = self.diverged
        where = f" ({ev.path})" if ev.path else ""
        with Vertical(classes="dialog", id="diverged-dialog"):
            yield Label("The run diverged from its journal", classes="dialog-title")
            yield Static(Text.assemble(f"event #{ev.at}{shown(where)} of ", (shown(ev.journal or "its journal"),
                                                                             "bold")), id="diverged-where")
            with VerticalScroll(id="diverged-report"):
                yield Static(side_by_side(ev))
                left = getattr(ev, "edits_not_made", None) or []
                if left:  # (continuing dropped them in silence: only a diff of the journals showed it)
                    yield Static(Text(shown(f"{edits_left(left)} that the recorded run holds after this point "
                                            "will not be made again."), "#ffd75f"), id="diverged-edits")
            yield Static(Text("Nothing live has happened yet: the run waits here.", "dim"))
            with Horizontal(classes="dialog-buttons"):
                yield Button("Continue live from here \\[c]", variant="warning", id="diverged-continue")
                yield Button("Cancel \\[x]", variant="error", id="diverged-cancel")
            yield Static(Text(KEYS, "dim"), id="diverged-keys")

    def on_mount(self) -> None:
        self.query_one("#diverged-cancel", Button).focus()
        self.call_after_refresh(self._fit)
        self.watch(self.query_one("#diverged-report"), "virtual_size", self._say_keys, init=False)

    def on_resize(self, event: Resize) -> None:
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        """The report gets the rows the rest of the dialog leaves on this screen (it scrolls), so
        the buttons and the keys stay in view at 80x24 too; at most ``REPORT_ROWS``."""
        dialog = self.query_one("#diverged-dialog")
        report = self.query_one("#diverged-report")
        limit = dialog.styles.max_height
        room = int(limit.resolve(self.size, self.size)) if limit is not None else self.size.height
        rest = dialog.styles.gutter.height + sum(
            child.outer_size.height + child.styles.margin.height for child in dialog.children if child is not report)
        rows = max(3, min(REPORT_ROWS, room - rest - report.styles.margin.height))
        if report.styles.max_height != rows:
            report.styles.max_height = rows
        self.call_after_refresh(self._say_keys)

    def _say_keys(self) -> None:
        """The keys line names ↑↓ when the report has more than it shows."""
        report = self.query_one("#diverged-report")
        more = report.virtual_size.height > report.scrollable_content_region.height > 0
        self.query_one("#diverged-keys", Static).update(Text(KEYS_MORE if more else KEYS, "dim"))

    def action_scroll_report(self, rows: int) -> None:
        self.query_one("#diverged-report").scroll_relative(y=rows, animate=False)

    def action_choose(self, choice: str | None) -> None:
        self.dismiss(choice)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss("continue" if event.button.id == "diverged-continue" else "cancel")


def ask_about_divergence(app: Any, resume: Callable[[], None], stop: Callable[[], None]) -> None:
    """Once per re-execution: when the run waits after a divergence, the screen above."""
    view = app.client.view
    diverged = view.divergence if view is not None else None
    # (the pause right after it: one where a call waits for approval says that reason; a later one, after
    # the run went on live, is no place to say "nothing live has happened yet")
    if diverged is None or view.status != "paused" or view.pause is None or view.pause.seq != view.waits_diverged:
        return
    if getattr(app, "_diverged_shown", None) == view.run_id or app.screen is not app.main:
        return  # shown already for this run, or another dialog is open: asked when it closes
    app._diverged_shown = view.run_id

    def chosen(choice: str | None) -> None:
        if choice == "continue":
            resume()
        elif choice == "cancel":
            stop()
        else:
            app.notify("The run waits after the divergence: c continues live, x stops it.", timeout=8)

    app.push_screen(DivergedScreen(diverged), chosen)
