"""Keys typed before a dialog showed are not the dialog's.

A burst of keys (`r` then `y` typed fast, tmux's send-keys, a paste into a
terminal that does not bracket pastes) is handed, all of it, to the focused
widget of the screen that is current when it arrives, before the first key's
binding opens a dialog. The rest of the burst then bubbles up through a screen
that is no longer current, and Textual checks it against the bindings of the
dialog now on top: `r` then `y` answered "reload and lose the run?" before it
showed. Such a key is dropped instead:

- :class:`KeysPassed` (the app's screens) remembers the keys that bubbled up
  through the screen;
- :class:`KeysStayPut` (the apps) drops a key that passed a screen now under a
  dialog, before the dialog's bindings see it.

A dialog takes the keys typed once it shows. (Handing the burst's letters to a
text dialog's box instead was tried: Textual's queues let the later keys, sent
straight to the box, overtake the earlier ones, and `buy milk` was saved as
` milkbuy`.)
"""

from __future__ import annotations

import weakref

from textual import events


class KeysPassed:
    """A screen that remembers the keys that bubbled up through it (weakly: each is gone once handled)."""

    def on_key(self, event: events.Key) -> None:
        passed = self.__dict__.setdefault("_keys_passed", weakref.WeakSet())
        passed.add(event)

    def passed(self, event: events.Key) -> bool:
        return event in self.__dict__.get("_keys_passed", ())


class KeysStayPut:
    """An app that drops a key that bubbled up through a screen now under a dialog. Runs before Textual's
    own key handling (the current screen's bindings), which it then prevents."""

    def on_key(self, event: events.Key) -> None:
        stack = self.screen_stack  # type: ignore[attr-defined]
        if any(isinstance(screen, KeysPassed) and screen.passed(event) for screen in stack[:-1]):
            event.stop()
            event.prevent_default()
