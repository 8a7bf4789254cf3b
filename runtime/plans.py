"""What ``bootstrap`` works out about a workflow once, and what each run builds from it.

:func:`make_plans` walks the workflow's steps and computes every injection
plan (agent and tool constructors, how each tool is called), so a marker that
cannot be satisfied fails before any run starts. :func:`build_instances`
makes one run's agents, tools and providers from those plans, so ``State()``
receives that run's instance and runs never share a provider's state.
"""

from __future__ import annotations

import inspect
import os

import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from flowtui.runtime.decorators import AgentSpec, WorkflowSpec, spec_of
from flowtui.runtime.checks import needs_more, needs_more_said
from flowtui.runtime.errors import ConfigError, FlowtuiError, InjectionError, describe_error, shown_path
from flowtui.runtime.markers import constructor_plan, execute_plan, positional_arity, type_hints, where
from flowtui.runtime.observe import make_state
from flowtui.runtime.providers.base import Provider
from flowtui.runtime.steps import LoopSpec, ParallelSpec
from flowtui.runtime.tool_forms import ToolSpec

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run


@dataclass
class AgentTools:
    """The tools one agent offers the model."""

    by_name: dict[str, ToolSpec]
    names: frozenset[str]
    schemas: list[dict[str, Any]]


@dataclass
class Plans:
    """Everything ``bootstrap`` worked out about a workflow, reused by every run."""

    spec: WorkflowSpec
    agent_specs: dict[type, AgentSpec] = field(default_factory=dict)
    tool_specs: dict[type, AgentTools] = field(default_factory=dict)
    ctor_plans: dict[type, list[tuple[str, str]]] = field(default_factory=dict)
    execute_plans: dict[ToolSpec, list[tuple[str, str]]] = field(default_factory=dict)
    _arity: dict[Any, int] = field(default_factory=dict)

    def new_state(self) -> Any:
        return make_state(self.spec.state) if self.spec.state is not None else None

    def arity(self, fn: Any) -> int:
        key = getattr(fn, "__func__", fn)
        n = self._arity.get(key)
        if n is None:
            n = positional_arity(fn)
            self._arity[key] = n
        return n

    def until_arity(self, loop: LoopSpec) -> int:
        return self.arity(loop.until)


def _defined_at(cls: type) -> str:
    """``flow.py:12``, where ``cls`` is defined (its name, when that cannot be found)."""
    file, line = where(cls)
    return f"{Path(file).name}:{line}" if file else cls.__qualname__


def make_plans(spec: WorkflowSpec) -> Plans:
    """Every injection plan of ``spec``'s steps; raises InjectionError/ConfigError naming the fault."""
    from flowtui.runtime.workflow_runtime import WorkflowRuntime

    plans = Plans(spec=spec)
    has_state = spec.state is not None

    def visit(step: Any) -> None:
        if isinstance(step, LoopSpec):
            if step.until is not None:
                n = positional_arity(step.until)
                # (99: *args, or a signature that cannot be read; three or more: said below, as with a state)
                if (n == 2 or n >= 99) and not has_state:
                    file, line = where(step.until)
                    raise InjectionError(
                        f"{step.name}(until=...) takes (ctx, s) but workflow {spec.name} declares no state; "
                        "add state=YourStateClass to @workflow(...) or make until take only ctx",
                        file=file, line=line, cls=spec.name)
                if n == 0:
                    file, line = where(step.until)
                    raise InjectionError(f"{step.name}(until=...) must take ctx (and optionally the state)",
                                         file=file, line=line, cls=spec.name)
            for param, fn, passed in (("until", step.until, ("ctx", "s") if has_state else ("ctx",)),
                                      ("on_exhausted", step.on_exhausted, ("ctx", "n")),
                                      ("on_fail", step.on_fail, ("ctx", "info"))):
                if fn is not None and (inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)):
                    file, line = where(fn)  # (a generator is truthy: such an until stopped every loop at once)
                    raise InjectionError(f"{step.name}({param}=...) yields, so calling it makes a generator, not "
                                         "a result: return the value instead", file=file, line=line, cls=spec.name)
                extra = needs_more(fn, passed) if fn is not None else []
                if extra:
                    file, line = where(fn)
                    raise InjectionError(f"{step.name}({param}=...) {needs_more_said(fn, extra, param, passed)}",
                                         file=file, line=line, cls=spec.name)
            for s in step.steps:
                visit(s)
        elif isinstance(step, ParallelSpec):
            for s in step.steps:
                visit(s)
        else:
            aspec = spec_of(step)
            if not isinstance(aspec, AgentSpec):
                shown = getattr(step, "__qualname__", None) or repr(step)
                if isinstance(aspec, WorkflowSpec):
                    raise ConfigError(
                        f"workflow {spec.name}: step {shown} is a @workflow, and a step is an @agent class, "
                        f"loop(...) or parallel([...]); run a child workflow from a tool or hook: "
                        f"await self.runtime.run({shown}, input=...)")
                made_of = type(step).__name__
                if isinstance(spec_of(type(step)), AgentSpec):
                    raise ConfigError(f"workflow {spec.name}: a step is an instance of {made_of}; flowtui makes the "
                                      f"@agent class's instance for each run: write {made_of}, not {made_of}()")
                fix = (": decorate it with @agent(provider=..., prompt=...)" if isinstance(step, type)
                       else "")  # (a class written without its decorator: the commonest)
                raise ConfigError(
                    f"workflow {spec.name}: step {shown} is not an @agent class, loop(...) or parallel([...]){fix}")
            if step in plans.agent_specs:
                return
            twin = next((c for c, a in plans.agent_specs.items() if a.name == aspec.name), None)
            if twin is not None:  # its nodes, breakpoints and turns could not be told apart
                file, line = where(step)
                raise InjectionError(
                    f"workflow {spec.name}: two agents are named {aspec.name} ({_defined_at(twin)} and "
                    f"{_defined_at(step)}); give one another name: @agent(..., name='...')",
                    file=file, line=line, cls=aspec.name)
            plans.agent_specs[step] = aspec
            plans.ctor_plans[step] = constructor_plan(step, has_state=has_state, lacks_state=spec.lacks_state,
                                                      runtime_type=WorkflowRuntime)
            _check_state_types(step.__init__, plans.ctor_plans[step], spec, owner=step.__name__,
                               label="__init__", where_=step)
            for t in aspec.tools:
                if t not in plans.execute_plans:
                    if t.form == "class":
                        plans.ctor_plans[t.target] = constructor_plan(
                            t.target, has_state=has_state, lacks_state=spec.lacks_state, runtime_type=WorkflowRuntime)
                        _check_state_types(t.target.__init__, plans.ctor_plans[t.target], spec,
                                           owner=t.target.__name__, label="__init__", where_=t.target)
                    plans.execute_plans[t] = _call_plan(t, has_state=has_state, lacks_state=spec.lacks_state)
                    fn = t.target.execute if t.form == "class" else t.target
                    _check_state_types(fn, plans.execute_plans[t], spec,
                                       owner=t.target.__name__ if t.form == "class" else f"tool {t.name}",
                                       label=f"{getattr(fn, '__name__', 'execute')}()", where_=fn)
            by_name = {t.name: t for t in aspec.tools}
            plans.tool_specs[step] = AgentTools(by_name=by_name, names=frozenset(by_name),
                                                schemas=[t.function_schema() for t in aspec.tools])

    for s in spec.steps:
        visit(s)
    if has_state:  # every run makes one: one that cannot be made is the flow's fault, said at load
        try:
            plans.new_state()
        except ConfigError as exc:
            file, line = where(spec.state)
            raise InjectionError(f"@workflow(state={spec.state.__name__}): {exc}", file=file, line=line,
                                 cls=spec.name) from None
    return plans


def _check_state_types(fn: Any, plan: list[tuple[str, str]], spec: WorkflowSpec, *, owner: str, label: str,
                       where_: Any) -> None:
    """A ``State()`` parameter annotated with a class receives the workflow's state instance, so
    the class must be the workflow's state class or one of its bases; any other class is a
    mistake that would only show mid-run (``'S' object has no attribute 'b'``). An unannotated
    parameter, ``Any``, or an annotation that is not a plain class is left alone."""
    state = spec.state
    if state is None or not any(want == "state" for _, want in plan):
        return
    hints = type_hints(fn)
    for param, want in plan:
        if want != "state":
            continue
        hint = hints.get(param)
        if typing.get_origin(hint) is Annotated:
            hint = typing.get_args(hint)[0]
        if _accepts(hint, state):
            continue
        file, line = where(fn)
        if file is None:
            file, line = where(where_)
        shown = hint.__name__ if isinstance(hint, type) else re.sub(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_])", "", str(hint))
        raise InjectionError(
            f"State() in {label} parameter {param!r} is annotated {shown}, but workflow {spec.name}'s state is "
            f"{state.__name__}; annotate it {param}: {state.__name__} = State() (the run passes its "
            f"{state.__name__} instance there)",
            file=file, line=line, cls=owner)


def _accepts(hint: Any, state: type) -> bool:
    """Whether a parameter annotated ``hint`` can hold an instance of ``state``."""
    if hint is None or hint is Any or isinstance(hint, (str, typing.ForwardRef, typing.TypeVar)):
        return True  # not annotated, or not a class we can judge
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_accepts(a, state) for a in typing.get_args(hint) if a is not type(None))
    if origin is not None or not isinstance(hint, type):
        return True  # list[...], Protocol-like constructs...: left to the type checker
    if getattr(hint, "_is_protocol", False):
        return True
    try:
        return issubclass(state, hint)
    except TypeError:
        return True


def _call_plan(t: ToolSpec, *, has_state: bool, lacks_state: str) -> list[tuple[str, str]]:
    """How to call a tool of any form: which parameter gets the arguments, ctx or the state."""
    if t.fields_from_signature:  # a function whose parameters are the schema
        for param, want in t.injected.items():
            if want == "state" and not has_state:
                file, line = where(t.target)
                raise InjectionError(f"State() in tool function parameter {param!r}{lacks_state}",
                                     file=file, line=line, cls=t.name)
        assert t.schema is not None
        return [(f, "field") for f in t.schema.model_fields] + list(t.injected.items())
    fn = t.target if t.form == "function" else t.target.execute
    owner = t.target.__name__ if t.form == "class" else t.name
    return execute_plan(fn, owner=owner, schema=t.schema, has_state=has_state, lacks_state=lacks_state,
                        skip_self=t.form == "class", tool=t.name)


def build_instances(run: "Run", *, model: str | None, wrap: Callable[[Provider], Provider] | None = None
                    ) -> tuple[dict, dict, dict]:
    """Agents, tools and providers for one run (so ``State()`` gets that run's instance)."""
    from flowtui.runtime.workflow_runtime import WorkflowRuntime

    plans = run.plans
    made: dict[type, Any] = {}

    def build(cls: type) -> Any:
        kwargs = {}
        for param, want in plans.ctor_plans[cls]:
            kwargs[param] = run.workflow_state if want == "state" else WorkflowRuntime(run)
        try:
            return cls(**kwargs)
        except Exception as exc:  # the flow's own __init__: where it raised, not a bare message
            raise ConfigError(f"{cls.__name__}() could not be made for the run: {describe_error(exc)}") from exc

    agents = {cls: build(cls) for cls in plans.agent_specs}
    tools: dict[ToolSpec, Any] = {}  # what to call for each tool: execute of this run's instance, or the function
    for t in plans.execute_plans:
        tools[t] = (build(t.target).execute if t.form == "class" else t.target if t.form == "function"
                    else t.target.execute)
    providers: dict[type, Provider] = {}
    for cls, aspec in plans.agent_specs.items():
        p = aspec.provider
        key = p if isinstance(p, type) else id(p)
        if key not in made:
            inst = _provider_for_run(p, aspec, replies=run.replies)
            inst = inst.override_model(model) if model else inst
            made[key] = wrap(inst) if wrap is not None else inst
        providers[cls] = made[key]
    return agents, tools, providers


def _provider_for_run(p: Any, aspec: AgentSpec, *, replies: str | Path | None) -> Provider:
    """This run's provider: a class built, an instance forked, a factory called."""
    if isinstance(p, type):
        try:
            return p()
        except Exception as exc:  # built with no arguments, once per run: which agent's, and where it is
            if p.__module__.startswith("flowtui."):  # flowtui's own (provider=FunctionProvider): where the agent is
                at = f" (agent defined at {_defined_at(aspec.cls)})"
            else:
                file, line = where(p)
                at = f" (defined at {file}:{line})" if file and line else ""
            why = str(exc) if isinstance(exc, FlowtuiError) else describe_error(exc)
            raise ConfigError(f"{aspec.name}: @agent(provider={p.__name__}){at} could not be made for the run: "
                              f"{why}") from exc
    if isinstance(p, Provider):
        forked = p.fork()
        if not isinstance(forked, Provider):  # (the run failed on "'NoneType' object has no attribute 'describe'")
            raise ConfigError(f"{aspec.name}: {type(p).__name__}.fork() returned {type(forked).__name__}, not a "
                              "Provider; return a copy of the provider for one run (Provider.fork, the default, "
                              "does), or leave fork() out")
        return forked
    try:
        made = p()
    except Exception as exc:
        raise ConfigError(f"{aspec.name}: the provider function {getattr(p, '__qualname__', p)!r} raised "
                          f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(made, Provider):
        raise ConfigError(f"{aspec.name}: the provider function {getattr(p, '__qualname__', p)!r} returned "
                          f"{made!r}, not a Provider")
    if replies is not None:  # --replies reaches the ScriptedProviders a factory makes too
        from flowtui.runtime.providers.scripted import ScriptedProvider

        if isinstance(made, ScriptedProvider):
            made = made.with_replies(replies)
    return made


_NO_MODEL = {"ScriptedProvider": "which plays scripted replies", "FunctionProvider": "whose replies come from a function"}


def load_notes(plans: Plans, *, model: str | None, replies: Any) -> list[str]:
    """What a person should know about a flow that loaded (the worker's ``hello`` says it): methods named
    like hooks, tools with no description, scripted replies under no agent's name, ``--model`` and
    ``--replies`` where they change nothing."""
    return hook_lookalikes(plans) + script_gaps(plans) + model_not_applied(plans, model) + \
        replies_not_applied(plans, replies)


def hook_lookalikes(plans: Plans) -> list[str]:
    """A method of an agent named like a hook but not one (``after_respons``): flowtui never calls it,
    which would go unnoticed. One note per such method, naming the hook it looks like; one per agent
    whose ``run()`` means its hooks are never called; one per tool with no description."""
    from difflib import get_close_matches

    from flowtui.runtime.checks import HOOKS

    notes: list[str] = []
    documented: set[Any] = set()
    for cls, aspec in plans.agent_specs.items():
        if aspec.prompt_file is None and _path_like(aspec.prompt):  # sent as it is: the model reads a path
            notes.append(f"{_at(cls)}agent {aspec.name}: prompt={aspec.prompt!r} is sent as the prompt's text; a "
                         "file is read when the path begins with ./ or ../ or ends in .md or .txt (or is a Path): "
                         f"write prompt='./{aspec.prompt.removeprefix('/')}' if it is one")
        for t in aspec.tools:
            if not str(t.description or "").strip():  # the model is told only a name: it guesses when to call it
                notes.append(f"{_at(t.target)}agent {aspec.name}: tool {t.name} has no description, so the model "
                             f"sees only its name; give it a docstring or description=")
            if t.target not in documented:  # (a tool several agents share: said once)
                documented.add(t.target)
                notes.extend(_doc_names_no_parameter(t, aspec.name))
        ignored = [h for h in HOOKS if h in aspec.hooks] if aspec.takes_over else []
        if ignored:  # run() takes the whole turn over: no hook of the turn is called around it
            notes.append(f"agent {aspec.name}: run() takes the turn over, so {', '.join(ignored)} "
                         f"{'is' if len(ignored) == 1 else 'are'} never called; do that work inside run()")
        for name, value in vars(cls).items():
            if name in HOOKS or name.startswith("__") or not callable(value):
                continue
            close = get_close_matches(name, HOOKS, n=1, cutoff=0.85)
            if close:
                notes.append(f"{_at(value)}agent {aspec.name}: {name} is no hook flowtui calls; did you mean {close[0]}? "
                             f"(the hooks: {', '.join(HOOKS)})")
    return notes


def _doc_names_no_parameter(t: Any, agent: str) -> list[str]:
    """A function tool's docstring describing a parameter it does not have (``contta:`` for ``conta``):
    the model got no description for the real one, unsaid."""
    from difflib import get_close_matches

    from flowtui.runtime.tool_forms import parse_docstring

    if not t.fields_from_signature:
        return []
    params = set(t.schema.model_fields) | set(t.injected)
    notes = []
    for name in parse_docstring(inspect.getdoc(t.target) or "")[1]:
        if name not in params:
            close = get_close_matches(name, sorted(params), n=1)
            meant = f"did you mean {close[0]}? " if close else ""
            notes.append(f"{_at(t.target)}agent {agent}: tool {t.name}'s docstring describes {name}, which is no "
                         f"parameter of it; {meant}(its parameters: {', '.join(sorted(params)) or 'none'})")
    return notes


def _path_like(prompt: str) -> bool:
    """A prompt of one word that names a file (``prompts/helper``, ``helper.prompt``), not a sentence (of
    a script written without spaces, too: ``只回答：通过/不通过``)."""
    return len(prompt) < 256 and re.fullmatch(r"[\w.\-/~]+", prompt, re.ASCII) is not None and \
        ("/" in prompt or re.search(r"\w\.[A-Za-z]\w{0,7}$", prompt) is not None)


def _at(obj: Any) -> str:
    """``file:line: `` of where ``obj`` is written, as a load error says it (or nothing)."""
    file, line = where(obj)
    return f"{shown_path(file)}:{line}: " if file and line else ""


def model_not_applied(plans: Plans, model: str | None) -> list[str]:
    """What ``--model`` (or ``FLOWTUI_MODEL``) does not change, and why: one line per kind of provider.

    An agent whose provider has no model to override (a scripted or function provider) keeps
    its provider; a provider made by a function is only known at run time and is not listed."""
    if not model:
        return []
    skipped: dict[type, list[str]] = {}
    for aspec in plans.agent_specs.values():
        p = aspec.provider
        cls = p if isinstance(p, type) else type(p) if isinstance(p, Provider) else None
        if cls is not None and issubclass(cls, Provider) and cls.override_model is Provider.override_model:
            skipped.setdefault(cls, []).append(aspec.name)
    given = "FLOWTUI_MODEL=" if os.environ.get("FLOWTUI_MODEL") == model else "--model "  # (as the person gave it)
    model = model if model.isprintable() else repr(model)  # (a line break in FLOWTUI_MODEL was printed as one)
    return [f"{given}{model} does not apply to {', '.join(names)}: {'its' if len(names) == 1 else 'their'} "
            f"provider is {_why(name)}" for name, names in skipped.items()]


def replies_not_applied(plans: Plans, replies: Any) -> list[str]:
    """``--replies`` given to a flow none of whose agents plays scripted replies: it changes nothing,
    which would go unnoticed (a provider made by a function is only known at run time: not said)."""
    from flowtui.runtime.providers.scripted import ScriptedProvider

    if replies is None:
        return []
    kinds = [p if isinstance(p, type) else type(p) if isinstance(p, Provider) else None
             for p in (aspec.provider for aspec in plans.agent_specs.values())]
    if any(k is None or issubclass(k, ScriptedProvider) for k in kinds):
        return []
    return ["--replies changes nothing: it replaces a ScriptedProvider's replies, and no agent's provider is one"]


def script_gaps(plans: Plans) -> list[str]:
    """An agent whose ScriptedProvider maps replies to agent names but has none under its name
    (``{"Agnet": [...]}``): its first model call would fail, which the load can say now."""
    from difflib import get_close_matches

    from flowtui.runtime.providers.replies import split_reply
    from flowtui.runtime.providers.scripted import ScriptedProvider

    notes = []
    users: dict[int, int] = {}  # id of a provider -> how many agents it answers
    for aspec in plans.agent_specs.values():
        users[id(aspec.provider)] = users.get(id(aspec.provider), 0) + 1
    for aspec in plans.agent_specs.values():
        p = aspec.provider
        replies = getattr(p, "_replies", None) if isinstance(p, ScriptedProvider) else None
        if isinstance(replies, dict) and aspec.name not in replies:
            close = get_close_matches(aspec.name, list(replies), n=1)
            # (it said "did you mean Writr?" of the key misspelled, as if the agent's name were the mistake)
            fix = f"; rename its key {close[0]!r} to {aspec.name!r}." if close else "."
            notes.append(f"agent {aspec.name}: its ScriptedProvider has no replies for {aspec.name} (it has: "
                         f"{', '.join(sorted(replies)) or 'none'}){fix} Its first model call will fail")
        # its own replies (a list shared by several agents may be meant for another): a call of a tool it lacks
        own = replies.get(aspec.name) if isinstance(replies, dict) else replies if users[id(p)] == 1 else None
        tools = sorted(t.name for t in aspec.tools)
        for i, reply in enumerate(own if isinstance(own, list) else ()):
            for call in split_reply(reply, where="")[1]:
                if call["name"] not in tools:
                    close = get_close_matches(call["name"], tools, n=1)
                    named = call["name"] or '""'  # (no name: "calls tool , which")
                    notes.append(f"agent {aspec.name}: its scripted reply {i + 1} calls tool {named}, which "
                                 f"{aspec.name} does not have (its tools: {', '.join(tools) or 'none'})"
                                 f"{f'; did you mean {close[0]}?' if close else '.'} The model would be told "
                                 "there is no such tool")
    return notes


def _why(cls: type) -> str:
    kind = next((k for k in cls.__mro__ if k.__name__ in _NO_MODEL), None)
    if kind is None:
        return f"{cls.__name__}, which takes no model (it has no override_model)"
    return f"{cls.__name__}{f' (a {kind.__name__})' if kind is not cls else ''}, {_NO_MODEL[kind.__name__]}"
