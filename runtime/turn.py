"""One agent step: a turn is one model call and the tool calls it asked for.

``before_prompt`` → pause → model call (agent prompt first, then
``ctx.state.to_messages()``) → the assistant message joins ``history`` → each
tool call (:mod:`runtime.tools`) → ``after_response`` → ``ctx.turn``,
``ctx.output``. Any raise goes to ``on_error``; an agent with ``run()`` takes
the whole turn over.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from flowtui.runtime.budget import BudgetStop
from flowtui.runtime.context import TurnInfo
from flowtui.runtime.control import RunStopped
from flowtui.runtime.decorators import AgentSpec
from flowtui.runtime.errors import BudgetExceededError, FatalToolError, ProviderError, describe_error
from flowtui.runtime.events import ChatAttempt, ChatDelta
from flowtui.runtime.messages import Message
from flowtui.runtime.nodes import NodeScope
from flowtui.runtime.providers.base import AttemptInfo, ChatReply, ChatRequest
from flowtui.runtime.tools import run_tool_call

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run


async def run_agent(run: "Run", spec: AgentSpec) -> None:
    """One agent step: pause, budget, then a turn (or the agent's own run())."""
    await run.pause("agent", spec.name, prompt=spec.prompt)
    await run.gate()
    inst = run.agents[spec.cls]
    with NodeScope(run, "agent", spec.name) as scope:
        if spec.takes_over:
            out = await run.hook(inst.run, spec.name, "run", (run.input, run.ctx))
            text = None if out is None else str(out)
            # A turn that called no tool, as far as until_answered & co. can tell.
            run.ctx._set("turn", TurnInfo(agent=spec.name, response=text or ""), origin="runtime")
            run.ctx._set("output", text, origin="runtime")
            return
        history_at_start = len(run.state.history)
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
            scope.status, scope.error = "error", describe_error(exc)
            scope.data["recovered"] = True
            speech = str(recovered)
            # The recovery is the agent's speech: the next agent reads it like any reply.
            origin = f"hook:{spec.name}.on_error"
            _answer_dangling_calls(run, spec.name, since=history_at_start,
                                   why=f"the turn failed ({describe_error(exc)})", origin=origin)
            run.state.append("history", Message(role="assistant", content=speech, agent=spec.name), origin=origin)
            # This turn's summary, not the previous one's: until_answered & co. decide on it.
            run.ctx._set("turn", TurnInfo(agent=spec.name, response=speech), origin="runtime")
            run.ctx._set("output", speech, origin="runtime")


def _answer_dangling_calls(run: "Run", agent: str, *, since: int, why: str, origin: str) -> None:
    """Give every tool call this turn asked for and never ran an error result, so the history
    stays a conversation a model accepts (each call answered) before the recovery is appended."""
    history = run.state.history
    answered = {m.tool_call_id for m in history[since:] if m.role == "tool"}
    for m in history[since:]:
        for call in m.tool_calls if m.role == "assistant" else ():
            if call.id not in answered:
                run.state.append("history", Message(
                    role="tool", content=f"Tool call {call.name} was not run: {why}.",
                    tool_name=call.name, tool_call_id=call.id, is_error=True, agent=agent), origin=origin)


async def _turn(run: "Run", spec: AgentSpec, inst: Any) -> None:
    ctx = run.ctx
    prompt = spec.prompt
    if "before_prompt" in spec.hooks:
        new = await run.hook(inst.before_prompt, spec.name, "before_prompt", (prompt, ctx))
        if new is not None:
            prompt = str(new)
    await run.pause("chat", spec.name, prompt=prompt)
    await run.gate()
    reply = await _chat(run, spec, prompt)
    calls = [c if c.id else c.model_copy(update={"id": f"call_{i}"}) for i, c in enumerate(reply.tool_calls)]
    asked_at = len(run.state.history)
    run.state.append("history", Message(role="assistant", content=reply.content, tool_calls=tuple(calls),
                                         reasoning=reply.reasoning, agent=spec.name), origin=f"agent:{spec.name}")
    results = []
    for call in calls:
        if ctx._stop_by is not None:  # ctx.stop() in a tool: this turn finishes, the rest is not run
            _answer_dangling_calls(run, spec.name, since=asked_at, why="the run is stopping (ctx.stop())",
                                   origin="runtime")
            break
        await run.pause("tool", call.name)
        await run.gate()
        results.append(await run_tool_call(run, spec, inst, call))
    last = results[-1] if results else None
    response = last.output if last is not None else reply.content
    if "after_response" in spec.hooks:
        new = await run.hook(inst.after_response, spec.name, "after_response", (response, ctx))
        if new is not None:
            response = str(new)
    ctx._set("turn", TurnInfo(
        agent=spec.name, called_tool=last is not None, tool_name=last.name if last else None,
        tool_error=any(r.is_error for r in results), tool_call_source=reply.tool_call_source if calls else None,
        response=response), origin="runtime")
    ctx._set("output", response, origin="runtime")

async def _chat(run: "Run", spec: AgentSpec, prompt: str) -> ChatReply:
    n = run._turns[spec.name] = run._turns.get(spec.name, 0) + 1
    messages = [Message(role="system", content=prompt)] if prompt else []
    messages += run.state.to_messages()
    with NodeScope(run, "chat", spec.name,
                   data={"turn": n, "messages": len(messages), "prompt": prompt}) as scope:
        del scope.data["prompt"]  # on node.start only: node.end need not repeat it
        emit = run.emitter.emit

        def on_delta(text: str) -> None:
            emit(ChatDelta, text=text)

        def on_attempt(info: AttemptInfo) -> None:
            emit(ChatAttempt, attempt=info.attempt, error=info.error, status=info.status,
                 retry_in_s=info.retry_in_s)

        tool_specs = run.plans.tool_specs[spec.cls]
        request = ChatRequest.model_construct(
            agent=spec.name, turn=n, messages=messages, tools=tool_specs.schemas,
            tool_names=tool_specs.names, sampling=spec.sampling, on_delta=on_delta, on_attempt=on_attempt)
        try:
            provider = run.providers[spec.cls]
            reply = provider.finish(request, await provider.complete(request))
        except ProviderError as exc:
            exc.agent = exc.agent or spec.name
            scope.data["attempts"] = exc.attempts
            raise
        usage = reply.usage
        run.tracker.add_chat(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                             cost_usd=reply.cost_usd)
        scope.data.update(
            prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
            cost_usd=reply.cost_usd, attempts=reply.attempts, tool_calls=len(reply.tool_calls),
            tool_call_source=reply.tool_call_source, model=reply.model)
        if reply.reasoning:
            scope.data["reasoning"] = reply.reasoning
    run.publish_budget()
    return reply
