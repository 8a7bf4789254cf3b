"""The control pane: the run's buttons, its status, where it is, breakpoints, watchpoints.

Every line fits the pane's width, whatever it is: the buttons lose their long labels, then
their names; the status line ends in an ellipsis; the line saying where the run is drops its
counters, then shortens the path from the left (the innermost step is what matters). The
replay draws its status lines with the same functions.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.events import Resize
from textual.timer import Timer
from textual.widgets import Button, Static

from flowtui.tui.actions import ACTIONS, ActionSpec, key_name
from flowtui.tui.shown import shown, shown_head

STATUS_STYLES = {"paused": "bold #ffd75f", "running": "bold #5fafff", "finished": "bold #87d787",
                 "failed": "bold #ff5f5f", "stopped": "bold #d7af5f", "idle": "dim"}
BUTTON_CHROME = 3  # a compact button's padding and its margin
_AT = re.compile(r"\(at ([^()]+:\d+ in [^()]+)\)$")  # where the flow's code raised (runtime.errors.describe_error)
_WHO = re.compile(r"\w*Error: agent '[^']*' \(turn \d+[^)]*\): ")  # a provider's failure, who failed (providers)


def button_labels(buttons: list[ActionSpec], width: int) -> list[str]:
    """The buttons' labels that fit in ``width`` cells: ``Next turn [n]``, else ``n turn``, else ``n``."""
    forms = [[f"{a.title.capitalize()} \\[{key_name(a.key)}]" for a in buttons],
             [f"{key_name(a.key)} {a.label}" for a in buttons],
             [key_name(a.key) for a in buttons]]
    for labels in forms:
        if sum(len(label.replace("\\", "")) + BUTTON_CHROME for label in labels) <= width:
            return labels
    return forms[-1]


def waiting_for(view: Any) -> str | None:
    """What a running run is busy with (see ``RunView.busy_with``)."""
    return view.busy_with() if view is not None else None


def _room(width: int | None) -> int:
    """How much of a text a line of ``width`` cells may show (wide characters and ``⏎`` aside)."""
    return 2 * (width or 500)


_WAITS = {"stopping": "stop", "quitting": "stop", "pausing": "return"}  # what each waits for the code to do


def status_text(view: Any, *, loading: str | None = None, stopping: str | None = None,
                width: int | None = None, waited_s: float = 0.0) -> Text:
    """``● paused before RevisorAgent``; ``stopping``: ``stopping``/``quitting``/``pausing``, said with what it
    waits for (or a phrase that says what is left); ``waited_s``: how long a model call waiting to retry has waited
    (its wait counts down)."""
    if view is None or loading is not None:
        text = Text(shown(loading or "loading…"), "dim")
    elif stopping == "pausing" and view.status == "running" and getattr(view, "retrying", None) is not None:
        # (its countdown stays, said short enough for 80 columns: "waiting for the model call to return" hid it)
        wait = shown_head(view.status_line(waited_s=waited_s), _room(width)).replace("\n", " ⏎ ")
        text = Text(f"● pausing; {wait.removeprefix('running: ')}", STATUS_STYLES["paused"])
    elif stopping:
        busy = waiting_for(view) if stopping in _WAITS else None  # (else it says what is left)
        said = f"● {stopping}: waiting for {shown(busy)} to {_WAITS[stopping]}…" if busy else f"● {stopping}…"
        text = Text(said, STATUS_STYLES["paused" if stopping == "pausing" else "stopped"])
    else:
        style = STATUS_STYLES.get(view.status, "")
        text = Text("● ", style)
        # made safe as far as it can show: a reason of 500,000 line breaks took seconds at every key
        text.append(shown_head(view.status_line(waited_s=waited_s), _room(width)).replace("\n", " ⏎ "), style)
    if width is not None:
        text.truncate(width, overflow="ellipsis")
    return text


def where_text(view: Any, *, breakpoints: set[str] | None = None, event: Any = None,
               width: int | None = None) -> Text:
    """Where the run is (``RevisaoWorkflow › loop 2/5 › RevisorAgent``), or its output once finished;
    then the live app's counters and breakpoints, or (a replay) what ``event`` did. At most ``width``."""
    path = view.path() if view is not None else []
    if not path and view is not None and view.pause is not None:
        path = list(view.pause.path)
    if path:  # (one line: a step named "my\nloop" took the counters after it off the line)
        head, head_style = shown(" › ".join(path)).replace("\n", " ⏎ "), "bold"
    elif view is not None and view.status in ("finished", "stopped") and view.output is not None:
        # (a stopped run ends with its output so far)
        said = view.output if view.output.strip() else json.dumps(view.output)  # ("" and "  " were blank)
        head, head_style = "output: " + shown_head(said, _room(width)).replace("\n", " "), ""
    elif view is not None and view.status == "failed" and _AT.search(view.error or ""):
        head, head_style = "raised at " + shown(_AT.search(view.error).group(1)), "#ff5f5f"  # the cut status's end
    elif view is not None and view.status == "failed" and _WHO.match(view.error or ""):
        # a failed model call: what failed, past "agent 'X' (turn 1, model 'm'): ", which takes a narrow status
        head, head_style = shown_head(_WHO.sub("", view.error, count=1), _room(width)).replace("\n", " "), "#ff5f5f"
    else:
        head, head_style = "—", "dim"
    tails = _tails(view, breakpoints, event)
    tail = tails[0]
    if width is not None:
        if breakpoints is not None:  # the live app: the longest counters that leave the head some room
            tail = next((t for t in tails if t.cell_len + len(head) <= width), tails[-1])
        room = width - (tail.cell_len if breakpoints is not None else 0)  # a replay's tail is cut, not the head
        if len(head) > room:  # the innermost steps matter: a long path loses its start
            head = "…" + head[len(head) - room + 1:] if path and room > 1 else head[:max(room - 1, 0)] + "…"
    text = Text(head, head_style)
    text.append_text(tail)
    if width is not None:
        text.truncate(width, overflow="ellipsis")
    return text


def _tails(view: Any, breakpoints: set[str] | None, event: Any) -> list[Text]:
    """What follows the path, longest first."""
    if breakpoints is None:  # a replay: what the event did
        from flowtui.tui.widgets.event_log import summarize

        what = shown_head(summarize(event), 400).replace("\n", " ⏎ ") if event is not None else ""
        return [Text.assemble(("   ← ", "dim"), (what[:400], "dim")) if what else Text()]
    events = view.events if view is not None else 0
    edits = view.user_edits if view is not None else 0
    marks = shown(", ".join(sorted(breakpoints)))
    bp_style = "#ff875f" if breakpoints else "dim"
    said = f" · {edits} edit{'s' * (edits != 1)}"  # (one wording however wide: "edits 7" flipped to "8 edits")
    long = Text.assemble((f"   events {events}", "dim"), (said, "#ffd75f") if edits else "",
                         ("   breakpoints: ", "dim"), (marks or "none", bp_style))
    short = Text.assemble((f"  {events} ev", "dim"),
                          (said, "#ffd75f") if edits else "",
                          ("  bp: ", "dim"), (marks or "none", bp_style))
    least = Text.assemble(("  bp: ", "dim"), (marks, bp_style)) if marks else Text()
    return [long, short, least]


def watches_text(view: Any, watches: list[str], *, width: int | None = None) -> Text:
    """``watch: state.rodadas >= 3 · ◆ memory ~ /plano/i`` (◆: fired at the pause the run is at)."""
    pause = view.pause if view is not None and view.status == "paused" else None
    fired = {hit.expr for hit in pause.watch} if pause is not None and pause.watch else set()
    text = Text("watch: ", "dim")
    for i, expr in enumerate(watches):
        if i:
            text.append(" · ", "dim")
        text.append_text(Text.assemble(("◆ ", "bold #ffd75f") if expr in fired else "",
                                       (shown(expr), "bold #ffd75f" if expr in fired else "#d7afff")))
    text.append("   W lists", "dim")
    if width is not None:
        text.truncate(width, overflow="ellipsis")
    return text


class ControlPane(Vertical):
    """Buttons (each runs the same action as its key) and the status lines.

    The buttons are mounted after the first paint (:meth:`add_buttons`): their
    row is there from the start, so nothing moves when they arrive.
    """

    def __init__(self, actions: list[ActionSpec] = ACTIONS, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._specs = [a for a in actions if a.button]
        self._shown: dict[str, tuple] = {}
        self._disabled: dict[str, bool] = {}
        self.idle: frozenset[str] = frozenset()  # the run's actions that do nothing now (buttons disabled)
        self._buttons: dict[str, Button] = {}
        self._lines = {"status": Static(Text("loading…", "dim"), id="status"), "where": Static("", id="where"),
                       "watches": Static("", id="watches")}
        self._lines["watches"].display = False  # a line only while watchpoints are set
        self._last: tuple | None = None  # what sync() was last given (drawn again on a resize)
        # The retry a model call waits for, when this pane first saw it, and the timer that counts its
        # wait down (this process's clock: an attached run's machine may keep another time).
        self._retry: tuple[Any, float] | None = None
        self._ticking: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Horizontal(id="buttons")
        yield from self._lines.values()

    def add_buttons(self) -> None:
        if self._buttons:
            return
        for spec, label in zip(self._specs, button_labels(self._specs, self._width())):
            button = Button(label, id=f"btn-{spec.action}", action=f"app.{spec.action}", compact=True)
            # clicked, or its key pressed, never focused: tab goes from pane to pane (on a focused
            # button, enter stepped the run and the arrows did nothing)
            button.can_focus = False
            button.tooltip = f"{spec.help} [{key_name(spec.key)}]"
            button.disabled = self._disabled.get(spec.action, False)
            self._buttons[spec.action] = button
        self.query_one("#buttons").mount_all(self._buttons.values())

    def _width(self) -> int:
        return self.content_region.width or 200

    def on_resize(self, event: Resize) -> None:
        for button, label in zip(self._buttons.values(), button_labels(self._specs, self._width())):
            if str(button.label) != label:
                button.label = label
                button.refresh(layout=True)  # a label is no layout change to Textual: it kept its width
        if self._last is not None:
            self.sync(*self._last[0], **self._last[1])

    def sync(self, view: Any, breakpoints: set[str], *, loading: str | None = None,
             stopping: str | None = None, watches: list[str] | tuple[str, ...] = ()) -> None:
        self._last = ((view, breakpoints), dict(loading=loading, stopping=stopping, watches=watches))
        width = self._width()
        waited = self._retry_waited(view)
        watching = self._lines["watches"]
        if watching.display != bool(watches):  # (a layout pass, only when the first is set or the last goes)
            watching.display = bool(watches)
        # One line each (fixed height in the stylesheet): no layout pass, and only when the text changed.
        for name, text in (("status", status_text(view, loading=loading, stopping=stopping, width=width,
                                                  waited_s=waited)),
                           ("where", where_text(view, breakpoints=breakpoints, width=width)),
                           ("watches", watches_text(view, list(watches), width=width))):
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
        # (while the run loads, its keys are queued: they do something)
        self.idle = frozenset(a for a, off in disabled.items() if off) if view is not None else frozenset()

    def _retry_waited(self, view: Any) -> float:
        """How long the retry the run waits for has waited; a timer draws the status again each second
        while there is one (the line said "in 30 s" for the whole 30 s)."""
        retrying = view.retrying if view is not None and view.status == "running" else None
        if retrying is None:
            self._retry = None
            if self._ticking is not None:
                self._ticking.stop()
                self._ticking = None
            return 0.0
        if self._retry is None or self._retry[0] is not retrying:
            self._retry = (retrying, time.monotonic())
        if self._ticking is None:
            self._ticking = self.set_interval(1.0, self._tick)
        return time.monotonic() - self._retry[1]

    def _tick(self) -> None:
        if self._last is not None:
            self.sync(*self._last[0], **self._last[1])
