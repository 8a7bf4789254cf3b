"""Controlling a run headlessly (SPEC §1.9): pause points, step / next turn / loop once /
continue / pause / stop, breakpoints, and edits made while paused."""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import BaseModel

from flowtui import (
    ConfigError,
    Controller,
    FunctionProvider,
    Input,
    State,
    agent,
    bootstrap,
    loop,
    tool,
    workflow,
)


# --- a small flow: Planner, then loop([Writer (calls a tool, then answers), Reviewer]) ----

class Q(BaseModel):
    q: str


class RevState(BaseModel):
    rounds: int = 0
    notes: list[str] = []


def make_flow(*, planner_handler=None, max_iterations: int = 2):
    """Returns (Workflow, calls) where calls[name] lists the messages each model call got."""
    calls: dict[str, list] = {"Planner": [], "Writer": [], "Reviewer": []}

    @tool(name="look", schema=Q)
    class Look:
        async def execute(self, args: Q = Input()):
            return "seen " + args.q

    def planner(messages, tools):
        calls["Planner"].append(list(messages))
        return "the plan"

    def writer(messages, tools):
        calls["Writer"].append(list(messages))
        n = len(calls["Writer"])
        if n % 2 == 1:
            return {"content": "", "tool_calls": [{"name": "look", "args": {"q": f"x{n}"}}]}
        return f"draft {n // 2}"

    def reviewer(messages, tools):
        calls["Reviewer"].append(list(messages))
        return f"review {len(calls['Reviewer'])}"

    @agent(provider=FunctionProvider(planner_handler or planner), prompt="You plan.")
    class Planner:
        pass

    @agent(provider=FunctionProvider(writer), prompt="You write.", tools=[Look])
    class Writer:
        def __init__(self, s: RevState = State()):
            self.s = s

        def before_prompt(self, prompt, ctx):
            return f"{prompt} Round {self.s.rounds}."

    @agent(provider=FunctionProvider(reviewer), prompt="You review.")
    class Reviewer:
        def __init__(self, s: RevState = State()):
            self.s = s

        def after_response(self, response, ctx):
            self.s.rounds += 1

    @workflow(state=RevState, steps=[Planner, loop([Writer, Writer, Reviewer], max_iterations=max_iterations)])
    class Rev:
        pass

    return Rev, calls


class Driver:
    """Runs a prepared run as a task and drives its controller like the TUI would."""

    def __init__(self, wf, controller: Controller, input="go"):
        self.events: list = []
        self.ctl = controller
        self.run = bootstrap(wf).prepare(input, controller=controller, on_event=self.events.append)
        self.task = asyncio.ensure_future(self.run.execute())

    def pauses(self):
        return [e for e in self.events if e.type == "run.pause"]

    async def paused(self, n: int):
        """Wait for the n-th pause (1-based) and return its event."""
        deadline = time.monotonic() + 30  # a hang, not a slow machine
        while time.monotonic() < deadline:
            if self.task.done():
                self.task.result()
                raise AssertionError(f"the run ended instead of pausing: {self.pause_log()}")
            p = self.pauses()
            if len(p) >= n and self.ctl.paused:
                return p[n - 1]
            await asyncio.sleep(0.001)
        raise AssertionError(f"no pause #{n}: {self.pause_log()}")

    async def command(self, fn):
        """Send a command and wait for the next pause."""
        n = len(self.pauses())
        fn()
        return await self.paused(n + 1)

    async def finish(self, fn):
        fn()
        return await asyncio.wait_for(self.task, 3)

    def pause_log(self):
        return [(e.point, e.name, e.reason) for e in self.pauses()]


def where(e):
    return (e.point, e.name, e.reason)


# --- pause points and stepping commands -------------------------------------------------

async def test_start_paused_then_step_next_turn_loop_once_and_resume():
    wf, calls = make_flow()
    d = Driver(wf, Controller(start_paused=True))

    first = await d.paused(1)
    assert where(first) == ("agent", "Planner", "start")
    assert first.path == ["Rev", "Planner"]  # names the agent about to run
    assert first.prompt == "You plan."
    assert calls["Planner"] == []  # nothing ran yet
    assert [(e.type, getattr(e, "kind", None)) for e in d.events] == [
        ("run.start", None), ("state.append", None), ("node.start", "workflow"), ("run.pause", None)]

    # step: to the very next pause point, the Planner's model call
    p = await d.command(d.ctl.step)
    assert where(p) == ("chat", "Planner", "step")
    assert p.path == ["Rev", "Planner", "chat"]
    assert calls["Planner"] == []

    # next turn: the Planner's call happens, then the first Writer turn is about to start
    p = await d.command(d.ctl.next_turn)
    assert where(p) == ("agent", "Writer", "next_turn")
    assert len(calls["Planner"]) == 1 and calls["Writer"] == []
    assert p.path == ["Rev", "loop 1/2", "Writer"]

    # step twice: the Writer's model call, then its tool call
    assert where(await d.command(d.ctl.step)) == ("chat", "Writer", "step")
    assert where(await d.command(d.ctl.step)) == ("tool", "look", "step")
    assert len(calls["Writer"]) == 1

    # loop once: everything up to the end of this loop iteration
    p = await d.command(d.ctl.loop_once)
    assert where(p) == ("loop_iteration", "loop", "loop_once")
    assert (len(calls["Writer"]), len(calls["Reviewer"])) == (2, 1)
    assert d.run.workflow_state.rounds == 1

    # loop once again: the whole second iteration
    p = await d.command(d.ctl.loop_once)
    assert where(p) == ("loop_iteration", "loop", "loop_once")
    assert (len(calls["Writer"]), len(calls["Reviewer"])) == (4, 2)

    # continue: to the end
    out = await d.finish(d.ctl.resume)
    assert out == "review 2"
    assert d.events[-1].type == "run.end" and d.events[-1].status == "finished"

    # every pause is followed by its resume, with the command that ended it
    marks = [(e.type, getattr(e, "point", None) or getattr(e, "command", None))
             for e in d.events if e.type in ("run.pause", "run.resume")]
    assert marks == [
        ("run.pause", "agent"), ("run.resume", "step"),
        ("run.pause", "chat"), ("run.resume", "next_turn"),
        ("run.pause", "agent"), ("run.resume", "step"),
        ("run.pause", "chat"), ("run.resume", "step"),
        ("run.pause", "tool"), ("run.resume", "loop_once"),
        ("run.pause", "loop_iteration"), ("run.resume", "loop_once"),
        ("run.pause", "loop_iteration"), ("run.resume", "continue"),
    ]
    # pause/resume events carry origin "runtime" and belong to this run
    assert {e.origin for e in d.events if e.type in ("run.pause", "run.resume")} == {"runtime"}


async def test_loop_once_after_an_inner_loops_last_iteration_stops_at_the_outer_loops_iteration():
    """l right after the inner loop's last iteration targeted that loop, which was over: the run went
    on to its end. The loop still running around it is the one whose iteration it finishes."""
    provider = FunctionProvider(lambda messages, tools: "ok")

    @agent(provider=provider, prompt="p")
    class Drafter:
        pass

    @agent(provider=provider, prompt="p")
    class Editor:
        pass

    @workflow(steps=[loop(name="chapters", max_iterations=2, steps=[
        loop(name="drafts", max_iterations=2, steps=[Drafter]), Editor])])
    class Book:
        pass

    d = Driver(Book, Controller(start_paused=True))
    await d.paused(1)
    first = await d.command(d.ctl.loop_once)
    assert (where(first), first.path[-1]) == (("loop_iteration", "drafts", "loop_once"), "drafts 1/2")
    last = await d.command(d.ctl.loop_once)
    assert (where(last), last.path[-1]) == (("loop_iteration", "drafts", "loop_once"), "drafts 2/2")
    outer = await d.command(d.ctl.loop_once)  # drafts is over: chapters' first iteration ends next
    assert where(outer) == ("loop_iteration", "chapters", "loop_once")
    assert outer.path[-1] == "chapters 1/2"
    nxt = await d.command(d.ctl.loop_once)  # chapters' next iteration, its new drafts loop run through
    assert (where(nxt), nxt.path[-1]) == (("loop_iteration", "chapters", "loop_once"), "chapters 2/2")
    assert await d.finish(d.ctl.resume) == "ok"


async def test_step_visits_every_pause_point_in_order():
    wf, calls = make_flow(max_iterations=1)
    d = Driver(wf, Controller(start_paused=True))
    await d.paused(1)
    while True:
        n = len(d.pauses())
        d.ctl.step()
        while not d.task.done() and len(d.pauses()) == n:
            await asyncio.sleep(0.001)
        if d.task.done():
            break
        await d.paused(n + 1)
    assert await d.task == "review 1"
    assert [(e.point, e.name) for e in d.pauses()] == [
        ("agent", "Planner"), ("chat", "Planner"),
        ("agent", "Writer"), ("chat", "Writer"), ("tool", "look"),
        ("agent", "Writer"), ("chat", "Writer"),
        ("agent", "Reviewer"), ("chat", "Reviewer"),
        ("loop_iteration", "loop"),
    ]
    assert [e.reason for e in d.pauses()] == ["start"] + ["step"] * 9


async def test_chat_pause_carries_the_prompt_before_prompt_built():
    wf, calls = make_flow()
    d = Driver(wf, Controller(start_paused=True))
    await d.paused(1)
    await d.command(d.ctl.next_turn)  # agent Writer
    p = await d.command(d.ctl.step)  # chat Writer
    assert where(p) == ("chat", "Writer", "step")
    assert p.prompt == "You write. Round 0."
    await d.finish(d.ctl.resume)


async def test_pause_while_running_pauses_at_the_next_point():
    release = asyncio.Event()
    in_call = asyncio.Event()

    async def slow_planner(messages, tools):
        in_call.set()
        await asyncio.wait_for(release.wait(), 3)
        return "slow plan"

    wf, calls = make_flow(planner_handler=slow_planner)
    ctl = Controller()
    d = Driver(wf, ctl)
    await asyncio.wait_for(in_call.wait(), 3)
    assert d.pauses() == []  # running freely
    ctl.pause()
    assert not ctl.paused  # takes effect at the next pause point
    release.set()
    p = await d.paused(1)
    assert where(p) == ("agent", "Writer", "pause")
    assert calls["Writer"] == []
    # still paused after a while: pause holds until a command
    await asyncio.sleep(0.02)
    assert ctl.paused and not d.task.done() and calls["Writer"] == []
    out = await d.finish(ctl.resume)
    assert out == "review 2"
    assert [(e.type, getattr(e, "command", None)) for e in d.events if e.type in ("run.pause", "run.resume")] == \
        [("run.pause", None), ("run.resume", "continue")]


@pytest.mark.parametrize("move", ["step", "next_turn", "resume"])
async def test_a_move_then_a_pause_at_once_moves_then_pauses(move):
    """A client's step followed at once by a pause (or its detach, which pauses): both answered ok, and
    the run never moved, the pause having overwritten the move before the run woke to take it."""
    wf, calls = make_flow()
    d = Driver(wf, Controller(start_paused=True))
    first = await d.paused(1)
    n = len(d.pauses())
    getattr(d.ctl, move)()
    d.ctl.pause()
    second = await d.paused(n + 1)
    assert where(first) == ("agent", "Planner", "start")
    assert second.seq > first.seq and second.reason == "pause" and where(second)[:2] != where(first)[:2]
    assert [e.command for e in d.events if e.type == "run.resume"] == [{"resume": "continue"}.get(move, move)]
    await d.finish(d.ctl.stop)


# --- stop --------------------------------------------------------------------------------

async def test_stop_while_paused_ends_the_run_as_stopped():
    wf, calls = make_flow()
    d = Driver(wf, Controller(start_paused=True))
    await d.paused(1)
    await d.command(d.ctl.next_turn)  # agent Writer, inside the loop
    assert where(d.pauses()[-1]) == ("agent", "Writer", "next_turn")
    out = await d.finish(d.ctl.stop)
    assert out == "the plan"  # the output so far
    assert calls["Writer"] == []
    end = d.events[-1]
    assert (end.type, end.status) == ("run.end", "stopped")
    assert end.error is None
    assert d.events[-2].type == "node.end" and d.events[-2].kind == "workflow" and d.events[-2].status == "stopped"
    (loop_end,) = [e for e in d.events if e.type == "node.end" and e.kind == "loop"]
    assert (loop_end.status, loop_end.data["stopped_by"]) == ("stopped", "stopped")
    assert d.run.ctx.loop.stopped_by == "stopped"
    # stopped before its first turn: no iteration was done (it said 1, and the sidebar "1 of N done")
    assert loop_end.data["iterations"] == 0 and d.run.ctx.loop.iterations == 0
    resumes = [e.command for e in d.events if e.type == "run.resume"]
    assert resumes[-1] == "stop"


async def test_stop_while_running_and_app_run_returns():
    release = asyncio.Event()
    in_call = asyncio.Event()

    async def slow_planner(messages, tools):
        in_call.set()
        await asyncio.wait_for(release.wait(), 3)
        return "slow plan"

    wf, calls = make_flow(planner_handler=slow_planner)
    app = bootstrap(wf)
    events: list = []
    app.subscribe(events.append)
    ctl = Controller()
    task = asyncio.ensure_future(app.run("go", controller=ctl))
    await asyncio.wait_for(in_call.wait(), 3)
    ctl.stop()
    assert ctl.stopping
    release.set()
    out = await asyncio.wait_for(task, 3)
    assert out == "slow plan"
    assert calls["Writer"] == []
    assert (events[-1].type, events[-1].status, events[-1].reason) == ("run.end", "stopped", "stopped by user")
    assert not [e for e in events if e.type == "run.pause"]


# --- breakpoints ----------------------------------------------------------------------------

async def test_breakpoint_on_an_agent_pauses_before_each_of_its_turns():
    wf, calls = make_flow()
    ctl = Controller()
    assert ctl.toggle_breakpoint("Reviewer") is True
    d = Driver(wf, ctl)
    p = await d.paused(1)
    assert where(p) == ("agent", "Reviewer", "breakpoint")
    assert (len(calls["Planner"]), len(calls["Writer"]), len(calls["Reviewer"])) == (1, 2, 0)
    p = await d.command(ctl.resume)
    assert where(p) == ("agent", "Reviewer", "breakpoint")
    assert (len(calls["Writer"]), len(calls["Reviewer"])) == (4, 1)
    assert ctl.toggle_breakpoint("Reviewer") is False  # cleared: the run goes to the end
    out = await d.finish(ctl.resume)
    assert out == "review 2"
    assert [where(e) for e in d.pauses()] == [("agent", "Reviewer", "breakpoint")] * 2


async def test_breakpoints_on_a_tool_and_on_a_loop_iteration():
    wf, calls = make_flow()
    ctl = Controller(breakpoints=["look", "loop"])
    d = Driver(wf, ctl)
    assert where(await d.paused(1)) == ("tool", "look", "breakpoint")
    assert where(await d.command(ctl.resume)) == ("loop_iteration", "loop", "breakpoint")
    assert where(await d.command(ctl.resume)) == ("tool", "look", "breakpoint")
    assert where(await d.command(ctl.resume)) == ("loop_iteration", "loop", "breakpoint")
    assert await d.finish(ctl.resume) == "review 2"


# --- edits while paused -----------------------------------------------------------------------

async def test_edits_while_paused_are_user_events_and_reach_the_next_model_call():
    wf, calls = make_flow()
    ctl = Controller()
    ctl.toggle_breakpoint("Writer")
    d = Driver(wf, ctl)
    assert where(await d.paused(1)) == ("agent", "Writer", "breakpoint")
    run = d.run
    assert [(m.role, m.content) for m in run.ctx.state.history] == [("user", "go"), ("assistant", "the plan")]
    mark = len(d.events)

    edits = run.edits
    edits.promote(1)  # the plan leaves the transcript and becomes memory
    with pytest.raises(ValueError) as info:
        edits.set_field("rounds", "abc")
    assert "rounds" in str(info.value) and "abc" in str(info.value)
    assert run.workflow_state.rounds == 0
    assert edits.set_field("rounds", "7") == 7
    edits.add_item("tasks", "check the spelling")
    edits.add_item("memory", "a mistake")
    assert edits.undo() is True  # takes "a mistake" back out

    user_events = [(e.type, getattr(e, "bucket", None) or getattr(e, "path", None), e.origin)
                   for e in d.events[mark:]]
    assert user_events == [
        ("state.set", "history", "user"),
        ("state.append", "memory", "user"),
        ("workflow_state.change", "rounds", "user"),
        ("state.append", "tasks", "user"),
        ("state.append", "memory", "user"),
        ("state.set", "memory", "user"),
    ]
    change = next(e for e in d.events[mark:] if e.type == "workflow_state.change")
    assert (change.old, change.new) == (0, 7)
    assert list(run.ctx.state.memory) == ["the plan"]
    assert list(run.ctx.state.tasks) == ["check the spelling"]

    ctl.toggle_breakpoint("Writer")
    out = await d.finish(ctl.resume)
    assert out == "review 2"

    # the Writer's first model call saw the edited state
    first = calls["Writer"][0]
    assert [(m.role, m.content) for m in first] == [
        ("system", "You write. Round 7."),
        ("system", "the plan\n\nTasks:\n- check the spelling"),
        ("user", "go"),
    ]
    assert run.workflow_state.rounds == 9  # 7 + two reviews


async def test_edits_undo_restores_promoted_message_and_field():
    wf, calls = make_flow()
    ctl = Controller(breakpoints=["Writer"])
    d = Driver(wf, ctl)
    await d.paused(1)
    edits = d.run.edits
    edits.promote(1)
    edits.set_field("rounds", "3")
    assert edits.undo() and edits.undo()
    assert not edits.can_undo and edits.undo() is False
    assert d.run.workflow_state.rounds == 0
    assert list(d.run.ctx.state.memory) == []
    ctl.breakpoints.clear()
    await d.finish(ctl.resume)
    first = calls["Writer"][0]
    assert [(m.role, m.content) for m in first] == [
        ("system", "You write. Round 0."), ("user", "go"), ("assistant", "the plan")]


async def test_undo_after_the_run_went_on_is_refused_and_loses_nothing():
    wf, calls = make_flow()
    d = Driver(wf, Controller(start_paused=True))
    await d.paused(1)
    p = await d.command(d.ctl.next_turn)
    assert where(p) == ("agent", "Writer", "next_turn")
    run = d.run
    run.edits.promote(1)                      # the plan goes to memory
    run.edits.add_item("tasks", "one")
    assert run.edits.undo() is True            # fine: nothing happened in between
    assert run.edits.can_undo
    await d.command(d.ctl.next_turn)          # the run goes on: turns join the history
    history = list(run.state.history)
    assert not run.edits.can_undo
    for _ in range(2):  # said again (a second u said "nothing to undo")
        with pytest.raises(ConfigError, match="gone on since the last edit"):
            run.edits.undo()
    assert list(run.state.history) == history  # nothing thrown away
    run.edits.add_item("tasks", "two")  # a new edit, undone; the older ones are forgotten
    assert run.edits.undo() is True and run.edits.undo() is False
    await d.finish(d.ctl.resume)


async def test_node_durations_leave_out_the_time_spent_paused():
    wf, calls = make_flow(max_iterations=1)
    d = Driver(wf, Controller(start_paused=True))
    await d.paused(1)
    await d.command(d.ctl.step)  # paused before the Planner's model call, inside its agent node
    await asyncio.sleep(2.0)  # the person reads the screen
    d.ctl.resume()
    await d.task
    ends = {(e.kind, e.name): e.duration_ms for e in d.events if e.type == "node.end"}
    assert ends[("agent", "Planner")] < 1000  # (what is left is the run's own work: wide of the 2 s)
    assert ends[("workflow", wf.__name__)] < 1000  # the pause at the very start too


async def test_node_durations_leave_out_the_time_events_take_to_reach_a_slow_sink():
    # a sink as slow as a journal redacting and writing a huge tool result: 1 s a history message
    wf, calls = make_flow(max_iterations=1)
    events: list = []

    def slow_sink(event):
        events.append(event)
        if event.type == "state.append":
            time.sleep(1.0)

    run = bootstrap(wf).prepare("go", controller=Controller(start_paused=True), on_event=slow_sink)
    task = asyncio.ensure_future(run.execute())
    while not run.controller.paused:
        await asyncio.sleep(0.001)
    run.edits.add_item("tasks", "one")  # delivered while paused: counted once, not twice
    started, before = time.monotonic(), len(events)
    run.controller.resume()
    await task
    appended = sum(1 for e in events[before:] if e.type == "state.append")
    assert time.monotonic() - started >= 1.0 * appended >= 3.0  # the sink did take its time
    ends = {(e.kind, e.name): e.duration_ms for e in events if e.type == "node.end"}
    assert ends[("tool", "look")] < 500  # (what is left is the run's own work: wide of the sink's 1 s)
    assert ends[("agent", "Writer")] < 500
    # the edit's 1 s, delivered while paused, is left out once: the workflow still lasts as long as
    # the agents inside it (subtracted twice, its duration came to nothing)
    assert ends[("agent", "Planner")] + ends[("agent", "Writer")] <= ends[("workflow", wf.__name__)] < 500


async def test_an_edits_note_quotes_no_piece_of_a_credential():
    # the note quoted the text cut in the middle, then redacted it: the key's end, no longer shaped
    # like a key, went to the journal and the event log
    wf, calls = make_flow(max_iterations=1)
    d = Driver(wf, Controller(start_paused=True))
    await d.paused(1)
    d.run.edits.add_item("memory", "the key is ghp_0123456789abcdefghijABCDEFGHIJ012345 ok")
    note = next(e.note for e in reversed(d.events) if e.type == "state.append")
    assert note.startswith('added memory[') and "[redacted]" in note
    assert "012345" not in note and "ABCDEF" not in note
    d.ctl.stop()
    await d.task


async def test_a_blank_memory_item_or_task_is_refused_as_the_add_dialog_refuses_it():
    wf, calls = make_flow(max_iterations=1)
    d = Driver(wf, Controller(start_paused=True))
    await d.paused(1)
    d.run.edits.add_item("memory", "keep this")
    with pytest.raises(ConfigError, match=r"a memory item cannot be blank; d deletes memory\[0\]"):
        d.run.edits.set_item("memory", 0, "  \n")
    with pytest.raises(ConfigError, match="a tasks item cannot be blank"):
        d.run.edits.add_item("tasks", "")
    assert list(d.run.state.memory) == ["keep this"] and list(d.run.state.tasks) == []
    d.ctl.stop()
    await d.task


async def test_step_stops_before_each_model_call_of_an_agents_own_run_and_shows_its_request():
    """An agent that takes its turn over with run() made its model calls with no pause point: s went
    past all of them at once, and what the model sees showed a request no call made."""
    from fakes import checking_twice
    from flowtui.runtime.fold import RunView

    received = []

    def model(messages, tools):
        received.append([(m.role, m.content) for m in messages])
        return f"reply {len(received)}"

    d = Driver(checking_twice(model), Controller(start_paused=True))
    await d.paused(1)
    seen = []
    for n in (2, 3):
        p = await d.command(d.ctl.step)
        assert where(p) == ("chat", "Checker", "step")
        view = RunView()
        for ev in d.events:
            view.apply(ev)
        seen.append([(m.role, m.content) for m in view.model_sees()])
        assert len(received) == n - 2  # paused before the call, not after it
    assert await d.finish(d.ctl.resume) == "reply 2"
    assert seen == received == [[("system", "Check twice."), ("user", "first look")],
                                [("system", "Check twice."), ("user", "second look")]]


async def test_model_calls_an_agents_run_makes_at_once_each_pause_on_their_own():
    """Three calls gathered at once paused together: the app showed one, and one s let all three go."""
    from flowtui import ChatRequest, Message

    received = []

    async def model(messages, tools):
        received.append(messages[-1].content)
        return f"seen {messages[-1].content}"

    @agent(provider=FunctionProvider(model), prompt="Ask three.")
    class Gatherer:
        async def run(self, input, ctx):
            replies = await asyncio.gather(*(self.provider.complete(ChatRequest(messages=[
                Message(role="user", content=f"question {i}")])) for i in range(3)))
            return ", ".join(r.content for r in replies)

    @workflow(steps=[Gatherer])
    class W:
        pass

    d = Driver(W, Controller(start_paused=True))
    await d.paused(1)
    asked = []
    for n in range(3):
        p = await d.command(d.ctl.step)
        assert where(p) == ("chat", "Gatherer", "step") and len(received) == n  # the next one waits
        asked.append(p.request["messages"][-1]["content"])
    assert await d.finish(d.ctl.step) == "seen question 0, seen question 1, seen question 2"
    assert sorted(asked) == ["question 0", "question 1", "question 2"]
