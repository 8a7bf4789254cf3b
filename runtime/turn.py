"""One agent step: a turn is one model call and the tool calls it asked for.

``before_prompt`` → pause → model call (agent prompt first, then
``ctx.state.to_messages()``) → the assistant message joins ``history`` → each
tool call (:mod:`runtime.tools`) → ``after_response`` → ``ctx.turn``,
``ctx.output``. Any raise goes to ``on_error``; an agent with ``run()`` takes
the whole turn over, with ``self.prompt``, ``self.provider`` and ``self.tools``
set first, and its output counts as a turn that called no tool.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from flowtui.runtime.budget import BudgetStop
from flowtui.runtime.chat import AgentProvider, build_request, call_model
from flowtui.runtime.construct import builders
from flowtui.runtime.context import TurnInfo
from flowtui.runtime.control import RunStopped
from flowtui.runtime.decorators import AgentSpec
from flowtui.runtime.errors import BudgetExceededError, FatalToolError, describe_error
from flowtui.runtime.invoke import hook_text
from flowtui.runtime.messages import Message, ToolCall, well_formed_call
from flowtui.runtime.nodes import NodeScope
from flowtui.runtime.pending import PendingCall, decide, deny_call
from flowtui.runtime.tool_forms import TOOL_NAME, sendable_name
from flowtui.runtime.tools import STOPPING, AgentTool, ends_the_run, run_tool_call

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run


async def run_agent(run: "Run", spec: AgentSpec) -> None:
    """One agent step: pause, budget, then a turn (or the agent's own run())."""
    if run.pauses:
        await run.pause("agent", spec.name, prompt=spec.prompt, prompt_hook="before_prompt" in spec.hooks)
    if run.gate_needed():
        await run.gate()
    inst = run.agents[spec.cls]
    with NodeScope(run, "agent", spec.name) as scope:
        if spec.takes_over:
            # What run() works with, as the seed's escape hatch promises.
            inst.prompt, inst.provider = spec.prompt, AgentProvider(run, spec)
            inst.tools = MappingProxyType({t.name: AgentTool(run, spec, t) for t in spec.tools})
            out = await run.hook(inst.run, spec.name, "run", (run.input, run.ctx))
            text = None if out is None else hook_text(inst.run, spec.name, "run", out)
            # A turn that called no tool, as far as until_answered & co. can tell.
            run.ctx._set("turn", TurnInfo(agent=spec.name, response=text or ""), origin="runtime")
            run.ctx._set("output", text, origin="runtime")
            return
        history_at_start = run.state._history_length()
        try:
            await _turn(run, spec, inst)
        except (RunStopped, BudgetStop, BudgetExceededError, FatalToolError, asyncio.CancelledError):
            raise
        except Exception as exc:
            if "on_error" not in spec.hooks:
                raise
            recovered = await run.hook(inst.on_error, spec.name, "on_error", (exc, run.ctx))
            if recovered is None:
                raise
            await others_answered(run, spec.name)  # (a parallel branch's calls since: answered first)
            scope.status, scope.error = "error", describe_error(exc)
            scope.data["recovered"] = True
            speech = hook_text(inst.on_error, spec.name, "on_error", recovered)
            # The recovery is the agent's speech: the next agent reads it like any reply.
            origin = f"hook:{spec.name}.on_error"
            _answer_dangling_calls(run, spec.name, since=history_at_start,
                                   why=f"the turn failed ({describe_error(exc)})", origin=origin)
            run.state.append("history", Message(role="assistant", content=speech, agent=spec.name), origin=origin)
            # This turn's summary, not the previous one's: until_answered & co. decide on it.
            run.ctx._set("turn", TurnInfo(agent=spec.name, response=speech), origin="runtime")
            run.ctx._set("output", speech, origin="runtime")


def sendable_calls(calls: Any, used: set[str] | None = None) -> list[ToolCall]:
    """A reply's tool calls as the history keeps them and the next request sends them back: each with
    an id of its own and a name the provider takes. A server that gave no id or one id twice (then
    both were answered, and the next request refused), a model that made a name up (``functions.echo``
    sent back was refused with a 400, and the run failed): the model is told of an unknown tool under
    the name it is shown.

    ``used``: the ids the run's history holds already; an id given again (a server that numbers each
    reply's calls from ``call_0``, calls found in the text of two agents' first turns) is renamed too,
    since a provider that takes the history as tool-use blocks refuses an id used twice. An id longer
    than OpenAI takes back (40 characters) is shortened the same way."""
    out: list[ToolCall] = []
    used = used or set()
    calls = [well_formed_call(c) for c in calls]  # (a lone surrogate: the tool is given what the journal keeps)
    ids = {c.id for c in calls if c.id} | used
    seen: set[str] = set()
    for i, c in enumerate(calls):
        update: dict[str, Any] = {}
        if not c.id or c.id in seen or c.id in used or len(c.id) > MAX_CALL_ID:
            base = c.id or f"call_{i}"
            new, n = _fitted(base), 1
            while new in ids:
                new, n = _fitted(f"{base}_{n}"), n + 1
            ids.add(new)
            update["id"] = new
        if not TOOL_NAME.fullmatch(c.name):
            update["name"] = sendable_name(c.name)
        c = c.model_copy(update=update) if update else c
        seen.add(c.id)
        out.append(c)
    return out


MAX_CALL_ID = 40  # OpenAI refuses a longer tool-call id sent back ("string too long", a 400)


def _fitted(call_id: str) -> str:
    """``call_id`` if it is short enough to send back; else its start and a digest of all of it."""
    if len(call_id) <= MAX_CALL_ID:
        return call_id
    return f"{call_id[:MAX_CALL_ID - 9]}_{hashlib.sha1(call_id.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _answer_dangling_calls(run: "Run", agent: str, *, since: int, why: str, origin: str,
                           running: str | None = None, running_was: str = "did not return") -> None:
    """Give every tool call this turn asked for and never ran an error result, so the history
    stays a conversation a model accepts (each call answered) before the recovery is appended.
    ``running``: the id of a call whose tool had started (``running_was``: what came of it)."""
    history = run.state.history
    answered = {m.tool_call_id for m in history[since:] if m.role == "tool"}
    for m in history[since:]:
        for call in m.tool_calls if m.role == "assistant" else ():
            if call.id not in answered:
                what = running_was if call.id == running else "was not run"
                run.state.append("history", Message(
                    role="tool", content=f"Tool call {call.name} {what}: {why}.",
                    tool_name=call.name, tool_call_id=call.id, is_error=True, agent=agent), origin=origin)


async def _turn(run: "Run", spec: AgentSpec, inst: Any) -> None:
    ctx = run.ctx
    prompt = spec.prompt
    if "before_prompt" in spec.hooks:
        new = await run.hook(inst.before_prompt, spec.name, "before_prompt", (prompt, ctx))
        if new is not None:
            prompt = hook_text(inst.before_prompt, spec.name, "before_prompt", new)
    while True:  # (waited for before the pause, and again after it if another branch asked meanwhile: the
        # pause shows the request that goes, and the gate sees what the wait let happen)
        if run.open_calls is not None:
            await others_answered(run, spec.name)
        if run.pauses:
            await run.pause("chat", spec.name, prompt=prompt)
        if run.gate_needed():
            await run.gate()
        if run.open_calls is None or run.open_calls[0] is asyncio.current_task():
            break
    reply = await call_model(run, spec, build_request(run, spec, prompt), prompt=prompt, built=True)
    if run.open_calls is not None:  # (asked while another branch's calls were still to be answered)
        await others_answered(run, spec.name)
    calls = sendable_calls(reply.tool_calls, run.state.call_ids()) if reply.tool_calls else []
    asked_at = run.state._history_length()
    run.state.append("history", _assistant_message(reply, calls, spec.name), origin=f"agent:{spec.name}")
    results = []
    if calls:
        run.open_calls = opened = (asyncio.current_task(), asyncio.Event(), spec.name, [c.name for c in calls])
        try:
            results = await _run_calls(run, spec, inst, calls, asked_at)
        finally:
            run.open_calls = None
            opened[1].set()
    last = results[-1] if results else None
    response = last.output if last is not None else reply.content
    if "after_response" in spec.hooks:
        new = await run.hook(inst.after_response, spec.name, "after_response", (response, ctx))
        if new is not None:
            response = hook_text(inst.after_response, spec.name, "after_response", new)
    info, shown = _turn_info(
        agent=spec.name, called_tool=last is not None, tool_name=last.name if last else None,
        tool_error=bool(results) and any(r.is_error for r in results),
        tool_call_source=reply.tool_call_source if calls else None, response=response)
    ctx._set("turn", info, origin="runtime", shown=shown)
    ctx._set("output", response, origin="runtime")


async def _run_calls(run: "Run", spec: AgentSpec, inst: Any, calls: list[ToolCall], asked_at: int) -> list[Any]:
    """The reply's tool calls, in order, each after its pause point; their results. A run that ends
    among them answers the ones left, so its history stays a conversation a provider accepts."""
    results = []
    running = None  # the call whose tool runs (a stop inside a child workflow it started ends it)
    try:
        for call in calls:
            if run.ctx._stop_by is not None:  # ctx.stop() in a tool: this turn finishes, the rest is not run
                break
            controller = run.controller
            pending = run.pending = PendingCall(spec, call, approval=controller is not None
                                                and controller.needs_approval(call.name))
            try:
                if run.pauses:
                    await run.pause("tool", call.name, call=call)
                if run.gate_needed():
                    await run.gate(before_tool=True)
            finally:
                run.pending = None
            if pending.approval and pending.decision is None:
                decide(run, pending, "approved")  # moved on by the person, who saw the call
            if pending.decision == "denied":
                results.append(deny_call(run, spec, pending.call, pending.reason))
                continue
            running = pending.call.id
            result = await run_tool_call(run, spec, inst, pending.call)
            running = None
            if result is not None:  # (None: its before_tool called ctx.stop(), and it was not run)
                results.append(result)
        if run.ctx._stop_by is not None:  # the calls not run are answered so
            _answer_dangling_calls(run, spec.name, since=asked_at, why=STOPPING, origin="runtime")
    except (RunStopped, BudgetStop) as stop:
        # the same words however it was stopped: a re-execution stops there as the person did, and compares
        why = f"the budget's {stop.limit} was reached" if isinstance(stop, BudgetStop) else "the run stopped"
        _answer_dangling_calls(run, spec.name, since=asked_at, why=why, origin="runtime", running=running)
        raise
    except asyncio.CancelledError:  # another branch of a parallel step failed; a stop's grace ran out
        _answer_dangling_calls(run, spec.name, since=asked_at, why="its turn was cancelled", origin="runtime",
                               running=running)
        raise
    except BaseException as exc:  # a hook or middleware raised among them, or a tool raised SystemExit or
        # KeyboardInterrupt (no observation: the run ends): the one that had started did run (a run that ends here
        # too: its history is a conversation a model takes, as a snapshot of it must be to be loaded, or a fork
        # from its end to go on)
        ends = ends_the_run(exc) if isinstance(exc, Exception) else True
        why = f"the {'run' if ends else 'turn'} failed ({describe_error(exc)})"
        _answer_dangling_calls(run, spec.name, since=asked_at, why=why, origin="runtime", running=running,
                               running_was="gave no result")
        raise
    return results


WAIT_SAID_S = 5.0  # a branch waiting this long for another's tool calls says so (it may wait for ever)


async def others_answered(run: "Run", waiting: str) -> None:
    """Until no other branch of a parallel step has tool calls in the history still to be answered.
    A model call sent meanwhile held calls without their results, which a provider refuses (the run
    failed, blaming the flow's code for the history), and a reply kept meanwhile came between a call
    and its result. Its own calls a turn does not wait for. A wait that goes on is said once, on
    stderr: a tool that waits for what another branch does then waits for ever."""
    held, said = run.open_calls, False
    while held is not None and held[0] is not asyncio.current_task():
        if said:
            await held[1].wait()
        else:
            said = await _said_if_long(run, waiting, held)
        held = run.open_calls


async def _said_if_long(run: "Run", waiting: str, held: Any) -> bool:
    """Waits for ``held``'s calls to be answered, saying so (True) once the wait has gone on for
    ``WAIT_SAID_S``. The time a person held the run (paused) while it waited is not counted: the tool
    they resumed was told of as waiting for ever when it took a moment, or only started, as their pause
    ended."""
    ctl = run.controller
    held_s = ctl.held_s if ctl is not None else (lambda: 0.0)
    since, paused_s = time.perf_counter(), held_s()
    while True:
        left = WAIT_SAID_S - (time.perf_counter() - since - (held_s() - paused_s))
        if left <= 0:
            print(f"flowtui: {waiting} waits for the tool calls of {held[2]} ({', '.join(held[3])}) to be answered: "
                  "branches of a parallel step share one history, so a tool that waits for another branch waits "
                  "for ever (x stops the run)", file=sys.stderr, flush=True)
            return True
        try:  # (while paused, what is left stays as it is: looked at again after as long)
            # (not wait_for: Python 3.11's swallows a cancel that comes as the wait ends, as it does when the
            # branch whose calls it waits for fails, and this branch, cancelled, ran on for ever)
            async with asyncio.timeout(left):
                await held[1].wait()
            return False
        except TimeoutError:
            continue


# A turn's message and summary are built without validation when every value already has its
# declared type, as the runtime's own values and a finished ChatReply's do. A reply a middleware
# put together by hand may not: then they are validated, so a malformed one fails as it always did.

def _assistant_message(reply: Any, calls: list[ToolCall], agent: str) -> Message:
    fields = dict(role="assistant", content=reply.content, tool_calls=tuple(calls), reasoning=reply.reasoning,
                  agent=agent)
    if (type(reply.content) is str and (reply.reasoning is None or type(reply.reasoning) is str)
            and type(agent) is str and (not calls or all(type(c) is ToolCall for c in calls))):
        return builders[Message](fields)
    return Message(**fields)


def _turn_info(**fields: Any) -> tuple[TurnInfo, dict[str, Any] | None]:
    """``ctx.turn`` and, when built without validation, its event value: its fields (given in
    declaration order) are str, bool or None, JSON already."""
    source = fields["tool_call_source"]
    if (type(fields["response"]) is str and type(fields["agent"]) is str
            and (source is None or (type(source) is str and source in ("native", "rescued")))):
        return builders[TurnInfo](fields), fields
    return TurnInfo(**fields), None
