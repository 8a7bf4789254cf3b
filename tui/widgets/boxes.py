"""Text boxes that take a burst of keys in the order it was typed.

Textual's ``Input`` and ``TextArea`` insert a printable key where it arrives,
but their editing keys (backspace, the arrows, home, end, enter) are bindings,
run only once the key has bubbled up to the app: within one burst (keys that
arrive in one read, over ssh, from a key macro or tmux's send-keys) the letters
overtook them. ``a b c backspace d`` saved ``abc``; ``End BSpace BSpace XYZ`` on
"buy milk" saved ``XYZbuy mi`` (Textual issue 6605). A box here runs its own
bindings where the key arrives, in its turn, through the public binding map;
any other key goes on as before.
"""

from __future__ import annotations

from textual import events
from textual.widgets import Input, TextArea


class InOrder:
    """A mixin for a text widget: its own bindings run as their key arrives, not after it bubbled up."""

    async def on_key(self, event: events.Key) -> None:
        if event.is_printable:
            return  # the widget's own handler inserts it, in its turn
        found = self.screen.active_bindings.get(event.key)  # type: ignore[attr-defined]
        if found is None or found.node is not self or not found.enabled or found.binding.priority:
            return  # the screen's or the app's (escape, ctrl+s): found as usual
        event.stop()
        event.prevent_default()
        await self.run_action(found.binding.action)  # type: ignore[attr-defined]


class Box(InOrder, Input):
    """A one-line text box."""


class Area(InOrder, TextArea):
    """A text area."""
