"""Every user action once: its key, its palette title (with a group prefix) and its help text.

The app's bindings, the help screen and the command palette are all built
from this table, so a key can never be missing from one of them.
"""

from __future__ import annotations

from typing import NamedTuple


class ActionSpec(NamedTuple):
    key: str
    action: str
    group: str
    title: str
    help: str
    show: bool = True  # in the footer


ACTIONS: list[ActionSpec] = [
    ActionSpec("s", "step", "run", "step", "Run to the next pause point"),
    ActionSpec("n", "next_turn", "run", "next turn", "Run until the next agent turn is about to start"),
    ActionSpec("l", "loop_once", "run", "loop once", "Run until the current loop finishes its iteration"),
    ActionSpec("c", "resume", "run", "continue", "Run to the next breakpoint or the end"),
    ActionSpec("p", "pause", "run", "pause", "Pause at the next pause point"),
    ActionSpec("x", "stop", "run", "stop", "End the run cleanly (status stopped)"),
    ActionSpec("b", "toggle_breakpoint", "run", "toggle breakpoint",
               "Breakpoint on the agent (assistant message) or tool under the cursor, or where the run is paused"),
    ActionSpec("r", "reload", "run", "reload", "Reload the flow file and start a new run"),
    ActionSpec("m", "promote", "edit", "promote to memory", "Move the assistant message under the cursor to memory"),
    ActionSpec("e", "edit", "edit", "edit", "Edit the message, memory item, task or state field under the cursor"),
    ActionSpec("d", "delete", "edit", "delete", "Delete the memory item or task under the cursor"),
    ActionSpec("a", "add_task", "edit", "add task", "Add a task"),
    ActionSpec("A", "add_memory", "edit", "add memory item", "Add a memory item", False),
    ActionSpec("u", "undo", "edit", "undo", "Undo the last edit"),
    ActionSpec("o", "open_whole", "view", "open whole text",
               "Open the whole text of the message under the cursor in your pager ($PAGER), even one cut on "
               "its way to the app", False),
    ActionSpec("1", "view('conversation')", "view", "conversation", "Show the conversation (ctx.state.history)", False),
    ActionSpec("2", "view('model-sees')", "view", "what the model sees",
               "Show the exact messages the next model call will send", False),
    ActionSpec("3", "view('events')", "view", "event log", "Show every event of the run", False),
    ActionSpec("4", "view('nodes')", "view", "node tree", "Show workflow › loop › agent › chat › tool", False),
    ActionSpec("tab", "focus_next", "view", "next pane", "Move the focus to the next pane", False),
    ActionSpec("question_mark", "help", "app", "keys", "Show the keys"),
    ActionSpec("q", "quit", "app", "quit", "Quit flowtui"),
]

KEY_NAMES = {"question_mark": "?", "tab": "tab"}


def help_groups() -> list[tuple[str, list[tuple[str, str]]]]:
    groups: dict[str, list[tuple[str, str]]] = {}
    for spec in ACTIONS:
        groups.setdefault(spec.group, []).append((KEY_NAMES.get(spec.key, spec.key), spec.help))
    groups["app"].append(("ctrl+p", "Command palette: every action, by name"))
    groups["view"][0:0] = [("↑ ↓ home end", "Move the selection over messages"),
                           ("enter", "Expand or collapse a tool call, tool result or reasoning")]
    return list(groups.items())
