"""Checking watchpoints after every event of a run (the language is :mod:`flowtui.runtime.watch`).

A :class:`Watchpoints` belongs to a run's :class:`~flowtui.runtime.control.Controller`.
While at least one watchpoint is set it is a sink of the run's event stream:
it keeps, per run (the top-level one and each child workflow's), what the
conditions read — the workflow state, memory, tasks, history, the latest
prompt's size, the streak of identical tool calls — plus the run's totals,
and re-evaluates the watchpoints an event can move. With none set it is not on
the stream at all, so a run without watchpoints pays nothing per event.

Firing is edge-triggered: a condition fires when it turns true (a change or
an arrival fires at each event that does it). A firing is handed to the
controller, which pauses at the next pause point (reason ``watchpoint``), or
says so at once when the run is already paused. ``prompt.tokens`` is known
right before each model call: it is measured at the ``chat`` pause point
(:meth:`Watchpoints.before_chat`), so such a watchpoint pauses before that call.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flowtui.runtime.compare import items_said
from flowtui.runtime.conditions import PatternTooSlow, new_items
from flowtui.runtime.errors import WatchError
from flowtui.runtime.watch import Watch, check_fields, check_known, parse

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run
    from flowtui.runtime.events import WatchHit


class Change:
    """What one event changed in a run: ``kinds`` (``state``, ``memory``, ``tasks``, ``history``,
    ``calls``, ``cost``, ``prompt``), a state field's ``path``/``old``/``new``, the items that
    arrived in a bucket (``added``; a message by its text)."""

    __slots__ = ("kinds", "path", "old", "new", "added", "what")

    def __init__(self, kinds: frozenset[str] = frozenset(), *, path: str | None = None, old: Any = None,
                 new: Any = None, added: list[str] | None = None, what: str = "") -> None:
        self.kinds, self.path, self.old, self.new = kinds, path, old, new
        self.added, self.what = added or [], what


NOTHING = Change()


class Track:
    """One run as the watchpoints see it."""

    __slots__ = ("run_id", "workflow", "state", "memory", "tasks", "history", "prompt_tokens", "content_seq",
                 "streak_tool", "streak_key", "streak", "prev")

    def __init__(self, run_id: str, workflow: str) -> None:
        self.run_id, self.workflow = run_id, workflow
        self.state: dict[str, Any] = {}
        self.memory: list[str] = []
        self.tasks: list[str] = []
        self.history: list[str] = []  # each message's text
        self.prompt_tokens: int | None = None  # measured at the latest chat pause point
        self.content_seq: int | None = None  # the latest event that changed what the prompt holds
        self.streak_tool: str | None = None
        self.streak_key: str | None = None
        self.streak = 0
        self.prev: dict[str, bool] = {}  # watch key -> its truth after the last event it read

    def called(self, calls: Any) -> None:
        for call in calls:
            key = f"{call.name}\0{json.dumps(dict(call.args), sort_keys=True, default=repr)}"
            self.streak = self.streak + 1 if key == self.streak_key else 1
            self.streak_tool, self.streak_key = call.name, key


class Totals:
    __slots__ = ("cost", "tokens", "prev")

    def __init__(self, cost: float = 0.0, tokens: int = 0) -> None:
        self.cost, self.tokens = cost, tokens
        self.prev: dict[str, bool] = {}  # for watchpoints that read only the totals


def _known(spec: Any) -> tuple[type | None, set[str] | None, set[str] | None, set[str] | None]:
    """What a watchpoint on workflow ``spec`` may name: (its state class, its agents' tools, the
    workflows defined, every defined workflow's tools: a child workflow's, started by a tool, may
    be named too). Matched by the spec itself, never by name: two workflows may share one."""
    from flowtui.runtime.decorators import defined_workflows, tools_of

    tools = tools_of(spec)
    specs = defined_workflows()
    every = set(tools)
    for s in specs:
        every |= tools_of(s)
    return spec.state, tools, {s.name for s in specs} | {spec.name}, every


def _fields_of(state: type | None) -> list[str] | None:
    """The field names of state class ``state``: a pydantic model's, a dataclass's; None when they cannot be
    told from the class (a plain class's are what an instance sets), or there is no state."""
    import dataclasses

    from pydantic import BaseModel

    if isinstance(state, type) and issubclass(state, BaseModel):
        return list(state.model_fields)
    if state is not None and dataclasses.is_dataclass(state):
        return [f.name for f in dataclasses.fields(state)]
    return None


class Watchpoints:
    """The watchpoints of one run (and its child runs), and their checker.

    ``on_fire(hit)`` is the controller's: it receives each firing as a
    :class:`~flowtui.runtime.events.WatchHit`.
    """

    def __init__(self, on_fire: Callable[["WatchHit"], None]) -> None:
        self.items: list[Watch] = []
        self.on_fire = on_fire
        self.wants_prompt = False  # a watchpoint reads prompt.tokens: measured at each chat pause point
        self.attached = False  # on the run's stream (only while a watchpoint is set)
        self.root: Run | None = None
        self.schema: tuple[str, str | None, list[str] | None] | None = None  # workflow, state class, fields
        # the state class, the workflow's tools, the workflows and tools the flow defines (None: unknown)
        self.known: tuple[type | None, set[str] | None, set[str] | None, set[str] | None] = (None, None, None, None)
        self.tracks: dict[str, Track] = {}
        self.totals = Totals()

    # --- setting them ---------------------------------------------------------------------------
    @property
    def texts(self) -> list[str]:
        """The watchpoints, as written, in the order they were set."""
        return [w.text for w in self.items]

    def describe(self, spec: Any, fields: list[str] | None) -> None:
        """The workflow (its spec) the watchpoints are for: state fields they name are checked
        against it, and so are the field's type (``len()`` of a number), the workflow a watchpoint
        is limited to and the tool ``repeat()`` counts (against the @workflow classes the flow defines)."""
        state_class = spec.state
        self.schema = (spec.name, state_class.__name__ if state_class is not None else None, fields)
        self.known = _known(spec)

    def check(self, watch: Watch) -> None:
        if self.schema is None:
            return
        from flowtui.runtime.decorators import defined_workflows, tools_of

        workflow, cls, fields = self.schema
        state_type, tools, workflows, all_tools = self.known
        if watch.workflow in (None, workflow):
            self._check_on(watch, workflow, state_type, tools, fields)
            if state_type is None and watch.workflow is None:  # a field of some child's state: one that none has
                self._some_state_has(watch, workflow)
            return
        # a child workflow's runs, checked as the run's own are (a misspelled field of it was taken and never
        # fired): against each workflow of that name the flow defines, refused only when none takes it
        refused = None
        for child in [s for s in defined_workflows() if s.name == watch.workflow] or [None]:
            try:
                if child is None:  # (no workflow of that name: check_known says so)
                    check_known(watch, workflow=workflow, state_type=None, tools=tools, workflows=workflows,
                                all_tools=all_tools)
                    return
                state = child.state
                self._check_on(watch, child.name, state, tools_of(child), _fields_of(state))
                return
            except WatchError as exc:
                refused = refused or exc
        if refused is not None:
            raise refused

    def _check_on(self, watch: Watch, workflow: str, state_type: Any, tools: set[str],
                  fields: list[str] | None) -> None:
        """Refuse what ``watch`` names that the runs of ``workflow`` (its state, its tools) never have."""
        _, _, workflows, all_tools = self.known
        cls = state_type.__name__ if state_type is not None else None
        check_fields(watch, workflow=workflow, state_class=cls, fields=fields)
        check_known(watch, workflow=workflow, state_type=state_type, tools=tools, workflows=workflows,
                    all_tools=all_tools)
        if state_type is None and watch.fields and watch.workflow == workflow:
            raise WatchError(f"{workflow} has no state: it has no field {watch.fields[0].parts[0]!r}",
                             expr=watch.source or watch.text, column=watch.fields[0].column,
                             hint="give it one (@workflow(state=...)), or name a workflow that has one before ':'")

    def _some_state_has(self, watch: Watch, workflow: str) -> None:
        """Refuse a state field no workflow the flow defines has (the run's own has no state)."""
        from flowtui.runtime.decorators import defined_workflows

        states = {s.name: _fields_of(s.state) for s in defined_workflows() if s.state is not None}
        if not watch.fields or any(fields is None for fields in states.values()):  # (a plain class's: unknown)
            return
        for f in watch.fields:
            if not any(f.parts[0] in fields for fields in states.values()):
                raise WatchError(
                    f"no workflow of this flow has a state field {f.parts[0]!r}", expr=watch.source or watch.text,
                    column=f.column, hint=f"{workflow} has no state; " + ("; ".join(
                        f"{name}'s has {', '.join(fields) or '(none)'}" for name, fields in sorted(states.items()))
                        or "no workflow of the flow declares one (@workflow(state=...))"))

    def add(self, text: str) -> Watch:
        """Set a watchpoint (raises :class:`~flowtui.runtime.errors.WatchError`); setting one that
        is set already (however spelled) changes nothing."""
        watch = parse(text)
        self.check(watch)
        found = next((w for w in self.items if w.key == watch.key), None)
        if found is not None:
            return found
        lock = self._lock()
        with lock:
            self.items.append(watch)
            self._changed()
            running = self.root is not None and self.root.status == "running"
            if self.root is not None and not self.attached:
                if running:  # set mid-run: what the conditions read comes from the live runs
                    self._seed()
                self._attach()
            elif running:
                self._prime(watch)
        return watch

    def add_all(self, texts: Any) -> None:
        """Set several watchpoints, or none of them when one is refused."""
        texts = list(texts)
        for text in texts:
            self.check(parse(text))
        for text in texts:
            self.add(text)

    def remove(self, text: str) -> bool:
        """Clear the watchpoint ``text`` (however spelled); False when it was not set."""
        key = parse(text).key
        with self._lock():
            kept = [w for w in self.items if w.key != key]
            if len(kept) == len(self.items):
                return False
            self.items = kept
            self._changed()
            if not kept and self.attached:
                self._detach()
        return True

    def _changed(self) -> None:
        self.wants_prompt = any("prompt" in w.deps for w in self.items)

    def _lock(self) -> Any:
        return self.root.emitter.lock if self.root is not None else contextlib.nullcontext()

    # --- the run ------------------------------------------------------------------------------------
    def bind(self, run: "Run") -> None:
        """The top-level run these watchpoints check (before it starts): its state fields are
        checked now, so a watchpoint naming an unknown one fails before the run starts."""
        fields = list(run.observer.fields) if run.observer is not None else None
        self.describe(run.spec, fields)
        for watch in self.items:
            self.check(watch)
        if self.attached:
            self._detach()
        self.root, self.tracks, self.totals = run, {}, Totals()
        if self.items:
            self._attach()

    def _attach(self) -> None:
        assert self.root is not None
        self.root.emitter.stream.add_sink(self)
        self.attached = True

    def _detach(self) -> None:
        if self.root is not None:
            self.root.emitter.stream.remove_sink(self)
        self.attached = False
        self.tracks = {}

    def _seed(self) -> None:
        """Set mid-run: what the conditions read, from the runs that are running now."""
        root = self.root
        assert root is not None
        self.totals = Totals(root.tracker.cost_usd, root.tracker.tokens)
        for run in list(root.runs.values()):
            if run.status != "running":
                continue
            t = Track(run.id, run.spec.name)
            t.state = run.observer.snapshot() if run.observer is not None else {}
            t.memory, t.tasks = list(run.state.memory), list(run.state.tasks)
            t.history = [m.content for m in run.state.history]
            for m in run.state.history:
                if m.role == "assistant" and m.tool_calls:
                    t.called(m.tool_calls)
            self.tracks[run.id] = t
        for watch in self.items:
            self._prime(watch)

    def _prime(self, watch: Watch) -> None:
        """A watchpoint's truth now, without firing: one already true fires only once it turned false."""
        if watch.local:
            for t in self.tracks.values():
                if watch.workflow in (None, t.workflow):
                    t.prev[watch.key] = watch.condition.eval(t, NOTHING, self.totals)[0]
        else:
            self.totals.prev[watch.key] = watch.condition.eval(Track("", ""), NOTHING, self.totals)[0]

    # --- the checker: a sink of the run's stream --------------------------------------------------
    def __call__(self, ev: Any) -> None:
        handler = _HANDLERS.get(ev.type)
        if handler is not None:
            handler(self, ev)

    def _run_start(self, ev: Any) -> None:
        t = self.tracks[ev.run_id] = Track(ev.run_id, ev.workflow)
        t.state, t.memory = dict(ev.state), list(ev.memory)
        top = self.root is not None and ev.run_id == self.root.id
        for watch in self.items:
            if watch.local and watch.workflow in (None, t.workflow):
                t.prev[watch.key] = watch.condition.eval(t, NOTHING, self.totals)[0]
            elif top and not watch.local:  # (the run's totals, true as it starts: cost >= 0 fired at its first call)
                self.totals.prev[watch.key] = watch.condition.eval(t, NOTHING, self.totals)[0]

    def _run_end(self, ev: Any) -> None:
        self.tracks.pop(ev.run_id, None)

    def _append(self, ev: Any) -> None:
        t = self.tracks.get(ev.run_id)
        if t is None:
            return
        bucket, item = ev.bucket, ev.item
        t.content_seq = ev.seq
        if bucket == "history":
            t.history.append(item.content)
            kinds = {"history"}
            if item.role == "assistant" and item.tool_calls:
                t.called(item.tool_calls)
                kinds.add("calls")
            self._check(t, Change(frozenset(kinds), added=[item.content], what=f"a {item.role} message joined"),
                        ev.seq)
        else:
            getattr(t, bucket).append(item)
            self._check(t, Change(frozenset((bucket,)), added=[item], what="an item joined"), ev.seq)

    def _set(self, ev: Any) -> None:
        t = self.tracks.get(ev.run_id)
        if t is None:
            return
        new = [m.content for m in ev.items] if ev.bucket == "history" else list(ev.items)
        added = new_items(getattr(t, ev.bucket), new)
        setattr(t, ev.bucket, new)
        t.content_seq = ev.seq
        self._check(t, Change(frozenset((ev.bucket,)), added=added, what=f"replaced, {items_said(len(new))}"), ev.seq)

    def _state(self, ev: Any) -> None:
        t = self.tracks.get(ev.run_id)
        if t is None:
            return
        t.state[ev.path] = ev.new
        self._check(t, Change(frozenset(("state",)), path=ev.path, old=ev.old, new=ev.new), ev.seq)

    def _node_end(self, ev: Any) -> None:
        data = ev.data
        if ev.kind != "chat" or "prompt_tokens" not in data:
            return
        self.totals.cost += data.get("cost_usd") or 0.0
        self.totals.tokens += (data.get("prompt_tokens") or 0) + (data.get("completion_tokens") or 0)
        change = Change(frozenset(("cost",)))
        t = self.tracks.get(ev.run_id)
        if t is not None:
            self._check(t, change, ev.seq)
        for watch in self.items:
            if not watch.local:
                self._judge(watch, t or Track(ev.run_id, "?"), change, self.totals.prev, ev.seq)

    def before_chat(self, run: "Run", prompt: str | None, *, exact: int | None = None) -> None:
        """At a ``chat`` pause point: measure the prompt the model call is about to send for
        ``prompt.tokens``: ``exact``, its model's tokenizer's count (:mod:`flowtui.runtime.tokens`),
        else the estimate :class:`~flowtui.runtime.context_window.ContextWindow` uses."""
        from flowtui.runtime.context_window import estimate_tokens

        with run.emitter.lock:
            t = self.tracks.get(run.id)
            if t is None:
                return
            t.prompt_tokens = exact if exact is not None else sum(
                estimate_tokens(m) for m in run.state.to_messages(prompt=prompt))
            seq = t.content_seq if t.content_seq is not None else run.emitter.stream.last_seq
            self._check(t, Change(frozenset(("prompt",))), seq)

    def _check(self, t: Track, change: Change, seq: int) -> None:
        kinds = change.kinds
        for watch in self.items:
            if watch.local and watch.workflow in (None, t.workflow) and not watch.deps.isdisjoint(kinds):
                self._judge(watch, t, change, t.prev, seq)

    def _judge(self, watch: Watch, t: Track, change: Change, prev: dict[str, bool], seq: int) -> None:
        try:
            true, fresh, detail = watch.condition.eval(t, change, self.totals)
        except PatternTooSlow as exc:  # taken off, and said as a hit: the run pauses there, saying why
            # (the checker stays a sink: detaching it while the stream hands it an event would skip the next sink)
            self.items = [w for w in self.items if w is not watch]
            self._changed()
            true, fresh, detail = True, True, str(exc)
        was = prev.get(watch.key, False)
        prev[watch.key] = true
        resume = getattr(self.root, "resume", None)
        if resume is not None and resume.checking:  # a re-executed prefix (--resume-from, r): seen, not new
            return
        if true and (fresh or not was):
            from flowtui.runtime.events import WatchHit

            self.on_fire(WatchHit(expr=watch.text, seq=seq, run_id=t.run_id, workflow=t.workflow, detail=detail))


_HANDLERS: dict[str, Callable[[Watchpoints, Any], None]] = {
    "run.start": Watchpoints._run_start, "run.end": Watchpoints._run_end,
    "state.append": Watchpoints._append, "state.set": Watchpoints._set,
    "workflow_state.change": Watchpoints._state, "node.end": Watchpoints._node_end,
}
