"""Budgets (SPEC §1.7): stop and raise modes, each limit, on_exceeded, ctx.budget,
and child workflows counting toward their parent's budget."""

from __future__ import annotations

import asyncio
import math

import pytest
from pydantic import BaseModel

from flowtui import (
    Budget,
    BudgetExceededError,
    BudgetUsage,
    ChatReply,
    FunctionProvider,
    Input,
    WorkflowRuntime,
    agent,
    bootstrap,
    loop,
    tool,
    workflow,
)
from fakes import call, counting, run_collect
from fakes import scripted as _scripted
from flowtui.runtime.providers.base import Usage


# --- helpers ---------------------------------------------------------------

def scripted(*replies):
    return _scripted(*replies, when_done="no more")


def agent_nodes(events):
    return [e.name for e in events if e.type == "node.start" and e.kind == "agent"]


def three_agents():
    pa, ca = counting("a")
    pb, cb = counting("b")
    pc, cc = counting("c")

    @agent(provider=pa)
    class A:
        pass

    @agent(provider=pb)
    class B:
        pass

    @agent(provider=pc)
    class C:
        pass

    @workflow(steps=[A, B, C])
    class W:
        pass

    return W, (ca, cb, cc)


# --- stop mode -----------------------------------------------------------------

async def test_stop_mode_returns_output_so_far_and_skips_remaining_steps():
    W, (ca, cb, cc) = three_agents()
    out, events, run = await run_collect(W, budget=Budget(max_chat_calls=2, mode="stop"))
    assert out == "b 1"
    assert (len(ca), len(cb), len(cc)) == (1, 1, 0)
    assert agent_nodes(events) == ["A", "B"]
    end = events[-1]
    assert end.type == "run.end"
    assert end.status == "finished"
    assert "budget" in end.reason and "max_chat_calls" in end.reason
    assert end.output == "b 1"
    wf_end = [e for e in events if e.type == "node.end" and e.kind == "workflow"][0]
    assert wf_end.status == "stopped"


async def test_stop_mode_is_the_default_and_app_run_returns():
    W, (ca, cb, cc) = three_agents()
    out = await bootstrap(W).run("go", budget=Budget(max_chat_calls=1))
    assert out == "a 1"
    assert (len(ca), len(cb), len(cc)) == (1, 0, 0)


async def test_stop_inside_a_loop_sets_stopped_by_budget():
    p, calls = counting("r")

    @agent(provider=p)
    class A:
        pass

    @workflow(steps=[loop([A], until=lambda ctx: False, max_iterations=10)])
    class W:
        pass

    out, events, run = await run_collect(W, budget=Budget(max_chat_calls=3))
    assert out == "r 3" and len(calls) == 3
    assert run.ctx.loop.stopped_by == "budget"
    assert run.ctx.loop.exhausted is False
    (loop_end,) = [e for e in events if e.type == "node.end" and e.kind == "loop"]
    assert loop_end.status == "stopped"
    assert loop_end.data["stopped_by"] == "budget"
    assert loop_end.data["iterations"] == 3
    assert "max_chat_calls" in events[-1].reason


# --- raise mode --------------------------------------------------------------------

async def test_raise_mode_raises_budget_exceeded_error():
    W, (ca, cb, cc) = three_agents()
    app = bootstrap(W)
    events: list = []
    app.subscribe(events.append)
    with pytest.raises(BudgetExceededError) as info:
        await app.run("go", budget=Budget(max_chat_calls=2, mode="raise"))
    assert info.value.limit == "max_chat_calls"
    assert isinstance(info.value.usage, BudgetUsage) and info.value.usage.chat_calls == 2
    assert "max_chat_calls" in str(info.value)
    assert len(cc) == 0
    end = events[-1]
    assert end.type == "run.end" and end.status == "failed"
    assert "BudgetExceededError" in end.error


# --- each limit ------------------------------------------------------------------

class Args(BaseModel):
    n: int


def _noop_tool(executed: list):
    @tool(name="noop", schema=Args)
    class Noop:
        async def execute(self, args: Args = Input()):
            executed.append(args.n)
            return f"done {args.n}"

    return Noop


async def test_max_tool_calls_stops_before_the_next_tool_call():
    executed: list = []
    provider, calls = scripted(*[call("noop", n=i) for i in range(10)])

    @agent(provider=provider, tools=[_noop_tool(executed)])
    class A:
        pass

    @workflow(steps=[loop([A], max_iterations=10)])
    class W:
        pass

    out, events, run = await run_collect(W, budget=Budget(max_tool_calls=2))
    assert executed == [0, 1]
    assert len(calls) == 2
    assert out == "done 1"
    assert "max_tool_calls" in events[-1].reason
    assert run.ctx.budget.tool_calls == 2


def _one_turn_of_calls(n: int, executed: list):
    """A workflow of one turn whose reply calls tool ``noop`` ``n`` times."""
    provider, _ = scripted({"content": "", "tool_calls": [{"name": "noop", "args": {"n": i}} for i in range(n)]})

    @agent(provider=provider, tools=[_noop_tool(executed)])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    return W


async def test_max_tool_calls_stops_between_tool_calls_of_one_turn():
    executed: list = []
    W = _one_turn_of_calls(4, executed)
    out, events, run = await run_collect(W, budget=Budget(max_tool_calls=3))
    assert executed == [0, 1, 2]
    assert [e.name for e in events if e.type == "node.start" and e.kind == "tool"] == ["noop"] * 3
    # the history stays a conversation a model accepts (the next run, a fork, a snapshot start from it)
    asked = [m for m in run.state.history if m.role == "assistant"][-1]
    answers = {m.tool_call_id: m for m in run.state.history if m.role == "tool"}
    assert set(answers) == {c.id for c in asked.tool_calls}
    last = answers[asked.tool_calls[3].id]
    assert last.is_error and last.content == "Tool call noop was not run: the budget's max_tool_calls was reached."
    assert not run.state.history_problems()


async def test_a_limit_on_model_calls_lets_the_reply_it_paid_for_run_its_tool_calls():
    """max_chat_calls=1 and one reply calling two tools: neither ran ("the budget's max_chat_calls was
    reached"), the output was None, though the limit is on model calls and the reply was in. A reply
    with no tool call finished the same run normally."""
    executed: list = []
    W = _one_turn_of_calls(2, executed)
    out, events, run = await run_collect(W, budget=Budget(max_chat_calls=1))
    assert executed == [0, 1]
    assert not [m for m in run.state.history if m.role == "tool" and m.is_error]
    assert events[-1].type == "run.end" and events[-1].status == "finished"
    assert run.ctx.budget.chat_calls == 1


async def test_a_run_stopped_before_a_tool_answers_the_calls_it_leaves():
    """Stopped (x) at the pause before a tool, the reply's calls were left unanswered."""
    from flowtui.runtime.control import Controller

    executed: list = []
    W = _one_turn_of_calls(2, executed)
    events: list = []
    ctl = Controller(start_paused=True)
    run = bootstrap(W).prepare("go", controller=ctl, on_event=events.append)
    task = asyncio.ensure_future(run.execute())
    for _ in range(50):  # step to the pause before the first tool
        await asyncio.sleep(0.01)
        pauses = [e for e in events if e.type == "run.pause"]
        if pauses and ctl.paused:
            if pauses[-1].point == "tool":
                break
            ctl.step()
    ctl.stop()
    await asyncio.wait_for(task, 5)
    assert executed == [] and events[-1].status == "stopped"
    assert [m.content for m in run.state.history if m.role == "tool"] == [
        "Tool call noop was not run: the run stopped."] * 2
    assert not run.state.history_problems()


async def test_max_tokens_counts_prompt_and_completion_tokens():
    seen = []

    def handler(messages, tools):
        seen.append(1)
        return ChatReply(content=f"r{len(seen)}", usage=Usage(prompt_tokens=20, completion_tokens=10))

    usages = []

    @agent(provider=FunctionProvider(handler))
    class A:
        def after_response(self, response, ctx):
            usages.append(ctx.budget)

    @workflow(steps=[loop([A], max_iterations=10)])
    class W:
        pass

    out, events, run = await run_collect(W, budget=Budget(max_tokens=75))
    # 30, 60 < 75; 90 >= 75 after the third call, so no fourth
    assert len(seen) == 3 and out == "r3"
    assert [u.tokens for u in usages] == [30, 60, 90]
    assert [u.chat_calls for u in usages] == [1, 2, 3]
    assert "max_tokens" in events[-1].reason
    chat_ends = [e for e in events if e.type == "node.end" and e.kind == "chat"]
    assert [(e.data["prompt_tokens"], e.data["completion_tokens"]) for e in chat_ends] == [(20, 10)] * 3


@pytest.mark.parametrize("answer", [lambda: "a fairly long reply " * 20,
                                    lambda: ChatReply(content="a fairly long reply " * 20)])
async def test_a_reply_that_says_no_usage_is_estimated_so_max_tokens_still_trips(answer):
    """A function standing in for the model (or a provider of the flow's own) said no usage: every call
    counted 0 tokens, the totals said 0 and max_tokens never tripped."""
    seen = []

    def handler(messages, tools):
        seen.append(1)
        return answer()

    @agent(provider=FunctionProvider(handler), prompt="Talk a lot.")
    class Talker:
        pass

    @workflow(steps=[loop([Talker], max_iterations=5)])
    class W:
        pass

    out, events, run = await run_collect(W, budget=Budget(max_tokens=200))
    chat_ends = [e for e in events if e.type == "node.end" and e.kind == "chat"]
    assert chat_ends[0].data["completion_tokens"] == 100  # 400 characters, about four a token
    assert chat_ends[0].data["prompt_tokens"] > 0 and chat_ends[0].data["usage_estimated"] is True
    assert len(seen) == 2 and "max_tokens" in events[-1].reason  # 2 calls of ~100+ tokens each
    assert events[-1].totals.tokens.total >= 200


async def test_max_cost_usd():
    def handler(messages, tools):
        return ChatReply(content="x", cost_usd=0.4)

    @agent(provider=FunctionProvider(handler))
    class A:
        pass

    @workflow(steps=[loop([A], max_iterations=10)])
    class W:
        pass

    out, events, run = await run_collect(W, budget=Budget(max_cost_usd=1.0))
    assert run.ctx.budget.chat_calls == 3
    assert run.ctx.budget.cost_usd == pytest.approx(1.2)
    assert "max_cost_usd" in events[-1].reason


@pytest.mark.parametrize("cost", [0.0, 0.25])
async def test_max_cost_usd_of_zero_lets_a_free_model_run_and_stops_a_paid_one_after_its_first_call(cost):
    """Budget(max_cost_usd=0), "spend no money", stopped a free model before its first call: 0 spent was the
    limit reached."""

    @agent(provider=FunctionProvider(lambda messages, tools: ChatReply(content="x", cost_usd=cost)))
    class A:
        pass

    @workflow(steps=[loop([A], max_iterations=3)])
    class W:
        pass

    out, events, run = await run_collect(W, budget=Budget(max_cost_usd=0))
    assert (run.ctx.budget.chat_calls, events[-1].totals.exceeded) == ((3, None) if cost == 0 else (1, "max_cost_usd"))


async def test_no_budget_leaves_ctx_budget_unset():
    W, _ = three_agents()
    out, events, run = await run_collect(W)
    assert out == "c 1"
    assert run.ctx.get("budget") is None
    assert events[-1].reason is None


# --- on_exceeded --------------------------------------------------------------------

def test_an_on_exceeded_that_needs_more_than_flowtui_passes_is_refused_when_made():
    """It failed when the limit was reached, as "TypeError: <lambda>() missing 1 required positional
    argument: 'extra'", naming neither on_exceeded nor where; until & co. are refused at load."""
    from flowtui.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^Budget\(on_exceeded=...\) needs extra, which flowtui does not pass"):
        Budget(max_chat_calls=1, on_exceeded=lambda ctx, usage, limit, extra: None)
    Budget(max_chat_calls=1, on_exceeded=lambda ctx: None)  # fewer: the first ones are passed

@pytest.mark.parametrize("mode", ["stop", "raise"])
async def test_on_exceeded_is_called_once_with_ctx_and_usage(mode):
    p, calls = counting("r")
    got = []

    @agent(provider=p)
    class A:
        pass

    @workflow(steps=[loop([loop([A], max_iterations=10, name="inner")], max_iterations=10, name="outer")])
    class W:
        pass

    def on_exceeded(ctx, usage):
        got.append((ctx.output, usage.chat_calls))

    budget = Budget(max_chat_calls=2, mode=mode, on_exceeded=on_exceeded)
    if mode == "raise":
        with pytest.raises(BudgetExceededError):
            await bootstrap(W).run("go", budget=budget)
    else:
        await bootstrap(W).run("go", budget=budget)
    assert got == [("r 2", 2)]


# --- ctx.budget ---------------------------------------------------------------------

async def test_ctx_budget_shows_usage_as_the_run_goes():
    executed: list = []
    provider, calls = scripted(call("noop", n=1), "answer")
    seen = []

    @agent(provider=provider, tools=[_noop_tool(executed)])
    class A:
        def before_prompt(self, prompt, ctx):  # before the first call too: nothing spent (it was None)
            seen.append(("before", ctx.budget.chat_calls))

        def after_response(self, response, ctx):
            seen.append((ctx.budget.chat_calls, ctx.budget.tool_calls))

    @workflow(steps=[A, A])
    class W:
        pass

    out, events, run = await run_collect(W, budget=Budget(max_chat_calls=100))
    assert seen == [("before", 0), (1, 1), ("before", 1), (2, 1)]
    assert events[1].type != "ctx.set"  # (no event says it: run.start does, with the budget's limits)
    assert isinstance(run.ctx.budget, BudgetUsage)
    budget_sets = [e.value for e in events if e.type == "ctx.set" and e.name == "budget"]
    assert budget_sets and budget_sets[-1]["chat_calls"] == 2 and budget_sets[-1]["tool_calls"] == 1


# --- child workflows ------------------------------------------------------------------

class Q(BaseModel):
    q: str


def _parent_with_child(child_calls_per_run: int, child_budget: Budget | None = None):
    child_p, child_calls = counting("child")

    @agent(provider=child_p)
    class ChildAgent:
        pass

    @workflow(steps=[loop([ChildAgent], max_iterations=child_calls_per_run)], budget=child_budget)
    class Child:
        pass

    @tool(name="delegate", schema=Q)
    class Delegate:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: Q = Input()):
            return await self.runtime.run(Child, input=args.q)

    parent_p, parent_calls = scripted(call("delegate", q="sub"), "parent 2", "parent 3", "parent 4")

    @agent(provider=parent_p, tools=[Delegate])
    class Parent:
        pass

    @workflow(steps=[Parent, Parent, Parent])
    class W:
        pass

    return W, parent_calls, child_calls


async def test_a_child_workflow_runs_under_its_declared_budget_when_the_tool_gives_none():
    W, parent_calls, child_calls = _parent_with_child(5, child_budget=Budget(max_chat_calls=2))
    out, events, run = await run_collect(W)
    assert len(child_calls) == 2 and len(parent_calls) == 3  # the child stopped at its own; the parent went on
    child_end = [e for e in events if e.type == "run.end" and e.run_id != run.id][0]
    assert child_end.reason == "budget: max_chat_calls"


async def test_child_workflow_counts_toward_parent_budget():
    W, parent_calls, child_calls = _parent_with_child(2)
    out, events, run = await run_collect(W, budget=Budget(max_chat_calls=4))
    # parent 1 + child 2 = 3 calls; parent's second turn is the 4th; the third is skipped
    assert len(child_calls) == 2
    assert len(parent_calls) == 2
    assert out == "parent 2"
    assert run.ctx.budget.chat_calls == 4
    assert run.ctx.budget.tool_calls == 1
    assert "max_chat_calls" in events[-1].reason


async def test_child_hitting_parent_budget_in_stop_mode_stops_the_child_and_the_parent():
    W, parent_calls, child_calls = _parent_with_child(5)
    got = []
    out, events, run = await run_collect(
        W, budget=Budget(max_chat_calls=3, on_exceeded=lambda ctx, usage: got.append(usage.chat_calls)))
    # parent 1 + child 2, then the child stops at the parent's limit and the parent stops too
    assert len(child_calls) == 2
    assert len(parent_calls) == 1
    assert out == "child 2"  # the child's output so far became the tool result, the last output
    tool_msgs = [e.item for e in events if e.type == "state.append" and e.run_id == run.id
                 and e.item.role == "tool"]
    assert [(m.content, m.is_error) for m in tool_msgs] == [("child 2", False)]
    run_ends = [(e.run_id == run.id, e.status, e.reason) for e in events if e.type == "run.end"]
    assert run_ends == [(False, "finished", "budget: max_chat_calls"), (True, "finished", "budget: max_chat_calls")]
    assert got == [3]  # on_exceeded once, though both runs reached it


async def test_child_hitting_parent_budget_in_raise_mode_raises_out_of_the_parent():
    W, parent_calls, child_calls = _parent_with_child(5)
    app = bootstrap(W)
    events: list = []
    app.subscribe(events.append)
    with pytest.raises(BudgetExceededError) as info:
        await app.run("go", budget=Budget(max_chat_calls=3, mode="raise"))
    assert info.value.limit == "max_chat_calls"
    assert len(child_calls) == 2 and len(parent_calls) == 1
    # not swallowed as a tool error observation the run goes on with: the call is answered as the run ends, so
    # its history stays a conversation a model takes (a snapshot of it loads, a fork from its end goes on)
    (answer,) = [e for e in events if e.type == "state.append" and getattr(e.item, "role", None) == "tool"]
    assert answer.origin == "runtime" and answer.item.is_error
    assert answer.item.content.startswith("Tool call delegate gave no result: the run failed (BudgetExceededError: "
                                          "budget exceeded: max_chat_calls=3")
    child_end = next(i for i, e in enumerate(events) if e.type == "run.end")
    assert events.index(answer) > child_end
    assert [e.status for e in events if e.type == "run.end"] == ["failed", "failed"]
    # the parent's end names the limit it reached, as it does when the parent itself makes the call
    assert [e.totals.exceeded for e in events if e.type == "run.end"] == ["max_chat_calls", "max_chat_calls"]


async def test_a_parents_ctx_budget_says_what_its_child_spent_of_it_as_it_spends_it():
    """The child's calls count against the parent's budget, but the parent's ctx.budget (the sidebar's
    "budget 1 of 3 chat calls") said its use from before the child ran, even once the child reached it."""
    from flowtui.runtime.fold import RunView

    W, parent_calls, child_calls = _parent_with_child(5)
    app = bootstrap(W)
    events: list = []
    app.subscribe(events.append)
    with pytest.raises(BudgetExceededError):
        await app.run("go", budget=Budget(max_chat_calls=3, mode="raise"))
    parent = events[0].run_id
    said = [e.value["chat_calls"] for e in events if e.type == "ctx.set" and e.name == "budget" and e.run_id == parent]
    assert said == [1, 2, 3]  # the parent's call, then each of the child's two
    view = RunView()
    for e in events:
        view.apply(e)
    assert view.ctx["budget"]["chat_calls"] == 3


async def test_an_async_on_exceeded_is_awaited():
    seen = []

    async def on_exceeded(ctx, usage):
        seen.append(usage.chat_calls)
        ctx.state.append("memory", "budget hit")

    wf, _ = three_agents()
    out, events, run = await run_collect(wf, budget=Budget(max_chat_calls=1, on_exceeded=on_exceeded))
    assert seen == [1]
    assert list(run.state.memory) == ["budget hit"]
    assert [e.origin for e in events if e.type == "state.append" and e.bucket == "memory"] == ["budget"]


# --- run totals ------------------------------------------------------------------------

def _priced(*replies):
    """A FunctionProvider whose replies report 10 prompt and 5 completion tokens, 0.01 USD each."""
    queue = list(replies)

    def handler(messages, tools):
        reply = queue.pop(0)
        content, calls_ = (reply, []) if isinstance(reply, str) else (reply["content"], reply["tool_calls"])
        from flowtui import ToolCall
        return ChatReply(content=content, tool_calls=[ToolCall(name=c["name"], args=c["args"]) for c in calls_],
                         usage=Usage(prompt_tokens=10, completion_tokens=5), cost_usd=0.01)

    return FunctionProvider(handler)


async def test_run_end_and_the_workflow_node_carry_the_runs_totals_without_a_budget():
    executed: list = []

    @agent(provider=_priced(call("noop", n=1), "answer"), tools=[_noop_tool(executed)])
    class A:
        pass

    @workflow(steps=[A, A])
    class W:
        pass

    out, events, run = await run_collect(W)
    end = events[-1]
    assert end.type == "run.end" and end.totals is not None
    t = end.totals
    assert (t.chat_calls, t.tool_calls, t.tokens.prompt, t.tokens.completion, t.tokens.total) == (2, 1, 20, 10, 30)
    assert t.cost_usd == pytest.approx(0.02) and t.elapsed_s > 0 and t.exceeded is None
    (wf_end,) = [e for e in events if e.type == "node.end" and e.kind == "workflow"]
    assert wf_end.data["totals"]["tokens"] == {"prompt": 20, "completion": 10, "total": 30}
    assert wf_end.data["totals"]["chat_calls"] == 2 and wf_end.data["totals"]["exceeded"] is None


async def test_totals_name_the_budget_limit_that_was_exceeded_and_on_exceeded_receives_it():
    got = []
    W, calls = three_agents()

    def on_exceeded(ctx, usage, limit):
        got.append(limit)

    out, events, run = await run_collect(W, budget=Budget(max_chat_calls=2, on_exceeded=on_exceeded))
    assert got == ["max_chat_calls"]
    assert events[-1].totals.exceeded == "max_chat_calls" and events[-1].totals.chat_calls == 2


async def test_the_fold_counts_totals_as_the_run_goes_and_takes_the_runs_own_at_the_end(tmp_path):
    from flowtui.runtime.fold import RunView
    from flowtui.runtime.journal import read_journal

    W, parent_calls, child_calls = _parent_with_child(2)
    app = bootstrap(W)
    live, during = RunView(), []

    def watch(ev):
        live.apply(ev)
        if ev.type == "node.end" and ev.kind == "agent" and ev.run_id == live.run_id:
            during.append((live.totals.chat_calls, live.totals.tool_calls))

    app.subscribe(watch)
    await app.run("go", journal=tmp_path / "j.jsonl", budget=Budget(max_chat_calls=4))
    # parent turn 1 (1 call + the child's 2, one tool call), then parent turn 2; the third is skipped
    assert during == [(3, 1), (4, 1)]
    assert (live.totals.chat_calls, live.totals.tool_calls, live.totals.exceeded) == (4, 1, "max_chat_calls")
    replay = RunView()
    for ev in read_journal(tmp_path / "j.jsonl"):
        replay.apply(ev)
    assert replay.totals == live.totals


@pytest.mark.parametrize("make, said", [
    (lambda: Budget(max_chat_call=2), "Budget(max_chat_call=...): no such parameter; did you mean max_chat_calls?"),
    (lambda: Budget(max_chat_calls=-1), "Budget(max_chat_calls=-1): a limit cannot be negative"),
    (lambda: Budget(mode="halt"), "Budget(mode='halt'): Input should be 'stop' or 'raise'"),
    (lambda: Budget(2), "Budget takes its limits by name, e.g. Budget(max_chat_calls=2)"),
    # set on a budget made already (budget.max_chat_calls = nan was no limit, -3 taken)
    (lambda: setattr(Budget(max_chat_calls=3), "max_chat_calls", -3), "Budget(max_chat_calls=-3): a limit cannot be"),
    (lambda: setattr(Budget(), "max_cost_usd", float("nan")), "Budget(max_cost_usd=nan): not a limit"),
    (lambda: setattr(Budget(), "max_chat_calls", "5"), "Budget(max_chat_calls='5'): a limit is a number"),
    (lambda: setattr(Budget(), "max_tokns", 5), "Budget(max_tokns=...): no such parameter; did you mean max_tokens?"),
])
def test_a_budget_written_wrong_is_refused_naming_the_parameter(make, said):
    """A misspelt limit used to be accepted, and the run went without it."""
    from flowtui.runtime.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        make()
    assert said in str(info.value) and "pydantic" not in str(info.value)


async def test_a_workflow_declares_the_budget_its_runs_have_unless_run_gives_one():
    """A run from the app or `flowtui run` (no budget= to give) had no way to have one."""
    provider, calls = counting("r")

    @agent(provider=provider)
    class A:
        pass

    @workflow(steps=[loop([A], max_iterations=10)], budget=Budget(max_chat_calls=2))
    class W:
        pass

    out, events, run = await run_collect(W)
    assert len(calls) == 2 and events[-1].reason == "budget: max_chat_calls"
    assert events[-1].totals.exceeded == "max_chat_calls" and run.ctx.budget.chat_calls == 2
    calls.clear()
    out, events, run = await run_collect(W, budget=Budget(max_chat_calls=3))  # given: it wins
    assert len(calls) == 3 and events[-1].reason == "budget: max_chat_calls"


def test_a_workflow_budget_that_is_no_budget_names_the_workflow():
    from flowtui.runtime.errors import ConfigError

    @agent(provider=counting()[0])
    class A:
        pass

    with pytest.raises(ConfigError, match=r"@workflow W: budget= takes a Budget\(...\), such as "
                                          r"Budget\(max_chat_calls=20\), not dict"):
        @workflow(steps=[A], budget={"max_chat_calls": 2})
        class W:
            pass


@pytest.mark.parametrize("limits,said", [
    ({"max_tool_calls": True}, "Budget(max_tool_calls=True): a limit is a number, such as max_tool_calls=20, not bool"),
    ({"max_chat_calls": "1"}, "Budget(max_chat_calls='1'): a limit is a number, such as max_chat_calls=20, not str"),
    ({"max_cost_usd": float("nan")}, "Budget(max_cost_usd=nan): not a limit (it is never reached)"),
])
def test_a_limit_that_is_no_number_is_refused_naming_it(limits, said):
    """True and "1" were taken as a limit of 1; NaN was taken and never stopped a run."""
    from flowtui.runtime.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        Budget(**limits)
    assert str(info.value).startswith(said)


def test_a_whole_float_is_a_count_and_inf_no_limit():
    import math

    assert Budget(max_tokens=1e6).max_tokens == 1_000_000
    assert Budget(max_duration_s=math.inf).max_duration_s == math.inf


# --- the budget as the panes show it ---------------------------------------------------

def two_turns(*replies):
    """A workflow of one agent run twice, answering ``replies`` in turn."""
    provider, _ = scripted(*replies)

    @agent(provider=provider)
    class A:
        pass

    @workflow(steps=[A, A])
    class W:
        pass

    return W


async def test_the_sidebar_shows_the_budget_against_its_limits_from_the_run_s_start():
    """The sidebar said nothing of a budget until the first model call had ended, and then only what
    was spent: a person stepping to the first agent could not tell the run had a budget, or how far
    from its limits it was. run.start now says the limits, and the sidebar says them from there."""
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.sidebar import sidebar_rows

    W = two_turns("one", "two")

    def budget_row(events):
        view = RunView()
        for ev in events:
            view.apply(ev)
        rows = [text.plain for _, text in sidebar_rows(view, width=200)]
        return next((row for row in rows if row.startswith("  budget")), None)

    out, events, _ = await run_collect(W, budget=Budget(max_chat_calls=5, max_cost_usd=2, mode="raise"))
    assert events[0].type == "run.start" and events[0].budget == {"max_chat_calls": 5, "max_cost_usd": 2.0,
                                                                  "mode": "raise"}
    first_call = next(i for i, e in enumerate(events) if e.type == "node.start" and e.kind == "chat")
    assert budget_row(events[:first_call]) == "  budget 0 of 5 chat calls · $0.0000 of $2.00 · raises when reached"
    row = budget_row(events)
    assert row.startswith("  budget 2 of 5 chat calls · ") and " · $0.0000 of $2.00 · " in row, row
    assert row.endswith(" · raises when reached"), row

    out, events, _ = await run_collect(W)  # no budget: no row, as before
    assert events[0].budget is None and budget_row(events) is None

    # math.inf is no limit: left out (the journal, which has no infinity, said it as null: "duration_s None")
    out, events, _ = await run_collect(W, budget=Budget(max_chat_calls=5, max_duration_s=math.inf))
    assert events[0].budget == {"max_chat_calls": 5, "mode": "stop"}
    assert budget_row(events[:1]) == "  budget 0 of 5 chat calls"


async def test_a_budget_limit_changed_is_no_difference_between_two_runs(tmp_path):
    """Raising a limit the run never reached is the commonest change before running a flow again:
    comparing the two runs (flowtui diff, a re-execution) must not stop at the run's start for it."""
    from flowtui.runtime.diff_cli import main_diff

    W = two_turns("one", "two", "one", "two")
    for name, most in (("a", 5), ("b", 50)):
        await bootstrap(W).run("go", budget=Budget(max_chat_calls=most), journal=str(tmp_path / f"{name}.jsonl"))
    assert main_diff([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 0


def test_a_limit_set_wrong_on_a_budget_leaves_it_as_it_was():
    from flowtui.runtime.errors import ConfigError

    budget = Budget(max_chat_calls=3)
    with pytest.raises(ConfigError):
        budget.max_chat_calls = -3
    budget.mode = "raise"
    assert (budget.max_chat_calls, budget.mode) == (3, "raise")


async def test_time_spent_paused_in_the_debugger_is_not_the_run_s_time():
    """A person reading the panes for a while at a pause spent none of the flow's max_duration_s: a run
    of a few milliseconds of work, paused for longer than its limit, was stopped by it at the next
    step ("budget: max_duration_s"), its sidebar saying less time than the limit."""
    from flowtui import Controller

    W = two_turns("one", "two")
    ctl = Controller(start_paused=True)
    events: list = []
    run = bootstrap(W).prepare("go", budget=Budget(max_duration_s=0.5), controller=ctl, on_event=events.append)
    task = asyncio.ensure_future(run.execute())
    for _ in range(3000):  # (a hang, not a slow machine)
        if ctl.paused:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(1.0)  # twice the limit, paused
    ctl.resume()
    await asyncio.wait_for(task, 30)
    end = events[-1]
    assert end.type == "run.end" and end.status == "finished" and end.reason is None
    assert end.totals.exceeded is None and end.totals.chat_calls == 2
    assert end.totals.elapsed_s < 0.5


async def test_a_run_stopped_by_its_time_says_the_time_it_ran():
    """ctx.budget (the sidebar's budget row) said the time of the last model call: "3.1 of 5.0 s" beside
    "budget: max_duration_s". The stop publishes the time it was stopped at."""
    import time as _time

    provider, _ = scripted("one", "two")

    @agent(provider=provider)
    class Slow:
        def after_response(self, reply, ctx):
            _time.sleep(0.3)

    @workflow(steps=[Slow, Slow], budget=Budget(max_duration_s=0.2))
    class W:
        pass

    out, events, _ = await run_collect(W)
    assert events[-1].totals.exceeded == "max_duration_s"
    spent = [e.value for e in events if e.type == "ctx.set" and e.name == "budget"]
    assert spent[-1]["duration_s"] >= 0.2
