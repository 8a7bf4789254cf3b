"""Re-executing a run against its journal: a checked prefix, then live.

    flowtui run flows/revisao.py --resume-from .flowtui/runs/RevisaoWorkflow-20250101-120000.jsonl@40
    await app.run(resume_from="runs/revisao.jsonl@40")

The flow's *current* code runs from the start, with the recorded run's input,
memory and data. Up to event K of the recorded run (its ``seq``; by default
its last event), nothing is asked of the world:

- every model call is answered with the reply the journal holds for it
  (:class:`~flowtui.runtime.serve.ServedProvider` wraps each provider of the run, its child runs'
  too); the provider is told (:meth:`Provider.skip`) so that after K it goes
  on as if it had answered: a ``ScriptedProvider`` at its next reply, a
  replayed cassette at its next exchange;
- every tool call gets the tool's recorded result, and the tool's recorded
  effects on the run (the ``ctx`` fields, workflow-state fields and
  ``ctx.state`` changes it made, its ``ctx.stop()``) are made again, without
  running it (:mod:`flowtui.runtime.serve`). A tool declared ``replay="rerun"`` runs,
  and so does a tool that runs a child workflow (whose own model calls and
  tools are served in turn); what they do is checked like the rest;
- a person's edits and decisions made while the recorded run was paused
  (promote, set_field, deny...) are made again at the same pause point, and a
  stop command stops the run there again; the re-executed prefix itself never
  pauses.

Every event the run emits meanwhile is compared with the recorded one
(:mod:`flowtui.runtime.compare`); at the first mismatch a ``run.diverged``
event says where and what differs (:mod:`flowtui.runtime.divergence`) and,
before anything live happens, the run stops (``on_divergence="stop"``, status
``stopped``; ``flowtui run`` exits 3) or waits at the next pause point
(``"pause"``, the app's choice: continuing goes on live from there). After K
the run is an ordinary live run: paused in the app, running headless. Its
``run.start`` names the journal, the run and K it came from, and its journal
holds the whole run, prefix included.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_core import from_json

from flowtui.runtime.bus import build_event, current_node, current_origin
from flowtui.runtime.compare import IGNORED, PATH, Paths, align, budget_use, comparable, show_path, stopped_again
from flowtui.runtime.control import RunStopped
from flowtui.runtime.divergence import describe, explain, lookup_for
from flowtui.runtime.encoding import encode_event
from flowtui.runtime.errors import ConfigError
from flowtui.runtime.events import (
    Difference, ResumedFrom, RunDiverged, RunEnd, RunPause, RunResume, continues_edit,
)
from flowtui.runtime.recorded import DamagedLine, Recorded, load_recorded, relative_run
from flowtui.runtime.secrets import Redactor, redact_data
from flowtui.runtime.serve import ServedProvider, Server, as_item, set_field

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run

EDITS = frozenset({"state.set", "state.append", "workflow_state.change", "tool.decision"})
# what brings a value into a run (ResumedFrom.redacted counts those holding a credential the journal hid)
_CARRIED = EDITS | {"run.start", "ctx.set"}
_SERVED = ("user", "input", "snapshot", "tool:", "agent:")
REDACTED = b"[redacted]"


class Diverged(RunStopped):
    """Raised at the next unit of work after a re-executed run diverged from its journal
    (``on_divergence="stop"``): the run ends as ``stopped``, before doing anything live."""


@dataclass
class _Edits:
    """What a person did while the recorded run was paused at ``point``: ``count`` edit events
    (from the expected event where this sits), then perhaps the stop command."""

    point: tuple[str, str, str] | None  # (kind, name, relative run id); None: the first pause point there
    count: int = 0
    stop: bool = False
    path: Any = None  # the path the recorded run.pause said, for the stop said again there


class Resume:
    """One re-execution: the recorded run, what was served so far, and the comparison (a sink)."""

    def __init__(self, recorded: Recorded, *, on_divergence: str = "stop") -> None:
        if on_divergence not in ("stop", "pause"):
            raise ConfigError(f"on_divergence is 'stop' or 'pause', not {on_divergence!r}")
        self.recorded, self.at, self.on_divergence = recorded, recorded.at, on_divergence
        self.expected: list[dict[str, Any]] = []  # the recorded events compared, in order
        self.edits: dict[int, _Edits] = {}  # index in expected -> the edits made at a pause just before
        self.stopped_because: str | None = None  # the recorded run's stop, in its end's words (a watchpoint's)
        # the run's time as the recorded run said it (ctx.budget's duration_s), before the expected event at each index
        self._said_at: list[int] = []
        self._said_elapsed: list[float] = []
        self._plan()
        self.i = 0  # the next expected event
        self.checking = True  # in the prefix: events are compared, calls served
        self.diverged: dict[str, Any] | None = None  # the run.diverged fields, once it diverged
        self.again: str | None = None  # the end's reason, once the run reached the recorded run's stop (stop_from)
        self.held = False  # on_divergence="pause": the run has paused since
        self._making = -1  # the index in expected of the recorded edit being made again
        self.made_again = 0  # the recorded edits and decisions made again so far
        self.reason = ""
        self.run: Any = None
        self.controller: Any = None
        self.root_id = ""
        self.server = Server(self)  # the recorded replies and results, served in the prefix
        self.server.check()
        self._paths = (Paths(), Paths())  # recorded, now
        self._gone_on = asyncio.Event()  # set once the run reached pause_at, or did something live
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop a branch waits for it on
        self._advanced: asyncio.Event | None = None  # set as the check moves on (see in_turn), on that loop
        self._approve: set[str] = set()
        self._redactor = Redactor.from_environment()
        self._end_compared = False  # the run's end was compared before it was emitted (see before_end)
        self.cleanups_served = 0  # the cleanups the recorded run's tools registered that were served (not run)

    @classmethod
    def load(cls, source: Any, *, on_divergence: str = "stop") -> "Resume":
        """From ``"JOURNAL[@K]"``, a path, or a :class:`Recorded`; a bad one is a ``ResumeError``."""
        recorded = source if isinstance(source, Recorded) else load_recorded(source)
        return cls(recorded, on_divergence=on_divergence)

    def _plan(self) -> None:
        pause: tuple[str, str, str] | None = None
        paused_on: Any = None  # that pause's path
        group: _Edits | None = None
        # Where the person was at K: the recorded run's pause with nothing after it up to K but their edits
        # there. After the prefix the run pauses there again, not at a pause point the recorded run went past
        # without pausing on its way to it (n: the end of a loop iteration, on the way to the next agent).
        self.pause_at: tuple[str, str, str] | None = None
        self.pause_node: str | None = None  # the node the recorded run was paused in there
        # (run id, loop node) -> its last ctx.loop recorded (by run alone, the second of two loops of a parallel
        # step ending alike, 3 of 3 iterations, was taken for the first's said twice: left out, and diverged)
        loops: dict[tuple[str, Any], Any] = {}
        for ev in self.recorded.events:
            t = ev["type"]
            if budget_use(ev) and not self.recorded.relative(ev["run_id"]) and isinstance(ev.get("value"), dict):
                spent = ev["value"].get("duration_s")  # the run's time, as said before the next event compared
                if isinstance(spent, (int, float)) and not isinstance(spent, bool):
                    if self._said_at and self._said_at[-1] == len(self.expected):
                        self._said_elapsed[-1] = spent
                    else:
                        self._said_at.append(len(self.expected))
                        self._said_elapsed.append(spent)
            if t == "ctx.set" and ev.get("name") == "loop" and ev.get("origin") == "runtime":
                value = ev.get("value")
                if isinstance(value, dict) and value.get("stopped_by") == "exhausted" \
                        and loops.get((ev["run_id"], ev.get("node_id"))) == value:
                    continue  # an older flowtui said an exhausted loop's last ctx.loop twice
                loops[(ev["run_id"], ev.get("node_id"))] = value
            if t == "run.end" and ev.get("status") == "stopped" and isinstance(ev.get("reason"), str) \
                    and not self.recorded.relative(ev["run_id"]):
                self.stopped_because = ev["reason"]
            if t == "run.pause":
                pause, group = (str(ev.get("point")), str(ev.get("name")), self.recorded.relative(ev["run_id"])), None
                paused_on = ev.get("path")
                if ev["seq"] <= self.at:
                    self.pause_at, self.pause_node = pause, ev.get("node_id")
            elif t == "run.resume":
                if ev.get("command") == "stop" and pause is not None:
                    group = group or self.edits.setdefault(len(self.expected), _Edits(pause))
                    group.stop, group.path = True, paused_on
            elif t == "run.end" and ev.get("origin") == "flowtui":
                continue  # written by flowtui for a run whose process died: nothing the code did
            elif t not in IGNORED and not budget_use(ev):
                if ev.get("origin") == "user" and t in EDITS:
                    # (with no pause before them: a re-execution's journal, whose prefix made them again
                    # at a pause point it went past without pausing, the first one at this place)
                    group = group or self.edits.setdefault(len(self.expected), _Edits(pause))
                    group.count += 1
                else:
                    pause, group = None, None
                    if ev["seq"] <= self.at:
                        self.pause_at = None
                self.expected.append(ev)
        self.stop_from = self._stop_began() if self.stopped_because is not None \
            and not self.stopped_because.startswith("stopped by ctx.stop()") else None

    def _stop_began(self) -> int | None:
        """Where the recorded run's stop from outside (ctrl-C, `x` while a tool ran, SIGTERM) shows first: after
        the last node that started, the first event the stop itself wrote (a node ending ``stopped``, a loop
        said stopped). That stop, landing at no pause point, is made again there: a re-execution of unchanged
        code went on and diverged, as if the code had changed. What other branches still did after it (a tool
        that returned) comes after it; the events of the stop's own unwinding (the calls left answered, a
        cleanup's) are not compared."""
        expected = self.expected
        # (a child workflow that ended by its own ctx.stop() or a budget: its ends are its code's, not the stop's)
        own = {ev.get("run_id") for ev in expected if ev.get("type") == "run.end" and ev.get("status") == "stopped"
               and str(ev.get("reason")).startswith(("stopped by ctx.stop()", "budget:"))}
        last_start = max((i for i, ev in enumerate(expected) if ev.get("type") == "node.start"), default=-1)
        for i in range(last_start + 1, len(expected)):
            ev = expected[i]
            value = ev.get("value")
            if ev.get("run_id") in own:
                continue
            if ev.get("type") in ("node.end", "run.end") and ev.get("status") == "stopped" \
                    or ev.get("type") == "ctx.set" and ev.get("name") == "loop" and isinstance(value, dict) \
                    and value.get("stopped_by") == "stopped":
                return i
        return None

    # --- the run's side -----------------------------------------------------------------------
    def recorded_elapsed(self) -> float | None:
        """In the prefix, the run's time as the recorded run said it last before the next event compared (None
        after it: the clock's). A time budget stops the re-execution where it stopped the recorded run."""
        if not self.checking:
            return None
        at = bisect.bisect_right(self._said_at, self.i) - 1
        return self._said_elapsed[at] if at >= 0 else 0.0

    def origin(self) -> ResumedFrom:
        kind, name = self.recorded.before or ("", None)
        # the values the journal brings into the run (a person's edit, the input, a served result or reply; not
        # what the flow's code makes again, nor a request, which only repeats them) that it holds redacted
        lines = self.recorded.lines
        redacted = sum(1 for ev in self.recorded.events if ev["seq"] <= self.at and ev["type"] in _CARRIED
                       and (ev["type"] == "run.start" or str(ev.get("origin")).startswith(_SERVED))
                       and REDACTED in lines.get(ev["seq"], b""))
        return ResumedFrom(journal=self.recorded.path, run_id=self.recorded.run_id, at=self.at,
                           before_tool=name if kind == "tool" else None, before_model=name if kind == "chat" else None,
                           asked=self.recorded.asked, inside_edit=self.recorded.inside_edit,
                           torn=self.recorded.torn,
                           # (one that stops inside a call says which: before_tool, before_model)
                           unended=self.recorded.unended and self.recorded.before is None
                           and self.recorded.asked is None or None,  # (nor one inside an edit: inside_edit)
                           redacted=redacted or None)

    def start_values(self) -> dict[str, Any]:
        """The recorded run's input, memory and data (a re-execution starts from them)."""
        start = self.recorded.start
        return {"input": start.get("input"), "memory": list(start.get("memory") or []),
                "data": dict(start.get("data") or {})}

    def snapshot(self) -> Any:
        """What the recorded run started from when it started from a snapshot (``run.start``'s ``snapshot``):
        its [state], and the tasks and history it set; None otherwise. Its memory and data are the recorded
        run's (:meth:`start_values`)."""
        from flowtui.runtime.snapshot import Snapshot

        seed = self.recorded.start.get("snapshot")
        if not isinstance(seed, dict):
            return None
        state = seed.get("state")
        # (its source as recorded: the re-execution's run.start says the same)
        made = Snapshot(state=dict(state) if isinstance(state, dict) else {}, source=str(seed.get("file")))
        for ev in self.recorded.events[1:]:  # (set right after run.start, before the input joins the history)
            if ev.get("type") != "state.set" or ev.get("origin") != "snapshot":
                break
            if ev.get("bucket") in ("tasks", "history") and isinstance(ev.get("items"), list):
                setattr(made, ev["bucket"], [as_item(ev["bucket"], item) for item in ev["items"]])
        return made

    def wrap(self, inner_wrap: Any) -> Any:
        """The provider wrapper for the run (around the cassette's, when there is one)."""
        return lambda inner: ServedProvider(inner_wrap(inner) if inner_wrap is not None else inner, self.server)

    def attach(self, run: "Run") -> None:
        """Follow ``run``: its events come here (this is its last sink) and its prefix never pauses."""
        self.run, self.root_id, self.controller = run, run.id, run.controller
        if self.controller is None:
            self.on_divergence = "stop"  # nobody to continue it
        else:  # calls waiting for approval: not in the prefix (the recorded decisions are made again)
            self._approve = set(self.controller.approve)
            self.controller.approve.clear()

    @property
    def halted(self) -> bool:
        """The run must do nothing live: it diverged, or it is where the recorded run was stopped."""
        return self.diverged is not None or self.again is not None or self._at_stop()

    def _at_stop(self) -> bool:
        """Every event before the recorded run's stop from outside was made again: what the run does next, the
        recorded run never did (its branches too: the events are compared in the recorded order)."""
        return self.checking and self.stop_from is not None and self.i >= self.stop_from

    def check(self) -> None:
        """Between units of work (``run.gate()``): a diverged run stops here when it should, one at the
        recorded run's stop stops again."""
        if self._at_stop():
            self._stop_again()
        if self.again is not None:
            raise RunStopped(self.again)
        if self.diverged is not None and self.on_divergence == "stop":
            raise Diverged(self.reason)

    def ending(self, status: str, reason: str | None) -> tuple[str, str | None]:
        """How the run ends: a diverged run that went on to its end without doing anything live is stopped."""
        if self.diverged is not None and status == "finished" and (self.on_divergence == "stop" or not self.held):
            return "stopped", self.reason  # (in the app's mode, one no pause came after: at the run's end)
        if self.again is not None and status == "finished":
            return "stopped", self.again
        return status, reason

    async def at_pause(self, run: "Run", kind: str, name: str) -> bool:
        """At a pause point: in the prefix, make the edits a person made here again and go on (True);
        after it, False: the run pauses as a live run does."""
        if self._at_stop() and self.i not in self.edits:  # (a stop a person made here, paused: made again below)
            self._stop_again()
        if not self.checking:
            if self.again is not None:
                raise RunStopped(self.again)
            if self.diverged is not None:
                self.check()  # stopping: never wait for a person after a divergence
                self.held = True
                return False
            if self.pause_at is not None and self.pause_at != (kind, name, relative_run(run.id, self.root_id)):
                if not self._other_branch():
                    return True  # on, to where the person was (nothing live happens before: see __call__)
                # Another branch of a parallel step than the one the person was paused in: it waits until
                # that one is there (it went live, and its model was called, before the pause at K), then
                # pauses here as a live run does.
                self._loop = asyncio.get_running_loop()
                await self._gone_on.wait()
                return False
            self._went_on()
            return False
        here = (kind, name, relative_run(run.id, self.root_id))
        # (a second group right after the first: the recorded run paused here again after its edits, as a fork
        # made after a call's approval was re-made does; its edits were lost, and the re-execution diverged)
        while self.checking and (group := self.edits.get(self.i)) is not None and group.point in (None, here):
            start = self.i
            for self._making in range(start, start + group.count):
                if not self.checking:  # past K (or diverged): the rest is the person's to redo
                    break
                edit = self.expected[self._making]
                self._edit(self._edited_run(edit, run), edit)
            del self.edits[start]  # (after: a divergence in them names the rest, see _edits_left)
            if group.stop and self.checking:  # stopped again where the person (or a watchpoint) stopped it: said
                # so (a watchpoint's words alone said one fired, naming the recorded run's event, and exit 4),
                # and journaled as a pause there and its stop, as the recorded run was: a re-execution of this
                # run's journal stops there too (it went on past it, and diverged)
                path = group.path if isinstance(group.path, list) and all(isinstance(p, str) for p in group.path) \
                    else []
                run.emitter.emit(RunPause, origin="runtime", point=kind, name=name, reason="resumed", path=path)
                run.emitter.emit(RunResume, origin="runtime", command="stop")
                raise RunStopped(stopped_again(self.recorded.path, self.stopped_because))
        if self.controller is not None:
            if self.controller.stopping:
                raise RunStopped()
            await asyncio.sleep(0)  # as a checkpoint does: a command that arrived is seen now
        if not self.checking:  # the prefix ended meanwhile (another branch's event was its last): as after it
            return await self.at_pause(run, kind, name)
        return True

    def edits_at(self, run: "Run", kind: str, name: str) -> bool:
        """In the prefix, the recorded edits next are ones a person made paused at ``kind`` ``name`` of ``run``
        (inside a model call: at the pause after a divergence found in its request)."""
        group = self.edits.get(self.i) if self.checking else None
        return group is not None and group.point == (kind, name, relative_run(run.id, self.root_id))

    @property
    def holds_at_end(self) -> bool:
        """The run's end is a pause point: in the prefix (an edit a person made there is made again), or when
        the pause the person was at is still ahead (a fork there pauses there)."""
        return self.checking or self.pause_at is not None

    def _went_on(self) -> None:
        self.pause_at = None
        loop = self._loop  # (a branch waits for it: the event is set on its loop, from a flow's thread too)
        if loop is not None and not self._gone_on.is_set():
            loop.call_soon_threadsafe(self._gone_on.set)

    async def in_turn(self, node: str) -> None:
        """In the prefix, until the next recorded event is one of recorded node ``node``'s: a served
        reply or tool result comes back when the recorded one did. Served at once, the calls of a
        parallel step's branches that overlapped in the recorded run ended in another order, and the
        re-execution of unchanged code diverged there."""
        while self.checking and not self._at_stop() and self.i < len(self.expected) \
                and self.expected[self.i].get("node_id") != node:
            if self._advanced is None:
                self._loop, self._advanced = asyncio.get_running_loop(), asyncio.Event()
            self._advanced.clear()
            await self._advanced.wait()

    def _moved_on(self) -> None:
        """The check moved on (an event matched, the prefix ended, the run diverged): the calls waiting
        for their turn look again."""
        if self._advanced is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._advanced.set)

    def _other_branch(self) -> bool:
        """Whether the pause point reached (after the prefix) is in another branch of a parallel step than
        the one the recorded run was paused in at K: the innermost node around both is a parallel one.
        (Nodes told apart by what they re-execute, not by their names: two branches may be loops of one
        name. An agent's pause point is in its parent's node, before its own: one directly in a parallel
        step is in a branch of its own, which no node started in the prefix holds.)"""
        mapped = self.server.node_map  # node id now -> the recorded node it re-executes
        here = [mapped.get(node) for node in self._paths[1].chain(current_node.get()[0])]
        there = self._paths[0].chain(self.pause_node)
        if not here or not there or None in here:
            return False
        common = 0
        while common < min(len(here), len(there)) and here[common] == there[common]:
            common += 1
        return common > 0 and self._paths[0].kind_of(there[common - 1]) == "parallel"

    def _edited_run(self, ev: dict[str, Any], paused: "Run") -> "Run":
        """The run a recorded edit was made on: not always the one paused (a person paused in a child
        workflow may edit its parent, and the edit went to the child, which then diverged)."""
        wanted = self.recorded.relative(ev["run_id"])
        return next((r for r in self.run.runs.values() if relative_run(r.id, self.root_id) == wanted), paused)

    def _edit(self, run: "Run", ev: dict[str, Any]) -> None:
        from flowtui.runtime.pending import decide, edited

        token = current_origin.set("user")
        node = current_node.set((None, None))  # a person's edit comes from outside any node, as recorded
        self.made_again += 1
        try:
            t = ev["type"]
            if t == "state.append":
                run.state.append(ev["bucket"], as_item(ev["bucket"], ev["item"]), origin="user", note=ev.get("note"))
            elif t == "state.set":
                run.state.set(ev["bucket"], [as_item(ev["bucket"], x) for x in ev["items"]], origin="user",
                              note=ev.get("note"))
            elif t == "workflow_state.change":
                set_field(run, ev["path"], ev.get("new"), ev.get("note"))
            elif t == "tool.decision" and run.pending is not None:
                pending = run.pending
                if ev.get("decision") == "edited":
                    old = pending.call
                    pending.call = old.model_copy(update={"args": dict(ev.get("args") or {})})
                    edited(run, pending, old, ev.get("reason"))
                else:
                    decide(run, pending, str(ev.get("decision")), ev.get("reason") or "")
        finally:
            current_node.reset(node)
            current_origin.reset(token)

    def tool(self, run: "Run", tspec: Any, execute: Any) -> Any:
        """What ``_run_tool`` calls in place of ``execute`` (:meth:`Server.tool`)."""
        return self.server.tool(run, tspec, execute)

    async def hold(self, kind: str, name: str) -> None:
        """A diverged run is about to do something live: stop it, or pause it once first."""
        if self._at_stop():
            self._stop_again()
        if self.again is not None:
            raise RunStopped(self.again)
        if self.on_divergence == "stop":
            raise Diverged(self.reason)
        if not self.held:
            await self.run.pause(kind, name, inside=True)

    # --- comparing (the run's last sink) ------------------------------------------------------
    def before_end(self, end: dict[str, Any]) -> tuple[str, str | None]:
        """The run's end (``end``: its fields), compared before it is emitted: a divergence there (the recorded
        run did more before its end, or ended otherwise) is said before it, as nothing follows a run's end
        (its run.diverged came after it, and the journal read as a run that never ended). The end's status
        and reason, as a divergence found here leaves them."""
        if self.checking:
            stream = self.run.emitter.stream
            # (its number if a divergence is said first: the report names the end as it will be numbered)
            self(build_event(RunEnd, {**end, "seq": stream.last_seq + 2, "ts": 0.0, "run_id": self.root_id,
                                      "origin": current_origin.get()}))
            self._end_compared = True
        return self.ending(end["status"], end["reason"])

    def __call__(self, event: Any) -> None:
        if event.type in IGNORED or event.type == "ctx.set" and event.name == "budget":  # (see budget_use)
            return
        if self._end_compared and event.type == "run.end" and event.run_id == self.root_id:
            return  # (compared already: before_end)
        if not self.checking:
            self._went_on()  # the run did something past the prefix: it pauses at the next pause point
            return
        try:
            self._check(event)
        except Exception as exc:  # never let a run go on unchecked: a failure to compare is a divergence
            rec = self.expected[self.i] if self.i < len(self.expected) else None
            why = str(exc) if isinstance(exc, DamagedLine) else \
                f"flowtui could not compare this event ({type(exc).__name__}: {exc})"
            new = {"type": event.type, "kind": getattr(event, "kind", None), "name": getattr(event, "name", None),
                   "origin": event.origin}
            self._diverge(rec, rec, new, [Difference(field="comparison", why=why)], now_seq=event.seq)

    def _check(self, event: Any) -> None:
        raw = encode_event(event, self._redactor)  # as the journal writes it (encoded once for both)
        now_run = relative_run(event.run_id, self.root_id)
        now_path = self._paths[1].of({"type": event.type, "node_id": event.node_id, "parent_id": event.parent_id,
                                      "kind": getattr(event, "kind", None), "name": getattr(event, "name", None),
                                      "value": event.value if event.type == "ctx.set" else None})
        if self.i >= len(self.expected):
            new = comparable(from_json(raw), now_run, now_path)
            return self._diverge(None, None, new, [Difference(field="event", why="the recorded run did nothing more")],
                                 now_seq=event.seq)
        rec_raw = self.expected[self.i]
        if event.type == "ctx.set" and _loop_start(event.name, event.value) \
                and not (rec_raw.get("type") == "ctx.set" and _loop_start(rec_raw.get("name"), rec_raw.get("value"))):
            return  # a journal of an older flowtui, which set ctx.loop only as an iteration ended: not in it
        if _failure_answer(event) and not (rec_raw.get("type") == "state.append"
                                           and rec_raw.get("origin") == "runtime"):
            return  # a journal of an older flowtui, which left the calls of a run failed among them unanswered
        rec_run, rec_path = self.recorded.relative(rec_raw["run_id"]), self._paths[0].of(rec_raw)
        # the common case, cheaply: the same place and, after the ids and the time, the same bytes
        payload = _payload(raw)
        same = (payload is not None and rec_run == now_run and rec_path == now_path
                and payload == _payload(self.recorded.lines.get(rec_raw["seq"], b"")))
        if not same:
            new = comparable(from_json(raw), now_run, now_path)
            rec = comparable(self.recorded.full(rec_raw), rec_run, rec_path)
            if rec != new:
                align(rec, new)
            if rec != new:  # a journal written elsewhere may hold a credential its writer did not know: hidden
                self._redactor.refresh()
                rec = redact_data(rec, self._redactor.values)  # now too, it is no difference
            if rec != new:
                if self.stop_from is not None and self.i >= self.stop_from:
                    return self._stop_again()
                found = explain(rec, new, lookup_for(self.run)) or [Difference(field="event")]
                return self._diverge(rec_raw, rec, new, found, now_seq=event.seq)
        if event.type == "node.start":
            self.server.node_map[event.node_id] = rec_raw["node_id"]
        self.i += 1
        if self.i >= len(self.expected) or self.expected[self.i]["seq"] > self.at \
                or self._fewer_cleanups(event, rec_raw):
            self._end_prefix()
        self._moved_on()

    def _fewer_cleanups(self, event: Any, rec_raw: dict[str, Any]) -> bool:
        """The run's steps are over, and the recorded run had more cleanups to run than this one, by the ones
        its served tools registered: a served tool is not run, so neither is a cleanup it registered, and what
        that one did (a memory item, a field, a child workflow) would never come again. The cleanups are not
        compared (every re-execution of such a run diverged there): they run as this run registered them. A
        difference the served tools do not account for (the code registers otherwise) is compared, as ever."""
        if not self.cleanups_served or event.type != "node.end" or event.kind != "workflow" \
                or event.run_id != self.root_id:
            return False
        now, recorded = event.data.get("cleanups"), (self.recorded.full(rec_raw).get("data") or {}).get("cleanups")
        return type(now) is int and type(recorded) is int and now + self.cleanups_served == recorded

    def _stop_again(self) -> None:
        """The run goes on where the recorded run was stopped from outside: it stops there again, before doing
        anything live (at the next unit of work), saying so as a stop made again at a pause point does."""
        self.checking = False
        self.again = stopped_again(self.recorded.path, self.stopped_because)
        self._moved_on()
        self._give_back_approvals()

    def _end_prefix(self) -> None:
        self.checking = False
        self._give_back_approvals()
        if self.controller is not None:
            self.controller.resumed()

    def _give_back_approvals(self) -> None:
        if self.controller is not None and self._approve:
            self.controller.approve.update(self._approve)
            self._approve = set()

    def diverge_at(self, end: dict[str, Any], difference: Difference, *, recorded: str, current: str) -> None:
        path = show_path(self._paths[0].of(end))
        self._report(dict(at=end["seq"], now=None, path=path, recorded=recorded, current=current,
                          differences=[difference]))

    def _diverge(self, rec_raw: dict[str, Any] | None, rec: dict[str, Any] | None, new: dict[str, Any] | None,
                 differences: list[Difference], *, now_seq: int | None) -> None:
        seq = rec_raw["seq"] if rec_raw is not None else self.recorded.last
        path = show_path((rec or new or {}).get(PATH) or ())
        self._report(dict(at=seq, now=now_seq, path=path, recorded=describe(rec), current=describe(new),
                          differences=differences))

    def _report(self, fields: dict[str, Any]) -> None:
        self.checking = False
        self._moved_on()
        self._give_back_approvals()
        action = "paused" if self.on_divergence == "pause" else "stopped"
        self.diverged = {**fields, "action": action, "journal": self.recorded.path,
                         "edits_not_made": self._edits_left()}
        where = f" ({fields['path']})" if fields["path"] else ""
        self.reason = f"diverged from {self.recorded.path} at event #{fields['at']}{where}"
        self.run.emitter.emit(RunDiverged, origin="runtime", **self.diverged)
        if action == "paused":
            self.controller.pause(reason="diverged")

    def _edits_left(self) -> list[str]:
        """The person's edits up to K not yet made again (continuing live after a divergence dropped
        them in silence: only a diff of the two journals showed them gone), each as its note says it;
        when one being made again diverged, the ones after it."""
        left = []
        for index in sorted(self.edits):
            first = max(index, self.i, self._making + 1)
            for ev in self.expected[first:index + self.edits[index].count]:
                if ev["seq"] <= self.at and not continues_edit(ev):
                    left.append(_said(ev))
        return left


def _loop_start(name: Any, value: Any) -> bool:
    """A ``ctx.set`` of name and value is the one a loop makes as it starts."""
    return name == "loop" and isinstance(value, dict) and value.get("iterations") == 0 \
        and value.get("stopped_by") is None


_FAILURE_ANSWER = re.compile(r"Tool call .+ (?:was not run|gave no result): the run failed \(", re.DOTALL)


def _failure_answer(event: Any) -> bool:
    """A tool call answered by the runtime as its run failed among a reply's calls (turn._run_calls)."""
    item = getattr(event, "item", None) if event.type == "state.append" and event.origin == "runtime" else None
    return getattr(item, "role", None) == "tool" and bool(_FAILURE_ANSWER.match(str(item.content)))


def _said(ev: dict[str, Any]) -> str:
    """A person's edit in words: its note, else what it set or decided."""
    if ev.get("note"):
        return str(ev["note"])
    if ev.get("type") == "workflow_state.change":
        return f"set {ev.get('path')} to {json.dumps(ev.get('new'), ensure_ascii=False, default=repr)}"
    if ev.get("type") == "tool.decision":
        return f"{ev.get('decision')} tool {ev.get('tool')}"
    return str(ev.get("type"))


def _payload(line: bytes) -> bytes | None:
    """A journal line after its ids and time (``seq``, ``ts``, ``run_id``, ``node_id``,
    ``parent_id`` come first): two events with equal payloads compare equal."""
    at = line.find(b',"origin":')
    return line[at:] if at > 0 else None
