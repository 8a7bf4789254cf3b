"""The app's one door into the runtime: load a flow, start a run, buffer its events.

Nothing here imports textual, and the runtime is imported lazily (inside the
methods), so the first paint never waits for it. The panes render
``session.view`` — a :class:`runtime.fold.RunView` folded from the event
stream — never the run's own objects; the run is kept only to send it
commands (the controller) and edits (``run.edits``).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LaunchConfig:
    """What the command line asked for (shared by the CLI, the tests and the bench)."""

    target: str
    input: str | None = None
    memory: dict[str, str] | list[str] | None = None
    model: str | None = None
    replies: str | None = None
    record: str | None = None  # cassette file to record every model exchange into
    replay: str | None = None  # cassette file to serve model replies from (no network)
    journal: str | None = None  # one file for every run of this session
    journal_auto: bool = False  # a new .flowtui/runs/<Workflow>-<time>.jsonl per run (reloads included)
    debug: bool = False
    preload_litellm: bool = True
    cursor_blink: bool = True  # tests and snapshots switch it off
    breakpoints: set[str] = field(default_factory=set)


class Session:
    """One loaded flow and its current run."""

    def __init__(self, config: LaunchConfig) -> None:
        self.config = config
        self.flow: Any = None  # runtime.App once loaded
        self.run: Any = None
        self.controller: Any = None
        self.view: Any = None  # runtime.fold.RunView of the current run
        self.events: list[Any] = []  # every event of the current run, for the event log
        self.breakpoints: set[str] = set(config.breakpoints)
        self.input: str | None = config.input
        self._buffer: deque[Any] = deque()  # the current run's events not folded yet (a new one per run)
        self.sink: Any = None  # the current run's event sink (thread-safe: it only appends)
        self.journals: list[str] = []  # the journal files this session's runs wrote

    # --- loading -----------------------------------------------------------
    def load(self) -> Any:
        """Load (or reload) the flow file. Raises ``FlowLoadError``."""
        from flowtui.runtime.loader import load_flow

        c = self.config
        self.flow = load_flow(c.target, model=c.model, replies=c.replies, record=c.record, replay=c.replay)
        return self.flow

    @property
    def workflow_name(self) -> str:
        return self.flow.workflow.name if self.flow is not None else self.config.target

    def uses_litellm(self) -> bool:
        """Some agent of the loaded flow calls litellm (then it is imported ahead, in a thread).

        A scripted flow never imports it: the import is seconds of a thread holding
        the interpreter lock that the app would share for nothing.
        """
        from flowtui.runtime.providers.litellm import LiteLLMProvider

        for spec in self.flow.plans.agent_specs.values():
            p = spec.provider
            if isinstance(p, LiteLLMProvider) or (isinstance(p, type) and issubclass(p, LiteLLMProvider)):
                return True
        return False

    def step_names(self) -> tuple[list[str], list[str]]:
        """The agents and tools of the loaded flow (for breakpoint commands)."""
        if self.flow is None:
            return [], []
        plans = self.flow.plans
        agents = [spec.name for spec in plans.agent_specs.values()]
        tools = sorted({name for t in plans.tool_specs.values() for name in t.names})
        return agents, tools

    # --- running -------------------------------------------------------------
    def prepare(self, input: str | None) -> Any:
        """A new run, paused before its first step, its events going to the buffer."""
        from flowtui.runtime.control import Controller
        from flowtui.runtime.fold import RunView

        # A new buffer per run: a thread of the previous run that still emits fills the old one.
        self._buffer = deque()
        self.sink = self._buffer.append  # may be called from worker threads: deque.append is atomic
        self.input = input
        self.view = RunView()
        self.events = []
        self.controller = Controller(start_paused=True, breakpoints=self.breakpoints)
        journal = self.config.journal
        if journal is None and self.config.journal_auto:
            from flowtui.runtime.cli import new_journal

            journal = str(new_journal(self.workflow_name))
        if journal is not None and journal not in self.journals:
            self.journals.append(journal)
        self.run = self.flow.prepare(input, memory=self.config.memory, journal=journal,
                                     controller=self.controller, on_event=self.sink)
        return self.run

    async def execute(self) -> Any:
        run = self.run
        try:
            return await run.execute()
        finally:
            if run.journal is not None:
                run.journal.close()

    @property
    def active(self) -> bool:
        """A run exists and has not ended."""
        return self.view is not None and self.run is not None and self.view.status in ("idle", "running", "paused")

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def drain(self, budget_s: float = 0.004, *, chunk: int = 256) -> int:
        """Fold buffered events into the view for about ``budget_s`` seconds; returns how many.

        Events are taken ``chunk`` at a time and folded with ``RunView.apply_many``
        (one call per chunk, not per event); the clock is read between chunks.
        """
        buffer, view, events = self._buffer, self.view, self.events
        if view is None or not buffer:
            return 0
        clock = time.perf_counter
        deadline = clock() + budget_s
        popleft = buffer.popleft
        n = 0
        while buffer:
            batch = [popleft() for _ in range(min(chunk, len(buffer)))]
            view.apply_many(batch)
            events.extend(batch)
            n += len(batch)
            if clock() > deadline:
                break
        return n

    def toggle_breakpoint(self, name: str) -> bool:
        on = name not in self.breakpoints
        if on:
            self.breakpoints.add(name)
        else:
            self.breakpoints.discard(name)
        if self.controller is not None:
            self.controller.breakpoints = set(self.breakpoints)
        return on
