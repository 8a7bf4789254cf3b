"""Steps and loops (SPEC §1.6): until (sync, async, with state), stopped_by, max_fails,
the stop helpers, nested loops and parallel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from flowtui import (
    Controller,
    FunctionProvider,
    Input,
    State,
    ToolOutput,
    agent,
    bootstrap,
    called_tool,
    loop,
    parallel,
    tool,
    turn_of,
    Budget,
    BudgetExceededError,
    WorkflowRuntime,
    until_answered,
    was_exhausted,
    workflow,
)
from flowtui.runtime.wellformed import problems
from fakes import call, counting, run_collect, scripted


# --- helpers ---------------------------------------------------------------

def loop_end(events, name="loop"):
    (end,) = [e for e in events if e.type == "node.end" and e.kind == "loop" and e.name == name]
    return end


def loop_infos(events):
    """Every ctx.loop value set, in order."""
    return [e.value for e in events if e.type == "ctx.set" and e.name == "loop"]


class S(BaseModel):
    done: bool = False
    rounds: int = 0


# --- until ----------------------------------------------------------------------

async def test_body_runs_once_even_when_until_is_already_true():
    provider, calls = counting()
    until_calls = []

    @agent(provider=provider)
    class A:
        pass

    def until(ctx):
        until_calls.append(ctx.output)
        return True

    @workflow(steps=[loop([A], until=until, max_iterations=5)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert len(calls) == 1
    assert until_calls == ["reply 1"]  # until is asked after the body, never before
    assert out == "reply 1"
    end = loop_end(events)
    assert end.status == "ok"
    assert (end.data["iterations"], end.data["stopped_by"]) == (1, "until")
    assert run.ctx.loop.stopped_by == "until" and run.ctx.loop.iterations == 1
    assert run.ctx.loop.exhausted is False
    assert not was_exhausted(run.ctx)


async def test_sync_until_stops_the_loop_when_it_returns_true():
    provider, calls = counting()

    @agent(provider=provider)
    class A:
        pass

    @workflow(steps=[loop([A], until=lambda ctx: ctx.output == "reply 3", max_iterations=10)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "reply 3" and len(calls) == 3
    assert (loop_end(events).data["iterations"], loop_end(events).data["stopped_by"]) == (3, "until")
    assert run.ctx.loop.stopped_by == "until"


async def test_async_until_is_awaited():
    provider, calls = counting()

    @agent(provider=provider)
    class A:
        pass

    async def until(ctx):
        await asyncio.sleep(0)
        return ctx.output == "reply 2"

    @workflow(steps=[loop([A], until=until, max_iterations=10)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "reply 2" and len(calls) == 2
    assert loop_end(events).data["stopped_by"] == "until"


async def test_until_with_two_parameters_gets_the_workflow_state():
    provider, calls = counting()
    states = []

    @agent(provider=provider)
    class Reviewer:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, response, ctx):
            self.s.rounds += 1
            self.s.done = self.s.rounds >= 3

    def until(ctx, s):
        states.append(s)
        return s.done

    @workflow(state=S, steps=[loop([Reviewer], until=until, max_iterations=5)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert len(calls) == 3
    assert len(states) == 3 and all(s is run.workflow_state for s in states)
    assert run.workflow_state.rounds == 3 and run.workflow_state.done is True
    changes = [(e.path, e.old, e.new) for e in events if e.type == "workflow_state.change"]
    assert changes == [("rounds", 0, 1), ("rounds", 1, 2), ("rounds", 2, 3), ("done", False, True)]


async def test_ctx_loop_counts_iterations_while_the_loop_runs():
    provider, _ = counting()
    seen = []

    @agent(provider=provider)
    class A:
        pass

    def until(ctx):
        seen.append((ctx.loop.iterations, ctx.loop.max_iterations, ctx.loop.stopped_by))
        return ctx.loop.iterations == 2

    @workflow(steps=[loop([A], until=until, max_iterations=4)])
    class W:
        pass

    await run_collect(W)
    assert seen == [(1, 4, None), (2, 4, None)]


async def test_ctx_loop_is_the_running_loop_from_its_first_iteration_nested_too():
    """"attempt {ctx.loop.iterations + 1} of {ctx.loop.max_iterations}" failed the run in the first
    iteration (no ctx.loop yet), and an inner loop's first iteration read the outer loop's."""
    p, _ = counting()
    seen = []

    @agent(provider=p)
    class A:
        def before_prompt(self, prompt, ctx):
            seen.append((ctx.loop.iterations, ctx.loop.max_iterations))

    @workflow(steps=[loop([loop([A], max_iterations=2, name="inner")], max_iterations=3, name="outer")])
    class W:
        pass

    await run_collect(W)
    assert seen == [(0, 2), (1, 2)] * 3


async def test_a_parallel_branch_reads_its_own_loop_whatever_the_other_branch_wrote():
    """The branches share ctx: an until that awaited read the sibling loop's iterations (which had
    run ahead), and ended its own loop on them."""
    a, _ = counting("a")
    b, _ = counting("b")
    b_done = asyncio.Event()
    seen = []

    @agent(provider=a)
    class A:
        def before_prompt(self, prompt, ctx):
            seen.append(("prompt", ctx.loop.iterations, ctx.loop.max_iterations))

    @agent(provider=b)
    class B:
        pass

    async def until(ctx):
        await asyncio.wait_for(b_done.wait(), 30)  # the other branch's loop runs to its end meanwhile
        seen.append(("until", ctx.loop.iterations, ctx.get("loop").max_iterations))
        return ctx.loop.iterations >= 2

    @workflow(steps=[parallel([loop([A], until=until, max_iterations=5, name="LA"),
                               loop([B], max_iterations=3, on_exhausted=lambda ctx: b_done.set(), name="LB")])])
    class W:
        pass

    _, events, run = await run_collect(W)
    assert seen == [("prompt", 0, 5), ("until", 1, 5), ("prompt", 1, 5), ("until", 2, 5)]
    ends = {e.name: (e.data["iterations"], e.data["stopped_by"]) for e in events
            if e.type == "node.end" and e.kind == "loop"}
    assert ends == {"LA": (2, "until"), "LB": (3, "exhausted")}
    # after the step, ctx.loop is the most recent loop: the branch's that ended last
    assert (run.ctx.loop.max_iterations, run.ctx.loop.stopped_by) == (5, "until")


# --- exhausted ------------------------------------------------------------------

async def test_loop_exhausted_at_max_iterations_calls_on_exhausted():
    provider, calls = counting()
    exhausted = []

    @agent(provider=provider)
    class A:
        pass

    def on_exhausted(ctx, n):
        exhausted.append((n, ctx.loop.exhausted, ctx.loop.stopped_by, was_exhausted(ctx)))

    @workflow(steps=[loop([A], until=lambda ctx: False, max_iterations=3, on_exhausted=on_exhausted)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert len(calls) == 3 and out == "reply 3"
    assert exhausted == [(3, True, "exhausted", True)]
    end = loop_end(events)
    assert (end.status, end.data["iterations"], end.data["stopped_by"], end.data["max_iterations"]) == \
        ("ok", 3, "exhausted", 3)
    assert run.ctx.loop.exhausted is True
    assert run.ctx.loop.stopped_by == "exhausted"
    assert was_exhausted(run.ctx) is True
    assert events[-1].type == "run.end" and events[-1].status == "finished"
    # each change of ctx.loop said once: the exhausted value was set twice, one ctx.set the same as the last
    infos = loop_infos(events)
    assert [(i["iterations"], i["stopped_by"]) for i in infos] == [(0, None), (1, None), (2, None), (3, None),
                                                                   (3, "exhausted")]


async def test_was_exhausted_in_an_outer_loops_until_reads_the_inner_loop_that_ended_in_its_iteration():
    """The outer loop sets ctx.loop to its own before its until runs, so was_exhausted there read the outer
    loop (running, never exhausted): retrying an inner loop until it no longer gave up could not be written."""
    provider, _ = counting()

    @agent(provider=provider)
    class A:
        pass

    seen_outer, seen_after = [], []

    def outer_until(ctx):
        seen_outer.append((ctx.loop.iterations, was_exhausted(ctx)))
        return not was_exhausted(ctx)

    def after_until(ctx):  # a loop after another: the one before did not end inside it
        seen_after.append(was_exhausted(ctx))
        return True

    rounds = iter([2, 2, 1])  # the inner loop's until holds at once on the third round

    def inner_until(ctx):
        return ctx.loop.iterations >= next(rounds) if ctx.loop.iterations == 1 else False

    @workflow(steps=[loop([loop([A], until=inner_until, max_iterations=2, name="inner")], until=outer_until,
                          max_iterations=5, name="outer"),
                     loop([A], until=after_until, max_iterations=2, name="after")])
    class W:
        pass

    await run_collect(W)
    assert seen_outer == [(1, True), (2, True), (3, False)]
    assert seen_after == [False]


async def test_loop_without_until_runs_to_max_iterations():
    provider, calls = counting()

    @agent(provider=provider)
    class A:
        pass

    @workflow(steps=[loop([A], max_iterations=2)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert len(calls) == 2
    assert loop_end(events).data["stopped_by"] == "exhausted"


async def test_async_on_exhausted_is_awaited():
    provider, _ = counting()
    got = []

    @agent(provider=provider)
    class A:
        pass

    async def on_exhausted(ctx, n):
        await asyncio.sleep(0)
        got.append(n)
        ctx.gave_up = True

    @workflow(steps=[loop([A], until=lambda ctx: False, max_iterations=2, on_exhausted=on_exhausted)])
    class W:
        pass

    _, _, run = await run_collect(W)
    assert got == [2] and run.ctx.gave_up is True


# --- fails ------------------------------------------------------------------------

class Args(BaseModel):
    ok: bool


def _flaky_tool():
    @tool(name="flaky", schema=Args)
    class Flaky:
        async def execute(self, args: Args = Input()):
            if args.ok:
                return "worked"
            return ToolOutput(content="it broke", is_error=True)

    return Flaky


async def test_max_fails_consecutive_tool_failures_stop_the_loop_and_call_on_fail():
    provider, calls = scripted(*[call("flaky", ok=False)] * 10)
    infos = []

    @agent(provider=provider, tools=[_flaky_tool()])
    class A:
        pass

    def on_fail(ctx, info):
        infos.append((info.consecutive, info.total, info.tool, info.error, ctx.get("loop")))

    @workflow(steps=[loop([A], until=until_answered, max_iterations=10, max_fails=3, on_fail=on_fail)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert len(calls) == 3
    # every failure is reported as it happens (the first in the loop's first iteration), not only the third
    assert [i[:4] for i in infos] == [(1, 1, "flaky", "it broke"), (2, 2, "flaky", "it broke"),
                                      (3, 3, "flaky", "it broke")]
    assert [i[4].iterations for i in infos] == [0, 1, 2]
    end = loop_end(events)
    assert (end.data["iterations"], end.data["stopped_by"]) == (3, "fails")
    assert run.ctx.loop.stopped_by == "fails"
    assert run.ctx.loop.exhausted is False
    # the run itself goes on and finishes
    assert events[-1].type == "run.end" and events[-1].status == "finished"


async def test_only_the_innermost_loop_counts_a_failure_so_a_loop_around_it_may_plan_again():
    """With every loop's max_fails 5 by default, a failure counted in every loop around it would end them all
    when an inner loop gave up: an outer loop that plans again never could."""
    provider, calls = scripted(*[call("flaky", ok=False)] * 5, "planned again", *[call("flaky", ok=True), "done"])
    outer = []

    @agent(provider=provider, tools=[_flaky_tool()])
    class A:
        pass

    @workflow(steps=[loop([loop([A], until=until_answered, name="inner")], until=lambda ctx: ctx.loop.iterations >= 2,
                          max_iterations=3, name="outer", on_fail=lambda ctx, info: outer.append(info))])
    class W:
        pass

    out, events, run = await run_collect(W)
    ends = [(e.name, e.data["stopped_by"]) for e in events if e.type == "node.end" and e.kind == "loop"]
    assert ends == [("inner", "fails"), ("inner", "until"), ("outer", "until")] and outer == []


async def test_a_child_workflows_tool_failures_are_its_own_not_its_parents_loops():
    """The parent loop's on_fail was called for each failure inside a child workflow, with the child's
    ctx, and counted them toward the parent's max_fails."""
    heard = []

    @agent(provider=scripted(call("flaky", ok=False), call("flaky", ok=False), call("flaky", ok=False), "done")[0],
           tools=[_flaky_tool()])
    class Inner:
        pass

    @workflow(steps=[Inner])
    class Child:
        pass

    @tool(name="delegar", description="Runs the child.")
    class Delegar:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self) -> str:
            return await self.runtime.run(Child, input="CHILD-INPUT")

    @agent(provider=scripted(call("delegar"), "all done")[0], tools=[Delegar])
    class P:
        pass

    @workflow(steps=[loop([P], until=until_answered, max_fails=2,
                          on_fail=lambda ctx, info: heard.append((info.tool, ctx.state.history[0].content)))])
    class Parent:
        pass

    out, events, run = await run_collect(Parent)
    assert out == "all done" and heard == []
    assert [e.data["stopped_by"] for e in events if e.type == "node.end" and e.kind == "loop"] == ["until"]


async def test_a_budget_in_raise_mode_says_it_stopped_the_loop():
    """ctx.loop.stopped_by and the loop's node said nothing (null) when a budget in mode="raise" ended it;
    in mode="stop" they said budget."""
    provider, _ = scripted(*["again"] * 10)

    @agent(provider=provider)
    class A:
        pass

    @workflow(steps=[loop([A], max_iterations=10)])
    class W:
        pass

    events: list = []
    run = bootstrap(W).prepare("go", on_event=events.append, budget=Budget(max_chat_calls=2, mode="raise"))
    with pytest.raises(BudgetExceededError):
        await run.execute()
    end = loop_end(events)
    assert (end.status, end.data["stopped_by"]) == ("error", "budget")
    assert run.ctx.loop.stopped_by == "budget"


async def test_a_success_resets_the_consecutive_fail_count():
    bad, good = call("flaky", ok=False), call("flaky", ok=True)
    provider, calls = scripted(bad, bad, good, bad, bad, good, bad, bad, bad, "never")
    infos = []

    @agent(provider=provider, tools=[_flaky_tool()])
    class A:
        pass

    @workflow(steps=[loop([A], until=until_answered, max_iterations=20, max_fails=3,
                          on_fail=lambda ctx, info: infos.append((info.consecutive, info.total)))])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert len(calls) == 9
    assert infos == [(1, 1), (2, 2), (1, 3), (2, 4), (1, 5), (2, 6), (3, 7)]
    assert (loop_end(events).data["iterations"], loop_end(events).data["stopped_by"]) == (9, "fails")


async def test_fails_break_out_of_the_body_before_the_remaining_steps():
    provider, calls = scripted(call("flaky", ok=False), "never")
    other, other_calls = counting("other")

    @agent(provider=provider, tools=[_flaky_tool()])
    class A:
        pass

    @agent(provider=other)
    class B:
        pass

    @workflow(steps=[loop([A, B], max_iterations=5, max_fails=1)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert len(calls) == 1 and other_calls == []
    assert loop_end(events).data["stopped_by"] == "fails"


# --- stop helpers --------------------------------------------------------------------

async def test_until_answered_loops_while_the_model_calls_tools():
    provider, calls = scripted(call("flaky", ok=True), call("flaky", ok=True), "the answer")
    seen = []

    @agent(provider=provider, tools=[_flaky_tool()])
    class A:
        pass

    def until(ctx):
        seen.append((called_tool(ctx), until_answered(ctx), turn_of(ctx).tool_name))
        return until_answered(ctx)

    @workflow(steps=[loop([A], until=until, max_iterations=10)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "the answer"
    assert seen == [(True, False, "flaky"), (True, False, "flaky"), (False, True, None)]
    # the second and third model calls read the previous tool results
    assert calls[1][-1].role == "tool" and calls[1][-1].content == "worked"
    assert calls[2][-1].role == "tool"


async def test_called_tool_as_until_stops_at_the_first_tool_call():
    provider, calls = scripted("thinking", "still thinking", call("flaky", ok=True))

    @agent(provider=provider, tools=[_flaky_tool()])
    class A:
        pass

    @workflow(steps=[loop([A], until=called_tool, max_iterations=10)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert len(calls) == 3 and out == "worked"


async def test_helpers_before_any_turn():
    captured = []

    @agent(provider=FunctionProvider(lambda m, t: "x"))
    class A:
        def before_prompt(self, prompt, ctx):
            captured.append((turn_of(ctx), called_tool(ctx), until_answered(ctx), was_exhausted(ctx)))

    @workflow(steps=[A])
    class W:
        pass

    await run_collect(W)
    assert captured == [(None, False, False, False)]


# --- nesting --------------------------------------------------------------------------

async def test_nested_loops_run_inner_fully_each_outer_iteration():
    inner_p, inner_calls = counting("inner")
    outer_p, outer_calls = counting("outer")
    order = []

    @agent(provider=inner_p)
    class Inner:
        def after_response(self, r, ctx):
            order.append(r)

    @agent(provider=outer_p)
    class Outer:
        def after_response(self, r, ctx):
            order.append(r)

    @workflow(steps=[loop([loop([Inner], max_iterations=2, name="inner"), Outer],
                          until=lambda ctx: ctx.output == "outer 3", max_iterations=5, name="outer")])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert order == ["inner 1", "inner 2", "outer 1", "inner 3", "inner 4", "outer 2",
                     "inner 5", "inner 6", "outer 3"]
    assert out == "outer 3"
    loops = [(e.type, e.name, e.data.get("iterations"), e.data.get("stopped_by"))
             for e in events if e.type.startswith("node.") and e.kind == "loop"]
    assert loops == [
        ("node.start", "outer", None, None),
        ("node.start", "inner", None, None), ("node.end", "inner", 2, "exhausted"),
        ("node.start", "inner", None, None), ("node.end", "inner", 2, "exhausted"),
        ("node.start", "inner", None, None), ("node.end", "inner", 2, "exhausted"),
        ("node.end", "outer", 3, "until"),
    ]
    # every inner loop node sits under the outer loop node
    outer_id = next(e.node_id for e in events if e.type == "node.start" and e.name == "outer")
    assert {e.parent_id for e in events if e.type == "node.start" and e.name == "inner"} == {outer_id}
    # the inner loop's exhaustion does not leak into the outer one's result
    assert run.ctx.loop.stopped_by == "until" and run.ctx.loop.iterations == 3
    assert not was_exhausted(run.ctx)


async def test_inner_until_sees_inner_loop_info():
    p, _ = counting()
    seen = []

    @agent(provider=p)
    class A:
        pass

    def inner_until(ctx):
        seen.append(("inner", ctx.loop.iterations, ctx.loop.max_iterations))
        return ctx.loop.iterations == 2

    @workflow(steps=[loop([loop([A], until=inner_until, max_iterations=7, name="inner")],
                          max_iterations=2, name="outer")])
    class W:
        pass

    _, events, run = await run_collect(W)
    assert seen == [("inner", 1, 7), ("inner", 2, 7)] * 2
    assert run.ctx.loop.stopped_by == "exhausted" and run.ctx.loop.max_iterations == 2


# --- parallel -------------------------------------------------------------------------

async def test_parallel_runs_steps_concurrently_on_the_same_ctx():
    a_in, b_in = asyncio.Event(), asyncio.Event()

    async def handler_a(messages, tools):
        a_in.set()
        await asyncio.wait_for(b_in.wait(), 2)  # only returns if B's call is in flight too
        return "from A"

    async def handler_b(messages, tools):
        b_in.set()
        await asyncio.wait_for(a_in.wait(), 2)
        return "from B"

    ctxs = []

    @agent(provider=FunctionProvider(handler_a))
    class A:
        def after_response(self, r, ctx):
            ctxs.append(ctx)
            ctx.a = r

    @agent(provider=FunctionProvider(handler_b))
    class B:
        def after_response(self, r, ctx):
            ctxs.append(ctx)
            ctx.b = r

    after = []

    @agent(provider=FunctionProvider(lambda m, t: after.append([x.content for x in m]) or "joined"))
    class Join:
        pass

    @workflow(steps=[parallel([A, B]), Join])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "joined"
    assert len(ctxs) == 2 and ctxs[0] is ctxs[1] is run.ctx
    assert (run.ctx.a, run.ctx.b) == ("from A", "from B")
    # both replies joined the one shared history the next step reads
    assert after[0][0] == "go" and sorted(after[0][1:]) == ["from A", "from B"]

    nodes = [(e.type, e.kind, e.name) for e in events if e.type.startswith("node.")]
    # both model calls were in flight at once: each chat started before the other ended
    at = nodes.index
    assert nodes[:2] == [("node.start", "workflow", "W"), ("node.start", "parallel", "parallel")]
    assert at(("node.start", "chat", "A")) < at(("node.end", "chat", "B"))
    assert at(("node.start", "chat", "B")) < at(("node.end", "chat", "A"))
    par_id = next(e.node_id for e in events if e.type == "node.start" and e.kind == "parallel")
    assert {e.parent_id for e in events if e.type == "node.start" and e.kind == "agent" and e.name in "AB"} \
        == {par_id}
    assert nodes.index(("node.end", "parallel", "parallel")) < nodes.index(("node.start", "agent", "Join"))


@pytest.mark.parametrize("order", ["caller first", "caller last"])
async def test_a_parallel_branch_calling_a_tool_keeps_the_shared_history_a_conversation(order):
    """A branch's reply with a tool call joined the history at once, its result only once the tool
    returned: the other branch's model call, sent in between, held a call without its result (refused:
    "ConversationError ... fix the code that wrote the history"), or its reply came between the call
    and its result, and the next step's call was refused."""
    seen = {}

    async def slow(messages, tools):  # (its reply comes while A's tool runs)
        seen["B"] = [(x.role, x.tool_call_id) for x in messages]
        await asyncio.sleep(0.02)
        return "B-text"

    @tool
    async def slowtool() -> str:
        """Slow."""
        await asyncio.sleep(0.1)
        return "slow-result"

    @agent(provider=FunctionProvider(lambda m, t: {"content": "", "tool_calls": [{"name": "slowtool", "args": {}}]}),
           tools=[slowtool])
    class A:
        pass

    @agent(provider=FunctionProvider(slow))
    class B:
        pass

    @agent(provider=FunctionProvider(lambda m, t: seen.setdefault("C", [(x.role, x.tool_call_id) for x in m])
                                     and "joined"))
    class C:
        pass

    @workflow(steps=[parallel([A, B] if order == "caller first" else [B, A]), C])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "joined"
    call_id = next(c.id for m in run.state.history for c in m.tool_calls)
    # each model saw a conversation: every call answered right after it
    roles = [("user", None), ("assistant", None), ("tool", call_id)]
    assert seen["B"] in (roles[:1], roles), seen["B"]
    assert seen["C"] == [*roles, ("assistant", None)], seen["C"]
    assert [m.content for m in run.state.history if m.role == "assistant"] == ["", "B-text", "joined"]


async def test_a_branch_whose_tool_ends_the_run_cancels_the_other_branch():
    # the other branch waited for the failing branch's tool call to be answered; cancelled as that wait
    # ended, Python 3.11's wait_for swallowed the cancel, and it ran on for ever (the run never ended)
    import math

    from flowtui import FatalToolError

    @tool
    def die() -> str:
        """Dies."""
        raise FatalToolError("fatal in branch")

    @agent(provider=FunctionProvider(lambda m, t: {"content": "", "tool_calls": [{"name": "die", "args": {}}]}),
           tools=[die])
    class P:
        pass

    @agent(provider=FunctionProvider(lambda m, t: "z"))
    class Z:
        pass

    @workflow(steps=[parallel([loop([P], until=lambda ctx: True, max_iterations=3, name="lp"),
                               loop([Z], until=lambda ctx: False, max_iterations=math.inf, name="lz")])])
    class W:
        pass

    events: list = []
    with pytest.raises(FatalToolError, match="fatal in branch"):  # (a controller, as the app's and flowtui run's)
        await asyncio.wait_for(bootstrap(W).run("go", controller=Controller(), on_event=events.append), 60)
    assert loop_end(events, "lz").status == "stopped"
    assert events[-1].type == "run.end" and events[-1].status == "failed"


async def test_parallel_inside_a_loop():
    pa, ca = counting("a")
    pb, cb = counting("b")

    @agent(provider=pa)
    class A:
        pass

    @agent(provider=pb)
    class B:
        pass

    @workflow(steps=[loop([parallel([A, B])], max_iterations=3)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert len(ca) == 3 and len(cb) == 3
    assert loop_end(events).data["iterations"] == 3
    assert [e.type for e in events if getattr(e, "kind", None) == "parallel"] == ["node.start", "node.end"] * 3


# --- on_fail warns on every failure; math.inf turns a brake off ----------------------------------

async def test_on_fail_hears_every_failure_early_and_can_be_async():
    bad, good = call("flaky", ok=False), call("flaky", ok=True)
    provider, calls = scripted(bad, good, bad, "done")
    warned = []

    @agent(provider=provider, tools=[_flaky_tool()])
    class A:
        pass

    async def on_fail(ctx, info):
        warned.append(info)
        ctx.warnings = ctx.get("warnings", 0) + 1  # a warning the run can act on

    @workflow(steps=[loop([A], until=until_answered, max_iterations=10, max_fails=3, on_fail=on_fail)])
    class W:
        pass

    out, events, run = await run_collect(W)
    from flowtui.runtime.steps import FailInfo
    assert warned == [FailInfo(tool="flaky", error="it broke", consecutive=1, total=1, max_fails=3),
                      FailInfo(tool="flaky", error="it broke", consecutive=1, total=2, max_fails=3)]
    assert out == "done" and run.ctx.loop.stopped_by == "until"
    sets = [e for e in events if e.type == "ctx.set" and e.name == "warnings"]
    assert [(e.value, e.origin) for e in sets] == [(1, "on_fail"), (2, "on_fail")]


async def test_max_iterations_inf_leaves_until_as_the_only_stop():
    import math

    provider, calls = counting()

    @agent(provider=provider)
    class A:
        pass

    @workflow(steps=[loop([A], until=lambda ctx: ctx.output == "reply 12", max_iterations=math.inf)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "reply 12" and len(calls) == 12
    end = loop_end(events)
    assert (end.status, end.data["iterations"], end.data["stopped_by"], end.data["max_iterations"]) == \
        ("ok", 12, "until", None)  # no ceiling: None in the (JSON) events
    assert run.ctx.loop.max_iterations == math.inf and run.ctx.loop.stopped_by == "until"
    assert loop_infos(events)[-1]["max_iterations"] is None


async def test_max_iterations_inf_leaves_the_budget_as_the_stop():
    import math

    from flowtui import Budget

    provider, calls = counting()

    @agent(provider=provider)
    class A:
        pass

    @workflow(steps=[loop([A], max_iterations=math.inf, max_fails=math.inf)])
    class W:
        pass

    out, events, run = await run_collect(W, budget=Budget(max_chat_calls=7))
    assert len(calls) == 7 and out == "reply 7"
    assert loop_end(events).data["stopped_by"] == "budget"
    assert events[-1].status == "finished" and events[-1].reason == "budget: max_chat_calls"


async def test_max_fails_inf_never_stops_on_failures():
    import math

    provider, calls = scripted(*[call("flaky", ok=False)] * 8, "gave up")

    @agent(provider=provider, tools=[_flaky_tool()])
    class A:
        pass

    @workflow(steps=[loop([A], until=until_answered, max_iterations=20, max_fails=math.inf)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "gave up" and len(calls) == 9 and run.ctx.loop.stopped_by == "until"


def test_a_bad_brake_is_refused_when_loop_is_called_naming_the_parameter():
    import math

    import pytest

    from flowtui import ConfigError

    @agent(provider=counting()[0])
    class A:
        pass

    for param, value in [("max_iterations", 0), ("max_iterations", -1), ("max_iterations", "5"),
                         ("max_iterations", 2.5), ("max_iterations", True), ("max_iterations", math.nan),
                         ("max_fails", 0), ("max_fails", -math.inf), ("max_fails", None)]:
        with pytest.raises(ConfigError) as info:
            loop([A], name="revisao", **{param: value})
        assert f"revisao(..., {param}={value!r})" in str(info.value)
        assert "math.inf" in str(info.value)


async def test_stepping_parallel_branches_pauses_before_a_model_call_only_with_every_call_answered():
    """Stepped, a branch paused before its model call while the other branch's call waited for its
    result: the request shown was not the one sent, and the app said the call would fail."""
    @tool
    def somar(a: int, b: int) -> int:
        """Adds.

        Args:
            a: first
            b: second
        """
        return a + b

    @agent(provider=FunctionProvider(lambda m, t: "5" if any(x.role == "tool" for x in m)
                                     else {"content": "", "tool_calls": [{"name": "somar", "args": {"a": 2, "b": 3}}]}),
           tools=[somar])
    class Calc:
        pass

    @agent(provider=FunctionProvider(lambda m, t: "um verso"))
    class Poeta:
        pass

    @workflow(steps=[parallel([loop([Calc], until=until_answered, max_iterations=3), Poeta])])
    class W:
        pass

    ctl = Controller(start_paused=True)
    run = bootstrap(W).prepare("go", controller=ctl)
    task = asyncio.ensure_future(run.execute())
    chat_pauses, seen = [], None
    while not task.done():
        await asyncio.sleep(0.001)
        if ctl.paused and ctl.paused_at is not seen:
            seen = ctl.paused_at
            if seen.kind == "chat":
                chat_pauses.append((seen.name, problems(run.state.history)))
            ctl.step()
    await task
    assert run.status == "finished"
    assert ("Poeta", []) in chat_pauses and all(found == [] for _, found in chat_pauses), chat_pauses


async def test_a_parallel_step_nested_in_a_branch_keeps_the_branch_loop_and_was_exhausted_its_own():
    """After a parallel step nested in a branch, the branch read the sibling branch's loop (the one last
    written to the shared ctx), and was_exhausted in a branch's until read the sibling's inner loop."""
    lb_wrote, slow_in, lb_ended_again = asyncio.Event(), asyncio.Event(), asyncio.Event()
    seen = []

    def waiting_for(event, first=None):
        async def model(messages, tools):
            if first is not None:
                first.set()
            await asyncio.wait_for(event.wait(), 30)
            return "ok"
        return FunctionProvider(model)

    @agent(provider=waiting_for(lb_wrote))
    class P1:  # the nested step waits while the other branch writes ctx.loop
        pass

    @agent(provider=FunctionProvider(lambda m, t: "p"))
    class P2:
        pass

    @agent(provider=FunctionProvider(lambda m, t: "obs"))
    class Obs:
        def before_prompt(self, prompt, ctx):
            seen.append((ctx.loop.max_iterations, ctx.loop.iterations, ctx.fields["loop"].max_iterations))

    @agent(provider=FunctionProvider(lambda m, t: "x"))
    class X:
        pass

    @agent(provider=waiting_for(lb_ended_again, first=slow_in))
    class Slow:  # after X's loop gave up, the other branch ends a loop of its own
        pass

    writes = []

    async def b_model(messages, tools):
        writes.append(1)
        if len(writes) == 1:
            lb_wrote.set()
            await asyncio.wait_for(slow_in.wait(), 30)
        return "b"

    @agent(provider=FunctionProvider(lambda m, t: "b"))
    class B:
        pass

    @agent(provider=FunctionProvider(b_model))
    class Bw:
        pass

    def lb_iteration_ended(ctx):
        if ctx.loop.iterations == 2:
            lb_ended_again.set()
        return False

    @workflow(steps=[parallel([
        loop([parallel([P1, P2]), Obs, loop([X], max_iterations=1), Slow], until=lambda ctx: was_exhausted(ctx),
             max_iterations=3, name="LA"),
        loop([loop([B], until=lambda ctx: True, max_iterations=5), Bw], until=lb_iteration_ended,
             max_iterations=2, name="LB")])])
    class W:
        pass

    _, events, run = await run_collect(W)
    assert seen == [(3, 0, 3)]  # LA's own loop, whatever LB wrote meanwhile
    ends = {e.name: (e.data["iterations"], e.data["stopped_by"]) for e in events
            if e.type == "node.end" and e.kind == "loop" and e.name in ("LA", "LB")}
    # LA's until: its inner loop gave up (exhausted), whatever loop LB ended since (stopped by its until)
    assert ends == {"LA": (1, "until"), "LB": (2, "exhausted")}


def _branches_and_a_held_tool(olhar: Any, b_model: Any, a_ahead: float = 0.0) -> type:
    """``parallel([A, B])``: A calls tool olhar once (``olhar``, a coroutine function, answers it), its
    model ``a_ahead`` s late; B's model is ``b_model``."""
    calls = []

    async def a_model(messages, tools):
        calls.append(1)
        if a_ahead:
            await asyncio.sleep(a_ahead)
        return "a ok" if len(calls) > 1 else {"content": "", "tool_calls": [{"name": "olhar", "args": {}}]}

    @tool(name="olhar", schema=None)
    class Olhar:
        async def execute(self):
            return await olhar()

    @agent(provider=FunctionProvider(a_model), prompt="a", tools=[Olhar])
    class A:
        pass

    @agent(provider=FunctionProvider(b_model), prompt="b")
    class B:
        pass

    @workflow(steps=[parallel([A, B])])
    class W:
        pass

    return W


async def _held_at_olhar(wf: type, hold_s: float) -> asyncio.Future:
    """``wf`` run with a breakpoint on olhar, held there ``hold_s`` by a person, then resumed: its task."""
    ctl = Controller(breakpoints=["olhar"])
    task = asyncio.ensure_future(bootstrap(wf).prepare("go", controller=ctl).execute())
    while not ctl.paused:
        assert not task.done()
        await asyncio.sleep(0.005)
    await asyncio.sleep(hold_s)
    ctl.resume()
    return task


async def test_a_branch_waiting_while_a_person_holds_the_run_says_nothing_of_a_wait(monkeypatch, capsys):
    """Paused before a branch's tool, the other branch's wait for that tool's answer was said as a flow
    that may wait for ever (a tool waiting for another branch), after 5 s of a person looking; and once
    they resumed it, when the tool took a moment. The wait counts the time the run was not held."""
    from flowtui.runtime import turn

    monkeypatch.setattr(turn, "WAIT_SAID_S", 2.0)

    async def olhar():
        await asyncio.sleep(1.5)  # resumed at 3 s, answered at 4.5 s: past the wait's second 2 s
        return "visto"

    task = await _held_at_olhar(_branches_and_a_held_tool(olhar, lambda m, t: "b ok"), 3.0)  # held past the wait
    await asyncio.wait_for(task, 30)
    assert "waits for the tool calls" not in capsys.readouterr().err


async def test_a_branch_that_begins_to_wait_late_in_a_pause_is_told_of_on_time(monkeypatch, capsys):
    """The whole of a pause was left out of a wait that began late in it: a branch whose reply came 2 s
    into a person's pause, waiting on a tool that then hung, was said to wait for ever 2 s late (after
    a pause of ten minutes, nine minutes late)."""
    from flowtui.runtime import turn

    monkeypatch.setattr(turn, "WAIT_SAID_S", 1.0)
    answered = asyncio.Event()

    async def olhar():
        await asyncio.sleep(2.5)  # resumed, it takes its time: the wait is said 1 s after the resume
        answered.set()
        return "visto"

    async def b_model(messages, tools):
        await asyncio.sleep(2.0)  # its reply comes about 2 s into the pause: it waits from then on
        return "b ok"

    # (A's model 0.2 s late: B's call is on its way when A's tool call comes, and it waits once it is back)
    task = await _held_at_olhar(_branches_and_a_held_tool(olhar, b_model, a_ahead=0.2), 4.0)  # a person looks
    await asyncio.wait_for(answered.wait(), 30)
    said_before_the_answer = "B waits for the tool calls of A (olhar)" in capsys.readouterr().err
    await asyncio.wait_for(task, 30)
    assert said_before_the_answer


@pytest.mark.parametrize("how", ["ctx.stop", "budget"])
async def test_a_branch_that_stops_the_run_lets_the_others_finish_the_model_call_under_way(how):
    """ctx.stop() (or a budget in stop mode) reached in one branch cancelled the other's model call under
    way: paid for, counted nowhere (the totals said one call less), and its loop said stopped_by None."""
    from flowtui import AgentContext, Budget, Context

    released, started = asyncio.Event(), asyncio.Event()
    calls = []

    async def slow(messages, tools):  # under way when the other branch stops the run
        calls.append("B")
        started.set()
        await released.wait()
        await asyncio.sleep(0.05)  # (the other branch's stop has reached the parallel step by then)
        return "b reply"

    @tool(name="finish", description="Ends the run.")
    def finish(ctx: AgentContext = Context()) -> str:
        ctx.stop()
        return "done"

    first = [{"content": "", "tool_calls": [{"name": "finish", "args": {}}]}] if how == "ctx.stop" else ["a"]

    async def fast(messages, tools):
        await started.wait()
        return first[0]

    @agent(provider=FunctionProvider(fast), prompt="A", tools=[finish])
    class A:
        pass

    @agent(provider=FunctionProvider(slow), prompt="B")
    class B:
        pass

    @workflow(steps=[parallel([loop([A], until=lambda ctx: False, max_iterations=5, name="la"),
                               loop([B], until=lambda ctx: False, max_iterations=5, name="lb")])])
    class W:
        pass

    app = bootstrap(W)
    events = []
    app.subscribe(events.append)
    app.subscribe(lambda e: released.set() if e.type == "node.end" and e.kind == "loop" and e.name == "la" else None)
    await asyncio.wait_for(app.run("go", budget=Budget(max_chat_calls=2) if how == "budget" else None), 60)
    (chat_b,) = [e for e in events if e.type == "node.end" and e.kind == "chat" and e.name == "B"]
    assert chat_b.status == "ok" and calls == ["B"]
    end = events[-1]
    assert end.totals.chat_calls == 1 + (how == "budget") + 1  # B's call counted
    loops = {e.name: e for e in events if e.type == "node.end" and e.kind == "loop"}
    assert loops["lb"].status == "stopped"
    said = [e.value for e in events if e.type == "ctx.set" and e.name == "loop"]
    assert said[-1]["stopped_by"] == ("stop" if how == "ctx.stop" else "budget"), said
