"""The run's commands, as the app's actions: step, next turn, loop once, continue, pause, stop,
breakpoints, reload and quit.

A command is sent at once; its answer is the next pause, through the event stream. A command
typed while there is no run to take it yet (the flow loading, a reload, the run starting) is
queued and sent when the run is ready, each after the previous one's pause (``x`` and ``p`` right
after the command before them), so no key is lost.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import TYPE_CHECKING

from flowtui.runtime.channel import within
from flowtui.tui.actions import ACTIONS, key_name
from flowtui.tui.widgets.control import waiting_for

if TYPE_CHECKING:
    from flowtui.tui.app import FlowApp

QUIT_GRACE_S = 0.4  # q: how long a run gets to stop before its process is terminated, then killed
SENT = {"step": "Step", "next_turn": "NextTurn", "loop_once": "LoopOnce", "resume": "Continue", "pause": "Pause"}
QUEUEABLE = (*SENT, "stop")
UNANSWERED_S = 3.0  # a move the run has not answered this long is said to be unanswered
INTERRUPTS = ("stop", "pause")  # they act on a running run: a queued one goes out right after the command before it
MOVES = ("step", "next_turn", "loop_once", "resume")  # they move a paused run on to its next pause
KEYS = {a.action: key_name(a.key) for a in ACTIONS}


def _p():
    from flowtui.runtime import protocol

    return protocol


class RunCommands:
    """Mixin of :class:`flowtui.tui.app.FlowApp`: the run's commands."""

    quitting = False
    exit_with = 0  # the app's exit code once it quits: 2 at a flow that could not load
    quit_reason: str | None = None  # why the app quits, when not q: what the run's end says
    signalled: int | None = None  # the signal it quits for (SIGTERM, SIGHUP): it exits 128 + that, as a shell says
    _queued_at = -1  # the pause the last queued command was sent from
    _pause_asked: tuple[str | None, int | None] | None = None  # (run, its last pause) when p was pressed
    _moved_from: tuple[str | None, int] | None = None  # (run, pause) a move left and the run has not paused since
    _moved_at: float | None = None  # when that move was sent, until the run answers it (or it is said unanswered)

    def _init_commands(self: FlowApp) -> None:
        self.queued: deque[str] = deque()  # commands typed before the run could take them

    def stopping_text(self: FlowApp) -> str | None:
        """``quitting`` or ``stopping`` while the run is being ended (the status line says what it waits for),
        and what is left to show of a run whose process has ended (stopped, or died on its own)."""
        if not self.client.active:
            return None
        word = "quitting" if self.quitting else "stopping" if self.client.stopping else None
        view = self.client.view
        if word is None and view is not None and view.status == "running" \
                and self._pause_asked == (view.run_id, view.last_pause_seq):  # p, and no pause point reached yet
            word = "pausing"
        channel, left = self.client.channel, self.client.pending
        if left and channel is not None and channel.closed.is_set():
            # (its events came faster than they are shown: what it was doing is over)
            gone = "the connection to the run" if self.config.attach is not None else "the run's process"
            said = f"{gone} has ended; showing the {left:,} event{'s' if left != 1 else ''} it sent before"
            return f"{word}: {said}" if word else said
        return word

    # --- the queue -------------------------------------------------------------------------
    def _loading(self: FlowApp) -> bool:
        view = self.client.view
        return self._loading_since is not None or view is None or view.run_id is None

    def _moving(self: FlowApp) -> bool:
        """A move (s, n, l, c) was sent and the run has not paused since: ``s s s`` is three steps, the
        second and third sent at the pauses the ones before reach (they went while it ran, and did nothing)."""
        view, moved = self.client.view, self._moved_from
        if moved is None or view is None or moved[0] != view.run_id or view.status not in ("running", "paused"):
            return False
        return view.status == "running" or view.pause is None or view.pause.seq <= moved[1]

    def _run(self: FlowApp, name: str) -> None:
        from flowtui.tui.screens.error import LoadErrorScreen

        if name == "stop" and self.client.starting_since is not None:  # a start that never answers: x ends it
            self._forget_queue(f"{KEYS[name]} pressed")
            self._send(name)
            return
        # (on the error screen, only once r is reloading the flow: before, there is no run to come)
        reloading = not isinstance(self.screen, LoadErrorScreen) or self._loading_since is not None
        if (self._loading() or self.queued) and reloading \
                and self.config.attach is None and not (name in INTERRUPTS and not self._loading()):
            self.queued.append(name)
            if self._loading():
                self.notify(f"{KEYS[name]}: queued until the run is ready ({len(self.queued)} waiting).", timeout=3)
            return
        if name in INTERRUPTS:  # x and p act now, on a running run too: what was queued behind a move goes
            self._forget_queue(f"{KEYS[name]} pressed")
        elif name in MOVES and self._moving():
            self._queued_at = self._moved_from[1]  # sent at the first pause after that one
            self.queued.append(name)  # (said once: the keys pressed after it queue behind it in silence)
            self.notify(f"{KEYS[name]}: queued, sent when the run pauses; keys pressed meanwhile queue behind it.",
                        timeout=3)
            return
        if self._movable():
            self._send(name)

    def say_unanswered(self: FlowApp) -> None:
        """A move the run has not answered (no event since it was sent) for ``UNANSWERED_S``: said once. An
        attached run's process may be stuck, or its peer not flowtui; the status alone showed nothing."""
        sent, view = self._moved_at, self.client.view
        if sent is None or view is None or time.monotonic() - sent < UNANSWERED_S:
            return
        self._moved_at = None
        # (the same run: after c, r within the time started another, paused at the same event number)
        if view.status == "paused" and view.pause is not None and self._moved_from == (view.run_id, view.pause.seq) \
                and view.last_seq == view.pause.seq:
            self.notify(f"The run has not answered for {UNANSWERED_S:g} s: its process may be busy or stuck "
                        "(x stops it; q quits).", severity="warning", timeout=8)

    def apply_queued(self: FlowApp) -> None:
        """Send the next queued command once the run is ready: paused, at a newer pause than the last."""
        view = self.client.view
        if not self.queued or self._loading_since is not None or view is None or view.run_id is None:
            return
        if view.status in ("finished", "failed", "stopped"):
            self.notify(f"The run has {view.status}: {len(self.queued)} queued key(s) dropped.", severity="warning")
            self.queued.clear()
        elif view.status == "paused" and view.pause is not None and view.pause.seq > self._queued_at:
            self._queued_at = view.pause.seq
            if view.pause.reason == "approval" and self.queued[0] in MOVES:  # a move there runs the call: never one
                # typed before the call was shown (s pressed while the model answered approved what it asked)
                self.notify(f"{view.pause.name} waits for your decision: {KEYS[self.queued[0]]}, typed before it "
                            f"asked, is not taken as one ({len(self.queued)} queued key(s) dropped).",
                            severity="warning", timeout=8)
                self.queued.clear()
                return
            self._send(self.queued.popleft())
            while self.queued and self.queued[0] in INTERRUPTS:  # x or p behind c: now, not at a pause c may never reach
                self._send(self.queued.popleft(), behind=True)

    def _forget_queue(self: FlowApp, why: str) -> None:
        if self.queued:
            self.notify(f"{why}: {len(self.queued)} queued key(s) dropped.", severity="warning")
            self.queued.clear()

    # --- commands ----------------------------------------------------------------------------
    def _movable(self: FlowApp) -> bool:
        view = self.client.view
        if view is None or view.run_id is None:
            self.notify("No run yet.", severity="warning")
            return False
        if view.status in ("finished", "failed", "stopped"):
            self.notify(f"The run has {view.status}; r starts a new one.", severity="warning")
            return False
        self.wake()
        return True

    def _send(self: FlowApp, name: str, *, behind: bool = False) -> None:
        """Send command ``name``; ``behind``: right after another one, which the panes do not show yet."""
        self.wake()
        if self.client.view is not None:
            self.client.view.focus = None  # the panes follow the run again (the node tree's cursor chose one)
        if name == "stop":
            channel = self.client.channel
            if channel is not None and channel.stopping_since is not None and not channel.closed.is_set():
                # x again: the stop under way keeps its clock (a fresh one waited the whole grace again, so
                # pressing x put off the end of a run whose code did not return)
                self.notify("Already stopping: the process serving the run ends it, whatever it is doing."
                            if self.config.attach is not None else
                            f"Already stopping: code of the run that does not return is unwound "
                            f"{self.client.config.grace:.1f} s after the first x.", timeout=3)
                return
            self.client.stopping = True  # the status says "stopping…" at once
            self.flush(force=True)
            self.run_worker(self.client.stop(), group="stop", name="stop", exclusive=True, exit_on_error=False)
            return
        if name == "pause" and self.client.view.status == "paused" and not behind:
            self.notify("Already paused.")
        elif name == "pause" and not behind:  # said at once: the pause comes when the run reaches a pause point
            self._pause_asked = (self.client.view.run_id, self.client.view.last_pause_seq)  # (the status says so)
            busy = waiting_for(self.client.view)
            self.notify(f"Pausing at the next pause point: waiting for {busy} to return…" if busy
                        else "Pausing at the next pause point…", timeout=4)
            self.flush(force=True)
        if name in MOVES:
            view = self.client.view
            self._moved_from = (view.run_id, view.pause.seq if view.pause is not None else -1)
            self._moved_at = time.monotonic()
        self.client.send(getattr(_p(), SENT[name])())  # the answer is the next pause, in the event stream

    def action_step(self: FlowApp) -> None:
        self._run("step")

    def action_next_turn(self: FlowApp) -> None:
        self._run("next_turn")

    def action_loop_once(self: FlowApp) -> None:
        self._run("loop_once")

    def action_resume(self: FlowApp) -> None:
        self._run("resume")

    def action_pause(self: FlowApp) -> None:
        self._run("pause")

    def action_stop(self: FlowApp) -> None:
        self._run("stop")

    # --- breakpoints ---------------------------------------------------------------------------
    def action_toggle_breakpoint(self: FlowApp, name: str | None = None) -> None:
        name = name or self._breakpoint_target()
        if name is None:
            self.notify("Put the cursor on an agent or tool (node tree, assistant message, tool result) "
                        "or pause at one.", severity="warning")
            return
        try:
            on, reply = self.client.toggle_breakpoint(name)
        except ValueError as exc:
            self.notify(f"No breakpoint can be set on {name}: {exc}.", severity="warning")
            return
        self.flush(force=True)
        if reply is None:
            later = "" if self.config.attach is not None else " (for the next run)"
            self.notify(f"Breakpoint on {name} {'set' if on else 'removed'}{later}.")
        else:
            self.run_worker(self._said_breakpoint(name, on, reply), group="command", exit_on_error=False)

    async def _said_breakpoint(self: FlowApp, name: str, on: bool, reply: asyncio.Future) -> None:
        """Said once the run has taken it (a busy or mute run: said that it has not, meanwhile)."""
        done = "set" if on else "removed"
        try:
            answer = await within(asyncio.shield(reply), UNANSWERED_S)
        except asyncio.TimeoutError:
            self.notify(f"Breakpoint on {name}: the run has not answered for {UNANSWERED_S:g} s (busy in a tool, "
                        f"or stuck); {done} when it does.", severity="warning", timeout=8)
            answer = await reply
        if answer.ok:
            self.notify(f"Breakpoint on {name} {done}.")
        else:
            self.notify(f"Breakpoint on {name} not {done}: {answer.error or 'the run refused it'}.", severity="error")
        self.flush(force=True)

    def _breakpoint_target(self: FlowApp) -> str | None:
        main, view = self.main, self.client.view
        if main.current_view == "nodes":
            picked = main.query_one("#nodes").selected_name  # type: ignore[attr-defined]
            if picked and picked[0] in ("agent", "tool", "loop", "chat"):
                return picked[1]
        if view is not None and main.current_view == "conversation":
            i = main.conversation.cursor
            if 0 <= i < len(view.history):
                msg = view.history[i]
                if msg.role == "tool" and msg.tool_name:
                    return msg.tool_name
                pause = view.pause
                if (msg.role == "assistant" and pause is not None and pause.point == "tool" and pause.call
                        and any(c.id == pause.call.get("id") for c in msg.tool_calls)):
                    return pause.name  # the message that asked for the call the run is paused before: that tool
                if msg.role == "assistant" and msg.agent:
                    return msg.agent
                if msg.tool_calls:
                    return msg.tool_calls[0].name
        if view is not None and view.pause is not None and view.pause.point in ("agent", "chat", "tool"):
            return view.pause.name
        return None

    # --- reload and quit -------------------------------------------------------------------------
    def action_reload(self: FlowApp) -> None:
        from flowtui.tui.screens.dialogs import ConfirmDialog
        from flowtui.tui.screens.error import LoadErrorScreen

        if isinstance(self.screen, LoadErrorScreen) and self.config.resume_from is not None:
            # the fixed code may go on where "continue from here" (or f) was asked for: it was dropped, and a
            # new run started from the beginning; or, the re-execution itself refused, start over
            self._ask_continue(self.config.resume_from, self.config.resume_run, "Continue from there",
                               f"re-executed against {self.config.resume_from}, as asked before.")
            return
        if (self.config.attach is not None or isinstance(self.screen, LoadErrorScreen) or not self.client.active
                or self.client.view.run_id is None):
            self._reload()  # attached: it says at once, without asking, that the run reloads where it runs
            return
        view, journal = self.client.view, self.client.channel.journal if self.client.channel else None
        if view.status == "paused" and journal is not None and self.config.attach is None:
            # Edit and continue: the new code re-executed against this run's journal up to this pause.
            self._ask_continue(f"{journal}@{view.last_seq}", view.run_id, "Continue from here",
                               f"the new code is re-executed against this run's journal up to event #{view.last_seq} "
                               "(no model or tool is called), then pauses here; if it does something else before, "
                               "you see where.")
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self._reload()

        self.push_screen(ConfirmDialog("A run is in progress. Stop it and reload the flow?"), answer)

    # --- looking back ------------------------------------------------------------------------
    def action_look(self: FlowApp, delta: int) -> None:
        """``←`` ``→``: the panes show the run as it was ``delta`` events earlier or later, while the
        run goes on; past the last event, the live run again."""
        from flowtui.tui.timeline import Timeline

        self.flush(everything=True)
        main, n = self.main, len(self.client.lines)
        if self.client.view is None or not n:
            return
        if main.looking is None:
            if delta > 0:
                return
            main.looking = (Timeline(self.client.events), n)
        timeline, k = main.looking
        if len(timeline) < n:  # events came meanwhile: look at them too
            timeline = Timeline(self.client.events)
        k += delta
        if k >= n:
            self.action_live()
            return
        main.looking = (timeline, max(k, 0))
        main.redraw()

    def action_live(self: FlowApp) -> None:
        """``esc``: back to the live run."""
        if self.main.looking is not None:
            self.main.looking = None
            self.main.redraw()

    def action_fork(self: FlowApp) -> None:
        """``f``: a new run of the flow's code, re-executed against this run's journal up to the event
        under the event log's cursor (elsewhere: the last event), paused there; the old run stays
        in its journal."""
        from flowtui.tui.widgets.event_log import EventLog, seq_of

        self.flush(everything=True)
        view, channel = self.client.view, self.client.channel
        journal = channel.journal if channel is not None else None
        if view is None or view.run_id is None or self.config.attach is not None:
            self.notify("No run of this app's own to fork.", severity="warning")
            return
        if journal is None:
            self.notify("This run keeps no journal (--no-journal): there is nothing to re-execute.",
                        severity="warning")
            return
        log = self.focused if isinstance(self.focused, EventLog) else None
        if self.main.looking is not None:  # the event the panes show
            seq, where = seq_of(self.client.lines[max(self.main.looking[1], 1) - 1]), ", the event looked back at"
        elif log is not None and log.cursor_row >= 0:
            seq, where = view.fork_point(seq_of(log.events[log.cursor_row]))
        else:
            seq, where = view.fork_point(view.last_seq)
        self.notify(f"Forking at event #{seq}{where}: the run so far stays in {journal}.")
        self._reload(resume_from=f"{journal}@{seq}", resume_run=view.run_id)

    def _ask_continue(self: FlowApp, resume_from: str, resume_run: str | None, label: str, what: str) -> None:
        """Reload, asking first: continue (re-executing ``resume_from``'s run ``resume_run``) or start over."""
        from flowtui.tui.screens.dialogs import ChoiceDialog

        def chosen(choice: str | None) -> None:
            if choice == "continue":
                self._reload(resume_from=resume_from, resume_run=resume_run)
            elif choice == "restart":
                self._reload()

        self.push_screen(ChoiceDialog("Reload the flow's code, and then?",
                                      [("c", label, "continue"), ("r", "Start over", "restart")],
                                      hint=f"{label}: {what}\nStart over: a new run from the first step."), chosen)

    def run_workflow_named(self: FlowApp, name: str) -> None:
        """The flow file's ``@workflow`` class ``name`` picked on the load error that said it has several (or
        none of the name given): loaded as ``FILE:NAME`` would be, that name kept for later reloads."""
        from flowtui.runtime.loader import split_target

        path, _ = split_target(self.config.target)
        self.config.target = f"{path}:{name}"
        self._reload(resume_from=self.config.resume_from, resume_run=self.config.resume_run)  # (one asked for stays)

    def _reload(self: FlowApp, *, resume_from: str | None = None, resume_run: str | None = None) -> None:
        """Load the flow afresh and start a run; ``resume_from`` (``JOURNAL@K``): re-executing that journal's
        run ``resume_run`` (the one shown: another may have been appended to the file since) up to K."""
        if self.config.attach is not None:
            self.notify("Attached to a run that lives elsewhere: reload it where it runs.", severity="warning")
            return
        self.config.resume_from = resume_from  # the next run (only): re-executed up to that event
        self.config.resume_run = resume_run
        self.client.stopping = self.client.active
        # (looking back at a run that goes: a redraw while the next one loads, with no run to say the state of,
        # failed: the app crashed)
        self.main.looking = None
        self.load()  # the client stops the old worker first; the new one reads the code afresh

    async def action_quit(self: FlowApp) -> None:
        """Quit within about a second, whatever the flow is doing: its run is stopped (then its
        process terminated, then killed) and the journal ends with the run's end. The status line
        and a notification say what the quit waits for."""
        if self.quitting:
            return
        self.quitting = True
        from flowtui.tui.screens.error import LoadErrorScreen

        # quit at a flow that could not load: exit 2, as flowtui run does (it exited 0)
        self.exit_with = 2 if isinstance(self.screen, LoadErrorScreen) else 128 + self.signalled if self.signalled else 0
        if self.client.channel is None or self.client.channel.closed.is_set():
            self.exit(return_code=self.exit_with)
            return
        busy = waiting_for(self.client.view)
        self.flush(force=True)  # the status line: "quitting: waiting for tool web_search to stop…"
        self.client.quitting = True  # what comes after is never shown: not folded
        self.notify("Detaching: the run waits, paused, for the next client…" if self.config.attach
                    else f"Quitting: waiting for {busy} to stop…" if busy else "Quitting: stopping the run…",
                    timeout=5)
        # In a worker: the app goes on drawing (the notification, the status) while the run stops.
        self.run_worker(self._quit(), group="quit", name="quit", exclusive=True, exit_on_error=False)

    async def _quit(self: FlowApp) -> None:
        try:
            await self._close_client()
        finally:
            self.exit(return_code=self.exit_with)

    async def _close_client(self: FlowApp) -> None:
        """The run's process ends (or an attached run is left), in a bounded time whatever it does."""
        try:
            await within(self.client.close(grace=QUIT_GRACE_S, reason=self.quit_reason), 4 * QUIT_GRACE_S)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            if self.client.channel is not None:
                await self.client.channel.kill()
