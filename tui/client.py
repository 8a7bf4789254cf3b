"""The app's side of a run: a worker process it started (or one it attached to), the fold of the
run's events, and the commands the keys send.

The app never imports the flow: a :class:`~flowtui.runtime.channel.Channel`
starts ``python -m flowtui.runtime.worker`` for it, and the panes render
``client.view`` — a :class:`~flowtui.runtime.fold.RunView` folded from the
events the worker sends, the same code a replay runs. Events arrive on the
app's event loop, a batch at a time, into a buffer that the app folds in
slices of a few milliseconds; the event log keeps each event's line as it
came (bytes, cheap to hold) and parses only the rows on screen.

Nothing here imports textual.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowtui.runtime.channel import LOAD_TIMEOUT_S, Channel, elided_of, within
from flowtui.runtime.linestore import Lines
from flowtui.runtime.spawn import STOP_GRACE_S, UNSTARTED, Options
from flowtui.tui.tokens import ExactTokens

if TYPE_CHECKING:
    from flowtui.runtime import protocol as p


def _p():
    """The protocol, imported on first use: the app paints before any of the runtime is imported."""
    from flowtui.runtime import protocol

    return protocol


MAX_BUFFERED = 50_000  # events read but not folded yet: past this, reading waits (the worker blocks)
FETCH_TIMEOUT_S = 10.0  # a cut value asked of the run's process: past this, said instead of waited on
LOG_LINES = 500  # lines the flow printed, kept for the log view


@dataclass
class LaunchConfig:
    """What the command line asked for (shared by the CLI, the tests and the bench)."""

    target: str
    input: str | None = None
    memory: dict[str, str] | list[str] | None = None
    data: dict[str, str] | None = None
    model: str | None = None
    replies: str | None = None
    record: str | None = None  # cassette file to record every model exchange into
    replay: str | None = None  # cassette file to serve model replies from (no network)
    journal: str | None = None  # one file for every run of this session
    journal_auto: bool = False  # a new .flowtui/runs/<Workflow>-<time>.jsonl per run (reloads included)
    debug: bool = False
    cursor_blink: bool = True  # tests and snapshots switch it off
    breakpoints: set[str] = field(default_factory=set)
    grace: float = STOP_GRACE_S  # a stop that has not ended the run by then terminates its process
    load_timeout: float = LOAD_TIMEOUT_S
    attach: tuple[str, int, str, bool] | None = None  # (host, port, token, take over): a run that lives elsewhere
    approve: list[str] = field(default_factory=list)  # tools whose calls wait for a decision ("all")
    watch: list[str] = field(default_factory=list)  # watchpoints set when the run starts (--watch)
    # JOURNAL[@K]: re-execute that journal's run up to event K, then pause, live (a divergence pauses too)
    resume_from: str | None = None
    resume_run: str | None = None  # the run of that journal (the one the app showed): none, its last
    head_start: Any = None  # the first run's worker, started by the command line already (Options.start_now)

    def worker_options(self, breakpoints: set[str] | None = None) -> Options:
        """How this flow's worker is started."""
        return Options(target=self.target, model=self.model, replies=self.replies, record=self.record,
                       replay=self.replay, breakpoints=sorted(self.breakpoints if breakpoints is None else breakpoints),
                       grace=self.grace, debug=self.debug)


class RunClient:
    """One run of the loaded flow, in its own process."""

    def __init__(self, config: LaunchConfig) -> None:
        self.config = config
        self.channel: Channel | None = None
        self.hello: p.Hello | None = None
        self.view: Any = None  # flowtui.runtime.fold.RunView of the current run
        self.lines = Lines()  # every event of the current run, as it came (for the event log), packed
        self.breakpoints: set[str] = set(config.breakpoints)
        self.watches: list[str] = list(config.watch)  # as the worker last listed them
        self.refused_watches: list[p.Reply] = []  # dropped when the last run started, each saying why
        self.input: str | None = config.input
        # the journal files this session's runs wrote, each with how many runs it took from this session
        self.journals: dict[str, int] = {}
        self.logs: deque[str] = deque(maxlen=LOG_LINES)  # the last lines the flow printed
        self.faults: deque[str] = deque(maxlen=LOG_LINES)  # the last protocol faults said (P lists them too)
        self.logs_total = 0
        self.cassette_note: str | None = None
        self.warnings: list[str] = []  # what the run's process sent that is not the protocol, not yet said
        self.stopping = False  # x was pressed: the status says so until the run ends
        # since when the start is on its way (a provider factory or an agent's __init__ may never return)
        self.starting_since: float | None = None
        self.detached: str | None = None  # attached: why the connection ended (the run lives on elsewhere)
        self.urgent = False  # a pause or the run's end arrived: redraw now, not at the next tick
        self.quitting = False  # the app is quitting: events are no longer folded (see _skim)
        self._buffer: deque[bytes] = deque()  # event lines read, not folded yet
        self._ending: str | None = None  # the worker is gone: "sent" / "journaled", what is folded before its end
        self.on_arrival: Any = None  # called (no arguments) when events arrive: the app wakes up
        self.tokens = ExactTokens()  # the run's own token counts of what the model sees, per pause
        self.count_failed: str | None = None  # why the last count failed (its provider's count_tokens raised)

    # --- the worker --------------------------------------------------------------------------
    async def load(self) -> p.Hello | p.LoadError:
        """Start a fresh worker for the flow (a reload is a new process) and wait until it has loaded.

        The worker is started first; the runtime's modules this process needs (the protocol,
        the fold) are imported in a thread meanwhile, so they delay neither it nor a frame."""
        await self.close()
        self.view, self.lines, self.hello, self.stopping = None, Lines(), None, False
        self.tokens = ExactTokens()
        self._buffer, self._ending = deque(), None
        self.channel = Channel(self._arrived, on_log=self._log, on_warning=self.warnings.append)
        c = self.config
        if c.attach is None:
            started, c.head_start = c.head_start, None  # a reload is a fresh process
            spawned = asyncio.ensure_future(self.channel.spawn(c.worker_options(self.breakpoints),
                                                               load_timeout=c.load_timeout, started=started))
            await asyncio.sleep(0)  # the process is on its way
        # the fold exists before the worker says anything: an attached run sends its backlog at once
        RunView = await asyncio.to_thread(_runtime_for_the_app)
        self.view = RunView()
        if c.attach is not None:
            host, port, token, take_over = c.attach
            reply = await self.channel.connect(host, port, token, take_over=take_over)
        else:
            reply = await spawned
        if isinstance(reply, _p().Hello):
            self.hello = reply
            self.view.model_middlewares = tuple(reply.model_middlewares)
            if c.attach is not None:  # what the run holds, an earlier client's included, is what is shown
                self.breakpoints, self.watches = set(reply.breakpoints), list(reply.watches)
        else:
            self.view = None
        return reply

    @property
    def workflow_name(self) -> str:
        return self.hello.workflow if self.hello is not None else self.config.target

    def step_names(self) -> tuple[list[str], list[str]]:
        """The agents and tools of the loaded flow, then those of its child workflows the run has
        called so far (known only once they run), for breakpoint commands."""
        if self.hello is None:
            return [], []
        agents, tools = list(self.hello.agents), list(self.hello.tools)
        view = self.view
        if view is not None and len(view.runs) > 1:
            known = {*agents, *tools}
            children = {(node.kind, node.name) for node in view.nodes.values()
                        if node.run_id != view.run_id and node.kind in ("agent", "tool") and node.name not in known}
            agents += sorted(name for kind, name in children if kind == "agent")
            tools += sorted(name for kind, name in children if kind == "tool")
        return agents, tools

    async def begin(self, input: str | None) -> p.Reply:
        """Start the run, paused before its first step."""
        from flowtui.runtime.cli import folders_to_make, new_journal, take_back

        self.input = input
        c = self.config
        journal, made = c.journal, None
        if journal is None and c.journal_auto:
            try:
                made = folders_to_make()
                journal = str(new_journal(self.workflow_name))
            except OSError as exc:  # a folder it cannot write (read-only, full): said, nothing started
                from flowtui.runtime.cli import JOURNAL_DIR
                from flowtui.runtime.files import cannot_write

                return _p().Reply(id=0, ok=False, error=cannot_write(JOURNAL_DIR, exc.strerror or str(exc)))
        assert self.channel is not None
        self.channel.keep_journal(journal)
        await self.check_watches()
        self.starting_since = time.monotonic()
        try:
            reply = await self.channel.command(_p().Start(input=input, memory=c.memory, data=c.data, journal=journal,
                                                          approve=c.approve, watch=self.watches,
                                                          resume_from=c.resume_from, resume_run=c.resume_run,
                                                          on_divergence="pause"))
        except ConnectionError:  # its process ended before answering (x on a start that never answered, a crash)
            why = self.channel.ending(UNSTARTED)[1]
            reply = _p().Reply(id=0, ok=False, error=f"stopped before the run started: {why}"
                               if self.channel.stopping_since is not None else why)
        except BaseException:  # the app quits: no run, no journal made for it
            if made is not None:
                take_back(Path(journal), made)
            raise
        finally:
            self.starting_since = None
        if not reply.ok:  # no run: no journal made for it (a stop that ended it has nothing left to stop: the
            # status said "stopping…" for good)
            self.stopping = False
            if made is not None:
                take_back(Path(journal), made)
        if journal is not None and reply.ok:  # (counted, not read: a journal of runs is read once, at the end)
            self.journals[journal] = self.journals.get(journal, 0) + 1
        return reply

    async def check_watches(self) -> None:
        """Set the watchpoints one by one, once the flow has loaded and again before the run starts:
        one the flow refuses (a state field it does not have, or a reloaded flow no longer has) is
        dropped, with why, in ``refused_watches`` (emptied as they are said), and the run starts with the
        others. The two checks may overlap (the first message given at once): each drop is made once."""
        for expr in list(self.watches):
            reply = await self.channel.command(_p().SetWatch(expr=expr))
            if not reply.ok and expr in self.watches:
                self.watches.remove(expr)
                self.refused_watches.append(reply)

    def _log(self, text: str) -> None:
        self.logs.append(text)
        self.logs_total += 1
        if text.startswith("cassette: "):  # what --record did with its file, said again once the app has quit
            self.cassette_note = text

    # --- events ---------------------------------------------------------------------------
    def _arrived(self, lines: list[bytes]) -> None:
        self._buffer.extend(lines)  # parsed when folded, a slice at a time (a flood never holds a key up)
        blob = b"\n".join(lines)  # looked at once a chunk, not once a line
        if b'"type":"run.pause"' in blob or b'"type":"run.end"' in blob:
            self.urgent = True
        channel = self.channel
        if len(self._buffer) > MAX_BUFFERED and channel is not None and channel.stopping_since is None:
            channel.paused.clear()  # the app is behind: let the worker wait (drain() reads on; a stop too)
        if self.on_arrival is not None:
            self.on_arrival()

    @property
    def pending(self) -> int:
        return len(self._buffer)

    @property
    def events(self) -> list[Any]:
        """Every event of the run folded so far, parsed from its line (for tests and tools; the
        app itself parses only the event log's rows on screen)."""
        return [_p().parse_worker_line(line) for line in self.lines if line]

    def drain(self, budget_s: float = 0.004, *, chunk: int = 32) -> int:
        """Fold buffered events into the view for about ``budget_s`` seconds; returns how many.

        ``chunk`` lines are parsed at a time: few enough that a slice's events are gone before
        Python's collector next runs, so they are not kept into its older generations (with 256,
        a 100,000-event flood made 630 young collections and 3-5 full ones, each a 50 ms stall;
        with 32, 280 and 1-2; ``bench/tui_bench.py``)."""
        buffer = self._buffer
        if self.view is None or not buffer:
            return 0
        if self.quitting:
            return self._skim()
        clock = time.perf_counter
        deadline = clock() + budget_s
        popleft = buffer.popleft
        n = 0
        while buffer:
            n += self._fold([popleft() for _ in range(min(chunk, len(buffer)))])
            if clock() > deadline:
                break
        if not buffer and self._ending is not None:  # a gone worker's: what comes next, to fold next time
            self._end_when_folded()
        if self.channel is not None and not self.channel.paused.is_set() and len(buffer) < MAX_BUFFERED // 2:
            self.channel.paused.set()
        return n

    def _fold(self, raw: list[bytes]) -> int:
        """Event lines parsed and folded into the view, in order; how many."""
        from flowtui.runtime.channel import parse_events

        view = self.view
        batch = parse_events(raw, self.warnings.append)
        if self.channel is not None:
            batch = self.channel.in_order(batch, view.last_seq)
        view.apply_many([mark_cuts(line, ev) if elided_of(ev) else ev for line, ev in batch])
        self.lines.extend(line for line, _ in batch)
        return len(batch)

    def _skim(self) -> int:
        """The app is quitting: the backlog is dropped unfolded but for how the run ended (nothing will show
        the rest; a thread of the flow flooding events while the run was paused had q fold them all). The
        number of the last event dropped is kept: what is folded, or written, after it follows it."""
        from flowtui.runtime.channel import seq_of

        buffer, n = self._buffer, len(self._buffer)
        ends = [line for line in buffer if b'"type":"run.end"' in line]
        dropped = next((seq for line in reversed(buffer) if line not in ends and (seq := seq_of(line)) is not None),
                       None)
        buffer.clear()
        if dropped is not None and dropped > self.view.last_seq:
            self.view.last_seq = dropped
        if ends:
            self._fold(ends)
        if self._ending is not None:
            self._end_when_folded()
        return n

    def gone(self, *, now: bool = False) -> None:
        """The worker is gone: when its run never said how it ended, say it (journal and panes).

        What it sent before it went is folded first, then what it journaled and never sent, then its
        end, if it said none: by the ticks, a slice each, as while it lived (folding a flood's backlog
        here held every key up for seconds), or ``now`` (the app quits, or reloads)."""
        channel = self.channel
        if channel is None or not channel.closed.is_set() or channel.ended or self.view is None:
            return
        if self.config.attach is not None:  # the run lives on where it is served: it did not end
            if self.detached is None:
                self.detached = channel.let_go or "the connection to the run was lost"
                self.urgent = True
            return
        if self._ending is None:
            self._ending = "sent"
        self.urgent = True
        if now:
            while self._buffer or self._ending is not None:
                self.drain(5.0)
                self._end_when_folded()
        else:
            self._end_when_folded()

    def _end_when_folded(self) -> None:
        """The next step of a gone worker's ending, once everything before it is folded."""
        channel = self.channel
        if self._ending is None or self._buffer or channel is None:
            return
        if self._ending == "sent":  # folded what it sent: what it journaled but never sent comes next
            self._ending = "journaled"
            recovered = channel.recover(self.view.last_seq)
            if recovered:
                self._buffer.extend(recovered)
                return
        self._ending = None
        if self.view.run_id is None:  # it died before the run started
            return
        if not channel.ended:  # (its end may have been journaled, never sent)
            status, why = channel.ending(self.view.busy_with())
            from flowtui.runtime.encoding import encode_event
            from flowtui.runtime.secrets import Redactor

            event = channel.write_run_end(status, why, self.view.last_seq) or _run_end(self.view, status, why)
            self._buffer.append(encode_event(event, Redactor([])))
            channel.ended = True
        self.urgent = True

    # --- commands ---------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """A run exists and has not ended."""
        return self.view is not None and self.view.status in ("idle", "running", "paused")

    async def command(self, command: p.BaseModel) -> p.Reply:
        """Send ``command``; an edit goes to the run the panes show (a child run's, when shown)."""
        if self.channel is None:
            raise ConnectionError("no run")
        view = self.view
        if view is not None and getattr(command, "run_id", False) is None and view.shown.run_id != view.run_id:
            command = command.model_copy(update={"run_id": view.shown.run_id})
        return await self.channel.command(command)

    async def fetch(self, seq: int, path: str) -> tuple[str | None, str | None]:
        """A value the wire cut, whole, from the run's process, else from the run's journal: (the value, None),
        or (None, why) when neither can give it (the process gone, or not answering: a sync tool holds it, or it
        is stopped; or it let go of the value, and there is no journal)."""
        try:
            reply = await within(self.command(_p().Fetch(seq=seq, path=path)), FETCH_TIMEOUT_S)
        except asyncio.TimeoutError:
            why = (f"the run's process did not send it within {FETCH_TIMEOUT_S:g} s (busy in a tool, or stopped?); "
                   "try again later")
        except ConnectionError:
            why = "the run's process has ended: the cut text is all there is"
        else:
            if reply.ok:
                return reply.value, None
            why = reply.error or "the run no longer holds it"
        journaled = self._journaled_value(seq, path)
        return (journaled, None) if journaled is not None else (None, why)

    def _journaled_value(self, seq: int, path: str) -> str | None:
        """The value event ``seq`` of this run holds at ``path``, as its journal holds it (whole, redacted)."""
        from flowtui.runtime.encoding import path_keys

        if self.channel is None or self.channel.journal is None:
            return None
        for line in self.channel.journaled_lines(seq - 1, seq + 1):
            holder: Any = json.loads(line)
            for key in path_keys(path):
                holder = _child(holder, key)
            return holder if isinstance(holder, str) else None
        return None

    async def whole(self, value: Any) -> tuple[Any, str | None]:
        """``value`` with every string in it that was cut on the wire fetched whole: (it, None), or
        (None, why) when one cannot be."""
        if isinstance(value, str):
            cut = cut_in(value)
            return (value, None) if cut is None else await self.fetch(cut[0], cut[1])
        if isinstance(value, (dict, list, tuple)) and cut_inside(value) is not None:
            items = value.items() if isinstance(value, dict) else enumerate(value)
            out = {} if isinstance(value, dict) else [None] * len(value)
            for key, item in items:
                out[key], why = await self.whole(item)
                if why is not None:
                    return None, why
            return out, None
        return value, None

    def send(self, command: p.BaseModel) -> None:
        if self.channel is not None:
            self.channel.send(command)

    def toggle_breakpoint(self, name: str) -> tuple[bool, asyncio.Future[p.Reply] | None]:
        """Set or clear the breakpoint on ``name``: (set now, the run's reply to come; None when there
        is no run to tell: the next one starts with it). Raises ValueError for a name no breakpoint can
        take (an attached run's peer may name a step with control characters, or at any length), and
        for one to set once an attached run has ended or the app is detached from it (no next run
        starts here). A refusal puts the breakpoint back as it was."""
        from pydantic import ValidationError

        on = name not in self.breakpoints
        try:
            command = _p().SetBreakpoint(name=name, on=on)
        except ValidationError as exc:
            raise ValueError(exc.errors()[0]["msg"].removeprefix("Value error, ")) from None
        channel = self.channel
        ended = channel is None or channel.closed.is_set()
        if ended and on and self.config.attach is not None:  # (cleared, it is only no longer marked)
            over = self.view is not None and self.view.status in ("finished", "failed", "stopped")
            gone = "the attached run has ended" if over else "the app is detached from the run"
            raise ValueError(f"{gone}, and no next run starts here")
        (self.breakpoints.add if on else self.breakpoints.discard)(name)
        if ended:
            return on, None

        async def answered() -> p.Reply:
            try:
                reply = await channel.command(command)
            except ConnectionError:  # the run ended meanwhile: the next one starts with it, if here
                if self.config.attach is not None:
                    (self.breakpoints.discard if on else self.breakpoints.add)(name)
                    return _p().Reply(id=0, ok=False, error="the connection to the run ended before it took it")
                return _p().Reply(id=0, ok=True)
            if not reply.ok and self.channel is channel:  # (a reloaded run's breakpoints are its own)
                (self.breakpoints.discard if on else self.breakpoints.add)(name)
            return reply

        return on, asyncio.ensure_future(answered())

    async def watch(self, expr: str | None = None, *, on: bool = True) -> p.Reply:
        """Set (or with ``on=False`` clear) watchpoint ``expr``; without one, ask for the list. The
        reply says why a malformed one is refused (``value``: its ``expr`` and ``column``); when it
        is accepted, ``watches`` is the worker's list."""
        reply = await self.command(_p().SetWatch(expr=expr, on=on))
        if reply.ok and isinstance(reply.value, list):
            self.watches = list(reply.value)
        return reply

    async def count_tokens(self, key: tuple) -> bool:
        """Ask the run to count what the model sees (``key``: :meth:`ExactTokens.wanted`'s); True
        when it could (its model has a local tokenizer), and ``tokens`` holds the count."""
        from flowtui.runtime.providers.base import TokenCount

        reply = await self.command(_p().Count(run_id=key[0]))
        self.count_failed = None if reply.ok else reply.error  # (its provider's count_tokens raised: said once)
        counted = TokenCount.model_validate(reply.value) if reply.ok and reply.value else None
        self.tokens.put(key, counted)
        return counted is not None

    async def stop(self) -> None:
        """Stop the run within about the grace period, whatever the flow is doing."""
        if self.channel is None:
            return
        self.stopping = True
        await self.channel.stop()

    async def close(self, *, grace: float | None = None, reason: str | None = None) -> None:
        """End the worker (its run stopped first, ``reason`` what its end says) and say how the run
        ended if it could not. Attached to a run that lives elsewhere: detach, and leave it waiting
        for the next client."""
        channel = self.channel
        if channel is None:
            return
        if self.config.attach is not None:
            await channel.detach()
            return
        if channel.ended:
            await channel.finish(grace)
        elif not channel.closed.is_set():
            await channel.stop(grace, reason=reason)
        await channel.wait()
        self.gone(now=True)

    @property
    def journal_notes(self) -> list[str]:
        from flowtui.runtime.journal import runs_before

        notes = []
        for j, ours in self.journals.items():
            now = runs_before(Path(j))  # (0 for a file that is gone)
            if now is None:  # too large to read through while the quit waits: ours are its last
                notes.append(f"journal: {j} ({'its last run' if ours == 1 else f'its last {ours} runs'})")
                continue
            before = max(now - ours, 0)
            if now > before:  # as flowtui run says it: which runs of the file are this session's
                runs = f"run {now}" if now == before + 1 else f"runs {before + 1}-{now}"
                notes.append(f"journal: appended {runs} to {j}" if before else
                             f"journal: {j}" + (f" ({runs})" if now > 1 else ""))
        return notes


def _runtime_for_the_app() -> type:
    """What the app needs of the runtime, imported (in a thread): the protocol and the fold."""
    from flowtui.runtime import protocol  # noqa: F401
    from flowtui.runtime.fold import RunView

    return RunView


# A string cut on the wire (see ``protocol.WIRE_LIMIT``) ends with this note, which says where the
# whole of it is: ``o`` fetches it from the run (``fetch``) and opens it in a pager.
_CUT_NOTE = ("\n… [cut on the way to the app: {total:,} characters in all (event {seq}, {path}); "
             "o opens the whole text]")
CUT = re.compile(r"\[cut on the way to the app: ([\d,]+) characters in all \(event (\d+), ([^)\s]+)\); "
                 r"o opens the whole text\]")


def cut_in(text: str) -> tuple[int, str, int] | None:
    """(seq, path, characters in all) when ``text`` was cut on the way to the app."""
    m = CUT.search(text) if "cut on the way" in text else None
    return (int(m.group(2)), m.group(3), int(m.group(1).replace(",", ""))) if m else None


def cut_inside(value: Any) -> tuple[int, str, int] | None:
    """:func:`cut_in` of the first string in ``value`` (a text, or a structure of them) that was cut."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            cut = cut_in(item)
            if cut:
                return cut
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None


def split_cut(text: str) -> tuple[str, int] | None:
    """(the part the app holds, characters in all) when ``text`` was cut on the way to the app."""
    if not text.endswith("o opens the whole text]"):  # cut, it ends in the note; one cut inside is no split
        return None
    cut = cut_in(text[-400:]) if len(text) > 400 else None
    if cut is None:
        return None
    return text[:text.rfind("\n… [cut on the way to the app:")], cut[2]


def lost_on_the_way(text: str) -> int:
    """About how many characters of ``text`` the app does not hold: each string of it cut on the way
    to the app kept the characters before its note, at most ``WIRE_LIMIT`` of them (a note of memory
    and tasks holds other items before the piece)."""
    if "cut on the way" not in text:
        return 0
    from flowtui.runtime.protocol import WIRE_LIMIT

    lost, start = 0, 0
    for m in CUT.finditer(text):
        held = min(WIRE_LIMIT, m.start() - start)
        lost += max(0, int(m.group(1).replace(",", "")) - held)
        start = m.end()
    return lost


def mark_cuts(line: bytes, event: Any) -> Any:
    """``event`` with each string it lost on the wire ending in a note saying so (and where it is whole).
    A path that names no string of the event (a peer's forged ``elided``) marks nothing."""
    from flowtui.runtime.encoding import path_keys

    data = json.loads(line)
    elided = elided_of(event)
    for path, total in elided.items() if isinstance(elided, dict) else ():
        if not isinstance(path, str) or not isinstance(total, int):
            continue
        holder, keys = data, path_keys(path)
        for key in keys:
            parent, holder = holder, _child(holder, key)
        if isinstance(holder, str):
            _set_child(parent, keys[-1], holder + _CUT_NOTE.format(total=total, seq=event.seq, path=path))
    return _p().parse_worker_line(json.dumps(data))


def _child(holder: Any, key: str) -> Any:
    if isinstance(holder, dict):
        return holder.get(key)
    if isinstance(holder, list) and key.isdecimal() and len(key) < 10 and int(key) < len(holder):
        return holder[int(key)]
    return None


def _set_child(holder: Any, key: str, value: str) -> None:
    holder[int(key) if isinstance(holder, list) else key] = value


def _run_end(view: Any, status: str, why: str) -> Any:
    """The ``run.end`` of a run whose process died, for the panes (when there is no journal to write it to)."""
    from flowtui.runtime.bus import build_event
    from flowtui.runtime.events import RunEnd

    return build_event(RunEnd, dict(seq=view.last_seq + 1, ts=time.time(), run_id=view.run_id, node_id=None,
                                    parent_id=None, origin="flowtui", status=status, output=None,
                                    error=why if status == "failed" else None,
                                    reason=why if status != "failed" else None, duration_ms=0.0))
