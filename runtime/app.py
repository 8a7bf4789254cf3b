"""``bootstrap(Workflow) -> App``, ``app.run(...)`` and ``run(Agent or Workflow, ...)``:
the public ways to run a flow.

``bootstrap`` walks the workflow once and computes every injection plan
(:mod:`runtime.plans`), so a marker that cannot be satisfied fails before any
run starts. ``App`` then makes one :class:`~runtime.engine.Run` per ``run()``
call; runs share nothing but the app's subscribers and middlewares.
"""

from __future__ import annotations

import itertools
import os
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from flowtui.runtime.budget import Budget, BudgetTracker, check_budget_arg
from flowtui.runtime.bus import Emitter, Sink, Stream
from flowtui.runtime.context import check_data_arg
from flowtui.runtime.control import Controller
from flowtui.runtime.conversation import memory_items
from flowtui.runtime.decorators import AgentSpec, WorkflowSpec, spec_of
from flowtui.runtime.engine import Run
from flowtui.runtime.errors import ConfigError
from flowtui.runtime.journal import JournalWriter
from flowtui.runtime.markers import where
from flowtui.runtime.middleware import Plugins
from flowtui.runtime.plans import Plans, make_plans
from flowtui.runtime.providers.base import Provider
from flowtui.runtime.snapshot import Snapshot, load_snapshot


def bootstrap(workflow_cls: type, *, model: str | None = None,
              replies: str | Path | None = None, record: str | Path | None = None,
              replay: str | Path | None = None) -> "App":
    """Check a workflow and return an :class:`App` that runs it.

    ``model`` overrides every agent's model
    (``--model``); ``replies`` gives every ``ScriptedProvider`` this TOML file
    (``--replies``); ``record`` keeps every model exchange in that cassette
    file and ``replay`` serves them back with no network (``--record``,
    ``--replay``). Injection errors are raised here, naming class and parameter.
    """
    if record is not None and replay is not None:
        raise ConfigError("--record and --replay cannot be used together: record once, then replay")
    spec = spec_of(workflow_cls)
    if not isinstance(spec, WorkflowSpec):
        raise ConfigError(f"{getattr(workflow_cls, '__name__', workflow_cls)!r} is not a @workflow class")
    plans = make_plans(spec)
    if replies is not None:
        from flowtui.runtime.providers.scripted import ScriptedProvider

        for cls, aspec in list(plans.agent_specs.items()):
            p = aspec.provider
            inst = p() if isinstance(p, type) and issubclass(p, ScriptedProvider) else p
            if isinstance(inst, ScriptedProvider):
                plans.agent_specs[cls] = _replace_provider(aspec, inst.with_replies(replies))
    given = os.environ.get("FLOWTUI_MODEL")
    if model is None and given and not given.strip():
        raise ConfigError("FLOWTUI_MODEL is blank: give a litellm model name, such as openai/gpt-4o-mini, or unset "
                          "it for the flow's own models")
    if model is not None and (not isinstance(model, str) or not model.strip()):  # (as --model and FLOWTUI_MODEL)
        raise ConfigError(f"bootstrap({spec.name}, model={model!r:.60}): give a litellm model name, such as "
                          "openai/gpt-4o-mini, or None for the flow's own models")
    model = model or given or None
    wrap, recording = _cassette_wrap(record, replay)
    return App(plans, model=model, wrap=wrap, replies=replies, recording=recording)


def _cassette_wrap(record: str | Path | None, replay: str | Path | None) -> tuple[Any, Any]:
    """(a function wrapping each run's providers for --record / --replay, the cassette being recorded)."""
    if record is None and replay is None:
        return None, None
    from flowtui.runtime.providers.cassette import Cassette, RecordingProvider, ReplayProvider

    if replay is not None:  # read once (or by the loader, for --replay): a missing file fails before the run
        cassette = replay if isinstance(replay, Cassette) else Cassette.load(replay)
        return (lambda inner: ReplayProvider(cassette, counter=inner)), None
    recording = record if isinstance(record, Cassette) else Cassette.new(record)  # replaces the file when a run
    # ends, not before (made by the loader, for --record, before the flow was imported)
    return (lambda inner: RecordingProvider(inner, recording)), recording


def _replace_provider(aspec: AgentSpec, provider: Provider) -> AgentSpec:
    from dataclasses import replace

    return replace(aspec, provider=provider)


_run_numbers = itertools.count(1)


class App:
    """A bootstrapped workflow. ``await app.run(...)`` as often as you like, concurrently too."""

    def __init__(self, plans: Plans, *, model: str | None,
                 wrap: Callable[[Provider], Provider] | None = None, replies: str | Path | None = None,
                 recording: Any = None) -> None:
        self.plans = plans
        self.wrap = wrap
        self.recording = recording  # the --record cassette: put in place when a run ends
        self.replies = replies
        self.workflow = plans.spec
        self.model = model
        self._subscribers: list[Sink] = []
        self._streams: weakref.WeakSet[Stream] = weakref.WeakSet()  # the runs' (an unsubscribe reaches them)
        self._plugins = Plugins()
        for mw in plans.spec.middlewares:  # the workflow's own, outermost
            self.use(mw)

    @property
    def middlewares(self) -> tuple[Any, ...]:
        """The middlewares in use, outermost (first registered) first."""
        return tuple(self._plugins.items)

    def use(self, middleware: Any) -> Any:
        """Wrap every model call and tool call of this app's runs with ``middleware``.

        Any object with some of ``tool(invocation, call_next)``,
        ``model(request, call_next)``, ``setup(app)``, ``dispose()`` (see
        :mod:`runtime.middleware`); the first registered is the outermost.
        ``setup(app)`` runs now (an async one before the next run starts).
        Returns ``middleware``.
        """
        self._closed("use()")
        self._plugins.add(middleware, self)
        return middleware

    def _closed(self, what: str) -> None:
        """Refuse ``what`` once the middlewares are disposed: a run went on through them (a closed
        connection, a flushed logger), and one added then was never disposed."""
        if self._plugins.disposed:
            raise ConfigError(f"app.{what}: this app is closed (its middlewares were disposed, by aclose() or "
                              f"the end of `async with`); bootstrap({self.workflow.name}) again for another run")

    async def start(self) -> None:
        """Await the async ``setup`` of middlewares added so far (runs do it themselves)."""
        await self._plugins.start()

    async def dispose_all(self) -> list[tuple[str, BaseException]]:
        """Call each middleware's ``dispose()`` once, last added first; returns what raised."""
        return await self._plugins.dispose_all()

    async def aclose(self) -> None:
        """Dispose the middlewares (each once, last added first); re-raises what raised, after all ran."""
        failed = await self.dispose_all()
        if len(failed) == 1:
            raise failed[0][1]
        if failed:
            raise ExceptionGroup(f"{len(failed)} middlewares raised in dispose()", [exc for _, exc in failed])

    async def __aenter__(self) -> "App":
        await self.start()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    def subscribe(self, callback: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event of every run; returns a function that unsubscribes."""
        self._subscribers.append(subscriber(callback, "subscribe()"))

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)
            for stream in list(self._streams):  # a run under way too: from its next event
                stream.remove_sink(callback)

        return unsubscribe

    def prepare(self, input: Any = None, *, memory: str | Iterable[str] | Mapping[str, Any] | None = None,
                data: Mapping[str, Any] | None = None, budget: Budget | None = None,
                journal: str | Path | None = None, controller: Controller | None = None,
                on_event: Callable[[Any], None] | None = None,
                snapshot: str | Path | Snapshot | None = None, resume_from: Any = None,
                on_divergence: str = "stop") -> Run:
        """A run ready to ``await run.execute()`` (the TUI keeps it to send edits and commands).

        ``resume_from`` (``"JOURNAL[@K]"``, see :mod:`flowtui.runtime.resume`) re-executes the
        journal's last run with this code, checked against it; the input, memory and data not
        given are the recorded run's."""
        self._closed("run()")
        resume = None
        if resume_from is not None:
            from flowtui.runtime.resume import Resume

            resume = Resume.load(resume_from, on_divergence=on_divergence)
            recorded = resume.start_values()
            input = recorded["input"] if input is None else input
            memory = recorded["memory"] if memory is None else memory
            data = recorded["data"] if data is None else data
            snapshot = resume.snapshot() if snapshot is None else snapshot  # (its [state], tasks and history)
        data = check_data_arg(data)
        if journal is not None and not isinstance(journal, (str, os.PathLike)):  # (pathlib's TypeError named neither)
            raise ConfigError(f"journal= takes the path of the file to write (a str or a Path), not "
                              f"{type(journal).__name__} {journal!r:.60}")
        if snapshot is not None and not isinstance(snapshot, Snapshot):
            snapshot = load_snapshot(snapshot)
        sinks: list[Sink] = list(self._subscribers)
        if on_event is not None:
            sinks.append(subscriber(on_event, "on_event="))
        run_id = f"r{next(_run_numbers)}-{os.urandom(3).hex()}"  # what uuid4().hex[:6] is, without the UUID
        async def startup() -> None:
            await self.start()
            sinks.extend(s for s in self._subscribers if s not in sinks)  # subscribed by an async setup

        wrap = resume.wrap(self.wrap) if resume is not None else self.wrap
        stream = Stream(sinks)
        self._streams.add(stream)
        run = Run(plans=self.plans, emitter=Emitter(stream, run_id), input=input,
                  memory=memory_items(memory), data=data,
                  tracker=BudgetTracker(check_budget_arg(budget, self.workflow.budget),
                                        held=controller.held_s if controller is not None else None),
                  controller=controller, model=self.model, wrap=wrap,
                  replies=self.replies, snapshot=snapshot, middlewares=self.middlewares, startup=startup)
        if resume is not None:  # the last sink: every other one has had an event when it is compared
            run.resume = resume
            resume.attach(run)
            sinks.append(resume)
        if journal is not None:  # opened only once the run could be built: a refused run leaves no file
            run.journal = JournalWriter(journal)
            sinks.insert(0, run.journal)
        run.recording = self.recording
        return run

    async def run(self, input: Any = None, *, memory: str | Iterable[str] | Mapping[str, Any] | None = None,
                  data: Mapping[str, Any] | None = None, budget: Budget | None = None,
                  journal: str | Path | None = None, controller: Controller | None = None,
                  on_event: Callable[[Any], None] | None = None,
                  snapshot: str | Path | Snapshot | None = None, listen: str | None = None,
                  token: str | None = None, listen_public: bool = False, resume_from: Any = None,
                  on_divergence: str = "stop") -> str | None:
        """Run the workflow once and return its output (``ctx.output`` at the end).

        ``input`` is a string or ``{"message": ...}`` (the first user turn; a
        mapping without ``message`` is sent as JSON). ``memory`` seeds durable
        context: a string, a list of strings, or a mapping (``key: value`` items).
        ``data`` is the run's own data, read as ``ctx.data`` by tools, hooks
        and ``until`` and never put in a message (per-tenant ids, flags).
        ``journal`` writes every event to that JSONL file as it happens;
        ``snapshot`` (a TOML file from :func:`runtime.snapshot.snapshot_toml`)
        starts from its memory, tasks, history and state fields.
        ``resume_from="JOURNAL[@K]"`` re-executes that journal's run with this code up to
        event K, serving the recorded model replies and tool results and checking every
        event (:mod:`flowtui.runtime.resume`), then goes on live; at a divergence the run
        stops (``on_divergence="stop"``) or, with a controller, pauses (``"pause"``).
        Raises the run's error when it fails; returns the output so far when a
        ``stop`` budget or a ``stop`` command ended it.

        ``listen="127.0.0.1:0"`` serves the run to ``flowtui attach`` (see
        :mod:`flowtui.runtime.listen`): it starts paused, prints where it listens
        and its ``token`` (random unless given) on stderr, and goes on as the
        attached app drives it. ``listen_public`` allows an address other than loopback.
        """
        if listen is not None:
            from flowtui.runtime.listen import serve_app

            return await serve_app(self, listen, token=token, public=listen_public, input=input, memory=memory,
                                   data=data, budget=budget, journal=journal, snapshot=snapshot, on_event=on_event,
                                   resume_from=resume_from)
        run = self.prepare(input, memory=memory, data=data, budget=budget, journal=journal,
                           controller=controller, on_event=on_event, snapshot=snapshot, resume_from=resume_from,
                           on_divergence=on_divergence)
        return await run.execute()


_BOOTSTRAP_OPTIONS = frozenset({"model", "replies", "record", "replay"})


def subscriber(callback: Any, who: str) -> Callable[[Any], None]:
    """``callback`` if it can be called with each event as it happens; else a ``ConfigError``: a value
    that is no function was taken and failed at every event (said only in the journal), and an
    ``async def`` one was never awaited, so never ran (Python's raw warning pointed into flowtui)."""
    import inspect

    if not callable(callback):
        raise ConfigError(f"{who} takes a function called with each event, not {type(callback).__name__} "
                          f"{callback!r:.60}")
    if inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(getattr(callback, "__call__", None)):
        name = getattr(callback, "__qualname__", type(callback).__name__)
        raise ConfigError(f"{who}: {name} is an async def, but a subscriber is called as each event happens, "
                          "not awaited; make it a def (it may put the event on a queue or start a task of yours)")
    return callback


# what App.run takes (listen=, token= and listen_public= were refused as unknown)
_RUN_OPTIONS = frozenset({"memory", "data", "budget", "journal", "controller", "on_event", "snapshot",
                          "listen", "token", "listen_public", "resume_from", "on_divergence"})


async def run(target: type, /, input: Any = None, *, max_iterations: int | float | None = None,
              state: type | None = None, middlewares: Iterable[Any] = (), **options: Any) -> str | None:
    """One call: run a workflow, or a single agent without writing one, and return the output.

    An ``@agent`` class runs in ``loop([Agent], until=until_answered,
    max_iterations=...)``: until it answers (one turn when it calls no
    tool); ``state=`` gives it a workflow state for ``State()``.
    ``middlewares`` are used for this run (then disposed). Other options
    go to :func:`bootstrap` (``model``, ``replies``, ``record``, ``replay``)
    or to :meth:`App.run` (``memory``, ``data``,
    ``budget``, ``journal``, ``snapshot``, ...).
    """
    unknown = set(options) - _BOOTSTRAP_OPTIONS - _RUN_OPTIONS
    if unknown:
        raise ConfigError(f"run({getattr(target, '__name__', target)}, ...): unknown option(s) "
                          f"{', '.join(sorted(unknown))}; known: max_iterations, state, middlewares, "
                          f"{', '.join(sorted(_BOOTSTRAP_OPTIONS | _RUN_OPTIONS))}")
    if isinstance(middlewares, (str, bytes)) or not isinstance(middlewares, Iterable):
        raise ConfigError(f"run({getattr(target, '__name__', target)}, middlewares=...) takes a list of middlewares, "
                          f"not {type(middlewares).__name__} {middlewares!r:.60}")
    spec = spec_of(target)
    if isinstance(spec, AgentSpec):
        target = _agent_workflow(target, spec, max_iterations=10 if max_iterations is None else max_iterations,
                                 state=state)
    elif not isinstance(spec, WorkflowSpec):
        raise ConfigError(f"run({getattr(target, '__name__', target)!r}, ...): pass an @agent or a @workflow class")
    elif state is not None:
        raise ConfigError(f"run({spec.name}, state=...): a workflow declares its own state in @workflow(state=...)")
    elif max_iterations is not None:  # (it was dropped, unsaid)
        raise ConfigError(f"run({spec.name}, max_iterations=...): it is the ceiling of the loop run(Agent, ...) makes; "
                          "a workflow's loops say their own, loop([...], max_iterations=...)")
    app = bootstrap(target, **{k: v for k, v in options.items() if k in _BOOTSTRAP_OPTIONS})
    for mw in middlewares:
        app.use(mw)
    async with app:
        return await app.run(input, **{k: v for k, v in options.items() if k in _RUN_OPTIONS})


run_workflow = run  # the older name


def _agent_workflow(agent_cls: type, spec: AgentSpec, *, max_iterations: int | float, state: type | None) -> type:
    """A workflow of one agent, looping until it answers."""
    from dataclasses import replace

    from flowtui.runtime.decorators import workflow
    from flowtui.runtime.steps import loop, until_answered

    cls = workflow(steps=[loop([agent_cls], until=until_answered, max_iterations=max_iterations)],
                   state=state, name=spec.name)(type(f"{spec.name}Workflow", (), {}))
    wf: WorkflowSpec = spec_of(cls)
    # the agent's file, not this one; a State() it asks for is told to come from run(..., state=...), no @workflow
    setattr(cls, "__flowtui__", replace(wf, file=where(agent_cls)[0], run_of=spec.name))
    return cls
