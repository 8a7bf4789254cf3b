"""The flowtui App: loads a flow, runs it as a worker, and projects its events onto the panes.

Events from the runtime land in the session's buffer (from any thread); a
fast tick folds them into the RunView in slices of a few milliseconds, and
the panes are redrawn at most ~20 times a second, one group of panes per
redraw, so a burst of events never freezes input. The garbage collector runs
in those ticks too (:mod:`tui.heap`), and the tick sleeps while the app is idle.
Keys only send commands to the run's controller or edits to ``run.edits``;
what the panes show always comes back through the event stream.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Iterable
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from flowtui.tui.actions import ACTIONS, help_groups
from flowtui.tui.heap import Heap
from flowtui.tui.messages import RunFlushed
from flowtui.tui.screens.main import MainScreen
from flowtui.tui.session import LaunchConfig, Session
from flowtui.tui.shown import PlainNotify, shown

DRAIN_INTERVAL = 1 / 100  # how often buffered events are folded into the view while a run is busy
IDLE_CHECK_S = 1 / 4  # how often an idle app looks for work (the fast tick sleeps meanwhile)
STAY_AWAKE_S = 1.0  # the fast tick keeps going this long after the last event (events come in bursts)
SETTLE_AFTER_S = 2.0  # idle this long after a busy spell: one full garbage collection
FLUSH_BUDGET_S = 0.005  # collect and fold at most this long per tick, so input stays answered
MIN_FOLD_S = 0.001  # ...but fold for at least this long, so a flood is never starved
REDRAW_INTERVAL = 1 / 20  # panes are redrawn at most this often


class FlowApp(PlainNotify, App[int]):
    """The terminal app of flowtui."""

    CSS_PATH = "flowtui.tcss"
    TITLE = "flowtui"
    BINDINGS = [
        Binding(a.key, a.action, a.title.capitalize(), show=a.show, id=f"{a.group}.{a.title.replace(' ', '-')}",
                tooltip=a.help)
        for a in ACTIONS if a.action != "focus_next"
    ]

    def __init__(self, config: LaunchConfig) -> None:
        super().__init__()
        self.config = config
        self.session = Session(config)
        self.main = MainScreen()
        self._ask_input = config.input is None
        self.first_paint: float | None = None
        self._undrawn = 0  # events folded since the last redraw
        self._drawn_at = 0.0
        self.heap = Heap()
        self._ticker: Timer | None = None
        self._folded_at = 0.0  # when the last events were folded
        self._asleep_at: float | None = None  # when the fast tick last went to sleep

    # --- lifecycle -------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        # The main screen is the app's first screen (not pushed from on_mount): it is composed
        # with the app, and its first frame is not one drawn inside the app's mount batch (dropped).
        return self.main

    def on_mount(self) -> None:
        self.heap.start()
        self._ticker = self.set_interval(DRAIN_INTERVAL, self._tick)
        self.set_interval(IDLE_CHECK_S, self._idle_check)
        self.call_after_refresh(self._after_first_paint)

    def on_unmount(self) -> None:
        self.heap.stop()

    def _after_first_paint(self) -> None:
        self.first_paint = time.time()
        self.main.complete()
        self.load()

    def load(self) -> None:
        """Load (or reload) the flow in a thread: importing the runtime never delays a paint."""
        self.main.sync(self.session, force=True, loading=f"loading {self.config.target}…")
        self.run_worker(self._load, thread=True, exclusive=True, group="load", name="load",
                        exit_on_error=False)

    def _load(self) -> Any:
        import flowtui.tui.screens.dialogs  # noqa: F401  (needed once loaded; imported here, off the event loop)

        return self.session.load()

    def start_run(self, input: str | None) -> None:
        """A new run of the loaded flow, paused before its first step."""
        self.session.prepare(input)
        # What startup built (modules, classes, widgets, the flow) lives as long as the app, and
        # the previous run is gone: one full collection now, then none of it is walked again.
        self.heap.settle()
        self.main.sync(self.session, force=True)
        self.run_worker(self.session.execute(), group="run", name="run", exclusive=True, exit_on_error=False)
        self.wake()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker, state = event.worker, event.state
        if worker.group == "load":
            if state == WorkerState.SUCCESS:
                self._loaded()
            elif state == WorkerState.ERROR:
                self._load_failed(worker.error)
        elif worker.group == "run":
            if state == WorkerState.ERROR:
                self.flush(everything=True)
                error = worker.error
                self.notify(f"{type(error).__name__}: {error}", title="The run failed", severity="error",
                            timeout=10)
            elif state in (WorkerState.SUCCESS, WorkerState.CANCELLED):
                self.flush(everything=True)

    def _loaded(self) -> None:
        from flowtui.tui.screens.dialogs import FirstMessageDialog
        from flowtui.tui.screens.error import LoadErrorScreen

        if isinstance(self.screen, LoadErrorScreen):
            self.pop_screen()
        litellm = self.config.preload_litellm and self.session.uses_litellm()
        self.run_worker(_preload(litellm), thread=True, group="preload", name="preload",
                        exit_on_error=False)
        if self._ask_input:
            self._ask_input = False
            self.push_screen(FirstMessageDialog(self.session.workflow_name), self.start_run)
        else:
            self.start_run(self.session.input)

    def _load_failed(self, error: BaseException | None) -> None:
        from flowtui.tui.screens.error import LoadErrorScreen

        assert error is not None
        details = "".join(traceback.format_exception(error)) if self.config.debug else None
        if isinstance(self.screen, LoadErrorScreen):
            self.pop_screen()
        self.push_screen(LoadErrorScreen(self.config.target, error, details=details))

    # --- the event buffer ----------------------------------------------------
    def flush(self, *, everything: bool = False, force: bool = False) -> int:
        """Fold buffered events into the view, or redraw when one is due (the timer calls it; commands too).

        A tick either folds (after collecting the garbage that is due) or redraws,
        never both: each stays a few milliseconds, so a key press waits at most one.
        ``everything`` folds the whole buffer and redraws now; ``force`` redraws every pane now.
        """
        session = self.session
        now = time.monotonic()
        n = 0
        if everything:
            while session.pending:
                n += session.drain(1.0)
        elif not (force or (now - self._drawn_at >= REDRAW_INTERVAL and self._behind())):
            start = time.perf_counter()  # the garbage that is due, then folding in what time is left
            self.heap.tick()
            n = session.drain(max(FLUSH_BUDGET_S - (time.perf_counter() - start), MIN_FOLD_S))
            self._undrawn += n
            return n
        self._undrawn += n
        if force or self._behind():
            self._drawn_at = now
            self.main.sync(session, force=force or everything)
            self.post_message(RunFlushed(self._undrawn))
            self._undrawn = 0
        return n

    def _behind(self) -> bool:
        """The panes do not show everything folded so far."""
        return bool(self._undrawn) or self.main.stale

    # The fast tick runs only while there is work: a run running, events waiting, panes behind.
    # Idle (paused, finished), it sleeps; commands wake it at once, and a slow check catches
    # anything else (a thread still emitting). An idle app then costs next to no CPU.
    def _busy(self) -> bool:
        view = self.session.view
        return (bool(self.session.pending) or self._behind() or (view is not None and view.status == "running")
                or time.monotonic() - self._folded_at < STAY_AWAKE_S)

    def _tick(self) -> None:
        if self.flush():
            self._folded_at = time.monotonic()
        if not self._busy() and self._ticker is not None:
            self._ticker.pause()
            self._asleep_at = time.monotonic()

    def _idle_check(self) -> None:
        self.heap.idle_tick()
        if self._busy():
            self.wake()
        elif (self.heap.handed_off and self._asleep_at is not None
              and time.monotonic() - self._asleep_at >= SETTLE_AFTER_S):
            self.heap.settle()

    def wake(self) -> None:
        """Run the fast tick again (after a command that sets the run going)."""
        if self._ticker is not None:
            self._ticker.resume()
            self._asleep_at = None

    # --- run commands ----------------------------------------------------------
    def _controller(self) -> Any:
        session = self.session
        view = session.view
        if view is None or session.controller is None:
            self.notify("No run yet.", severity="warning")
            return None
        if view.status in ("finished", "failed", "stopped"):
            self.notify(f"The run has {view.status}; r starts a new one.", severity="warning")
            return None
        self.wake()
        return session.controller

    def action_step(self) -> None:
        if c := self._controller():
            c.step()

    def action_next_turn(self) -> None:
        if c := self._controller():
            c.next_turn()

    def action_loop_once(self) -> None:
        if c := self._controller():
            c.loop_once()

    def action_resume(self) -> None:
        if c := self._controller():
            c.resume()

    def action_pause(self) -> None:
        if c := self._controller():
            if c.paused:
                self.notify("Already paused.")
            c.pause()

    def action_stop(self) -> None:
        if c := self._controller():
            c.stop()

    def action_toggle_breakpoint(self, name: str | None = None) -> None:
        name = name or self._breakpoint_target()
        if name is None:
            self.notify("Put the cursor on an agent or tool (node tree, assistant message, tool result) "
                        "or pause at one.",
                        severity="warning")
            return
        on = self.session.toggle_breakpoint(name)
        self.notify(f"Breakpoint on {name} {'set' if on else 'removed'}.")
        self.flush(force=True)

    def _breakpoint_target(self) -> str | None:
        main, view = self.main, self.session.view
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
                if msg.role == "assistant" and msg.agent:
                    return msg.agent
                if msg.tool_calls:
                    return msg.tool_calls[0].name
        if view is not None and view.pause is not None and view.pause.point in ("agent", "chat", "tool"):
            return view.pause.name
        return None

    def action_reload(self) -> None:
        from flowtui.tui.screens.dialogs import ConfirmDialog
        from flowtui.tui.screens.error import LoadErrorScreen

        view = self.session.view
        if isinstance(self.screen, LoadErrorScreen) or view is None or view.status not in ("running", "paused"):
            self._reload()
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self._reload()

        self.push_screen(ConfirmDialog("A run is in progress. Stop it and reload the flow?"), answer)

    def _reload(self) -> None:
        if self.session.controller is not None:
            self.session.controller.stop()
        self.workers.cancel_group(self, "run")
        self.load()

    async def action_quit(self) -> None:
        if self.session.controller is not None:
            self.session.controller.stop()
        self.exit(0)

    # --- edits -----------------------------------------------------------------
    def _editor(self) -> Any:
        self.flush(everything=True)
        session = self.session
        view = session.view
        if view is None or session.run is None:
            self.notify("No run yet.", severity="warning")
            return None
        if view.status != "paused":
            hint = "pause it first (p)" if view.status == "running" else "r starts a new one"
            self.notify(f"Edits apply to a paused run; this one is {view.status}: {hint}.", severity="warning")
            return None
        return session.run.edits

    def _edited(self, message: str) -> Any:
        def done(result: str | None) -> None:
            if result is not None:
                self.flush(everything=True, force=True)
                self.notify(message)

        return done

    def _sidebar_target(self) -> str | None:
        sidebar = self.main.sidebar
        return sidebar.highlighted_id if self.focused is sidebar else None

    def action_promote(self) -> None:
        from flowtui.tui.screens.dialogs import TextDialog

        if (editor := self._editor()) is None:
            return
        i = self.main.conversation.cursor
        history = self.session.view.history
        if not 0 <= i < len(history) or history[i].role != "assistant":
            self.notify("Put the cursor on an assistant message to promote it.", severity="warning")
            return
        self.push_screen(TextDialog(f"Promote message #{i} to memory", history[i].content,
                                    lambda text: editor.promote(i, text), save_label="Promote",
                                    hint="It leaves the history and joins memory; u undoes."),
                         self._edited(f"Message #{i} promoted to memory."))

    def action_edit(self) -> None:
        from flowtui.tui.screens.dialogs import TextDialog

        if (editor := self._editor()) is None:
            return
        view = self.session.view
        target = self._sidebar_target()
        if target is not None:
            kind, _, key = target.partition(":")
            if kind in ("memory", "tasks"):
                i = int(key)
                items = view.memory if kind == "memory" else view.tasks
                self.push_screen(TextDialog(f"Edit {kind} item {i + 1}", items[i],
                                            lambda text: editor.set_item(kind, i, text)),
                                 self._edited(f"{kind.capitalize()} item {i + 1} edited."))
            else:
                value = view.state.get(key)
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                self.push_screen(TextDialog(f"Edit state field {key}", text, lambda t: editor.set_field(key, t),
                                            single_line=True, hint="Typed as JSON or plain text; checked "
                                            "against the field's type."),
                                 self._edited(f"State field {key} set."))
            return
        i = self.main.conversation.cursor
        if not 0 <= i < len(view.history):
            self.notify("Nothing selected: pick a message, or a memory item, task or field in the sidebar (tab).",
                        severity="warning")
            return
        self.push_screen(TextDialog(f"Edit message #{i} ({view.history[i].role})", view.history[i].content,
                                    lambda text: editor.edit_message(i, text)),
                         self._edited(f"Message #{i} edited."))

    def action_delete(self) -> None:
        target = self._sidebar_target()
        if target is None or not target.startswith(("memory:", "tasks:")):
            self.notify("Select a memory item or task in the sidebar (tab) to delete it.", severity="warning")
            return
        if (editor := self._editor()) is None:
            return
        kind, _, key = target.partition(":")
        editor.delete_item(kind, int(key))
        self.flush(everything=True, force=True)
        self.notify(f"{kind.capitalize()} item {int(key) + 1} deleted; u undoes.")

    def action_add_task(self) -> None:
        self._add("tasks", "Add a task")

    def action_add_memory(self) -> None:
        self._add("memory", "Add a memory item")

    def _add(self, bucket: str, title: str) -> None:
        from flowtui.tui.screens.dialogs import TextDialog

        if (editor := self._editor()) is None:
            return
        self.push_screen(TextDialog(title, "", lambda text: _nonempty(text) and editor.add_item(bucket, text),
                                    single_line=True, save_label="Add"),
                         self._edited(f"Added to {bucket}."))

    def action_undo(self) -> None:
        if (editor := self._editor()) is None:
            return
        if editor.undo():
            self.flush(everything=True, force=True)
            self.notify("Last edit undone.")
        else:
            self.notify("Nothing to undo.")

    # --- views -----------------------------------------------------------------
    def action_view(self, name: str) -> None:
        if self.screen is self.main:
            self.main.show_view(name)

    def action_help(self) -> None:
        from flowtui.tui.screens.dialogs import HelpScreen

        self.push_screen(HelpScreen(help_groups()))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        for spec in ACTIONS:
            if spec.action == "focus_next":
                continue
            yield SystemCommand(f"{spec.group}: {spec.title}", f"{spec.help}  [{spec.key}]",
                                _action_callback(self, spec.action))
        agents, tools = self.session.step_names()
        for name in agents + tools:
            state = "remove" if name in self.session.breakpoints else "set"
            yield SystemCommand(shown(f"breakpoint: {state} on {name}"), shown(f"Pause before {name}"),
                                _bind(self.action_toggle_breakpoint, name))
        yield from super().get_system_commands(screen)


def _action_callback(app: App, action: str):
    async def run() -> None:
        await app.run_action(action)

    return run


def _bind(fn, *args):
    return lambda: fn(*args)


def _nonempty(text: str) -> bool:
    if not text.strip():
        raise ValueError("type some text first")
    return True


def _preload(litellm: bool):
    """Heavy imports, after the first paint: Markdown for assistant blocks, litellm for the first call."""

    def load() -> None:
        import rich.markdown  # noqa: F401

        if litellm:
            from flowtui.runtime.providers._litellm import load_litellm

            load_litellm()

    return load


def make_app(target: str, **options: Any) -> FlowApp:
    """The app for ``FLOW[:Class]``; options are :class:`LaunchConfig` fields. Shared by the CLI and tests."""
    return FlowApp(LaunchConfig(target=target, **options))
