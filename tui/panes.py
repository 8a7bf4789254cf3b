"""The left pane's views, each in one place: name, title, key, widget, and how it is drawn.

The live app and the replay both build their view switcher, view keys, help and palette
entries from :data:`PANES` (see :class:`flowtui.tui.screens.panes.PanesScreen` and
:mod:`flowtui.tui.actions`): a new view is one entry here. Each pane is drawn from the same
thing in both, a :class:`PaneData` (the run's folded view and its events so far), so what the
replay shows at event *k* is what the live app showed then.

Widgets are imported when a pane is first shown: nothing here costs the first paint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple


class PaneData(NamedTuple):
    """What a pane is drawn from."""

    view: Any  # flowtui.runtime.fold.RunView
    events: Sequence[Any]  # the run's events so far: lines as they came (the live app) or events (a replay)
    tokens: Any = None  # the live run's own token count of what the model sees (flowtui.tui.tokens), if any


@dataclass(frozen=True)
class Pane:
    name: str  # the widget's id, and the view action's argument: view('events')
    title: str  # the pane's border title
    key: str
    label: str  # in the border's list of keys and the key bar: [3] events
    help: str
    make: Callable[[], Any]  # the widget (mounted when the pane is first shown)
    update: Callable[[Any, PaneData], None]  # draw the widget from the run (cheap when nothing changed)
    always: bool = False  # kept up to date while hidden (it grows by appending: the cursor stays put)


def _conversation() -> Any:
    from flowtui.tui.widgets.message_list import MessageList

    return MessageList(id="conversation", empty_text="No messages yet.")


def _model_sees() -> Any:
    from flowtui.tui.widgets.message_list import MessageList

    return MessageList(id="model-sees", empty_text="Nothing to send yet.", markdown=False)  # the text as sent


def _events() -> Any:
    from flowtui.tui.widgets.event_log import EventLog

    return EventLog(id="events")


def _nodes() -> Any:
    from flowtui.tui.widgets.node_tree import NodeTree

    return NodeTree(id="nodes")


def _diff() -> Any:
    from flowtui.tui.widgets.diff_view import DiffView

    return DiffView(id="diff")


def _show_model_sees(widget: Any, data: PaneData) -> None:
    from flowtui.tui.widgets.model_sees import show_model_sees

    show_model_sees(widget, data.view, data.tokens)


PANES: list[Pane] = [
    Pane("conversation", "Conversation", "1", "conversation", "Show the conversation (ctx.state.history)",
         _conversation, lambda w, d: w.show_run(d.view), always=True),
    Pane("model-sees", "What the model sees", "2", "model sees",
         "Show the exact messages the next model call sends", _model_sees, _show_model_sees),
    Pane("events", "Event log", "3", "events", "Show the run's events (in a replay: up to this one)",
         _events, lambda w, d: w.set_events(d.events)),
    Pane("nodes", "Node tree", "4", "nodes", "Show workflow › loop › agent › chat › tool",
         _nodes, lambda w, d: w.sync(d.view)),
    Pane("diff", "Diff against another run", "5", "diff",
         "Compare this run with another journal (the one it was forked from, else the newest; enter picks)",
         _diff, lambda w, d: w.sync(d.view, d.events)),
]
BY_NAME = {p.name: p for p in PANES}


def pane(name: str) -> Pane:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"no pane named {name!r}; there are {', '.join(BY_NAME)}") from None


def keys_line(room: int | None = None) -> str:
    """``[1] conversation [2] model sees …`` for the pane's border, shorter when ``room`` is short."""
    forms = [" ".join(f"[{p.key}] {p.label}" for p in PANES), " ".join(f"{p.key} {p.label}" for p in PANES),
             " ".join(f"[{p.key}]" for p in PANES)]
    return next((f for f in forms if room is None or len(f) <= room), forms[-1])
