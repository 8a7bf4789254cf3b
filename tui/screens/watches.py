"""The watchpoints set on the run (``W``): remove one, or add one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static

from flowtui.tui.shown import shown


class WatchListDialog(ModalScreen[None]):
    """The watchpoints, as written, in the order they were set. ``d`` (or ``delete``) removes the one
    under the cursor through ``remove(expr)`` (which answers the list left, or raises with the run's
    reason, shown); ``w`` closes the list and opens the dialog that sets a new one (``add()``)."""

    BINDINGS = [
        Binding("d,delete", "remove", "Remove", id="watches.remove", tooltip="Remove the watchpoint under the cursor"),
        Binding("w", "add", "Add", id="watches.add", tooltip="Set a new watchpoint"),
        Binding("escape,q", "close", "Close", id="watches.close", tooltip="Back to the run"),
    ]

    def __init__(self, watches: list[str], remove: Callable[[str], Awaitable[list[str]]], *,
                 add: Callable[[], Any]) -> None:
        super().__init__()
        self.watches, self._remove_one, self._add_one = list(watches), remove, add  # (remove: a Widget's own)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="watch-list"):
            yield Label("Watchpoints: the run pauses when one becomes true", classes="dialog-title")
            yield OptionList(*self._options(), id="watch-options")
            yield Static("", id="dialog-error")
            yield Static(Text("d removes the one under the cursor · w sets a new one · esc closes", "dim"))

    def _options(self) -> list[Any]:
        return [Text(shown(w)) for w in self.watches] or [Text("none set — w sets one", "dim italic")]

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    async def action_remove(self) -> None:
        options = self.query_one(OptionList)
        i = options.highlighted
        if not self.watches or i is None or not 0 <= i < len(self.watches):
            return
        try:
            self.watches = list(await self._remove_one(self.watches[i]))
        except Exception as exc:  # the run says why (it is gone...): shown, the list stays
            self.query_one("#dialog-error", Static).update(Text(f"✗ {shown(str(exc))}", "bold #ff5f5f"))
            return
        options.clear_options()
        options.add_options(self._options())
        if self.watches:
            options.highlighted = min(i, len(self.watches) - 1)

    def action_add(self) -> None:
        self.dismiss(None)
        self._add_one()

    def action_close(self) -> None:
        self.dismiss(None)
