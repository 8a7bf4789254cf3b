"""Running one tool call: hooks, validation, ``execute``, and failure as observation.

A tool failure is an observation for the model, not an exception: ``execute``
raising, returning ``ToolOutput(is_error=True)``, an unknown tool name, or
arguments that fail the schema all become a ``tool`` message with
``is_error=True``. Only what ``ends_the_run`` names ends the run: a ``FatalToolError``, a budget's
error, a ``MemoryError``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from flowtui.runtime.bus import ToolNotes, tool_notes
from flowtui.runtime.construct import bad_fields
from flowtui.runtime.context import stable_repr
from flowtui.runtime.decorators import AgentSpec
from flowtui.runtime.errors import (
    BudgetExceededError, FatalToolError, as_raised, describe_error, message_of, safe_repr,
)
from flowtui.runtime.invoke import call_user, hook_text, refuse_returned
from flowtui.runtime.messages import Message, ToolCall, ToolOutput, ToolResult
from flowtui.runtime.middleware import ToolInvocation, through
from flowtui.runtime.nodes import NodeScope, fail_counter
from flowtui.runtime.providers.base import RAW_ARGUMENTS_KEY
from flowtui.runtime.secrets import redact_streaming, secret_values
from flowtui.runtime.steps import FailInfo
from flowtui.runtime.tool_forms import ToolSpec

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run


def _text(value: Any) -> tuple[str, bool]:
    """A tool's return value as (text, is_error); one that cannot be written as text says so (it failed the call
    as if the tool had not run: a re-execution then ran it again, and diverged)."""
    try:
        return _as_text(value)
    except Exception as exc:  # noqa: BLE001 (a __repr__ that raises, a model holding itself)
        return (f"<{type(value).__name__} the tool returned, which cannot be written as text: {type(exc).__name__}: "
                f"{message_of(exc)[:200]}>", False)


def _as_text(value: Any) -> tuple[str, bool]:
    if isinstance(value, ToolOutput):
        if (wrong := _output_fault(value)) is not None:
            return f"the tool returned a ToolOutput whose {wrong}", True
        return value.content, value.is_error
    if value is None:
        return "", False
    if isinstance(value, str):
        return value, False
    if isinstance(value, BaseModel):
        return value.model_dump_json(), False
    try:  # a set as a list, a datetime in ISO form, a dataclass as an object: JSON as pydantic makes it
        shown = to_jsonable_python(value, fallback=stable_repr)
        if isinstance(shown, str):  # a date, a path, an object with no JSON form (its repr): that text, not
            return shown, False  # the JSON string of it ("\"<Thing object>\"" reached the model)
        return json.dumps(shown, ensure_ascii=False), False
    except (TypeError, ValueError):
        try:
            return stable_repr(value), False
        except Exception as exc:  # noqa: BLE001 (an int of 100,000 digits: Python writes none past 4,300)
            return f"<{type(value).__name__} the tool returned, which cannot be written as text: " \
                   f"{type(exc).__name__}: {exc}>", False


def _output_fault(out: ToolOutput) -> str | None:
    """What a ToolOutput made without validation (``model_construct``, ``model_copy(update=...)``) holds that its
    fields refuse (``content is int 42: ...``); None when it is as declared."""
    if out.content.__class__ is str and out.is_error.__class__ is bool:
        return None
    return bad_fields(out)


def _note_raised(exc: BaseException) -> None:
    notes = tool_notes.get()
    if notes is not None:
        notes.raised.append(describe_error(exc))


@contextmanager
def _noted(run: "Run", scope: NodeScope) -> Iterator[ToolNotes]:
    """The tool call's :class:`ToolNotes` while it runs; the cleanups it registered, on its node after."""
    notes = ToolNotes(run.ctx)
    token = tool_notes.set(notes)
    try:
        yield notes
    finally:
        tool_notes.reset(token)
        if notes.cleanups:
            scope.data["cleanups"] = notes.cleanups


def _validation_text(name: str, exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors()
    )
    return f"Invalid arguments for tool {name}: {problems}. Fix the arguments and call it again."


async def run_tool_call(run: "Run", spec: AgentSpec, agent: Any, call: ToolCall) -> ToolResult | None:
    """Execute ``call`` for ``agent``; append its tool message; return the result (None: ``before_tool``
    called ``ctx.stop()``, and the tool was not run)."""
    ctx = run.ctx
    executed: list[tuple[str, bool]] = []  # what the tool itself returned, each time it ran
    stop_before = ctx._stop_by
    with NodeScope(run, "tool", call.name, data={"args": dict(call.args)}) as scope:
        try:
            with _noted(run, scope) as notes:
                output, is_error, ran = await _execute(run, spec, agent, call, executed)  # ran: as before_tool left it
        except _Stopping:  # the run is stopping (before_tool called ctx.stop()): the turn answers it as it
            scope.status = "stopped"  # does the calls left; the journal says it was not run, not that it
            scope.data["executed"] = 0  # never returned (a re-execution ran it live)
            return None
        _changed(scope, ran)
        if stop_before is None and ctx._stop_by == f"tool:{call.name}":
            scope.data["stop"] = True  # the tool called ctx.stop(): a re-execution that serves it does too
        if "after_tool" in spec.hooks:
            result = ToolResult(name=ran.name, args=dict(ran.args), output=output, is_error=is_error)
            new = await run.hook(agent.after_tool, spec.name, "after_tool", (result, ctx))
            if isinstance(new, ToolOutput):
                if (wrong := _output_fault(new)) is not None:
                    raise TypeError(f"{spec.name}.after_tool returned a ToolOutput whose {wrong}")
                output, is_error = new.content, new.is_error
            elif new is not None:
                output = hook_text(agent.after_tool, spec.name, "after_tool", new)
        run.state.append("history", Message(role="tool", content=output, tool_name=call.name,
                                            tool_call_id=call.id, is_error=is_error, agent=spec.name),
                          origin=f"tool:{call.name}")
        _ran(run, scope, output, is_error, executed, notes.raised)
    run.publish_budget()
    await _count_failure(run, ran.name, output, is_error)  # (the tool that ran, as after_tool and ctx.turn say)
    return ToolResult(name=ran.name, args=dict(ran.args), output=output, is_error=is_error)


def _changed(scope: NodeScope, ran: ToolCall) -> None:
    """The call as the tool got it, on its node, when ``before_tool`` or a middleware changed it (in place
    too): the node's ``args``, copied as it began, and the history say the call as the model made it."""
    if (ran.name, ran.args) != (scope.name, scope.data["args"]):
        scope.data["ran"] = {"name": ran.name, "args": to_jsonable_python(dict(ran.args), fallback=stable_repr)}


def _ran(run: "Run", scope: NodeScope, output: str, is_error: bool, executed: list[tuple[str, bool]],
         raised: list[str]) -> None:
    """A tool call ran to a result: count it, and mark its node. The node also says how often the
    tool's own code ran (``executed``: 0 when a middleware, ``before_tool``, the schema or an
    unknown name answered) and, when a middleware or ``after_tool`` changed what it returned,
    its own ``results``: what a re-execution against the journal serves in its place. ``raised``: what the
    tool's code or a middleware raised, described for people (``raised``: its type and where)."""
    run.tracker.add_tool()
    if raised and is_error:
        scope.data["raised"] = raised[-1]
    scope.data["is_error"] = is_error
    scope.data["executed"] = len(executed)
    if any(result != (output, is_error) for result in executed):
        scope.data["results"] = [{"content": text, "is_error": error} for text, error in executed]
    if is_error:  # cut short for the node: a credential the cut splits is hidden too (its start alone
        scope.status, scope.error = "error", redact_streaming(output[:200], secret_values())  # is no key)


class AgentTool:
    """One of ``self.tools`` inside an agent's ``run()``: ``await self.tools["x"](q="...")`` runs
    the tool like a turn's tool call (middlewares, validation, a tool node, the budget) and
    returns its :class:`ToolOutput`; it adds nothing to the history."""

    def __init__(self, run: "Run", spec: AgentSpec, tool: ToolSpec) -> None:
        self._run, self._spec = run, spec
        self.name, self.description = tool.name, tool.description
        self.schema = tool.function_schema()  # what a ChatRequest's tools=[...] holds

    async def __call__(self, args: Mapping[str, Any] | None = None, /, **kwargs: Any) -> ToolOutput:
        run, call = self._run, ToolCall(name=self.name, args={**(args or {}), **kwargs})
        if run.ctx._stop_by is not None:  # no tool starts once the run is stopping, a turn's or an agent's own
            return ToolOutput(content=f"Tool call {self.name} was not run: {STOPPING}.", is_error=True)
        executed: list[tuple[str, bool]] = []
        with NodeScope(run, "tool", self.name, data={"args": dict(call.args)}) as scope:
            with _noted(run, scope) as notes:
                output, is_error, ran = await invoke_tool(run, self._spec, call, executed)
            _changed(scope, ran)
            _ran(run, scope, output, is_error, executed, notes.raised)
        run.publish_budget()
        return ToolOutput(content=output, is_error=is_error)

    def __repr__(self) -> str:
        return f"<tool {self.name}>"


async def _count_failure(run: "Run", tool: str, output: str, is_error: bool) -> None:
    """Count the call in the innermost loop's fails (a loop around it keeps going as its own steps do:
    every loop's max_fails is 5 by default, so an inner loop giving up would end every one around it);
    ``on_fail`` hears of every failure at once."""
    fails = fail_counter.get()
    if fails is None:
        return
    if not is_error:
        fails.count = 0
        return
    fails.count += 1
    fails.total += 1
    if fails.on_fail is not None:
        info = FailInfo(tool=tool, error=output, consecutive=fails.count, total=fails.total,
                        max_fails=fails.max_fails)
        await call_user(fails.on_fail, (run.ctx, info)[:run.plans.arity(fails.on_fail)], origin="on_fail",
                        then=run.check_state)


def _said(exc: Exception) -> str:
    """What a tool's exception tells the model: its message; its type too where the message alone says nothing
    of what went wrong (a KeyError's is the key: "Tool t failed: 'x'"), or there is none."""
    exc = as_raised(exc)
    text = message_of(exc)
    if isinstance(exc, LookupError) and len(exc.args) == 1 and text == safe_repr(exc.args[0], len(text) + 1):
        return f"{type(exc).__name__}: {text}"
    return text or type(exc).__name__


def ends_the_run(exc: Exception) -> bool:
    """What a tool raises that ends the run, not an observation: a FatalToolError, a child workflow's
    budget error, and a MemoryError (the run's process is out of memory: nothing the model can fix).
    Not a subclass of it: numpy's "Unable to allocate 8 TiB for an array" is a request too large, which
    the model can make smaller."""
    return isinstance(exc, (FatalToolError, BudgetExceededError)) or type(exc) is MemoryError


async def _execute(run: "Run", spec: AgentSpec, agent: Any, call: ToolCall,
                   executed: list[tuple[str, bool]]) -> tuple[str, bool, ToolCall]:
    """``before_tool``, then the call through the middlewares to the tool."""
    if "before_tool" in spec.hooks:
        try:
            new = await run.hook(agent.before_tool, spec.name, "before_tool", (call, run.ctx))
        except Exception as exc:
            if ends_the_run(exc):
                raise
            return f"Tool call {call.name} was cancelled: {exc}", True, call
        if isinstance(new, ToolCall):
            call = new
        elif new is not None:  # (a dict or a name ran the call unchanged, unsaid)
            refuse_returned(agent.before_tool, spec.name, "before_tool", new)
        if run.ctx._stop_by is not None:  # no tool starts once the run is stopping (it ran: a tool that
            raise _Stopping  # deletes did delete), said by before_tool or, while it awaited, elsewhere
    return await invoke_tool(run, spec, call, executed)


STOPPING = "the run is stopping (ctx.stop())"  # why a call was not run, as the model is told


class _Stopping(Exception):
    """The run is stopping (``ctx.stop()``) as ``before_tool`` returns: the call it was about is not run."""


async def invoke_tool(run: "Run", spec: AgentSpec, call: ToolCall,
                      executed: list[tuple[str, bool]] | None = None) -> tuple[str, bool, ToolCall]:
    """``call`` through the app's tool middlewares to the tool: (output, is_error, the call that
    reached the tool). A middleware that raises fails the call like the tool would. Each result
    of the tool's own code is added to ``executed``."""
    reached = [call]

    async def to_tool(inv: ToolInvocation) -> ToolOutput:
        ran = call if (inv.name, inv.args) == (call.name, call.args) else ToolCall(name=inv.name, args=inv.args,
                                                                                  id=call.id)
        reached.append(ran)
        text, is_error = await _run_tool(run, spec, ran, executed)
        return ToolOutput(content=text, is_error=is_error)

    invocation = ToolInvocation(name=call.name, args=dict(call.args), agent=spec.name, ctx=run.ctx, call_id=call.id)
    try:
        out = await through(run.tool_layers, invocation, to_tool, on_pass=_an_invocation, returned=_an_output)
    except BaseException as exc:
        if isinstance(exc, Exception) and not ends_the_run(exc):
            _note_raised(exc)
            return f"Tool {call.name} failed: {_said(exc)}", True, reached[-1]
        if len(reached) > 1:  # the tool was called, and what it raised ends the run (a FatalToolError, SystemExit):
            run.tracker.add_tool()  # a call the totals and max_tool_calls count as one that gave a result
        raise
    text, is_error = _text(out)
    return text, is_error, reached[-1]


def _an_invocation(name: str, received: Any, passed: Any) -> None:
    """What tool middleware ``name`` passed on is an invocation of a tool with arguments: it fails the call,
    naming it ("'str' object has no attribute 'name'", and pydantic's lines for args of a str, named no one)."""
    if not isinstance(passed, ToolInvocation):
        raise TypeError(f"tool middleware {name!r} passed on {type(passed).__name__} {passed!r:.40}, not a "
                        "ToolInvocation (pass the invocation it got, or invocation.replace(args={...}))")
    if not isinstance(passed.args, Mapping):
        raise TypeError(f"tool middleware {name!r} passed on an invocation whose args is {type(passed.args).__name__}"
                        f" {passed.args!r:.40}, not the call's arguments (a dict)")
    if not isinstance(passed.name, str):
        raise TypeError(f"tool middleware {name!r} passed on an invocation whose name is {type(passed.name).__name__}"
                        f" {passed.name!r:.40}, not a tool's name")


def _an_output(name: str, out: Any) -> None:
    """What tool middleware ``name`` returned is an output: None is one that forgot to return what
    call_next gave (every call's result was blank, unsaid). It fails the call, naming it."""
    if out is None:
        raise TypeError(f"tool middleware {name!r} returned None, not a ToolOutput (return await "
                        "call_next(invocation), or a ToolOutput of your own)")
    if isinstance(out, ToolOutput) and (wrong := _output_fault(out)) is not None:
        raise TypeError(f"tool middleware {name!r} returned a ToolOutput whose {wrong}")
    if not isinstance(out, (ToolOutput, str)):  # (a generator's str() reached the model as the result, unsaid, its
        # tool never run; 42 was "42")
        hint = ("; a method with yield in it is a generator: return await call_next(invocation) instead"
                if inspect.isgenerator(out) or inspect.isasyncgen(out) else "")
        raise TypeError(f"tool middleware {name!r} returned {type(out).__name__}, not a ToolOutput or a str (return "
                        f"await call_next(invocation), or ToolOutput(content=...) of your own){hint}")


async def _run_tool(run: "Run", spec: AgentSpec, call: ToolCall,
                    executed: list[tuple[str, bool]] | None) -> tuple[str, bool]:
    """Validate ``call``'s arguments and execute the tool; every failure is an observation.

    In a re-execution against a journal (``--resume-from``) the tool's recorded result is
    served in place of running it (:meth:`~flowtui.runtime.resume.Resume.tool`)."""
    plans = run.plans.tool_specs[spec.cls]
    tspec = plans.by_name.get(call.name)
    if tspec is None:
        available = ", ".join(sorted(plans.names)) or "none"
        return f"Unknown tool {call.name!r}. Available tools: {available}.", True
    if RAW_ARGUMENTS_KEY in call.args:
        raw = str(call.args[RAW_ARGUMENTS_KEY])[:500]
        return (f"Invalid arguments for tool {call.name}: not a JSON object ({raw!r}). "
                "Send the arguments as a JSON object."), True
    if tspec.schema is not None:
        try:
            args: Any = tspec.schema.model_validate(call.args)
        except ValidationError as exc:
            return _validation_text(call.name, exc), True
    else:
        args = dict(call.args)
    kwargs = {}
    for param, want in run.plans.execute_plans[tspec]:
        kwargs[param] = (args if want == "input" else run.ctx if want == "ctx" else run.workflow_state
                         if want == "state" else getattr(args, param))
    execute = run.tools[tspec]
    resume = run.root.resume
    if resume is not None:
        execute = resume.tool(run, tspec, execute)
    try:
        value = await call_user(execute, (), kwargs=kwargs, origin=f"tool:{call.name}", then=run.check_state)
    except Exception as exc:
        if ends_the_run(exc):
            raise
        _note_raised(exc)
        result = f"Tool {call.name} failed: {_said(exc)}", True
    else:
        result = _text(value)
    if executed is not None:
        executed.append(result)
    return result
