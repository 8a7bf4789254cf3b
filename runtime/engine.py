"""Executing one run: the workflow and its steps, from ``run.start`` to ``run.end``.

A :class:`Run` owns everything of one run (its ``ctx``, its state instance, its
agents, tools and providers) so concurrent runs never meet. Loops and parallel
blocks are in :mod:`runtime.loops`, an agent turn in :mod:`runtime.turn`, a
model call in :mod:`runtime.chat`, a tool call in :mod:`runtime.tools`, the node
tree in :mod:`runtime.nodes`; bootstrapping and the public ``App`` in
:mod:`runtime.app`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from flowtui.runtime.budget import BudgetStop, BudgetTracker, RunTotals, limits_of
from flowtui.runtime.bus import Emitter, current_node
from flowtui.runtime.context import AgentContext, json_text, jsonable, output_text
from flowtui.runtime.control import Controller, PausePoint, RunStopped, Signalled, StopRequested, Terminated
from flowtui.runtime.conversation import ConversationState
from flowtui.runtime.decorators import WorkflowSpec
from flowtui.runtime.edits import Editor
from flowtui.runtime.errors import BudgetExceededError, ConfigError, cleanup_failed, describe_error
from flowtui.runtime.events import DisposeError, RunEnd, RunPause, RunStart
from flowtui.runtime.invoke import call_user
from flowtui.runtime.request_lines import forget as forget_encoded_requests
from flowtui.runtime.messages import Message
from flowtui.runtime.loops import in_parallel, run_loop, run_parallel
from flowtui.runtime.middleware import layers
from flowtui.runtime.nodes import NodeScope, loops_var, path_var
from flowtui.runtime.observe import StateObserver
from flowtui.runtime.snapshot import apply_state, check_workflow
from flowtui.runtime.steps import LoopSpec, ParallelSpec
from flowtui.runtime.turn import run_agent

if TYPE_CHECKING:
    from flowtui.runtime.plans import Plans


YIELD_EVERY_S = 0.02  # the longest a run goes without letting the event loop run, between steps


class Run:
    """One execution of a workflow. Built by ``App``; ``await run.execute()``."""

    def __init__(self, *, plans: "Plans", emitter: Emitter, input: Any, memory: list[str],
                 data: dict[str, Any], tracker: BudgetTracker, controller: Controller | None,
                 model: str | None, wrap: Any = None, replies: Any = None, depth: int = 0,
                 snapshot: Any = None, middlewares: tuple[Any, ...] = (),
                 startup: Callable[[], Awaitable[None]] | None = None) -> None:
        from flowtui.runtime.plans import build_instances  # what bootstrap planned, made for this run

        self.plans = plans
        self.spec: WorkflowSpec = plans.spec
        self.emitter = emitter
        self.id = emitter.run_id
        self.input = input
        self.tracker = tracker
        self.controller = controller
        self.depth = depth
        emit = emitter.emit
        self._seed = snapshot
        if snapshot is not None:
            check_workflow(snapshot, self.spec.name)
            memory = [*snapshot.memory, *memory]
            data = {**snapshot.data, **data}
        self.state = ConversationState(emit, memory=memory, lock=emitter.lock)
        self.ctx = AgentContext(self.state, emit, run_id=self.id, lock=emitter.lock, data=data)
        self.workflow_state = plans.new_state()
        if snapshot is not None and snapshot.state:
            if self.workflow_state is None:
                raise ConfigError(f"{snapshot.source}: the snapshot has [state] but workflow {self.spec.name} "
                                  "declares no state")
            apply_state(self.workflow_state, self.spec.state, snapshot.state, source=snapshot.source)
        self.observer = (StateObserver(self.workflow_state, emit, lock=emitter.lock)
                         if self.workflow_state is not None else None)
        if self.observer is not None:  # (what ctx says of a state field read from it: see AgentContext)
            object.__setattr__(self.ctx, "_state_fields", frozenset(self.observer.fields))
        # What a child workflow inherits: the same --model, cassette and --replies.
        self.model, self.wrap, self.replies = model, wrap, replies
        self.agents, self.tools, self.providers = build_instances(self, model=model, wrap=wrap)
        self.child_apps: dict[type, Any] = {}
        self.children = 0  # numbers child runs: <run id>.1, .2, ...
        self._edits: Editor | None = None  # made when first used (see edits)
        self.pending: Any = None  # the PendingCall while paused before a tool
        # (its task, set when they are, its agent, the tools called): the turn whose tool calls are in the
        # history still to be answered while it runs them. In a parallel step, other branches wait for it
        # (see turn.others_answered).
        self.open_calls: tuple[asyncio.Task | None, asyncio.Event, str, list[str]] | None = None
        # (agent, prompt) of the latest run.pause or chat node that carried a prompt: the one
        # "what the model sees" shows (the fold reads the same two events), counted by `count`
        self.next_prompt: tuple[str, str] | None = None
        self.journal: Any = None  # the JournalWriter, closed when the run ends
        self.recording: Any = None  # the --record cassette, put in place when the run ends
        self.recorded: tuple[str, Any] | None = None  # what that did (see Cassette.commit)
        self.middlewares = middlewares  # outermost first; a child's come after its parent's
        self.model_layers, self.tool_layers = layers(middlewares, "model"), layers(middlewares, "tool")
        self._startup = startup  # the app's async plugin setups, awaited before run.start
        self._turns: dict[str, int] = {}
        self.pausing = asyncio.Lock()  # held while a pause point waits (the top-level run's is used)
        self.yielded_at = time.perf_counter()  # when a step last let the event loop run (the root's is used)
        self.error: BaseException | None = None
        self._stopped_in_cleanup: str | None = None  # the reason of a stop that ended a cleanup's child workflow
        self.exceeded: str | None = None  # the budget limit that ended the run
        self.status = "idle"  # then running; at the end finished, failed or stopped (as run.end says)
        self._root: Run | None = None  # a child's top-level run (see root)
        self._runs: dict[str, Run] | None = None  # made when first used (see runs)
        self.resume: Any = None  # a re-execution against a journal (runtime.resume.Resume), on the top-level run
        if controller is not None and not depth:  # a child's events reach its parent's watchpoints
            controller.watch.bind(self)

    # The three references a run holds to itself are made only when used: a run that never needs them
    # (no child, no edit) is no cycle, freed as it ends rather than by the collector.
    @property
    def root(self) -> "Run":
        """The top-level run (this one, unless a child workflow's); child runs register in its ``runs``."""
        return self._root or self

    @root.setter
    def root(self, run: "Run") -> None:
        self._root = None if run is self else run

    @property
    def runs(self) -> dict[str, "Run"]:
        """This run and its child runs that are running, by id (of the top-level run)."""
        runs = self._runs
        if runs is None:
            runs = self._runs = {self.id: self}
        return runs

    @property
    def edits(self) -> Editor:
        """Applies a person's edits to this run."""
        edits = self._edits
        if edits is None:
            edits = self._edits = Editor(self)
        return edits

    # --- the run ---------------------------------------------------------
    async def execute(self) -> str | None:
        """Run the workflow to the end; returns its output (``ctx.output`` as ``run.end`` says it: text, or
        the JSON of a value that is no text). Raises when it fails. A run runs once."""
        if self.status != "idle":  # (run again, it called the model again on its history, every event dropped)
            raise ConfigError(f"this run ({self.id}) has {'begun' if self.status == 'running' else 'run'} "
                              "already: a run runs once; prepare another (app.prepare(...)) or await app.run(...)")
        self.status = "running"
        unstarted = None  # what the app's async setups raised (a stop while one hangs): the run fails with it
        if self._startup is not None:
            try:
                await self._startup()
            except BaseException as exc:  # (after run.start: the journal says it, and the run's end why)
                unstarted = exc
        if self.depth == 0:  # the thread the run runs on (it may be prepared on another)
            self.emitter.stream.thread = threading.get_ident()
        t0 = time.perf_counter()
        message = _first_message(self.input)
        self.emitter.emit(
            RunStart, node_id=None, parent_id=current_node.get()[0], workflow=self.spec.name,
            input=_jsonable_input(self.input), memory=list(self.state.memory),
            state=self.observer.snapshot() if self.observer else {}, file=self.spec.file,
            data={key: jsonable(value) for key, value in self.ctx.data.items()},  # (an object, whatever a value is)
            resumed_from=self.resume.origin() if self.resume is not None else None,
            budget=limits_of(self.tracker.budget),
            # (a re-execution restores it: one of a run from a snapshot diverged at its first event)
            snapshot=None if self._seed is None else {"file": str(self._seed.source),
                                                      "state": {k: jsonable(v) for k, v in self._seed.state.items()}},
        )
        if self.tracker.budget is not None:  # nothing spent yet, as run.start says: a before_prompt reading
            self.ctx._starts_with("budget", self.tracker.usage())  # it before the first call got None
        reason = error = None
        status = "finished"
        try:
            if unstarted is not None:
                raise unstarted
            if self._seed is not None:
                for bucket in ("tasks", "history"):
                    if getattr(self._seed, bucket):
                        self.state.set(bucket, getattr(self._seed, bucket), origin="snapshot")
            if message is not None:
                self.state.append("history", Message(role="user", content=message), origin="input")
            with NodeScope(self, "workflow", self.spec.name) as scope:
                try:
                    for step in self.spec.steps:
                        await self.step(step)
                    if not self.depth and any(h is not None and h.holds_at_end for h in (self.controller, self.resume)) \
                            or self.depth and self.controller is not None and self.controller.fired_unsaid:
                        await self.pause("end", self.spec.name)  # (see Controller.holds_at_end, Resume.holds_at_end)
                finally:
                    scope.data["totals"] = self.totals().model_dump(mode="json")
                    # what runs between this node's end and the run's (the app says it, or that it is ending)
                    scope.data["cleanups"] = len(self.ctx._disposers or ()) + len(self.child_apps)
        except BudgetStop as stop:
            reason = f"budget: {stop.limit}"
        except StopRequested as stop:  # ctx.stop(): this run ends, a parent goes on
            status, reason = "stopped", f"stopped by ctx.stop() in {stop.origin}"
        except RunStopped as exc:
            status, reason = "stopped", exc.reason
            if self.depth:  # a child: the stop ends its parent too
                self.error = exc
        except asyncio.CancelledError as exc:  # the host (e.g. the app quitting) cancelled the run
            cause = exc.args[0] if exc.args else None
            if isinstance(cause, Signalled):  # the worker's process was told to end by something else
                status, error = "failed", str(cause)
            else:
                status, reason = "stopped", cause if isinstance(cause, str) else "cancelled"
            self.error = exc
        except BaseException as exc:
            status, error = "failed", describe_error(exc)
            self.error = exc
        finally:
            stop_by = self.ctx._stop_by  # (a cleanup's ctx.stop() comes after the run's end: it changes nothing)
            await self._dispose()
            try:
                self.check_state()  # (a change made by a thread the flow started, refused or not: reported)
            except Exception as exc:
                self._report_dispose("the state, checked after the cleanups", describe_error(exc))
            if self.observer is not None:
                self.observer.detach()
        if status == "finished" and stop_by is not None:  # ctx.stop() with nothing left to skip
            status, reason = "stopped", f"stopped by ctx.stop() in {stop_by}"
        elif status == "finished" and self._stopped_in_cleanup is not None:  # the stop landed in the cleanups:
            status, reason = "stopped", self._stopped_in_cleanup  # it ended one (the run's end says it, so a
            # re-execution stops it again there, and the command line's last line said "stopped" over "finished")
        end = dict(node_id=None, parent_id=current_node.get()[0], status=status,
                   output=output_text(self.ctx.get("output")),  # (app.run gave a value on ctx.output as it was)
                   error=error, reason=reason, duration_ms=round((time.perf_counter() - t0) * 1000, 3),
                   totals=self.totals())
        if self.resume is not None:
            end["status"], end["reason"] = self.resume.ending(status, reason)
            if not self.depth:  # (compared before it is emitted: a divergence there is said before it)
                end["status"], end["reason"] = self.resume.before_end(end)
        self.status = end["status"]
        self.emitter.emit(RunEnd, **end)
        self.emitter.close()
        self.close_files()
        if not self.depth:
            forget_encoded_requests()  # (its history, encoded for its events: held no longer)
        if self.error is not None:
            raise self.error
        return end["output"]

    def edits_for(self, run_id: str | None) -> Editor:
        """The editor of run ``run_id`` (this one or a child that is running), for an edit sent by a client."""
        run = self.runs.get(run_id or self.id)
        if run is None or run.status != "running":
            raise ConfigError(f"run {run_id} is not running (a child workflow that has ended cannot be edited)")
        return run.edits

    def close_files(self) -> None:
        """Close the journal and put the recorded cassette in place (a top-level run's files)."""
        if self.journal is not None:
            self.journal.close()
        if self.recording is not None and not self.depth:
            self.recorded, self.recording = self.recording.commit(whole=self.status == "finished"), None

    async def _dispose(self) -> None:
        """The ``ctx.on_dispose`` cleanups, last registered first, then the child workflows' apps
        (their plugins' ``dispose``); one that raises is reported and the others still run."""
        disposers = self.ctx._disposers
        object.__setattr__(self.ctx, "_disposers", None)  # from now on, on_dispose refuses (see there)
        while disposers:
            fn = disposers.pop()
            name = getattr(fn, "__qualname__", None) or repr(fn)
            try:
                await call_user(fn, (), origin="dispose", then=self.check_state)
            except (Terminated, asyncio.CancelledError) as exc:
                # a stop whose grace ran out inside a cleanup that never returned (sync: unwound; async:
                # cancelled): the cleanup's failure, not the run's, whose end and output stand
                self._report_dispose(name, f"{type(exc).__name__}: it never returned; the stop ended it")
            except RunStopped as exc:
                # a child workflow the cleanup ran, stopped by the run's stop (at its first step: the stop
                # stands): the cleanup ends there, the others still run, and the run ends. It left the run
                # unended, its cleanups after it unrun, and its process killed after the grace.
                self._report_dispose(name, f"a child workflow it ran was stopped ({exc.reason}); the cleanup "
                                           "ended there")
                self._stopped_in_cleanup = self._stopped_in_cleanup or exc.reason
            except BaseException as exc:
                if not cleanup_failed(exc):
                    raise
                self._report_dispose(name, describe_error(exc))
        for app in self.child_apps.values():
            for name, exc in await app.dispose_all():
                self._report_dispose(name, describe_error(exc))

    def _report_dispose(self, cleanup: str, error: str) -> None:
        self.emitter.emit(DisposeError, node_id=None, parent_id=current_node.get()[0], origin="dispose",
                          cleanup=cleanup, error=error)

    async def step(self, step: Any) -> None:
        root = self.root
        now = time.perf_counter()
        if now - root.yielded_at > YIELD_EVERY_S and not in_parallel():
            # A run whose models, hooks and tools are sync never waits on the event loop: what the loop runs
            # waited for its end (asyncio.wait_for's timeout, a cancel, ctrl-C under asyncio.run). A step lets
            # it run this often; not in a parallel step's branch, where the others would run then, at a time
            # no journal says (its re-execution, served at once, ran them in another order, and diverged).
            root.yielded_at = now
            await asyncio.sleep(0)
        if isinstance(step, LoopSpec):
            await run_loop(self, step)
        elif isinstance(step, ParallelSpec):
            await run_parallel(self, step)
        else:
            await run_agent(self, self.plans.agent_specs[step])
        self.check_state()

    def check_state(self) -> None:
        if self.observer is not None:
            self.observer.check()

    async def pause(self, kind: str, name: str, *, prompt: str | None = None, call: Any = None,
                    request: dict[str, Any] | None = None, inside: bool = False, prompt_hook: bool = False) -> None:
        """A pause point before ``kind`` ``name`` (agent, chat, tool, loop_iteration). ``inside``: called
        from within that step's own node (a diverged re-execution waits there before going live),
        whose label the path then names once, as an ordinary pause point's does."""
        resume = self.root.resume
        if resume is not None and await resume.at_pause(self, kind, name):
            return  # a re-executed prefix: the recorded edits made here are made again, and it goes on
        controller = self.controller
        if controller is None:
            return
        if kind == "chat" and request is None and controller.watch.wants_prompt:  # prompt.tokens: known only here
            from flowtui.runtime.tokens import prompt_tokens

            controller.watch.before_chat(self, prompt, exact=await prompt_tokens(self, name, prompt))
        path = path_var.get()[:-1] if inside else path_var.get()
        path += (name,) if kind in ("agent", "tool") else ("chat",) if kind == "chat" else ()
        point = PausePoint(kind=kind, name=name, node_id=current_node.get()[0], loops=loops_var.get(),  # type: ignore[arg-type]
                           path=path, decided=kind == "tool" and self.pending is not None
                           and self.pending.decision is not None, call_id=call.id if call is not None else None)

        def emit(cls, **fields):
            if cls is RunPause:
                if prompt is not None:
                    fields["prompt"] = prompt
                    self.next_prompt = (name, prompt)
                if prompt_hook:
                    fields["prompt_hook"] = True
                if call is not None:
                    fields["call"] = {"id": call.id, "name": call.name, "args": dict(call.args)}
                if request is not None:
                    fields["request"] = request
            return self.emitter.emit(cls, origin="runtime", **fields)

        stream = self.emitter.stream
        # One pause at a time: steps running at once (an agent's run() gathering model calls) each
        # wait here for the one before to be moved on, then pause on their own.
        async with self.root.pausing:
            held = self.open_calls
            if kind == "chat" and request is None and held is not None and held[0] is not asyncio.current_task():
                return  # another branch asked for tools while this one waited its turn to pause: the turn waits
                # for their results, then pauses (what the pause shows is then the request that goes)
            delivered, paused = stream.delivery_s, controller.paused_s
            await controller.checkpoint(point, emit)
            if controller.paused_s != paused:  # what was delivered while paused is in the paused time already
                stream.delivery_s = delivered

    @property
    def pauses(self) -> bool:
        """Whether a pause point does anything: a controller may wait there, and a re-execution
        (``--resume-from``) makes a person's recorded edits again there. Most runs: no."""
        return self.controller is not None or self.root.resume is not None

    def gate_needed(self) -> bool:
        """Whether :meth:`gate` has anything to do: a ``ctx.stop()`` to honour, a budget (this
        run's or a parent's) to check, a re-execution that diverged. Most runs have none: they
        skip awaiting it."""
        if self.ctx._stop_by is not None:
            return True
        if self.root.resume is not None and self.root.resume.halted:
            return True
        tracker = self.tracker
        while tracker is not None:
            if tracker.budget is not None:
                return True
            tracker = tracker.parent
        return False

    async def gate(self, before_tool: bool = False) -> None:
        """Between units of work: end the run after ``ctx.stop()``; stop or raise when a budget
        limit is reached (``on_exceeded(ctx, usage, limit)``, sync or async, may take fewer
        parameters, is called once per budget). ``before_tool``: a tool call of a reply the run has
        already, which a limit on model calls, tokens or money does not stop (``max_chat_calls=1``
        left the one reply's tool calls unrun)."""
        self.check_stop()
        resume = self.root.resume
        if resume is not None:
            resume.check()  # a re-execution that diverged stops before anything live
        # (re-executed, the served calls take no time: the run's time is the journal's, or a run its time budget
        # stopped went on where it had stopped, and diverged)
        elapsed = resume.recorded_elapsed() if resume is not None and self is self.root else None
        found = self.tracker.exceeded_in(before_tool, elapsed_s=elapsed)
        if found is None:
            return
        tracker, limit = found  # a child run may hit its parent's budget: that run's end says so too
        self.exceeded = limit
        for run in (self.root, *self.root.runs.values()):
            if run.tracker is tracker:
                run.exceeded = limit
        budget = tracker.budget
        assert budget is not None
        if limit == "max_duration_s":  # (ctx.budget said the time of the last call: "3.1 of 5.0 s", under it)
            self.publish_budget()
        usage = tracker.usage()
        if not tracker.reported and budget.on_exceeded is not None:
            tracker.reported = True
            args = (self.ctx, usage, limit)[:self.plans.arity(budget.on_exceeded)]
            await call_user(budget.on_exceeded, args, origin="budget", then=self.check_state)
        if budget.mode == "raise":
            # (what was used, but the time: the error is journaled and compared, and a re-execution of the
            # same failure diverged on the time it took; a limit on the time says it)
            used = ", ".join(f"{k}={v}" for k, v in usage.model_dump().items() if k != "duration_s")
            raise BudgetExceededError(f"budget exceeded: {limit}={getattr(budget, limit)} (used: {used})",
                                      limit=limit, usage=usage)
        raise BudgetStop(limit)

    def check_stop(self) -> None:
        if self.ctx._stop_by is not None:
            raise StopRequested(self.ctx._stop_by)

    def totals(self) -> RunTotals:
        """What this run (its children included) consumed so far."""
        return self.tracker.totals(exceeded=self.exceeded)

    def publish_budget(self) -> None:
        """``ctx.budget`` of this run, and of each run around it whose budget what it used counts against:
        a child's calls spend its parent's too (the parent's sidebar said its use from before the child ran,
        and a limit the child reached for it, ``1 of 4 chat calls``)."""
        tracker = self.tracker
        while tracker is not None:
            if tracker.budget is not None:
                owner = self if tracker is self.tracker else next(
                    (r for r in (self.root, *self.root.runs.values()) if r.tracker is tracker), None)
                if owner is not None:
                    owner.ctx._set("budget", tracker.usage(), origin="runtime")
            tracker = tracker.parent

    def hook(self, fn: Any, agent: str, hook: str, args: tuple) -> Awaitable[Any]:
        """Call hook ``fn`` with the arguments it takes (await the result: call_user's coroutine)."""
        arity = self.plans.arity(fn)
        return call_user(fn, args[:arity], origin=f"hook:{agent}.{hook}", then=self.check_state)


def _first_message(input: Any) -> str | None:
    """The first user turn: a text as it is, ``{"message": ...}``'s message (None: no turn, as no input),
    anything else as JSON, as run.start carries it (it was Python's own text of a value that is no text:
    ``"{'x': 1}"``, ``"None"``, ``"b'bytes'"``, a set's ``"{1, 2}"``)."""
    if isinstance(input, dict) and "message" in input:
        input = input["message"]
    if input is None or isinstance(input, str):
        return input
    if isinstance(input, dict):  # (an object whatever a value is, as run.start carries it)
        return json.dumps(_jsonable_input(input), ensure_ascii=False)
    return json_text(input)


def _jsonable_input(input: Any) -> Any:
    if input is None or isinstance(input, (str, int, bool)):
        return input
    if isinstance(input, dict):  # a child's input: an object still, whatever a value is (bytes, a cycle)
        return {str(key): jsonable(value) for key, value in input.items()}
    if isinstance(input, (list, float)):
        return jsonable(input)
    return repr(input)
