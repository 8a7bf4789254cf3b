"""The control pane: step/loop/continue buttons, the run's status, where it is, breakpoints."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from flowtui.tui.shown import shown

BUTTONS = [
    ("step", "Step", "s", "Run to the next pause point"),
    ("next_turn", "Next turn", "n", "Run until the next agent turn is about to start"),
    ("loop_once", "Loop once", "l", "Run until the current loop finishes its iteration"),
    ("resume", "Continue", "c", "Run to the next breakpoint or the end"),
    ("pause", "Pause", "p", "Pause at the next pause point"),
    ("stop", "Stop", "x", "End the run cleanly (status stopped)"),
    ("reload", "Reload", "r", "Reload the flow file and start a new run"),
]
STATUS_STYLES = {"paused": "bold #ffd75f", "running": "bold #5fafff", "finished": "bold #87d787",
                 "failed": "bold #ff5f5f", "stopped": "bold #d7af5f", "idle": "dim"}


def status_text(view: Any, *, loading: str | None = None, stopping: bool = False) -> Text:
    if view is None or loading is not None:
        return Text(shown(loading or "loading…"), "dim")
    if stopping:
        return Text("● stopping…", STATUS_STYLES["stopped"])
    line = shown(view.status_line())
    text = Text("● ", STATUS_STYLES.get(view.status, ""))
    text.append(line, STATUS_STYLES.get(view.status, ""))
    return text


def where_text(view: Any, breakpoints: set[str]) -> Text:
    text = Text()
    path = view.path() if view is not None else []
    if not path and view is not None and view.pause is not None:
        path = list(view.pause.path)
    if path:
        text.append(shown(" › ".join(path)), "bold")
    elif view is not None and view.status == "finished" and view.output is not None:
        out = shown(view.output).replace("\n", " ")
        text.append("output: ", "dim")
        text.append(out if len(out) <= 70 else out[:69] + "…")
    else:
        text.append("—", "dim")
    text.append(f"   events {view.events if view is not None else 0}", "dim")
    if view is not None and view.user_edits:
        text.append(f" · edits {view.user_edits}", "#ffd75f")
    text.append("   breakpoints: ", "dim")
    text.append(shown(", ".join(sorted(breakpoints))) if breakpoints else "none",
                "#ff875f" if breakpoints else "dim")
    return text


class ControlPane(Vertical):
    """Buttons (each runs the same action as its key) and the status lines.

    The buttons are mounted after the first paint (:meth:`add_buttons`): their
    row is there from the start, so nothing moves when they arrive.
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: dict[str, tuple] = {}
        self._disabled: dict[str, bool] = {}
        self._buttons: dict[str, Button] = {}
        self._lines = {"status": Static(Text("loading…", "dim"), id="status"), "where": Static("", id="where")}

    def compose(self) -> ComposeResult:
        yield Horizontal(id="buttons")
        yield from self._lines.values()

    def add_buttons(self) -> None:
        if self._buttons:
            return
        for action, label, key, tip in BUTTONS:
            button = Button(f"{label} \\[{key}]", id=f"btn-{action}", action=f"app.{action}", compact=True)
            button.tooltip = tip
            button.disabled = self._disabled.get(action, False)
            self._buttons[action] = button
        self.query_one("#buttons").mount_all(self._buttons.values())

    def sync(self, view: Any, breakpoints: set[str], *, loading: str | None = None, stopping: bool = False) -> None:
        # One line each (fixed height in the stylesheet): no layout pass, and only when the text changed.
        for name, text in (("status", status_text(view, loading=loading, stopping=stopping)),
                           ("where", where_text(view, breakpoints))):
            key = (text.plain, tuple(text.spans))
            if self._shown.get(name) != key:
                self._shown[name] = key
                self._lines[name].update(text, layout=False)
        active = view is not None and view.status in ("running", "paused")
        paused = view is not None and view.status == "paused"
        disabled = self._disabled
        for action in ("step", "next_turn", "loop_once", "resume"):
            disabled[action] = not active
        disabled["pause"] = not (active and not paused)
        disabled["stop"] = not active
        for action, button in self._buttons.items():
            button.disabled = disabled.get(action, False)
