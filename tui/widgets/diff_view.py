"""The diff view (``5``): the run on screen against another journal, as ``flowtui diff`` says it.

The other journal is, by default, the one the run was re-executed from (``--resume-from``, a
fork), else the newest other journal of the same workflow in ``.flowtui/runs/``; ``enter`` picks
another from that folder, newest first. The comparison is made again only when the run has
new events or the other journal changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from flowtui.runtime.channel import elided_of
from flowtui.tui.shown import shown

RUNS = Path(".flowtui/runs")


def journals(workflow: str | None, *, besides: str | None) -> list[Path]:
    """The journals of ``.flowtui/runs/`` and of the folder of ``besides`` (A's journal, left out: a
    journal kept with --journal a.jsonl has its b.jsonl beside it), newest first, that workflow's first."""
    folders = {RUNS.resolve(): RUNS} if RUNS.is_dir() else {}
    if besides is not None and Path(besides).parent.is_dir():
        folders.setdefault(Path(besides).parent.resolve(), Path(besides).parent)
    found = [p for folder in folders.values() for p in folder.glob("*.jsonl") if p.is_file() and p.stat().st_size
             and (besides is None or p.resolve() != Path(besides).resolve())]
    found.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    if workflow:
        from flowtui.runtime.cli import file_stem

        found.sort(key=lambda p: not p.name.startswith(f"{file_stem(workflow)}-"))  # stable: newest first within
    return found


def _events(items: Any) -> list[Any]:
    """The run's events so far: parsed already (a replay) or JSON lines (the live app)."""
    from flowtui.runtime.journal import Invalid, parse_line

    out = []
    for n, item in enumerate(items, 1):
        ev = parse_line(item, n) if isinstance(item, bytes) else item
        if not isinstance(ev, Invalid) and hasattr(ev, "seq"):
            out.append(ev)
    return out


class DiffView(VerticalScroll, can_focus=True):
    """What differs between the run on screen (A) and another recorded run (B)."""

    BINDINGS = [Binding("enter", "pick", "Compare with…", show=False,
                        tooltip="Pick the journal to compare with (.flowtui/runs/, newest first)")]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.against: str | None = None  # B: a journal file
        # B's run, by id: the run this one was re-executed from (else the file's last). A re-execution
        # journaled into the same file (--journal FILE) is that file's last run: B was A itself.
        self.against_run: str | None = None
        self._chosen_for: Any = ()  # the run B was chosen for (a new run chooses again, unless one was picked)
        self._picked = False
        self.report = Text()  # what the view shows
        self._seen: tuple = ()
        self._workflow: str | None = None
        self._text = Static(id="diff-text")
        self._last: tuple[Any, Any] | None = None
        self._shown_against: str | None = None  # B of the report on screen
        self._loaded: tuple[tuple, Any] | None = None  # B as last read, by (path, mtime, size)
        self._whole_a: tuple[tuple, list[Any]] | None = None  # A as its journal held it, by (path, run id)
        # One comparison at a time, and the latest one asked for next: each key scrubbing a replay of a million
        # events started one more in a thread (none can be cancelled), keys then lagged 8 s and quitting 11 s
        self._comparing = False
        self._wanted: tuple[tuple, list[Any], int] | None = None

    def compose(self):  # type: ignore[no-untyped-def]
        yield self._text

    def current_journal(self) -> str | None:
        """A's file: the replay's journal, or the live run's."""
        app = self.app
        source = getattr(app, "source", None)
        if source:
            return str(source)
        channel = getattr(getattr(app, "client", None), "channel", None)
        return getattr(channel, "journal", None)

    def _found(self, journal: str) -> str:
        """The journal a run was re-executed from, as its run.start names it: relative to the folder the run
        was started in, which a replay from another folder is not in; then looked for beside A's journal
        (and above its .flowtui/runs/)."""
        path = Path(journal)
        mine = self.current_journal()
        if path.is_absolute() or path.exists() or not mine:
            return journal
        here = Path(mine).parent
        for folder in (here, here.parent.parent):
            if (folder / path).is_file():
                return str(folder / path)
        return journal

    def sync(self, view: Any, events: Any) -> None:
        self._workflow, self._last = view.workflow, (view, events)
        if not self._picked and view.run_id != self._chosen_for:  # each run its own B: a fork of a fork's parent
            self._chosen_for = view.run_id
            resumed = getattr(view, "resumed_from", None)
            if resumed is not None and getattr(resumed, "journal", None):
                self.against, self.against_run = self._found(str(resumed.journal)), resumed.run_id
            else:  # the newest other journal of this workflow (another flow's is no default)
                others = [p for p in journals(view.workflow, besides=self.current_journal())
                          if not view.workflow or p.name.startswith(f"{view.workflow}-")]
                self.against, self.against_run = (str(others[0]) if others else None), None
        if not self.size.width:  # not on screen (another view is): compared when shown
            return
        key = (view.run_id, len(events), self.against, self.against_run, self.size.width)
        if key == self._seen:
            return
        self._seen = key
        if self.against != self._shown_against:  # the report on screen is of another journal: say what comes
            self._text.update(Text(f"comparing with {shown(self.against or '')}…", "dim"))
        # Reading a journal of hundreds of megabytes takes seconds: never on the thread that answers keys.
        self._wanted = (key, list(events), max((self.size.width or 100) - 2, 40))
        if not self._comparing:
            self._next()

    def _next(self) -> None:
        """Start the comparison last asked for (one at a time)."""
        key, snapshot, width = self._wanted
        self._wanted, self._comparing = None, True
        self.run_worker(lambda: self._compare(key, snapshot, width), thread=True, group="diff",
                        name="diff", exit_on_error=False)

    def _compare(self, key: tuple, events: list[Any], width: int) -> None:
        """In a thread: the report, shown if it is still the one wanted (a newer sync may have come)."""
        try:
            report = self._report(events, key[2], width)
        except Exception as exc:  # (said, and the next comparison still starts)
            report = Text(f"cannot compare: {type(exc).__name__}: {shown(str(exc))}", "bold #ff5f5f")
        self.app.call_from_thread(self._show, key, report)

    def _show(self, key: tuple, report: Text) -> None:
        self._comparing = False
        if self._wanted is not None:
            self._next()
        if key != self._seen:
            return
        self.report, self._shown_against = report, key[2]
        self._text.update(report)

    def on_resize(self) -> None:
        if self._last is not None:  # the report is laid out for the width: again at the new one
            self.sync(*self._last)

    def _report(self, events: Any, against: str | None, width: int) -> Text:
        from flowtui.runtime.diff import DiffError, LoadedRun, diff_runs
        from flowtui.runtime.diff_cli import render

        if against is None:
            return Text("Nothing to compare with: no other journal of this workflow in .flowtui/runs/. enter picks "
                        "one.", "dim")
        try:
            b = self._load(against)
        except DiffError as exc:
            return Text(f"{shown(str(exc))}\nenter picks another journal.", "bold #ff5f5f")
        here = self.current_journal()
        same_file = here is not None and Path(here).resolve() == Path(against).resolve()
        # A: the replay's run is its file's Nth of M (--run N); the live run is the last of its file, appended to
        # as it runs (B's file when it is A's own too)
        number, total = getattr(self.app, "place", None) or ((b.total, b.total) if same_file else (1, 1))
        a = LoadedRun(path=here or "this run", number=number, total=total, events=self._whole(_events(events), here),
                      notices=[])
        try:
            found = diff_runs(a.events, b.events)
        except Exception as exc:  # a journal shaped in a way the comparison did not foresee
            return Text(f"cannot compare with {shown(against)}: {type(exc).__name__}: {shown(str(exc))}",
                        "bold #ff5f5f")
        lines = render(a, b, found, width=width)
        return Text(shown("\n".join(lines)) + "\n\nenter: compare with another journal", no_wrap=True)

    def _whole(self, events: list[Any], journal: str | None) -> list[Any]:
        """A live run's events with its values as its journal holds them, when some reached the app cut (a
        value over 64 KiB): compared cut, a memory item of 250,000 characters differed from itself in B, which
        `flowtui diff` of the same files did not say. The events the journal does not have yet stay as they came."""
        if journal is None or getattr(self.app, "source", None) or not any(map(elided_of, events)) \
                or events[0].type != "run.start":
            return events
        from flowtui.runtime.diff import DiffError, load_run

        key = (journal, events[0].run_id)
        read = self._whole_a[1] if self._whole_a is not None and self._whole_a[0] == key else None
        last = read[-1].seq if read else 0
        # read again only when a value cut since came (each new event of a live run compares again: the whole
        # journal was read at each)
        if read is None or any(elided_of(e) for e in events if e.seq > last):
            try:
                read = load_run(journal, run_id=events[0].run_id).events
            except DiffError:
                return events
            self._whole_a = (key, read)
        whole = [e for e in read if e.seq <= events[-1].seq]  # (as far as the app is)
        seen = whole[-1].seq if whole else 0
        return whole + [e for e in events if e.seq > seen]

    def _load(self, path: str) -> Any:
        """B, read again only when its file changed (each new event of A compares again)."""
        from flowtui.runtime.diff import load_run

        try:
            st = Path(path).stat()
            stamp = (path, self.against_run, st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp is not None and self._loaded is not None and self._loaded[0] == stamp:
            return self._loaded[1]
        run = load_run(path, run_id=self.against_run)  # raises DiffError for a file that is not a journal
        if stamp is not None:
            self._loaded = (stamp, run)
        return run

    def action_pick(self) -> None:
        from flowtui.tui.screens.dialogs import ChoiceDialog

        options = journals(self._workflow, besides=self.current_journal())[:9]
        if not options:
            self.app.notify("No other journal in .flowtui/runs/ or beside this run's to compare with: "
                            "flowtui diff A.jsonl B.jsonl compares any two.", severity="warning")
            return

        def chosen(value: str | None) -> None:
            if value:
                self.against, self.against_run, self._picked = str(options[int(value)]), None, True
                self._seen = ()
                screen = self.screen
                if hasattr(screen, "redraw"):
                    screen.redraw()

        self.app.push_screen(ChoiceDialog("Compare this run with…", [
            (str(i + 1), p.name, str(i)) for i, p in enumerate(options)]), chosen)
