"""``flowtui replay JOURNAL``: open a recorded run read-only and scrub through it.

The panes are the live app's, fed a :class:`runtime.fold.RunView` folded
from the journal's first ``k`` events (see :mod:`tui.timeline`), so what you
see at event ``k`` is what the live app showed then. There are no run
commands and no edits: a journal is history.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual.app import App, SystemCommand
from textual.screen import Screen

from flowtui.runtime.cli import Once, printable, say
from flowtui.tui.actions import (
    ActionSpec, Redraws, bindings, help_groups, key_hints, palette, pane_actions, textual_commands,
)
from flowtui.tui.screens.dialogs import HelpScreen
from flowtui.tui.shown import PlainNotify, shown_path
from flowtui.tui.signals import quit_on_signals
from flowtui.tui.screens.replay import ReplayScreen
from flowtui.runtime.journal import JournalError, Mended, load_runs
from flowtui.tui.timeline import Timeline
from flowtui.tui.driver import TolerantInput
from flowtui.tui.typeahead import KeysStayPut

KEYS: list[ActionSpec] = [  # scrubbing wins over the focused pane's own keys (priority)
    ActionSpec("left,h", "step(-1)", "replay", "back", "One event back", rank=3, priority=True),
    ActionSpec("right,l", "step(1)", "replay", "forward", "One event forward", rank=4, priority=True),
    ActionSpec("shift+left,pageup", "step(-100)", "replay", "back 100", "100 events back", "-100", rank=8,
               priority=True),
    ActionSpec("shift+right,pagedown", "step(100)", "replay", "forward 100", "100 events forward", "+100", rank=9,
               priority=True),
    ActionSpec("home", "go(0)", "replay", "start", "Before the first event", rank=10, priority=True),
    ActionSpec("end", "go(-1)", "replay", "end", "After the last event", rank=11, priority=True),
    ActionSpec("left_square_bracket", "turn(-1)", "replay", "previous turn",
               "Back to the previous agent turn's start", "prev turn", rank=5, priority=True),
    ActionSpec("right_square_bracket", "turn(1)", "replay", "next turn", "On to the next agent turn's start", "next turn",
               rank=6, priority=True),
    *pane_actions(),
    ActionSpec("f", "fork", "replay", "fork", "Fork: open the app on a new run of the flow's current code, re-executed "
               "against this journal up to this event and paused there, ready for edits", rank=6),
    ActionSpec("o", "open_whole", "view", "open whole text", "Open the whole text of the message under the "
               "cursor (or of the sidebar's item or field) in your pager ($PAGER)", "open"),
    ActionSpec("tab", "focus_next", "view", "next pane", "Move the focus to the next pane (↑ ↓ move over messages)"),
    ActionSpec("question_mark", "help", "app", "keys", "Show the keys", rank=1),
    ActionSpec("ctrl+l", "redraw", "app", "redraw", "Draw the whole screen again"),
    ActionSpec("q", "quit", "app", "quit", "Close the replay", rank=7),
]


def replay_help_groups() -> list[tuple[str, list[tuple[str, str]]]]:
    return help_groups(KEYS, after={"app": [("ctrl+p", "Command palette: every action, by name")]})


class ReplayApp(PlainNotify, KeysStayPut, Redraws, TolerantInput, App[int]):
    """A recorded run, one event at a time."""

    CSS_PATH = "flowtui.tcss"
    TITLE = "flowtui replay"
    BINDINGS = bindings(KEYS)

    def __init__(self, events: list[Any], *, source: str = "", notices: list[Any] = (),
                 place: tuple[int, int] = (1, 1)) -> None:
        super().__init__()
        self.place = place  # (N, M): the shown run is the file's Nth of M (--run N)
        # (FLOW:Class, JOURNAL@K, the run's id: any run of the journal, not only its last) when f closed the replay
        self.fork: tuple[str, str, str] | None = None
        self.notices = list(notices)  # journal lines that could not be read
        self.timeline = Timeline(events)
        self.final = self.timeline.view_at(len(self.timeline)).clone()  # also lays the checkpoints down
        self.final_status = self.final.status
        self.source = source
        self.position = len(self.timeline)  # where it opens: the run's end, unless told otherwise
        self.main = ReplayScreen(key_hints(KEYS))
        self.view: Any = None

    async def on_mount(self) -> None:
        quit_on_signals(self)
        await self.push_screen(self.main)
        self.go(self.position)
        first = self.timeline.events[0] if self.timeline.events else None
        if first is not None and getattr(first, "type", None) != "run.start":
            self.notify(f"These events do not begin with a run.start: the journal's numbering starts again at "
                        f"event {first.seq} without one (lines edited, lost or joined by hand?), and a run is taken "
                        "to begin there. --run N picks another of the file's runs.",
                        title="No run.start", severity="warning", timeout=15)
        if self.notices:
            lines = [f"line {n.line}: {n.reason}" for n in self.notices[:5]]
            more = len(self.notices) - len(lines)
            left_out = sum(not isinstance(n, Mended) for n in self.notices)
            title = (f"Skipped {left_out} unreadable line{'s' if left_out > 1 else ''}" if left_out == len(self.notices)
                     else "This journal was edited by hand, or damaged")
            self.notify("\n".join(lines) + (f"\n… and {more} more" if more > 0 else ""), title=title,
                        severity="warning", timeout=15)

    def action_fork(self) -> None:
        """``f``: leave the replay for the app, on a run re-executed up to the event shown."""
        event = self.timeline.event(self.position)
        start = self.timeline.events[0] if self.timeline.events else None
        if event is None or start is None or getattr(start, "type", None) != "run.start":
            self.notify("Move to an event first (→): the fork re-executes the run up to it.", severity="warning")
        elif not start.file or not Path(start.file).is_file():
            self.notify(f"The flow's file {shown_path(start.file or '(not recorded)')} is not there: nothing to fork "
                        "(a fork runs the flow's current code, from its file).", severity="error")
        elif not start.workflow.isidentifier() or Path(f"{start.file}:{start.workflow}").exists():
            # "shown.py" and workflow "W.py": the file "shown.py:W.py" was what ran, not the one the dialog named
            self.notify(f"This journal names workflow {shown_path(start.workflow)} of {shown_path(start.file)}: not a "
                        "class a fork can run from that file. Run the flow yourself with --resume-from "
                        f"{shown_path(self.source)}@{event.seq}.", severity="error")
        else:
            from flowtui.tui.screens.dialogs import ConfirmDialog

            seq, where = self.final.fork_point(event.seq)

            def answered(yes: bool | None) -> None:
                if yes:
                    self.fork = (f"{start.file}:{start.workflow}", f"{self.source}@{seq}", start.run_id)
                    self.exit(0)

            # the journal names the file: a journal from elsewhere could name any code on this machine (said on
            # one line, its end kept: a path of 40 line breaks hid the file, the question and the buttons)
            self.push_screen(ConfirmDialog(f"Run the code of the flow file this journal names? Fork runs "
                                           f"{shown_path(str(Path(start.file).resolve()))} (workflow {start.workflow}) "
                                           f"here, up to event #{seq}{where}."), answered)

    # --- position ---------------------------------------------------------------
    def go(self, k: int) -> None:
        """Show the state after event ``k`` (clamped to the run)."""
        n = len(self.timeline)
        self.position = k = max(0, min(k, n))
        self.view = view = self.timeline.view_at(k)
        # Inside a child workflow's events, its panes: its conversation, state and ctx (the live app shows
        # a child where the run pauses in it; a run recorded headless has no pause to follow).
        event = self.timeline.event(k)
        child = view.runs.get(getattr(event, "run_id", None) or "") if event is not None else None
        view.focus = event.run_id if child is not None and event.run_id != view.run_id \
            and child.status == "running" else None
        self.main.sync(self.timeline, k, self.view, self.final, source=Path(self.source).name)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # the scrub keys are priority bindings: let a dialog or the palette keep its own arrows
        if action in ("step", "go", "turn") and self.screen is not self.main:
            return False
        return True

    def action_step(self, delta: int) -> None:
        self.go(self.position + delta)

    def action_go(self, k: int) -> None:
        self.go(len(self.timeline) if k < 0 else k)

    def action_turn(self, direction: int) -> None:
        timeline = self.timeline
        k = timeline.next_agent(self.position) if direction > 0 else timeline.previous_agent(self.position)
        if k is None:
            self.notify("No later agent turn." if direction > 0 else "No earlier agent turn.")
            return
        self.go(k)

    def action_view(self, name: str) -> None:
        if self.screen is self.main:
            self.main.show_view(name)

    def action_open_whole(self) -> None:
        """The message under the conversation's cursor (or the sidebar's item or field) whole, in the pager:
        a block draws its first lines, and said "o opens it whole" where o did nothing."""
        from flowtui.tui.app import page_value
        from flowtui.tui.edits import row_value

        view, sidebar = self.view, self.main.sidebar
        if view is None:
            return
        if self.focused is sidebar and sidebar.highlighted_id is not None:
            value = row_value(view, sidebar.highlighted_id)[1]
        elif self.main.current_view != "conversation":  # (the events, the nodes: o would open a hidden message)
            self.notify("o opens a text whole in the conversation (1), on the message under its cursor; in the "
                        "sidebar (tab), on the item under its cursor.", severity="warning")
            return
        else:
            i = self.main.conversation.cursor
            if not 0 <= i < len(view.history):
                self.notify("Put the cursor on a message to open it.", severity="warning")
                return
            value = view.history[i].content
        self.run_worker(page_value(self, value), group="command", exit_on_error=False)

    async def _open_whole(self, value: Any) -> None:  # what the model sees (2) opens its own blocks through it
        from flowtui.tui.app import page_value

        await page_value(self, value)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(replay_help_groups()))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        for title, help, callback in palette(KEYS, self.run_action):
            yield SystemCommand(title, help, callback)
        yield from textual_commands(super().get_system_commands(screen))


def build_parser() -> argparse.ArgumentParser:
    from flowtui.runtime.cli import Parser

    parser = Parser(prog="flowtui replay",
                                     description="Open a recorded run (a JSONL journal) read-only and scrub through it.")
    parser.add_argument("journal", metavar="JOURNAL", help="e.g. .flowtui/runs/RevisaoWorkflow-20250101-120000.jsonl")
    parser.add_argument("--at", type=int, metavar="K", action=Once,
                        help="open just after event #K, numbered as in the event log and JOURNAL@K "
                             "(0: before the first; default: the run's end)")
    parser.add_argument("--run", type=int, metavar="N", action=Once,
                        help="which run, when the file holds several (1 is the first; default: the last)")
    return parser


def make_replay(path: str | Path, *, run: int | None = None, progress: Any = None, **options: Any) -> ReplayApp:
    """The replay app for a journal file; raises :class:`JournalError` for a file it cannot replay.
    ``progress``: told how many bytes of the file are read, as they are."""
    notices: list[Any] = []
    runs = load_runs(path, notices=notices, progress=progress)
    if run is not None and not 1 <= run <= len(runs):
        raise JournalError(f"{path}: --run {run}: the file holds {len(runs)} run{'s' if len(runs) != 1 else ''}")
    number = run or len(runs)
    return ReplayApp(runs[number - 1], source=str(path), notices=notices, place=(number, len(runs)), **options)


class Reading:
    """How far the reading of a large journal is, on one line of a terminal's stderr (a gigabyte takes
    seconds to read before the screen can show anything of it)."""

    LARGE = 32 << 20  # bytes: a journal smaller than this is read in well under a second

    def __init__(self, path: str) -> None:
        try:
            self.size = os.stat(path).st_size
        except OSError:
            self.size = 0
        self.shown = self.size >= self.LARGE and sys.stderr.isatty()
        self.name = printable(path)
        self._said = -1

    def __call__(self, done: int) -> None:
        percent = done * 100 // self.size
        if percent != self._said:
            self._said = percent
            self._write(f"\rflowtui replay: reading {self.name}: {percent}% of {self.size / 1e6:,.0f} MB")

    def done(self) -> None:
        if self._said >= 0:
            self._write("\r\x1b[K")  # the line is cleared: the app or a message takes its place

    @staticmethod
    def _write(text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()


def main_replay(argv: list[str]) -> int:
    """``flowtui replay JOURNAL``: 0 when closed, 2 when the journal cannot be read."""
    args = build_parser().parse_args(argv)
    progress = Reading(args.journal)
    try:
        app = make_replay(args.journal, run=args.run, progress=progress if progress.shown else None)
    except JournalError as exc:
        progress.done()
        say(f"flowtui replay: {exc}")
        return 2
    progress.done()
    if args.at is not None:
        last = getattr(app.timeline.event(len(app.timeline)), "seq", 0)
        if not 0 <= args.at <= last:  # it would open elsewhere, unsaid
            say(f"flowtui replay: --at {args.at}: the run's events are numbered up to #{last:,}; give K from 0 "
                f"to {last:,}")
            return 2
        app.position = app.timeline.after(args.at)
    from flowtui.tui.cli import needs_a_terminal

    needs_a_terminal("flowtui replay", "without one, the journal is JSON lines to read as they are, and "
                                       "flowtui diff compares two runs")
    app.run()
    if app.fork is not None:  # f: the app, on the run re-executed up to the event that was shown
        from flowtui.tui.app import make_app

        target, resume_from, run_id = app.fork
        live = make_app(target, resume_from=resume_from, resume_run=run_id, journal_auto=True)
        live.run()
        for note in live.client.journal_notes:
            say(note)
        return live.exit_code
    return app.exit_code
