"""The flowtui App: a client of a run that lives in its own process, projecting its events onto the panes.

The run's worker process (:mod:`flowtui.runtime.worker`) is started as the
first frame goes out, so the flow loads while it is drawn (and nothing of the
runtime is imported before it). Its events
arrive on this event loop into the client's buffer (:mod:`flowtui.tui.client`);
a fast tick folds them into the RunView in slices of a few milliseconds, and
the panes are redrawn at most ~20 times a second — at once when the run
pauses or ends, so a step answers without waiting for a tick. The tick sleeps
while the app is idle. Keys send commands and edits over the protocol; what
the panes show always comes back through the event stream. Whatever the
flow does, ``x`` stops the run and ``q`` quits, each within about a second.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual.app import App, SystemCommand
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from flowtui.runtime.channel import ATTACH_TIMEOUT_S
from flowtui.tui.actions import ACTIONS, Redraws, app_help_groups, bindings, live_actions, palette, textual_commands
from flowtui.tui.client import LaunchConfig, RunClient, cut_inside
from flowtui.tui.commands import RunCommands
from flowtui.tui.driver import TolerantInput
from flowtui.tui.edits import RunEdits
from flowtui.tui.messages import RunFlushed
from flowtui.tui.watchpoints import RunWatches
from flowtui.tui.screens.main import MainScreen
from flowtui.tui.shown import PlainNotify, shown_apart, shown_markup
from flowtui.tui.signals import quit_on_signals
from flowtui.tui.typeahead import KeysStayPut


def _p():
    """The protocol, imported on first use: the app paints before any of the runtime is imported."""
    from flowtui.runtime import protocol

    return protocol


DRAIN_INTERVAL = 1 / 100  # how often buffered events are folded into the view while a run is busy
IDLE_CHECK_S = 1 / 4  # how often an idle app looks for work (the fast tick sleeps meanwhile)
STAY_AWAKE_S = 1.0  # the fast tick keeps going this long after the last event (events come in bursts)
FLUSH_BUDGET_S = 0.008  # fold at most this long per tick, so input stays answered
REDRAW_INTERVAL = 1 / 20  # panes are redrawn at most this often (a pause or the end: at once)
LOG_NOTICE_S = 2.0  # the flow's printed lines are announced at most this often
NOTICE_CHARS = 120  # of a printed line, what its notice shows
SAID_WARNINGS = 3  # of the protocol faults that arrived together, how many a notice says (P lists every one)
# After the first pause is drawn, when the full collection start-up owes is made (_settle): once the
# frame is on the terminal (the collection holds the thread that writes it), before a person can act.
SETTLE_AFTER_S = 0.1


class FlowApp(RunCommands, RunEdits, RunWatches, PlainNotify, KeysStayPut, Redraws, TolerantInput, App[int]):
    """The terminal app of flowtui."""

    CSS_PATH = "flowtui.tcss"
    TITLE = "flowtui"
    BINDINGS = bindings(ACTIONS)

    def __init__(self, config: LaunchConfig) -> None:
        super().__init__()
        self.config = config
        self.actions = live_actions(attached=config.attach is not None)  # (key bar, buttons, help, palette)
        self.client = RunClient(config)
        self.client.on_arrival = self.wake
        self.main = MainScreen()
        self._ask_input = config.input is None and config.resume_from is None  # a re-execution has its own
        self.first_paint: float | None = None
        self._undrawn = 0  # events folded since the last redraw
        self._drawn_at = 0.0
        self._ticker: Timer | None = None
        self._folded_at = 0.0  # when the last events were folded
        self._loading_since: float | None = None
        self._asking = False  # the first message is asked for
        self._logs_seen = 0
        self._logs_said_at = 0.0
        self._init_commands()
        self.refused: str | None = None  # attaching: why the run's process would not have us
        self._settled = False  # the full collection start-up owes has been made (see _settle)
        self.text_drafts: dict[tuple[str, str], str] = {}  # what was typed in a text dialog, then esc (TextDialog)

    # --- lifecycle -------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        # The main screen is the app's first screen (not pushed from on_mount): it is composed
        # with the app, and its first frame is not one drawn inside the app's mount batch (dropped).
        return self.main

    def on_mount(self) -> None:
        quit_on_signals(self)
        self._ticker = self.set_interval(DRAIN_INTERVAL, self._tick)
        self.set_interval(IDLE_CHECK_S, self._idle_check)
        self.call_after_refresh(self._after_first_paint)

    def push_screen(self, screen: Any, *args: Any, **kwargs: Any) -> Any:
        """A dialog a key opens clears the notifications said before it: they were about what came
        before, and at 80x24 one covered its buttons (Cancel under "Put the cursor on an assistant
        message"). One the run opens (``keeps_notices``: an approval, a divergence) keeps them: a
        watchpoint's notice says why the run is there."""
        if isinstance(screen, ModalScreen) and not getattr(screen, "keeps_notices", False):
            self.clear_notifications()
        return super().push_screen(screen, *args, **kwargs)

    async def on_unmount(self) -> None:
        """However the app ends (q, an error, a test's end), the run's process ends with it (bounded:
        quitting never waits on a run)."""
        await self._close_client()

    def _after_first_paint(self) -> None:
        self.first_paint = time.time()
        self.load()  # the worker starts as the first frame goes out: the flow loads while it is drawn
        self.main.complete()
        self.flush(force=True)

    def load(self) -> None:
        """Start a fresh worker process for the flow (a reload too); the status shows the time it takes."""
        self._loading_since = time.monotonic()
        self._queued_at = -1  # a new run: its pauses count from the start again
        self.run_worker(self.client.load(), exclusive=True, group="load", name="load", exit_on_error=False)
        self.flush(force=True)

    def _loading_text(self) -> str:
        waited = time.monotonic() - (self._loading_since or time.monotonic())
        limit = ATTACH_TIMEOUT_S if self.config.attach is not None else self.config.load_timeout
        then = f", then {self._resuming()}" if self.config.resume_from else ""
        return (f"loading {self.config.target}{then}… {waited:.1f} s (gives up after {limit:g} s)"
                if waited >= 0.5 else f"loading {self.config.target}{then}…")

    def _resuming(self) -> str:
        """What a run started from a journal does first (the panes stay empty until it has)."""
        from flowtui.runtime.errors import ResumeError
        from flowtui.runtime.recorded import parse_resume_arg

        given = self.config.resume_from or ""
        try:  # (read as the run reads it: a journal named x@12 that exists is taken whole)
            journal, at = parse_resume_arg(given)
        except ResumeError:
            journal, at = Path(given), None
        if at is None:
            return f"re-executing {journal.name} to its end"
        return f"re-executing {journal.name} up to event #{at}"

    def _before_run(self) -> str | None:
        """The status line before the run's first event: loading, or loaded and waiting for the first message."""
        if self._loading_since is not None:
            return self._loading_text()
        if self._asking:
            return f"{self.client.workflow_name} loaded: waiting for the first message"
        since = self.client.starting_since
        if since is not None and self.client.stopping:  # said at once, as x says it on a running run
            return "stopping the run before it started…"
        if since is not None and time.monotonic() - since >= 0.5:  # a provider factory, an __init__, not returning
            doing = self._resuming() if self.config.resume_from else "starting the run"
            return f"{doing}… {time.monotonic() - since:.1f} s (x stops it)"
        return None

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker, state = event.worker, event.state
        if worker.group == "load":
            if state == WorkerState.SUCCESS:
                self._loading_since = None
                reply = worker.result
                if isinstance(reply, _p().Hello):
                    self._loaded()
                elif self.config.attach is not None:  # no hello: not a run served by --listen (said on exit)
                    said = self.client.channel is not None and reply is self.client.channel.load_error  # (by the run)
                    self.refused = (_load_error_text(reply) if said else
                                    "the connection closed before the run answered (is it flowtui run --listen?)")
                    self.exit(2)
                else:
                    self._load_failed(reply)
            elif state == WorkerState.ERROR:
                self._loading_since = None
                if self.config.attach is not None:  # refused, unreachable or silent: said on exit, not a screen
                    self.refused = _why_not_attached(worker.error)
                    self.exit(2)
                    return
                self._load_failed(worker.error)
        elif state == WorkerState.ERROR and worker.group in ("command", "watch"):
            self.notify(f"{type(worker.error).__name__}: {worker.error}", title="flowtui", severity="error")

    def _loaded(self) -> None:
        from flowtui.tui.screens.dialogs import FirstMessageDialog
        from flowtui.tui.screens.error import LoadErrorScreen

        if isinstance(self.screen, LoadErrorScreen):
            self.pop_screen()
        self.run_worker(_preload_markdown, thread=True, group="preload", name="preload", exit_on_error=False)
        self.run_worker(self._watch(), group="watch", name="watch", exit_on_error=False)
        if self.client.hello is not None and self.client.hello.started:  # attached: the run is going already
            self.flush(everything=True, force=True)  # the status said "loading" while the backlog came
            self.wake()
            return
        if self._ask_input and self.client.watches:  # --watch naming a field the flow lacks: said while the
            # first message is asked for, not once the run has started (given one, the run starts checking them)
            self.run_worker(self._check_watches(), group="command", name="watches", exit_on_error=False)
        if self._ask_input:
            self._ask_input, self._asking = False, True
            self.push_screen(FirstMessageDialog(self.client.workflow_name), self.start_run)
            self.flush(force=True)  # the status no longer says loading
        else:
            self.start_run(self.client.input)

    async def _check_watches(self) -> None:
        await self.client.check_watches()
        self.say_refused_watches()
        self.main.sync(self.client, force=True)

    async def _watch(self) -> None:
        """Until the worker is gone; then the run's end is shown, said by us when the worker could not."""
        channel = self.client.channel
        if channel is not None:
            await channel.wait()
            self.client.gone()
            self.wake()

    def _load_failed(self, error: Any) -> None:
        from flowtui.tui.screens.error import LoadErrorScreen

        details = getattr(error, "traceback", None) if self.config.debug else None
        self._forget_queue("The flow could not load")
        if isinstance(self.screen, LoadErrorScreen):
            self.pop_screen()
        option = getattr(error, "option", None)  # the file an option names is at fault, not the flow
        said = {}
        if option:
            said = dict(title=f"Could not use {option}", fix=f"Fix the file or the {option} option")
        elif self.config.resume_from:
            said = dict(fix=f"Fix the file (the run then goes on from {self.config.resume_from}, where it was)")
        self.push_screen(LoadErrorScreen(self.config.target, error, details=details, **said))

    def start_run(self, input: str | None) -> None:
        """Start the loaded flow's run, paused before its first step."""
        self.main.looking = None  # looking back was at the run before
        self._asking = False
        self.main.sync(self.client, force=True)
        self.run_worker(self._begin(input), group="command", name="start", exit_on_error=False)

    async def _begin(self, input: str | None) -> None:
        self.clear_notifications()  # what they said was about the run before
        from flowtui.runtime.cli import unknown_approvals

        hello = self.client.hello
        for note in [*hello.notes, *unknown_approvals(self.config.approve, hello)] if hello is not None else ():
            self.notify(note, severity="warning", timeout=10)
        reply = await self.client.begin(input)
        self.say_refused_watches()
        if not reply.ok:
            error = reply.error or "the run could not start"
            if error.startswith("--watch: "):  # the person's watchpoint, said where it was typed
                self.notify(error, title="The run could not start", severity="error", timeout=10)
            else:  # the flow's fault (an agent's __init__ raised): as a load error, r reloads the fixed file
                from flowtui.tui.screens.error import LoadErrorScreen

                self._forget_queue("The run could not start")
                self.push_screen(LoadErrorScreen(self.config.target, ValueError(error),
                                                 title="The run could not start", fix="Fix what it says"))
        self.wake()

    # --- the event buffer ----------------------------------------------------
    def flush(self, *, everything: bool = False, force: bool = False) -> int:
        """Fold buffered events into the view, or redraw when one is due (the timer calls it; commands too).

        A tick either folds or redraws, never both: each stays a few
        milliseconds, so a key press waits at most one. ``everything`` folds
        the whole buffer and redraws now; ``force`` redraws every pane now.
        """
        client = self.client
        now = time.monotonic()
        due = now - self._drawn_at >= REDRAW_INTERVAL and self._behind()
        n = 0
        if client.urgent:  # the run paused or ended: shown as soon as what came before it is folded
            if not (everything or force or due):  # behind a flood's backlog: a slice a tick, keys answered between
                n = client.drain(FLUSH_BUDGET_S)
                if client.pending:
                    self._undrawn += n
                    return n
            if not (due and client.pending):  # (a redraw due goes first: the panes keep their pace meanwhile)
                client.urgent = False
                everything = True
        if everything:
            while client.pending:
                folded = client.drain(1.0)
                if not folded:  # nothing to fold into yet (no view)
                    break
                n += folded
        elif not (force or due):
            n = client.drain(FLUSH_BUDGET_S)
            self._undrawn += n
            return n
        self._undrawn += n
        if force or everything or self._behind():
            self._drawn_at = now
            self.main.sync(client, force=force or everything,
                           loading=self._before_run())
            self.post_message(RunFlushed(self._undrawn))
            self._undrawn = 0
        self.apply_queued()
        self.at_pause()
        self._say_journal_stopped()
        if not self._settled and client.view is not None and client.view.status == "paused":
            self._settled = True
            self.set_timer(SETTLE_AFTER_S, _settle)
        return n

    _journal_said: str | None = None

    def _say_journal_stopped(self) -> None:
        """Once: the run's journal could not be written on (a full disk); the run goes on unrecorded."""
        view = self.client.view
        error = view.journal_error if view is not None else None
        if error is not None and error != self._journal_said:
            self._journal_said = error
            self.notify(f"{error}. The run goes on; free some space, then r starts a recorded one.",
                        title="The journal stopped", severity="error", timeout=30)

    def _behind(self) -> bool:
        """The panes do not show everything folded so far."""
        return bool(self._undrawn) or self.main.stale

    # The fast tick runs only while there is work: a run running, events waiting, panes behind.
    # Idle (paused, finished), it sleeps; arriving events and commands wake it at once, and a
    # slow check catches anything else. An idle app then costs next to no CPU.
    def _busy(self) -> bool:
        view = self.client.view
        return (bool(self.client.pending) or self.client.urgent or self._behind()
                or (view is not None and view.status == "running")
                or time.monotonic() - self._folded_at < STAY_AWAKE_S)

    def _tick(self) -> None:
        if self.flush():
            self._folded_at = time.monotonic()
        if not self._busy() and self._ticker is not None:
            self._ticker.pause()

    def _idle_check(self) -> None:
        if self._loading_since is not None or self.client.starting_since is not None:
            self.flush(force=True)
        self.say_unanswered()
        self._say_logs()
        if self._busy():
            self.wake()

    def _say_logs(self) -> None:
        """What the flow printed reaches the app as a message (at most one every few seconds); what
        the run's process sent that is not the protocol, as a warning of its own."""
        warnings = self.client.warnings
        if warnings:  # (only the first was said, "+15 more like it" of fifteen other faults, and they were lost)
            distinct = list(dict.fromkeys(warnings))
            shown = [w if len(w) <= NOTICE_CHARS else f"{w[:NOTICE_CHARS]}…" for w in distinct[:SAID_WARNINGS]]
            more = len(distinct) - len(shown)
            broke = "The run" if self.client.config.attach is not None else "The run's process"
            self.notify("\n".join(shown) + (f"\n(+{more} more: P lists them)" if more else ""),
                        title=f"{broke} broke the protocol", severity="warning", timeout=10)
            self.client.faults.extend(warnings)  # every one, in P's list
            warnings.clear()
        logs = self.client.logs
        total = self.client.logs_total
        if total > self._logs_seen and time.monotonic() - self._logs_said_at >= LOG_NOTICE_S:
            new = total - self._logs_seen
            self._logs_seen, self._logs_said_at = total, time.monotonic()
            last = logs[-1] if logs else ""
            if len(last) > NOTICE_CHARS:  # a notice stays a few lines; P shows the whole of it
                last = f"{last[:NOTICE_CHARS]}…"
            self.notify((last if new == 1 else f"{last}\n(+{new - 1} more lines)") + "\n(P: all of it)",
                        title="The flow printed")

    def wake(self) -> None:
        """Run the fast tick again (events arrived, or a command sets the run going)."""
        if self._ticker is not None:
            self._ticker.resume()
        if self.client.urgent:  # the run paused or ended: drawn now, not at the next tick
            self.call_next(self._tick)

    # --- views -----------------------------------------------------------------
    def action_open_whole(self) -> None:
        """The message under the cursor (or the sidebar's memory item, task or state field), whole, in
        the pager: what was cut on the way to the app fetched from the run."""
        view = self.client.view
        target = self._sidebar_target() if view is not None else None
        if target is not None:
            value = self.row_value(target)[1]
            self.run_worker(self._open_whole(value), group="command", exit_on_error=False)
            return
        if self._not_in_conversation("o opens a text whole"):
            return
        i = self.main.conversation.cursor
        if view is None or not 0 <= i < len(view.history):
            self.notify("Put the cursor on a message to open it.", severity="warning")
            return
        self.run_worker(self._open_whole(view.history[i].content), group="command", exit_on_error=False)

    async def _open_whole(self, value: Any) -> None:
        cut = cut_inside(value)
        if cut is not None:
            if cut[2] >= 1_000_000:
                self.notify(f"Fetching {cut[2]:,} characters from the run…", timeout=3)
            value, why = await self.client.whole(value)
            if why is not None:
                self.notify(why, severity="warning")
                return
        await page_value(self, value)

    def action_printed(self) -> None:
        """The last lines the flow printed (its stdout and stderr), in the pager; after them, what the run's
        process sent that broke the protocol (a notice says the first few)."""
        logs, faults = self.client.logs, self.client.faults
        if not logs and not faults:
            self.notify("The flow has printed nothing.")
            return
        older = self.client.logs_total - len(logs)
        text = (f"({older:,} earlier lines are not kept)\n" if older else "") + "\n".join(logs)
        if faults:
            text += "\n\nWhat the run's process sent that broke the protocol:\n" + "\n".join(faults)
        self.run_worker(page(self, text), group="command", exit_on_error=False)

    def ask_tokens(self) -> None:
        """What the model sees is on screen: ask the run to count its tokens with the model's own
        tokenizer, once per pause; the view is drawn again with them when they come."""
        key = self.client.tokens.wanted(self.client.view)
        if key is not None:
            self.run_worker(self._count_tokens(key), group="tokens", name="tokens", exit_on_error=False)

    async def _count_tokens(self, key: tuple) -> None:
        if await self.client.count_tokens(key) and self.main.current_view == "model-sees":
            self.main.redraw()
        failed = self.client.count_failed
        if failed and failed != self._count_said:  # (a count_tokens that raised was taken for "no tokenizer")
            self._count_said = failed
            self.notify(f"What the model sees shows estimates: counting its tokens failed ({failed})",
                        severity="warning", timeout=10)

    _count_said: str | None = None

    def action_view(self, name: str) -> None:
        if self.screen is self.main:
            self.main.show_view(name)

    def action_help(self) -> None:
        from flowtui.tui.screens.dialogs import HelpScreen

        self.push_screen(HelpScreen(app_help_groups(self.actions)))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        for title, help, callback in palette(self.actions, self.run_action):
            yield SystemCommand(title, help, callback)
        agents, tools = self.client.step_names()
        # and a breakpoint set on a name none of them has (a loop, a child's agent it has not called yet)
        for name in agents + tools + sorted(self.client.breakpoints - {*agents, *tools}):
            state = "remove" if name in self.client.breakpoints else "set"
            said = f"No longer pause before {name}" if state == "remove" else f"Pause before {name}"
            yield SystemCommand(shown_markup(f"breakpoint: {state} on {name}"), shown_markup(said),
                                _bind(self.action_toggle_breakpoint, name))
        for title, help, callback in self.watch_commands():
            yield SystemCommand(title, help, callback)
        view = self.client.view
        if view is not None and view.status == "paused" and view.pause.reason == "approval":
            yield SystemCommand("call: approve or deny", "The tool call waiting for approval: its dialog again",
                                self._ask_again)
        yield from textual_commands(super().get_system_commands(screen))


def _bind(fn, *args):
    return lambda: fn(*args)


def _settle() -> None:
    """The full collection Python owes after start-up, made while nobody waits on the app.

    Start-up grows the heap from a few thousand objects to about 80,000 (Textual, the panes,
    the protocol), all promoted since the collector's last full pass, so its next one is due
    within a few thousand allocations: it would land inside the first step or event flood and
    hold the screen 50-70 ms. It is made once, a tenth of a second after the run's first pause is
    drawn, while the person reads it; the collector is otherwise left as it is (automatic, its thresholds
    and generations untouched), and with 80,000 objects behind it a later one is due only after
    about 20,000 more outlive their young collections (``bench/tui_bench.py``)."""
    gc.collect()


def _preload_markdown() -> None:
    """Markdown for assistant blocks, imported after the first paint (in a thread)."""
    import rich.markdown  # noqa: F401


async def page_value(app: App, value: Any) -> None:
    """``value`` whole in the pager: a text as it is, anything else as indented JSON."""
    await page(app, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2, default=str))


async def page(app: App, text: str) -> None:
    """Show ``text`` as it may be drawn (:func:`~flowtui.tui.shown.shown_apart`) in the person's
    pager (``$PAGER``, else ``less``), the app suspended meanwhile.

    The text goes through a private temporary file (0600), removed afterwards; where the
    terminal cannot be handed over (a test, a web terminal), the notification names the file."""
    import os
    import shlex
    import shutil
    import signal
    import subprocess
    import tempfile

    from textual.app import SuspendNotSupported

    text = await shown_apart(text)
    fd, path = tempfile.mkstemp(prefix="flowtui-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:  # (a lone surrogate from a peer)
        f.write(text)
    try:
        pager = shlex.split(os.environ.get("PAGER") or "less")
    except ValueError as exc:  # PAGER='"less' : an unclosed quote
        app.notify(f"PAGER={os.environ.get('PAGER')!r} cannot be read as a command ({exc}); fix it. The text is "
                   f"in {path}", severity="warning", timeout=15)
        return
    if not pager or shutil.which(pager[0]) is None:
        # (PAGER=/nonexistent/pager was told "No pager found (set PAGER)": it was set)
        said = (f"PAGER={os.environ['PAGER']!r}: no such command; fix it, or unset it for less"
                if os.environ.get("PAGER") else "No pager found (less is not installed; set PAGER)")
        app.notify(f"{said}. The text is in {path}", severity="warning", timeout=15)
        return
    # ctrl-C in the pager is the pager's (it reaches the whole process group): not a KeyboardInterrupt
    # that ends the app. A handler, not SIG_IGN, so the pager itself starts with the default one.
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        with app.suspend():
            done = subprocess.run([*pager, path])
        if done.returncode not in (0, -signal.SIGINT, 128 + signal.SIGINT):  # (PAGER=false showed nothing at all)
            app.notify(f"The pager {pager[0]} ended with code {done.returncode}; the text is in {path}",
                       severity="warning", timeout=15)
            return
    except SuspendNotSupported:
        app.notify(f"This terminal cannot be handed to a pager; the text is in {path}", timeout=15)
        return
    finally:
        signal.signal(signal.SIGINT, previous)
    os.unlink(path)


def _why_not_attached(error: BaseException) -> str:
    """What stopped ``flowtui attach``, in words (not an errno's)."""
    if isinstance(error, ConnectionRefusedError):
        return "nothing listens there (is flowtui run --listen serving on that port?)"
    if isinstance(error, OSError) and not isinstance(error, (PermissionError, ConnectionError)) and error.strerror:
        return f"cannot connect: {error.strerror}"
    return str(error) or type(error).__name__


def _load_error_text(error: Any) -> str:
    """A served run's ``load.error``, said on one line: its message, and where (file:line); the file an
    option names is in the message."""
    if error.option:
        return f"the run could not start: {error.message}"
    where = f" ({error.file}{f':{error.line}' if error.line else ''})" if error.file else ""
    return f"the run could not load its flow: {error.message}{where}"


def make_app(target: str, **options: Any) -> FlowApp:
    """The app for ``FLOW[:Class]``; options are :class:`LaunchConfig` fields. Shared by the CLI and tests."""
    return FlowApp(LaunchConfig(target=target, **options))
