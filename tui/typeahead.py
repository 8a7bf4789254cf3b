"""Type-ahead: keys typed faster than a dialog opens belong to the dialog.

A burst of keys (`a` then `buy milk` typed fast, a paste into a terminal that
does not bracket pastes, tmux's send-keys) is handed to the focused widget of
the screen that is current when the burst arrives, all of it, before the
first key's binding opens a dialog. The rest of the burst then bubbles up
through a screen that is no longer current, and Textual dropped it: the task
added was `milk`. Three parts put those keys where the user meant them:

- :class:`KeysPassed` (the app's screens) remembers the keys that bubbled up
  through the screen;
- :class:`KeysFollowDialogs` (the apps) sends a key that passed a screen now
  under a dialog on to the dialog, as if typed again;
- :class:`TypedBeforeFocus` (the dialogs) hands a key that reaches the dialog
  before its text box has focus to the box.

A key bound on the dialog (`escape`) still acts as that binding; keys the
screen under it binds (`s` steps) never reach the run while the dialog is open.
A question (reload and lose the run? delete this message?) gets none of them:
it is answered by keys typed once it shows.
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


class KeysFollowDialogs:
    """An app that sends a key that bubbled up through a screen now under a text dialog on to the
    dialog, and drops one that finds a question there. Runs before Textual's own key handling (the
    current screen's bindings), which it then prevents: a question (reload and lose the run? delete
    this message?) is answered by keys typed once it shows, never by one typed before (`r` then `y`
    in one burst reloaded)."""

    def on_key(self, event: events.Key) -> None:
        stack = self.screen_stack  # type: ignore[attr-defined]
        if any(isinstance(screen, KeysPassed) and screen.passed(event) for screen in stack[:-1]):
            event.stop()
            event.prevent_default()
            if isinstance(stack[-1], TypedBeforeFocus):
                self.post_message(events.Key(event.key, event.character))  # type: ignore[attr-defined]


class TypedBeforeFocus:
    """A dialog that gives its text box the keys that reach it before the box has focus (the box is
    focused once the dialog is shown; a burst typed with the key that opened it comes sooner)."""

    def on_key(self, event: events.Key) -> None:
        if self.focused is not None:  # type: ignore[attr-defined]
            return
        box = next(iter(self.query("Input, TextArea")), None)  # type: ignore[attr-defined]
        if box is None:
            return
        event.stop()
        event.prevent_default()
        self.set_focus(box)  # type: ignore[attr-defined]  # now: the keys queued behind this one go to it too
        box.post_message(events.Key(event.key, event.character))
