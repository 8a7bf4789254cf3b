"""The worker: the process a run lives in, serving the protocol (:mod:`flowtui.runtime.protocol`).

    python -m flowtui.runtime.worker FLOW[:Class] [--journal FILE] [--model M] ...   # on its pipes
    flowtui run FLOW --listen 127.0.0.1:0                                            # on a socket

It loads the flow, says ``hello`` (or ``load.error`` and exits 2), starts the
run when told (``start``) and sends every event; it answers every command.
The flow's code runs inline here, on this process's event loop: a hook, a
tool or ``until`` that loops, blocks, exits or crashes takes this process
down, never the app.

- On its pipes, the protocol goes out on a private copy of stdout; what the
  flow prints goes to stderr, which the client reads.
- ``STOP_SIGNAL`` (the client's stop, when a cooperative ``stop`` did not
  reach a pause point within the grace period) raises :class:`~flowtui.runtime.control.Terminated`
  inside whatever code is running, so the run still ends with ``run.end``
  (``stopped (killed after 1.0 s: tool fetch did not return (at flows/f.py:12 in fetch))``). ``SIGTERM``
  from anything else unwinds it the same way, and the run ends ``failed``
  (``the flow process received SIGTERM``).
- ``SIGINT`` is the client's business on pipes (ignored here); listening, the
  first stops the run cooperatively and the second terminates it.
- Exit codes: 0 the run finished or was stopped, 1 it failed, 2 the flow
  could not be loaded.
- The pipe out closes when the last ``atexit`` handler has run (every other
  one, the flow's and its libraries', before it): the client then knows the
  rest is the interpreter's teardown (over a second of it with litellm
  loaded), which it need not wait for.
"""

from __future__ import annotations

import atexit

# Registered before any library this process imports registers its own: atexit runs them last
# registered first, so this one runs after all of them (see ``Outbox.close``).
_at_the_very_end: list[Callable[[], None]] = []
atexit.register(lambda: [last() for last in _at_the_very_end])
_exit_code: list[int] = []  # once the run's process is on its way out: its exit code

import argparse  # noqa: E402 (after the registration above, on purpose)
import asyncio
import contextlib
import errno
import os
import select
import signal
import sys
import threading
import time
import traceback
from typing import Any, Callable

from flowtui.runtime import protocol as p
from flowtui.runtime.control import Controller, Signalled, Terminated
from flowtui.runtime.errors import ConfigError, WatchError, user_frame
from flowtui.runtime.observe import state_fields
from flowtui.runtime.encoding import encode_event
from flowtui.runtime.inert import visible
from flowtui.runtime.invoke import awaited_code, running_code
from flowtui.runtime.construct import copy_with
from flowtui.runtime.secrets import Redactor, StreamRedactor, redact_data
from flowtui.runtime.sender import Owed
from flowtui.runtime.spawn import EXIT_FD_CLOSED, LINE_MAX, STOP_SIGNAL, UNSTARTED, WHOLE_LINE_MAX

DEFAULT_GRACE_S = 1.0
ELIDED_KEPT = 256 << 20  # characters of values cut on the wire kept for fetch (the latest)

START_CWD = os.getcwd()  # the folder the run's process started in (the flow's import may change it)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m flowtui.runtime.worker",
                                     description="Run one flow and serve the flowtui protocol on stdin/stdout.")
    parser.add_argument("flow")
    parser.add_argument("--model")
    parser.add_argument("--replies")
    parser.add_argument("--record")
    parser.add_argument("--replay")
    parser.add_argument("--journal", help="append the run's events to this file")
    parser.add_argument("--breakpoint", action="append", default=[])
    parser.add_argument("--snapshot", help="start the run from this TOML snapshot")
    parser.add_argument("--debug", action="store_true", help="print a failed run's traceback on stderr")
    parser.add_argument("--wire-limit", type=int, default=p.WIRE_LIMIT,
                        help="cut strings longer than this on the way to the client (0: never)")
    parser.add_argument("--grace", type=float, default=DEFAULT_GRACE_S,
                        help="how long the client waits for a stop before terminating (said in run.end)")
    return parser


class Worker:
    """One loaded flow and its run, driven by commands."""

    def __init__(self, app: Any, *, journal: str | None, breakpoints: list[str], grace: float,
                 send: Callable[[bytes, bool], None], snapshot: str | None = None,
                 wire_limit: int | None = p.WIRE_LIMIT, debug: bool = False) -> None:
        self.app = app
        self.debug = debug
        self.dispose_after = True  # the app's middlewares are disposed when the run ends (the process's last)
        self.also: Callable[[Any], None] | None = None  # another sink of the run's events (embedded use)
        self.journal = journal
        self.snapshot = snapshot
        self.wire_limit = wire_limit or None
        self.grace = grace
        self.send = send  # send(line, at_once): a slow client slows the run down
        self.owed = Owed()  # token counts still being made, per client (served: its detach waits for them)
        self.redactor = Redactor.from_environment()
        self._streams: dict[str | None, StreamRedactor] = {}  # chat node -> the reply streaming in there
        self.controller = Controller(start_paused=True, breakpoints=breakpoints)
        state = app.plans.new_state()  # the fields a watchpoint may name, before the run exists
        self.controller.watch.describe(app.workflow, state_fields(state) if state is not None else None)
        self.run: Any = None
        self.task: asyncio.Task | None = None
        self.elided: dict[tuple[int, str], str] = {}  # (seq, path) -> a value cut on the wire, the latest ELIDED_KEPT
        self.elided_chars = 0  # characters in all in self.elided, each value once
        self._held: dict[str, list[Any]] = {}  # a value in self.elided -> [it, how many (seq, path) hold it]
        self.elided_gone: set[tuple[int, str]] = set()  # the (seq, path) of those let go since
        self.stop_asked: float | None = None  # when the first stop came (a forced stop says how long it waited)
        self.stop_reason: str | None = None  # and why, when it said (the app's SIGTERM): a forced stop says it too
        self.backlog: Any = None  # every event line, for clients that attach later (Lines: set by a Listener)
        self.started = asyncio.Event()
        self.counting: set[asyncio.Task] = set()  # count commands being answered

    # --- output --------------------------------------------------------------------------
    def hello(self) -> p.Hello:
        from flowtui.runtime.middleware import layers
        from flowtui.runtime.plans import load_notes

        plans = self.app.plans
        tools = sorted({name for t in plans.tool_specs.values() for name in t.names})
        agents = [s.name for s in plans.agent_specs.values()]
        known = {*agents, *tools, *_loop_names(plans.spec.steps)}
        notes = load_notes(plans, model=self.app.model, replies=self.app.replies) + [
            f"breakpoint {name}: no agent, tool or loop of {self.app.workflow.name} is called that (it stays set: "
            "a child workflow's may be)" for name in sorted(self.controller.breakpoints - known)]
        return p.Hello(workflow=self.app.workflow.name, file=self.app.workflow.file, agents=agents, tools=tools,
                       pid=os.getpid(), started=self.run is not None, notes=notes,
                       breakpoints=self._redacted(sorted(self.controller.breakpoints)),
                       watches=self._redacted(list(self.controller.watch.texts)),
                       model_middlewares=[name for name, _ in layers(self.app.middlewares, "model")])

    def on_event(self, event: Any) -> None:
        if self.also is not None:
            self.also(event)
        if event.type in _STREAM_EVENTS:
            event = self._streamed(event)
        kept: dict[str, str] = {}
        line = encode_event(event, self.redactor, limit=self.wire_limit, kept=kept) + b"\n"
        # a client leaves out a longer line (and waited for ever for a run.end it never got): its values cut
        # (cut already: harder, for a line of many values each under the limit); one of millions of numbers
        # that still does not fit is left out, and said
        cap, limit = (LINE_MAX, self.wire_limit // 16) if self.wire_limit is not None \
            else (WHOLE_LINE_MAX, p.WIRE_LIMIT)
        while len(line) > cap and limit >= 16:
            kept.clear()
            line = encode_event(event, self.redactor, limit=limit, kept=kept) + b"\n"
            limit //= 16
        if kept:
            self._keep_elided(event.seq, kept)
        if self.backlog is not None:
            self.backlog.append(line)
        self.send(line, event.type in _AT_ONCE)

    def _keep_elided(self, seq: int, kept: dict[str, str]) -> None:
        """Keep what ``seq`` lost on the wire for ``fetch``: the latest ELIDED_KEPT characters of such values (a
        value edited 300 times held 300 copies: the worker grew by gigabytes while the run's state did not)."""
        for path, value in kept.items():
            # a value the run carries in several events (a 70 MB tool result: its message, ctx.turn, ctx.output,
            # run.end) is held, and counted, once: counted each time, it let go of its own first copy
            held = self._held.setdefault(value, [value, 0])
            if held[1] == 0:
                self.elided_chars += len(value)
            held[1] += 1
            self.elided[(seq, path)] = held[0]
        while self.elided_chars > ELIDED_KEPT and len(self.elided) > 1:
            oldest = next(iter(self.elided))
            held = self._held[self.elided.pop(oldest)]
            held[1] -= 1
            if held[1] == 0:
                del self._held[held[0]]
                self.elided_chars -= len(held[0])
            self.elided_gone.add(oldest)

    def _streamed(self, event: Any) -> Any:
        """A reply streamed in pieces reaches the app redacted as a whole would be: a credential split
        over pieces was sent a piece at a time, each too short to be found (StreamRedactor)."""
        if event.type != "chat.delta":  # a retry streams anew; the node's end: the whole reply follows
            self._streams.pop(event.node_id, None)
            return event
        self.redactor.refresh()
        if not self.redactor.values:
            return event
        stream = self._streams.get(event.node_id)
        if stream is None:
            stream = self._streams[event.node_id] = StreamRedactor()
        text = stream.feed(event.text, self.redactor.values)
        return event if text == event.text else copy_with(event, {"text": text})

    def pause_for_next(self) -> None:
        """A client of a served run left: the run pauses at its next pause point for the next one."""
        if not self.run_over():
            self.controller.pause()

    def reply(self, command: Any, error: str | None = None, value: Any = None, *, to: Any = None) -> None:
        """Answer ``command``; ``to``: the sender of the client that sent it (one answered later). What an error
        quotes of the command is shown inert, credentials redacted (``no run 'sk-...'`` was sent back whole)."""
        if error is not None:
            error = visible(self.redactor.redact(error))
        (to or self.send)(p.encode(p.Reply(id=command.id, ok=error is None, error=error, value=value)), True)

    # --- the run -------------------------------------------------------------------------
    def start(self, input: Any, memory: Any, *, data: Any = None, paused: bool = True,
              journal: str | None = None, approve: list[str] = (), watch: list[str] = (),
              on_watch: str = "pause", resume_from: Any = None, on_divergence: str = "stop",
              resume_run: str | None = None, **options: Any) -> None:
        try:
            self.controller.watch.add_all(watch)
        except WatchError as exc:  # they come from the command line: say so (the reply says which one)
            raise ConfigError(exc.render("--watch: ")) from exc
        self.controller.on_watch = on_watch  # type: ignore[assignment]
        if not paused:
            self.controller.resume()
        self.controller.approve.update(approve)
        journal = journal or self.journal
        if journal:  # where the run started, whatever folder the flow's import moved to
            journal = os.path.join(START_CWD, journal)
        snapshot = self.snapshot
        if os.getcwd() != START_CWD:  # the same for the files named to start from (said as given, unless moved)
            resume_from = resume_from and os.path.join(START_CWD, resume_from)
            snapshot = snapshot and os.path.join(START_CWD, snapshot)
        if resume_from is not None and resume_run is not None:  # that run of the journal, not its last one
            from flowtui.runtime.recorded import load_recorded

            resume_from = load_recorded(resume_from, run_id=resume_run)
        self.run = self.app.prepare(input, memory=memory or None, data=data, journal=journal,
                                    controller=self.controller, on_event=self.on_event, snapshot=snapshot,
                                    resume_from=resume_from, on_divergence=on_divergence, **options)
        self.task = asyncio.ensure_future(self._execute())
        self.started.set()

    async def _execute(self) -> None:
        try:
            await self.run.execute()
        except BaseException as exc:  # the run's end (run.end) already says how and why
            if self.debug and self.run.status == "failed":
                tb = "".join(traceback.format_exception(exc)).rstrip()
                print(visible(self.redactor.redact(tb)), file=sys.stderr, flush=True)
        for name, exc in await self.app.dispose_all() if self.dispose_after else ():  # said, not fatal
            print(visible(self.redactor.redact(f"! {name} raised: {type(exc).__name__}: {exc}")),
                  file=sys.stderr, flush=True)
        if self.run.recorded is not None:  # said on stderr: the client shows it
            from flowtui.runtime.files import written_note

            verb, where = self.run.recorded
            print(written_note("cassette", verb, self.app.recording.path, where, self.run.status), file=sys.stderr,
                  flush=True)

    @property
    def exit_code(self) -> int:
        return 1 if self.run is not None and self.run.status == "failed" else 0

    # --- commands ------------------------------------------------------------------------
    def unsent(self) -> int:
        """Bytes of commands handed on and not applied yet: none, each is applied as it is handled."""
        return 0

    def unanswered(self) -> int:
        """Commands handled and not answered yet: the counts of tokens on their way."""
        return len(self.counting)

    def handle(self, command: Any) -> None:
        """Apply one command and answer it (an edit's refusal is an answer, not a failure)."""
        if command.type == "count":  # answered when counted: a tokenizer may take seconds to load
            self.owed.owe(self.send)
            task = asyncio.ensure_future(self._count(command, self.send))
            self.counting.add(task)
            task.add_done_callback(self.counting.discard)
            return
        try:
            value = self._apply(command)
        except (Terminated, Signalled) as exc:  # code making the run (a provider factory) never returned
            if command.type != "start":
                raise
            where = user_frame(exc)
            what = "stopped before the run started" if isinstance(exc, Terminated) else str(exc)
            self.reply(command, error=f"{what}: {UNSTARTED} did not return{f' (at {where})' if where else ''}")
            return
        except Exception as exc:  # the reason goes back to the client; the run goes on
            self.reply(command, error=str(exc) or type(exc).__name__, value=self._redacted(watch_refusal(exc)))
            return
        # what an edit made, the breakpoints and watchpoints set: what a client typed, a credential too, comes
        # back as the events say it (a fetched value is redacted already, and may be megabytes)
        self.reply(command, value=value if command.type == "fetch" else self._redacted(value))

    def _redacted(self, value: Any) -> Any:
        self.redactor.refresh()
        return redact_data(value, self.redactor.values) if self.redactor.values and value is not None else value

    async def _count(self, c: Any, to: Any) -> None:
        try:
            self.reply(c, **await self._counted(c), to=to)
        finally:
            self.owed.paid(to)

    async def _counted(self, c: Any) -> dict[str, Any]:
        from flowtui.runtime.tokens import count_shown

        if self.run is not None and c.run_id is not None and c.run_id not in self.run.runs:
            return {"error": f"no run {c.run_id!r} in this run (its own, or one of its child workflows)"}
        try:
            counted = await count_shown(self.run, c.run_id) if self.run is not None else None
        except Exception as exc:  # the provider could not count: said, and the estimates stay
            return {"error": f"{type(exc).__name__}: {exc}"}
        return {"value": None if counted is None else counted.model_dump()}

    def _apply(self, c: Any) -> Any:
        kind = c.type
        if kind in ("auth", "detach"):
            raise ValueError(f"{kind} is for a client on a socket (flowtui run --listen); the worker's own pipes "
                             "need none")
        if kind == "start":
            if self.run is not None:
                raise ValueError("the run has started already")
            self.start(c.input, c.memory, data=c.data, paused=c.paused, journal=c.journal, approve=c.approve,
                       watch=c.watch, on_watch=c.on_watch, resume_from=c.resume_from,
                       on_divergence=c.on_divergence, resume_run=c.resume_run)
            return None
        if kind == "watch":
            if c.expr is not None:
                (self.controller.watch.add if c.on else self.controller.watch.remove)(c.expr)
            return self.controller.watch.texts
        if kind == "breakpoint":
            if c.on:
                self.controller.breakpoints.add(c.name)
            else:
                self.controller.breakpoints.discard(c.name)
            return sorted(self.controller.breakpoints)
        if kind == "fetch":
            value = self.elided.get((c.seq, c.path))
            if value is None:
                where = f", at {c.path}" if c.path else " (a path is needed)"
                if (c.seq, c.path) in self.elided_gone:
                    raise ValueError(f"the value cut at event {c.seq}{where} is no longer kept: the run's process "
                                     f"keeps the latest {ELIDED_KEPT >> 20} Mi characters of cut values; the run's "
                                     "journal, when it has one, holds it whole")
                raise ValueError(f"no value was cut at event {c.seq}{where}")
            return self.redactor.redact(value)
        if self.run is None:
            raise ValueError("the run has not started yet")
        if kind in _MOVES:
            if self.run_over():
                raise ValueError("the run has ended")
            if self.controller.stopping and kind != "stop":  # (a step sent behind a stop: it does not go on)
                raise ValueError("the run is stopping")
            if kind == "stop":  # a run awaiting (a model call) reaches no pause point: cancel what it awaits
                self.controller.stop(c.reason)
                asyncio.get_running_loop().call_later(self.grace / 2, self._cancel, c.reason or "stopped by user")
            else:
                getattr(self.controller, _MOVES[kind])()
            return None
        return self._edit(c)

    def _edit(self, c: Any) -> Any:
        if self.run_over() or self.controller.stopping:  # (told to pause, a client paused in vain)
            raise ValueError(f"the run {'has ended' if self.run_over() else 'is stopping'}: edits apply to a "
                             "paused run")
        if not self.controller.paused:
            raise ValueError("edits apply to a paused run; pause it first (p, or the pause command)")
        edits = self.run.edits_for(c.run_id)
        kind = c.type
        if kind == "promote":
            return edits.promote(c.index, c.text)
        if kind == "edit_message":
            return edits.edit_message(c.index, c.text)
        if kind == "delete_message":
            return edits.delete_message(c.index, with_call=c.with_call)
        if kind == "edit_call":
            return edits.edit_call(c.text)
        if kind == "decide":
            return edits.decide(c.decision, c.reason)
        if kind == "set_item":
            return edits.set_item(c.bucket, c.index, c.text)
        if kind == "delete_item":
            return edits.delete_item(c.bucket, c.index)
        if kind == "add_item":
            return edits.add_item(c.bucket, c.text)
        if kind == "set_field":
            value = edits.set_field(c.name, c.text)
            return None if value is None else repr(value)
        if kind == "undo":
            return edits.undo()
        raise ValueError(f"unknown command {kind!r}")

    def _cancel(self, reason: str) -> None:
        if self.task is not None and not self.task.done():
            what, where = awaited_code(self.task)
            self.task.cancel(f"{reason} after {self.grace / 2:.1f} s ({what or 'what it awaited'} was cancelled"
                             f"{f', at {where}' if where else ''})")

    def run_over(self) -> bool:
        return self.task is not None and self.task.done()


# Never batched: what the client waits on (a pause, the end), and where the flow's own code starts
# and ends (what a crash inside it would otherwise take along unsent; the journal has it anyway).
_AT_ONCE = frozenset({"run.start", "run.pause", "run.resume", "run.end", "node.start", "node.end"})
_STREAM_EVENTS = frozenset({"chat.delta", "chat.attempt", "node.end"})  # what a streamed reply's redaction follows
_MOVES = {"step": "step", "next_turn": "next_turn", "loop_once": "loop_once", "continue": "resume",
          "pause": "pause", "stop": "stop"}


def _loop_names(steps: Any) -> list[str]:
    """The names of the loops among ``steps``, nested ones too (a breakpoint may name one)."""
    from flowtui.runtime.steps import LoopSpec, ParallelSpec

    names = []
    for step in steps:
        if isinstance(step, (LoopSpec, ParallelSpec)):
            names += ([step.name] if isinstance(step, LoopSpec) else []) + _loop_names(step.steps)
    return names


def load(args: argparse.Namespace) -> Any:
    """The flow's App, or a :class:`~flowtui.runtime.protocol.LoadError` saying why not."""
    from flowtui.runtime.errors import FlowLoadError, FlowtuiError, OptionError
    from flowtui.runtime.loader import load_flow

    redactor = Redactor.from_environment()

    def error(message: str, exc: BaseException | None = None, **where: Any) -> p.LoadError:
        tb = "".join(traceback.format_exception(exc)) if exc is not None else None
        return p.LoadError(message=redactor.redact(message), traceback=redactor.redact(tb) if tb else None, **where)

    try:
        return load_flow(args.flow, model=args.model, replies=args.replies, record=args.record, replay=args.replay)
    except FlowLoadError as exc:
        return error(exc.message, exc.__cause__ or exc.__context__ or exc, file=exc.file, line=exc.line, cls=exc.cls,
                     choices=[redactor.redact(name) for name in exc.choices])
    except OptionError as exc:  # a bad --replies or cassette file: the flow was not imported
        return error(str(exc), option=exc.option, file=exc.file)
    except FlowtuiError as exc:
        return error(str(exc))
    except SystemExit as exc:
        return error(f"the flow called sys.exit({exc.code!r}) while it was being imported; a flow file "
                     "must only define its workflow", exc, file=args.flow)
    except BaseException as exc:  # KeyboardInterrupt, MemoryError... while importing
        return error(f"{type(exc).__name__} while importing: {exc}", exc, file=args.flow)


SIGNAL_LATE_S = 0.05  # a stop noted less than this before its signal was handled was read late


def install_terminate(grace: float, run_task: Callable[[], asyncio.Task | None],
                      stop_asked: Callable[[], float | None] = lambda: None,
                      stop_reason: Callable[[], str | None] = lambda: None) -> None:
    """``STOP_SIGNAL`` (the client's) and ``SIGTERM`` (anyone's) unwind whatever code is running, so
    the run still ends with ``run.end``: stopped, or failed saying which signal ended it. ``run_task``:
    the run's task, cancelled with the signal as its cause when no code of the run is running (it is
    paused, or awaits a model), so its end says the same."""
    def terminate(signum: int, frame: Any) -> None:
        if _exit_code:  # the run is over: what holds the process is the flow's own threads, at exit
            _end_with_threads_running(_exit_code[0])
        now = time.monotonic()
        asked = stop_asked()  # (the client may not wait the whole grace: the app's q does not)
        # A stop read only now (or not yet): the code held the interpreter the whole grace (a regex
        # backtracking in C), so the command reader could not note when the stop came; the client
        # signals once its grace has passed.
        waited = grace if asked is None or now - asked < SIGNAL_LATE_S else now - asked
        why = stop_reason()
        task = run_task()
        if _idle() and task is not None and not task.done():  # the run awaits: a model call, an async tool
            what, where = awaited_code(task)
            said = f"killed after {waited:.1f} s: {what or 'the model call or async tool it awaited'} did not return"
            task.cancel(f"{why} ({said}{f', at {where}' if where else ''})" if why
                        else f"{said}{f' (at {where})' if where else ''}")
            return
        what, where = running_code(frame)
        said = f"killed after {waited:.1f} s: {what} did not return"
        raise Terminated(f"{why} ({said}{f', at {where}' if where else ''})" if why
                         else f"{said}{f' (at {where})' if where else ''}")

    def terminated_elsewhere(signum: int, frame: Any) -> None:
        why = Signalled(f"the flow process received {signal.Signals(signum).name} (not from flowtui)")
        task = run_task()
        if _idle() and task is not None and not task.done():
            task.cancel(why)
            return
        raise why

    signal.signal(STOP_SIGNAL, terminate)
    signal.signal(signal.SIGTERM, terminated_elsewhere)


def _end_with_threads_running(code: int) -> None:
    """Python waits at exit for every thread that is no daemon; one the flow started that never ends
    held the process after its run, and the client's stop, landing in that wait, printed a traceback
    ("Exception ignored in: <module 'threading'>", "killed after 1.0 s: a tool or hook did not return")
    that said nothing true. The run has ended and said so: the process ends, saying which threads."""
    names = [t.name for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()]
    said = ", ".join(names[:5]) + (f" and {len(names) - 5:,} more" if len(names) > 5 else "")
    print(f"flowtui: the flow's thread{'s' * (len(names) != 1)} {said} still ran after the run "
          "ended; ended with the run's process", file=sys.stderr, flush=True)
    for last in _at_the_very_end:
        last()
    os._exit(code)


def _idle() -> bool:
    """Whether a signal came while no code of the run was running (its loop waits on I/O or a timer)."""
    try:
        return asyncio.current_task() is None
    except RuntimeError:  # no event loop (loading the flow)
        return False


def main(argv: list[str] | None = None) -> int:
    """The worker on its pipes: the protocol on stdin and (a private copy of) stdout."""
    args = build_parser().parse_args(argv)
    # Started with -P: the folder the run starts in was left off the front of the import path, where a
    # json.py in it would shadow the standard library. At the end, the flow may still import the
    # project it is run from, as `python -m` allowed.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    out_fd, in_fd = os.dup(1), os.dup(0)  # the protocol's pipes, on numbers of their own
    os.dup2(2, 1)  # what the flow prints goes to stderr, never into the protocol
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    null = os.open(os.devnull, os.O_RDONLY)  # what the flow reads (input()) is nothing, never a command
    os.dup2(null, 0)
    os.close(null)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker: Worker | None = None
    install_terminate(args.grace, lambda: worker.task if worker is not None else None,
                      lambda: worker.stop_asked if worker is not None else None,
                      lambda: worker.stop_reason if worker is not None else None)

    send = Outbox(out_fd)
    _at_the_very_end.append(send.close)

    def forked() -> None:  # a process the flow forked is not the worker: it sends nothing, a signal ends it
        send.drop()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(STOP_SIGNAL, signal.SIG_DFL)
        for fd in (out_fd, in_fd):
            os.close(fd)

    os.register_at_fork(after_in_child=forked)
    loaded = threading.Event()
    threading.Thread(target=_end_if_orphaned_while_loading, args=(in_fd, loaded), name="flowtui-loading",
                     daemon=True).start()
    try:  # until hello is sent, the commands are not read: a client that goes is seen by the watcher
        app = load(args)
        if isinstance(app, p.LoadError):
            send(p.encode(app), True)
            return 2
        # (the state class is made here, and its code may never return: a loop in its __getattribute__)
        worker = Worker(app, journal=args.journal, breakpoints=args.breakpoint, grace=args.grace, send=send,
                        snapshot=args.snapshot, wire_limit=args.wire_limit, debug=args.debug)
        send(p.encode(worker.hello()), True)
    finally:
        loaded.set()
    try:
        asyncio.run(_serve_pipe(worker, in_fd))
    except (Terminated, Signalled):
        pass
    except OSError as exc:  # the flow closed a descriptor of this process's own (its event loop's, its pipes)
        if exc.errno != errno.EBADF:
            raise
        with contextlib.suppress(OSError):  # (stderr may be one of those it closed)
            print(f"flowtui: the flow closed a file descriptor the run's process uses ({exc}); it cannot go on",
                  file=sys.stderr)
        return EXIT_FD_CLOSED
    finally:
        try:
            send.flush()
        except OSError:  # the pipe itself was closed: nothing can be sent
            pass
    return worker.exit_code


class Outbox:
    """The protocol's way out on a pipe: lines gathered and written a batch at a time.

    A flood of events then costs one write per 64 KiB instead of one per event. What a client
    waits on (a reply, a pause, the run's end) goes out at once, and nothing waits longer than
    ``FLUSH_S``: a thread flushes, even while the flow's code holds the event loop. A slow client
    blocks the write, and so the run: the app is never flooded beyond what it can read.
    """

    FLUSH_S = 0.005
    BATCH = 1 << 16

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending = bytearray()
        self._lock = threading.Lock()
        self._dropped = False
        threading.Thread(target=self._flusher, name="flowtui-outbox", daemon=True).start()

    def drop(self) -> None:
        """Send nothing from now on (in a process the flow forked; its lock may be held by a
        thread that does not exist there)."""
        self._dropped = True

    def __call__(self, data: bytes, at_once: bool = False) -> None:
        if self._dropped:
            return
        with self._lock:
            self._pending += data
            if at_once or len(self._pending) >= self.BATCH:
                self._write()

    def flush(self) -> None:
        if self._dropped:
            return
        with self._lock:
            self._write()

    def close(self) -> None:
        """Send what is left and close the pipe: nothing of this process's Python code runs after
        (atexit's last handler calls this), so the client need not wait for its exit."""
        if self._dropped:  # (a forked process: the pipe is not its own)
            return
        try:
            self.flush()
        except OSError:
            pass
        self._dropped = True
        with contextlib.suppress(OSError):  # the flow closed it already (os.closerange in a tool)
            os.close(self._fd)

    def _write(self) -> None:
        view = memoryview(self._pending)
        while view:
            view = view[os.write(self._fd, view):]
        self._pending = bytearray()

    def _flusher(self) -> None:
        while True:
            time.sleep(self.FLUSH_S)
            if self._pending:
                try:
                    self.flush()
                except OSError:  # the client is gone: nothing to write to
                    return


async def _serve_pipe(worker: Worker, in_fd: int) -> None:
    loop = asyncio.get_running_loop()
    _wake_on_signals(loop)
    gone = asyncio.Event()
    # Commands are read by a thread: while the flow's code holds the event loop (a sync tool), a
    # pause or stop still arrives, and takes effect at the very next pause point. Buffered: a line is
    # had as soon as its newline arrives all the same, and a long one (an edit's text) is read in
    # blocks, not a byte a call (0.7 s a megabyte).
    reader = threading.Thread(target=_read_commands, args=(worker, os.fdopen(in_fd, "rb"), loop, gone),
                              name="flowtui-commands", daemon=True)
    reader.start()
    started = asyncio.ensure_future(worker.started.wait())
    left = asyncio.ensure_future(gone.wait())
    try:
        await asyncio.wait([started, left], return_when=asyncio.FIRST_COMPLETED)
        if worker.task is None:  # the client went away before `start`
            return
        await asyncio.wait([worker.task, left], return_when=asyncio.FIRST_COMPLETED)
        if not worker.task.done():  # the client went away without a stop: stop the run cleanly, saying so
            worker.controller.stop("its client went away (flowtui was closed or killed) before the run ended")
            await worker.task
        await left  # the run is over; what it cut on the wire can still be fetched until the client goes
    finally:
        started.cancel()
        left.cancel()


def _wake_on_signals(loop: asyncio.AbstractEventLoop) -> None:
    """A signal that another thread receives (the command reader's) still wakes the event loop while
    it waits, so the handler (run by the main thread) ends a paused or awaiting run at once."""
    r, w = os.pipe()
    for fd in (r, w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    loop.add_reader(r, lambda: os.read(r, 512))


def _read_commands(worker: Worker, stream: Any, loop: asyncio.AbstractEventLoop, gone: asyncio.Event) -> None:
    """In a thread: each command line, parsed here, applied on the loop."""
    try:
        for line in stream:
            if not line.strip():
                continue
            try:
                command = p.parse_command(line)
            except (ValueError, RecursionError) as exc:  # not a command: refused, and the reading goes on
                loop.call_soon_threadsafe(worker.send, p.encode(p.refusal(line, exc)))
                continue
            if command.type == "stop" and worker.stop_asked is None:  # when it came, not when the loop is free
                worker.stop_asked, worker.stop_reason = time.monotonic(), command.reason
            loop.call_soon_threadsafe(worker.handle, command)
    except (OSError, ValueError):
        pass
    finally:
        try:
            loop.call_soon_threadsafe(gone.set)
        except RuntimeError:  # the loop is closed: the worker is ending anyway
            pass
        _orphaned(worker)


def watch_refusal(exc: BaseException) -> dict[str, Any] | None:
    """A refused watchpoint, for the reply's ``value``: which one, where, what, and what to do."""
    cause = exc if isinstance(exc, WatchError) else exc.__cause__
    if not isinstance(cause, WatchError):
        return None
    expr, column = cause.shown_at()  # (its message says the column as typed)
    return {"expr": expr, "column": column, "message": cause.message, "hint": cause.hint}


ORPHANED_IMPORT_S = 2.0  # an import still going this long after its client left is ended


def _end_if_orphaned_while_loading(in_fd: int, loaded: threading.Event) -> None:
    """While the flow is imported, the commands are not read yet: if the client goes (ctrl-C, killed)
    and the import does not end soon after (one that never ends, say), this process ends, having run
    nothing of the run. An import that ends goes on as usual: the run's process sees its client gone."""
    poller = select.poll()
    poller.register(in_fd, 0)  # hang-ups only: a command that comes early stays unread for the reader
    while not loaded.is_set():
        if poller.poll(200) and not loaded.wait(ORPHANED_IMPORT_S):
            os.killpg(os.getpgrp(), signal.SIGKILL) if os.getpgrp() == os.getpid() else os._exit(1)


def _orphaned(worker: Worker) -> None:
    """The client is gone (its end of our stdin closed): the run was told to stop; if code that never
    returns holds it, unwind that code, and if even that fails, leave, the journal ended first (no
    client is left to end it). A worker never outlives its client by more than a few seconds, whatever
    the flow does."""
    time.sleep(2 * worker.grace)
    os.kill(os.getpid(), STOP_SIGNAL)
    time.sleep(2 * worker.grace)
    run = worker.run
    if run is not None and run.status == "running" and run.journal is not None:
        from flowtui.runtime.journal import ended_by_flowtui

        # (the run's code still holds its loop and may hold its stream: written to the journal alone)
        with contextlib.suppress(Exception):
            run.journal(ended_by_flowtui(run.id, run.emitter.stream.last_seq + 1, "stopped",
                                         "its client went away, and the run's code did not return: its process "
                                         f"was ended after {4 * worker.grace:.1f} s"))
    os._exit(1)


def _stdout_closed_by_the_flow() -> None:
    """What the flow printed after closing this process's stdout (``os.close(1)`` in a tool) is dropped at
    exit, rather than said as an "Exception ignored" traceback when Python flushes it."""
    try:
        os.fstat(1)
    except OSError:
        fd = os.open(os.devnull, os.O_WRONLY)
        if fd != 1:
            os.dup2(fd, 1)
            os.close(fd)


if __name__ == "__main__":
    _exit_code.append(main())
    _stdout_closed_by_the_flow()
    sys.exit(_exit_code[0])

