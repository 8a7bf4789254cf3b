"""Isolated sub-agents (SPEC §1.5): a tool with a WorkflowRuntime runs a child workflow
with its own ctx, state and history, in the parent's event stream."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from flowtui import (
    FatalToolError,
    FunctionProvider,
    Input,
    State,
    WorkflowRuntime,
    agent,
    bootstrap,
    tool,
    workflow,
)
from fakes import call


class Q(BaseModel):
    q: str


class ChildState:
    def __init__(self):
        self.notes: list[str] = []


class ParentState:
    def __init__(self):
        self.notes: list[str] = []


def build(child_handler, parent_replies, *, seen_parent: list, seen_child: list, states: dict):
    def child_fn(messages, tools):
        seen_child.append(list(messages))
        return child_handler(messages)

    @agent(provider=FunctionProvider(child_fn), prompt="You research.")
    class Researcher:
        def __init__(self, s: ChildState = State()):
            self.s = s

        def after_response(self, response, ctx):
            self.s.notes.append(response)
            states["child"] = self.s
            states["child_ctx"] = ctx
            ctx.state.append("memory", "child-only memory")

    @workflow(state=ChildState, steps=[Researcher])
    class ResearchWorkflow:
        pass

    @tool(name="research", description="Delegates a question to a sub-agent.", schema=Q)
    class ResearchTool:
        def __init__(self, runtime: WorkflowRuntime, s: ParentState = State()):
            self.runtime = runtime
            self.s = s

        async def execute(self, args: Q = Input()):
            out = await self.runtime.run(ResearchWorkflow, input=args.q, memory={"topic": args.q})
            self.s.notes.append(f"child said {out}")
            return out

    queue = list(parent_replies)

    def parent_fn(messages, tools):
        seen_parent.append(list(messages))
        return queue.pop(0)

    @agent(provider=FunctionProvider(parent_fn), prompt="You plan.", tools=[ResearchTool])
    class Planner:
        def __init__(self, s: ParentState = State()):
            states["parent"] = s

        def after_response(self, response, ctx):
            states["parent_ctx"] = ctx

    @workflow(state=ParentState, steps=[Planner, Planner])
    class PlanWorkflow:
        pass

    return PlanWorkflow


async def test_child_workflow_runs_isolated_and_returns_its_output_as_the_tool_result():
    seen_parent: list = []
    seen_child: list = []
    states: dict = {}
    W = build(lambda m: f"answer to {m[-1].content}", [call("research", q="what is X?"), "final"],
              seen_parent=seen_parent, seen_child=seen_child, states=states)

    app = bootstrap(W)
    events: list = []
    run = app.prepare("plan it", on_event=events.append)
    out = await run.execute()
    assert out == "final"

    # the child saw only its own prompt, its memory and its input: nothing of the parent
    (child_msgs,) = seen_child
    assert [(m.role, m.content) for m in child_msgs] == [
        ("system", "You research."), ("system", "topic: what is X?"), ("user", "what is X?")]

    # the parent's history holds the tool result, not the child's messages
    history = [(m.role, m.content) for m in run.ctx.state.history]
    assert history == [("user", "plan it"), ("assistant", ""), ("tool", "answer to what is X?"),
                       ("assistant", "final")]
    assert "child-only memory" not in run.ctx.state.memory
    # the parent's second model call reads the child's output as the tool observation
    assert seen_parent[1][-1].role == "tool" and seen_parent[1][-1].content == "answer to what is X?"

    # separate state instances and contexts
    assert isinstance(states["child"], ChildState) and isinstance(states["parent"], ParentState)
    assert states["child"] is not states["parent"]
    assert states["child"].notes == ["answer to what is X?"]
    assert states["parent"].notes == ["child said answer to what is X?"]
    assert run.workflow_state is states["parent"]
    assert states["child_ctx"] is not states["parent_ctx"]
    assert states["parent_ctx"] is run.ctx
    assert states["child_ctx"].run_id != run.id


@pytest.mark.parametrize("form", ["async", "sync"])
async def test_a_child_run_returned_without_its_await_is_awaited_not_sent_as_a_coroutine(form):
    """`return self.runtime.run(Child, ...)` in an async execute gave the model "<coroutine object
    WorkflowRuntime.run ...>" as the tool's result (and a warning that it was never awaited)."""
    @agent(provider=FunctionProvider(lambda m, t: f"child says {m[-1].content}"), prompt="You research.")
    class Researcher:
        pass

    @workflow(steps=[Researcher])
    class ResearchWorkflow:
        pass

    class Delegate:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

    if form == "async":
        async def execute(self, args: Q = Input()):
            return self.runtime.run(ResearchWorkflow, input=args.q)
    else:
        def execute(self, args: Q = Input()):
            return self.runtime.run(ResearchWorkflow, input=args.q)
    Delegate.execute = execute
    Tool = tool(name="research", description="Delegates.", schema=Q)(Delegate)
    replies = [call("research", q="X?"), "done"]

    @agent(provider=FunctionProvider(lambda m, t: replies.pop(0)), prompt="You plan.", tools=[Tool])
    class Planner:
        pass

    @workflow(steps=[Planner, Planner])
    class PlanWorkflow:
        pass

    run = bootstrap(PlanWorkflow).prepare("plan it")
    assert await run.execute() == "done"
    result = [m for m in run.ctx.state.history if m.role == "tool"][0]
    assert (result.content, result.is_error) == ("child says X?", False)


async def test_child_events_nest_under_the_parent_tool_node_in_one_stream():
    seen_parent: list = []
    seen_child: list = []
    states: dict = {}
    W = build(lambda m: "child answer", [call("research", q="q"), "final"],
              seen_parent=seen_parent, seen_child=seen_child, states=states)

    app = bootstrap(W)
    events: list = []
    app.subscribe(events.append)
    await app.run("go")

    parent_id = events[0].run_id
    child_ids = {e.run_id for e in events} - {parent_id}
    assert len(child_ids) == 1
    (child_id,) = child_ids

    # one stream: seq strictly increasing across parent and child events
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

    # the whole node tree, in order, with which run each node belongs to
    nodes = [(e.run_id == child_id, e.type, e.kind, e.name) for e in events if e.type.startswith("node.")]
    assert nodes == [
        (False, "node.start", "workflow", "PlanWorkflow"),
        (False, "node.start", "agent", "Planner"),
        (False, "node.start", "chat", "Planner"),
        (False, "node.end", "chat", "Planner"),
        (False, "node.start", "tool", "research"),
        (True, "node.start", "workflow", "ResearchWorkflow"),
        (True, "node.start", "agent", "Researcher"),
        (True, "node.start", "chat", "Researcher"),
        (True, "node.end", "chat", "Researcher"),
        (True, "node.end", "agent", "Researcher"),
        (True, "node.end", "workflow", "ResearchWorkflow"),
        (False, "node.end", "tool", "research"),
        (False, "node.end", "agent", "Planner"),
        (False, "node.start", "agent", "Planner"),
        (False, "node.start", "chat", "Planner"),
        (False, "node.end", "chat", "Planner"),
        (False, "node.end", "agent", "Planner"),
        (False, "node.end", "workflow", "PlanWorkflow"),
    ]
    tool_start = next(e for e in events if e.type == "node.start" and e.kind == "tool")
    child_wf = next(e for e in events if e.type == "node.start" and e.kind == "workflow" and e.run_id == child_id)
    assert child_wf.parent_id == tool_start.node_id
    # the child's run.start/run.end sit under the tool node too
    child_runs = [(e.type, e.parent_id, getattr(e, "status", None)) for e in events
                  if e.type.startswith("run.") and e.run_id == child_id]
    assert child_runs == [("run.start", tool_start.node_id, None), ("run.end", tool_start.node_id, "finished")]
    # node ids are unique across the stream
    starts = [e.node_id for e in events if e.type == "node.start"]
    assert len(starts) == len(set(starts))
    # the child's state changes are events of the child run
    child_changes = [(e.path, e.new) for e in events if e.type == "workflow_state.change" and e.run_id == child_id]
    assert child_changes == [("notes", ["child answer"])]


async def test_fatal_tool_error_inside_the_child_reraises_out_of_the_parent():
    secret = "child-secret-token-9876"

    @tool(name="boom", schema=Q)
    class Boom:
        async def execute(self, args: Q = Input()):
            try:
                raise OSError(secret)
            except OSError as exc:
                raise FatalToolError("child tool died", cause=exc)

    child_replies = [call("boom", q="x")]

    @agent(provider=FunctionProvider(lambda m, t: child_replies.pop(0)), tools=[Boom])
    class ChildAgent:
        pass

    @workflow(steps=[ChildAgent])
    class Child:
        pass

    @tool(name="delegate", schema=Q)
    class Delegate:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: Q = Input()):
            return await self.runtime.run(Child, input=args.q)

    parent_seen: list = []
    parent_replies = [call("delegate", q="go"), "never"]

    def parent_fn(messages, tools):
        parent_seen.append(messages)
        return parent_replies.pop(0)

    @agent(provider=FunctionProvider(parent_fn), tools=[Delegate])
    class ParentAgent:
        pass

    @workflow(steps=[ParentAgent, ParentAgent])
    class Parent:
        pass

    app = bootstrap(Parent)
    events: list = []
    app.subscribe(events.append)
    with pytest.raises(FatalToolError) as info:
        await app.run("start")
    assert info.value.message == "child tool died"
    assert len(parent_seen) == 1  # the parent never got another turn
    ends = [(e.run_id == events[0].run_id, e.status) for e in events if e.type == "run.end"]
    assert ends == [(False, "failed"), (True, "failed")]
    # no observation either run goes on with: each call is answered as its run ends (a conversation still)
    told = [e.item.content for e in events if e.type == "state.append" and getattr(e.item, "role", None) == "tool"]
    assert told == ["Tool call boom gave no result: the run failed (FatalToolError: child tool died).",
                    "Tool call delegate gave no result: the run failed (FatalToolError: child tool died)."]
    for e in events:
        assert secret not in e.model_dump_json()


async def test_each_child_run_gets_a_fresh_state_and_its_own_run_id():
    states = []

    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class ChildAgent:
        def __init__(self, s: ChildState = State()):
            self.s = s

        def after_response(self, r, ctx):
            self.s.notes.append(r)
            states.append((ctx.run_id, self.s, list(self.s.notes)))

    @workflow(state=ChildState, steps=[ChildAgent])
    class Child:
        pass

    @tool(name="delegate", schema=Q)
    class Delegate:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: Q = Input()):
            return await self.runtime.run(Child, input=args.q)

    two_calls = {"content": "", "tool_calls": [{"name": "delegate", "args": {"q": "1"}},
                                                {"name": "delegate", "args": {"q": "2"}}]}

    @agent(provider=FunctionProvider(lambda m, t: two_calls), tools=[Delegate])
    class ParentAgent:
        pass

    @workflow(steps=[ParentAgent])
    class Parent:
        pass

    await bootstrap(Parent).run("go")
    assert len(states) == 2
    (id1, s1, notes1), (id2, s2, notes2) = states
    assert id1 != id2
    assert s1 is not s2
    assert notes1 == ["ok"] and notes2 == ["ok"]


def _delegating_flow(child_agent_provider):
    """A parent agent whose tool runs a one-agent child workflow using ``child_agent_provider``."""

    @agent(provider=child_agent_provider, prompt="You research.")
    class Researcher:
        pass

    @workflow(steps=[Researcher])
    class ResearchWorkflow:
        pass

    @tool(name="research", description="Delegates.", schema=Q)
    class ResearchTool:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: Q = Input()):
            return await self.runtime.run(ResearchWorkflow, input=args.q)

    replies = iter([call("research", q="why?"), "done"])

    @agent(provider=FunctionProvider(lambda m, t: next(replies)), prompt="You plan.", tools=[ResearchTool])
    class Planner:
        pass

    @workflow(steps=[Planner, Planner])
    class PlanWorkflow:
        pass

    return PlanWorkflow


async def test_a_child_workflow_inherits_the_cassette_so_replay_never_reaches_its_model(tmp_path):
    from flowtui import bootstrap

    cassette = tmp_path / "c.jsonl"
    calls = []
    recorded = bootstrap(_delegating_flow(FunctionProvider(lambda m, t: calls.append(1) or "because")),
                         record=cassette)
    assert await recorded.run("go") == "done" and calls == [1]
    broken = FunctionProvider(lambda m, t: pytest.fail("the child's model was called during a replay"))
    replayed = bootstrap(_delegating_flow(broken), replay=cassette)
    events: list = []
    assert await replayed.run("go", on_event=events.append) == "done"
    child_tool = [e for e in events if e.type == "node.end" and e.kind == "tool"][0]
    assert child_tool.status == "ok"


async def test_a_stop_inside_a_child_workflow_stops_the_parent():
    from flowtui import Controller, bootstrap

    ctl = Controller(breakpoints={"Researcher"})
    app = bootstrap(_delegating_flow(FunctionProvider(lambda m, t: "because")))
    events: list = []
    run = app.prepare("go", controller=ctl, on_event=events.append)
    task = asyncio.ensure_future(run.execute())
    while not ctl.paused:
        await asyncio.sleep(0.001)
    assert ctl.paused_at.name == "Researcher"  # paused inside the child
    ctl.stop()
    assert await task is None
    ends = [(e.run_id == run.id, e.status) for e in events if e.type == "run.end"]
    assert ends == [(False, "stopped"), (True, "stopped")]
    tool_end = [e for e in events if e.type == "node.end" and e.kind == "tool"][0]
    assert tool_end.status == "stopped"
    # the parent's call is answered as what happened (no made-up result): its history stays a conversation
    (answer,) = [e.item for e in events if e.type == "state.append" and e.item.role == "tool"]
    assert answer.is_error and answer.content.startswith("Tool call ") \
        and answer.content.endswith(" did not return: the run stopped.")
    assert not run.state.history_problems()


async def test_paused_inside_a_child_run_the_view_shows_the_childs_own_state_and_edits_reach_it():
    """The panes follow the run that is paused: the child's history, memory and prompt, named
    as the child of its parent; an edit sent with its run id lands in the child."""
    from flowtui import Controller
    from flowtui.runtime.fold import RunView

    seen_parent, seen_child, states = [], [], {}
    ctl = Controller(breakpoints={"Researcher"})
    wf = build(lambda m: "because", [call("research", q="why?"), "done"], seen_parent=seen_parent,
               seen_child=seen_child, states=states)
    view = RunView()
    run = bootstrap(wf).prepare("go", controller=ctl, on_event=view.apply)
    task = asyncio.ensure_future(run.execute())
    while not ctl.paused:
        await asyncio.sleep(0.001)
    child_id = view.pause.run_id
    assert child_id != run.id and view.shown.run_id == child_id
    assert view.path()[0] == "ResearchWorkflow (child of PlanWorkflow)"
    assert [m.content for m in view.history] == ["why?"]  # the child's input, not the parent's history
    run.edits_for(child_id).add_item("memory", "from the person")
    assert view.memory == ["topic: why?", "from the person"] and "from the person" not in run.state.memory
    ctl.step()
    while not ctl.paused or ctl.paused_at.kind != "chat":
        await asyncio.sleep(0.001)
    sees = view.model_sees()
    assert [m.role for m in sees] == ["system", "system", "user"] and "from the person" in sees[1].content
    view.focus = view.run_id  # the cursor on a parent node: the parent's panes
    assert [m.role for m in view.history] == ["user", "assistant"]
    view.focus = None
    ctl.resume()
    await asyncio.wait_for(task, 10)
    assert [m.role for m in seen_child[0]] == [m.role for m in sees]  # what view 2 showed is what was sent
    assert [m.content for m in seen_child[0]] == [m.content for m in sees]


async def test_a_workflow_that_runs_itself_ends_the_run_naming_the_recursion():
    """It nested until Python's recursion limit: a RecursionError naming nothing, a node tree hundreds
    of columns wide, and the run "finished"."""

    @tool(name="again", description="Runs the workflow again.", schema=Q)
    class Again:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: Q = Input()):
            return await self.runtime.run(Loop, input=args.q)

    def model(messages, tools):
        return call("again", q="deeper") if not any(m.role == "tool" for m in messages) else "done"

    @agent(provider=FunctionProvider(model), prompt="You recurse.", tools=[Again])
    class Recurser:
        pass

    @workflow(steps=[Recurser])
    class Loop:
        pass

    events: list = []
    with pytest.raises(FatalToolError, match=r"child workflows nested 32 deep, Loop the next: a workflow that "
                                               r"runs itself, directly or through another\?"):
        await bootstrap(Loop).run("go", on_event=events.append)
    assert events[-1].type == "run.end" and events[-1].status == "failed"
    assert max(e.run_id.count(".") for e in events) == 32


async def test_the_parents_message_whose_call_runs_the_child_cannot_be_deleted_while_paused_inside_it():
    """Paused inside the child, deleting (or promoting) the parent's reply that made the call running the
    child was made: the child's result then answered a call no message made, and the run failed."""
    from flowtui import Controller, ConfigError, bootstrap

    ctl = Controller(breakpoints={"Researcher"})
    run = bootstrap(_delegating_flow(FunctionProvider(lambda m, t: "because"))).prepare("go", controller=ctl)
    task = asyncio.ensure_future(run.execute())
    while not ctl.paused:
        await asyncio.sleep(0.001)
    assert ctl.paused_at.name == "Researcher"  # inside the child, the parent's call still running
    assert [m.role for m in run.state.history] == ["user", "assistant"]
    for edit in (lambda: run.edits.delete_message(1), lambda: run.edits.promote(1, "kept")):
        with pytest.raises(ConfigError, match=r"^history\[1\] makes call_1_0, whose tool is still running"):
            edit()
    assert [m.role for m in run.state.history] == ["user", "assistant"]
    ctl.resume()
    assert await asyncio.wait_for(task, 10) == "done"
