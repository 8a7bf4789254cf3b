"""Every user action once: its key, its palette title (with a group prefix), its help text, and where
else it shows (the key bar at the bottom, a button in the control pane).

The live app's bindings, buttons, key bar, help screen and command palette are all built from
:data:`ACTIONS`, and the replay's from :data:`flowtui.tui.replay.KEYS`, with the same helpers, so a
key can never be missing from one of them. The view keys of both come from the pane registry
(:mod:`flowtui.tui.panes`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from flowtui.tui.panes import PANES


class ActionSpec(NamedTuple):
    key: str  # Textual key names, comma-separated for several ("left,h")
    action: str
    group: str
    title: str
    help: str
    short: str = ""  # its name in the key bar and on a narrow button ("": the title)
    rank: int = 0  # key bar: the lower the more important (shown first, kept when narrow); 0: not shown
    button: bool = False  # a button in the control pane
    priority: bool = False  # the binding wins over the focused pane's own keys

    @property
    def label(self) -> str:
        return self.short or self.title


def pane_actions() -> list[ActionSpec]:
    """``1`` ``2`` ``3`` ``4``: one action per pane of the registry (listed on the pane's border)."""
    return [ActionSpec(p.key, f"view('{p.name}')", "view", p.title.lower(), p.help, short=p.label) for p in PANES]


ACTIONS: list[ActionSpec] = [
    ActionSpec("s", "step", "run", "step", "Run to the next pause point", rank=2, button=True),
    ActionSpec("n", "next_turn", "run", "next turn", "Run until the next agent turn is about to start", "turn",
               rank=3, button=True),
    ActionSpec("l", "loop_once", "run", "loop once", "Run until the current loop finishes its iteration", "loop",
               rank=4, button=True),
    ActionSpec("c", "resume", "run", "continue", "Run to the next breakpoint or the end", rank=5, button=True),
    ActionSpec("p", "pause", "run", "pause", "Pause at the next pause point", rank=6, button=True),
    ActionSpec("x", "stop", "run", "stop", "End the run cleanly (status stopped)", rank=7, button=True),
    ActionSpec("b", "toggle_breakpoint", "run", "toggle breakpoint",
               "Breakpoint on the agent (assistant message) or tool under the cursor, or where the run is paused",
               "break", rank=14),
    ActionSpec("w", "watch", "run", "watch",
               "Watchpoint: pause when a condition becomes true (on a state field: its change)"),
    # (not on the key bar, which is full at 160 columns: the help, the palette and the control pane say them)
    ActionSpec("W", "watchpoints", "run", "watchpoints", "List the watchpoints; remove one", "watch"),
    ActionSpec("r", "reload", "run", "reload", "Reload the flow file: paused with a journal, continue from here "
               "with the new code, or start a new run", rank=10, button=True),
    ActionSpec("f", "fork", "run", "fork",
               "Fork: a new run re-executed against this run's journal up to the event under the event log's "
               "cursor (elsewhere: the last event; a stopped run's last pause), paused there; the old run stays "
               "in its journal"),
    ActionSpec("m", "promote", "edit", "promote to memory", "Move the assistant message under the cursor to memory",
               "promote", rank=11),
    ActionSpec("e", "edit", "edit", "edit", "Edit the message, memory item, task or state field under the cursor; "
               "paused before a tool, the arguments of its call", rank=12),
    ActionSpec("d", "delete", "edit", "delete", "Delete the message, memory item or task under the cursor (a dialog "
               "names what leaves with a message)", rank=16),
    ActionSpec("a", "add_task", "edit", "add task", "Add a task", "add", rank=15),
    ActionSpec("A", "add_memory", "edit", "add memory item", "Add a memory item", "add"),  # shown as "a/A add"
    ActionSpec("u", "undo", "edit", "undo", "Undo the last edit", rank=13),
    ActionSpec("o", "open_whole", "view", "open whole text",
               "Open the whole text of the message under the cursor (or of the sidebar's item or field) in "
               "your pager ($PAGER), even one cut on its way to the app", "open", rank=18),
    ActionSpec("P", "printed", "view", "what the flow printed",
               "Open the last 500 lines the flow printed (stdout and stderr) in your pager", "printed"),
    *pane_actions(),  # the panes' border lists their keys
    ActionSpec("left", "look(-1)", "view", "look back",
               "Look back: the panes show the run as it was one event earlier, while it goes on", "back"),
    ActionSpec("right", "look(1)", "view", "look forward",
               "Look forward one event; past the last one, the live run again", "forward"),
    ActionSpec("escape", "live", "view", "back to live", "Stop looking back: the panes show the live run again"),
    ActionSpec("tab", "focus_next", "view", "next pane", "Move the focus to the next pane"),
    ActionSpec("question_mark", "help", "app", "keys", "Show the keys", rank=1),
    ActionSpec("ctrl+l", "redraw", "app", "redraw", "Draw the whole screen again (after something else wrote on "
               "the terminal)"),
    ActionSpec("q", "quit", "app", "quit", "Quit flowtui", rank=8),
]

KEY_NAMES = {"question_mark": "?", "left_square_bracket": "[", "right_square_bracket": "]",
             "left": "←", "right": "→", "shift+left": "shift+←", "shift+right": "shift+→",
             "pageup": "pgup", "pagedown": "pgdn"}


def key_name(key: str) -> str:
    """``left,h`` → ``← h``: how a binding's keys are written for a person."""
    return " ".join(KEY_NAMES.get(k, k) for k in key.split(","))


class Redraws:
    """``ctrl+l``, as in a shell, ``less`` or ``vim``: the whole screen drawn again. Something the flow started
    may write on the terminal by its path (``/dev/pts/3``), which the app never hears of; only what changes
    next would be drawn over it."""

    def action_redraw(self) -> None:
        self.refresh(repaint=True, layout=True)  # type: ignore[attr-defined]


def bindings(specs: Iterable[ActionSpec]) -> list[Any]:
    """Textual bindings for ``specs`` (``tab`` is Textual's own)."""
    from textual.binding import Binding

    return [Binding(s.key, s.action, s.title.capitalize(), show=False, priority=s.priority,
                    id=f"{s.group}.{s.title.replace(' ', '-')}", tooltip=s.help)
            for s in specs if s.action != "focus_next"]


def help_groups(specs: Iterable[ActionSpec] = ACTIONS, *, before: dict[str, list[tuple[str, str]]] | None = None,
                after: dict[str, list[tuple[str, str]]] | None = None) -> list[tuple[str, list[tuple[str, str]]]]:
    """(group, [(keys, what)]) for the help screen; ``before``/``after`` add rows that are no action."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for spec in specs:
        groups.setdefault(spec.group, []).append((key_name(spec.key), spec.help))
    for group, rows in (before or {}).items():
        groups.setdefault(group, [])[0:0] = rows
    for group, rows in (after or {}).items():
        groups.setdefault(group, []).extend(rows)
    return list(groups.items())


def live_actions(*, attached: bool) -> list[ActionSpec]:
    """The live app's actions: an app attached to a run that lives elsewhere has no reload nor fork (the
    flow's file and the journal are where the run is)."""
    return [a for a in ACTIONS if not (attached and a.action in ("reload", "fork"))]


def app_help_groups(specs: Iterable[ActionSpec] = ACTIONS) -> list[tuple[str, list[tuple[str, str]]]]:
    """The live app's help: every action, and the keys that belong to a pane."""
    return help_groups(specs, before={"view": [
        ("↑ ↓ home end", "Move the selection over messages"),
        ("enter space", "Expand or collapse a tool call, tool result or reasoning (in what the model sees, enter "
                        "shows the event that put the block there)"),
        ("drag, ctrl+c", "Select text with the mouse; ctrl+c copies it")]},
        after={"app": [("ctrl+p", "Command palette: every action, by name")]})


def palette(specs: Iterable[ActionSpec], run: Callable[[str], Any]) -> Iterator[tuple[str, str, Callable[[], Any]]]:
    """(title, help, callback) for each action, for the command palette (``run: step``)."""
    for spec in specs:
        if spec.action != "focus_next":
            yield f"{spec.group}: {spec.title}", f"{spec.help}  [{key_name(spec.key)}]", _bind(run, spec.action)


# Textual's own palette commands that flowtui's say better or that do not work here: "Quit" and "Keys"
# beside flowtui's own quit and keys, and "Screenshot", which failed with nowhere to save (and would
# write a file that is not owner-only). "Theme" and "Maximize" stay.
TEXTUAL_LEFT_OUT = frozenset({"Quit", "Keys", "Screenshot"})


def textual_commands(commands: Iterable[Any]) -> Iterator[Any]:
    """Textual's system commands (``App.get_system_commands``) flowtui keeps in its palette."""
    return (command for command in commands if command.title not in TEXTUAL_LEFT_OUT)


def _bind(run: Callable[[str], Any], action: str) -> Callable[[], Any]:
    async def go() -> None:
        await run(action)

    return go


def key_hints(specs: Iterable[ActionSpec]) -> list[tuple[int, str, str, str]]:
    """(rank, keys, label, action) for the key bar, most important first. An action not ranked
    itself joins a ranked one of the same label (``a/A add``)."""
    specs = list(specs)
    ranked = {s.label: s for s in specs if s.rank}
    keys = {label: [key_name(s.key)] for label, s in ranked.items()}
    for s in specs:
        if not s.rank and s.label in ranked:
            keys[s.label].append(key_name(s.key))
    return sorted((s.rank, "/".join(keys[label]), label, s.action) for label, s in ranked.items())
