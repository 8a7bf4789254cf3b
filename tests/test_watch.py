"""Watchpoints (issue 12, section 4): the language and its errors, each kind firing at the event
that made it true, edge-triggering, child runs, and no change at all when none is set. Driven
in-process with a Controller here; through the worker protocol in test_watch_protocol.py."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from enum import Enum

import pytest
from pydantic import BaseModel

from flowtui import (
    ChatReply, Controller, FunctionProvider, Input, State, ToolCall, Usage, WorkflowRuntime, agent, bootstrap, loop,
    tool, workflow,
)
from flowtui.runtime.context_window import estimate_tokens
from flowtui.runtime.errors import WatchError
from flowtui.runtime.watch import parse
from flowtui.runtime.watching import Watchpoints

# --- the language ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text,key", [
    ("state.rodadas", "state.rodadas"),
    ("state.rodadas>=3", "state.rodadas >= 3"),
    ("state.aprovado == true", "state.aprovado == true"),
    ("state.label != null", "state.label != null"),
    ("state.verdict == 'it''s'", None),  # two strings side by side: refused below
    ('state.verdict == "a \\"b\\""', "state.verdict == 'a \"b\"'"),
    ("memory ~ /plano/i", "memory ~ /plano/i"),
    ("tasks ~ /revis/", "tasks ~ /revis/"),
    ("prompt.tokens > 6000", "prompt.tokens > 6000"),
    ("cost > 0.50", "cost > 0.5"),
    ("tokens > 2e4", "tokens > 20000.0"),
    ("repeat(ler_arquivo) >= 3", "repeat(ler_arquivo) >= 3"),
    ("len(state.problemas) >= 2", "len(state.problemas) >= 2"),
    ("state.a.b.0 == -1", "state.a.b.0 == -1"),
    ("state.a >= 2 and state.b == false or memory", "(state.a >= 2 and state.b == false) or memory"),
    ("Child: state.found >= 1", "Child: state.found >= 1"),
])
def test_expressions_parse_to_one_normal_form(text, key):
    if key is None:
        with pytest.raises(WatchError):
            parse(text)
        return
    assert parse(text).key == key
    assert parse(parse(text).key).key == key  # the normal form reads back as itself


@pytest.mark.parametrize("typed,text", [
    (r"state.v == 'a\d'", "a\\d"),  # a backslash before no escape is itself (it was dropped: 'ad')
    (r"state.v == 'C:\\dir'", "C:\\dir"),
    (r"state.v == 'it\'s'", "it's"),
    (r"state.v == 'two\nlines\tand a tab'", "two\nlines\tand a tab"),
    (r"state.v == '\x1b[31m \u00e9 \U0001f600'", "\x1b[31m é 😀"),
])
def test_a_quoted_text_reads_its_escapes_as_python_does(typed, text):
    assert parse(typed).condition.literal == text


@pytest.mark.parametrize("text", ["a\\d", "a\nb", "it's", "x\"y'z", "\x1b[2J", "\\", "\t", "\x00\u202e"])
def test_a_watchpoint_on_any_text_reads_back_from_its_normal_form(text):
    """The normal form writes a text as repr() does: a text holding a line break or a backslash read back as
    another (the break as the letter n), so the watchpoint saved was not the one set."""
    watch = parse(f"state.v == {text!r}")
    assert watch.condition.literal == text
    assert parse(watch.key).condition.literal == text


@pytest.mark.parametrize("text,column,message", [
    ("state.rodadas >= ", 18, "expected a value"),
    ("state.", 7, "expected a field name"),
    ("state", 6, "expected '.FIELD' after state"),
    ("foo > 1", 1, "unknown subject 'foo'"),
    ("__import__('os').system('x')", 1, "unknown subject '__import__'"),
    ("cost > 'x'", 8, "expected a number for cost"),
    ("state.a == 1 extra", 14, "expected the end, 'and' or 'or'"),
    ("state.a = 1", 9, "use == to compare"),
    ("state.a => 1", 9, "write >=, not =>"),  # (told to use ==)
    ("state.a =< 1", 9, "write <=, not =<"),
    ("memory == 1", 11, "memory is a list: compare len(memory)"),
    ("memory ~ plano", 10, "expected a /pattern/ after ~"),
    ("memory ~ /[/", 11, "bad pattern"),
    ("memory ~ /x", 10, "unterminated pattern"),
    # re's parser recurses once a group: 500 nested was a RecursionError with its traceback, and the app never opened
    ("memory ~ /" + "(" * 500 + "a" + ")" * 500 + "/", 11, "bad pattern: nested too deep for Python's re"),
    ("memory ~ /x/q", 13, "unknown pattern flag 'q'"),
    ("cost", 5, "expected a comparison after cost"),
    ("state.a >= true", 12, "true can only be compared with == or !="),
    ("state.a == 'abc", 12, "unterminated text"),
    ("prompt.toks > 1", 8, "prompt has one field, tokens"),
    ("repeat() > 1", 8, "expected a tool name"),
    ("(state.a == 1", 14, "expected ')'"),
    ("cost > 1 and", 13, "expected a subject"),
    ("", 1, "expected a condition"),
    ("state.rodadas == " + "1" * 5000, 18, "a number of 5,000 characters: at most 100 here"),  # not int()'s limit
    ("state.rodadas >= 1e999", 18, "1e999 is too large a number: it reads as infinity"),  # never fired
    # numbers as Python writes them: the caret was under what follows the digits, "expected the end"
    ("state.rodadas >= 3.", 18, "3. is no number here: write digits, with a '.' and digits"),
    ("state.rodadas >= 0x10", 18, "0x10 is no number here"),
    ("state.rodadas >= 1_000", 18, "1_000 is no number here"),
    ("cost > 1e", 8, "1e is no number here"),
    ("state.v == 1e-3x", 12, "1e-3x is no number here"),
    ("state.v == 1.2.3", 12, "1.2.3 is no number here: write digits, with a '.' and digits or an exponent if need be "
                             "(3, 3.5, -0.25, 1e3), or quote a text ('1.2.3')"),
    ("state.a." + "1" * 5000 + " == 1", 9, "expected a key or an index"),
    # parsing and checking recurse: what would exhaust Python's stack is refused, not raised as RecursionError
    ("(" * 1000 + "state.a > 1" + ")" * 1000, 34, "parentheses nested more than 32 deep"),
    (" or ".join(["state.a > 1"] * 3000), 96 * 10 + 1, "more than 64 conditions in one watchpoint"),
    pytest.param("len(" * 2000 + "history" + ")" * 2000 + " > 1", 5, "len() takes memory, tasks, history or a state "
                 "field, not another len()", id="len-2000-deep"),
])
def test_a_malformed_expression_is_refused_at_its_column(text, column, message):
    with pytest.raises(WatchError) as caught:
        parse(text)
    assert (caught.value.column, caught.value.expr) == (column, text)
    assert caught.value.message.startswith(message), caught.value.message


def test_the_command_line_shows_the_error_with_a_caret_under_it():
    from flowtui.runtime.cli import parse_watches

    with pytest.raises(SystemExit) as caught:
        parse_watches(["state.rodadas >= 1", "state.rodadas >= "])
    line = "--watch: expected a value at column 18: state.rodadas >= "
    assert caught.value.code == line + "\n" + " " * (len(line) - 17 + 17) + "^"
    assert parse_watches(["cost > 1"]) == ["cost > 1"]


# --- a flow: Planner, then loop([Writer, Reviewer]) ----------------------------------------------------


class Q(BaseModel):
    q: str


class S(BaseModel):
    rounds: int = 0
    approved: bool = False
    verdict: str = ""
    label: str | None = None
    notes: list[str] = []


def make_flow(*, calls: int = 3, cost: float = 0.0):
    """The Writer asks for look(q="a") on its first ``calls`` turns; the Reviewer approves on round 3.
    Every model call costs ``cost`` and 100 + 10 tokens. ``seen`` records each call's messages and
    each execution of look."""
    seen: dict[str, list] = {"messages": [], "look": []}

    @tool(name="look", schema=Q)
    class Look:
        async def execute(self, args: Q = Input()):
            seen["look"].append(args.q)
            return "seen " + args.q

    def reply(content="", call=None):
        return ChatReply(content=content, tool_calls=[call] if call else [], cost_usd=cost,
                         usage=Usage(prompt_tokens=100, completion_tokens=10))

    def model(messages, tools):
        seen["messages"].append(list(messages))
        writer_turns = sum(1 for m in seen["messages"] if m[0].content == "You write.")
        if messages[0].content == "You plan.":
            return reply("the plan")
        if messages[0].content == "You write." and writer_turns <= calls:
            return reply(call=ToolCall(name="look", args={"q": "a"}))
        return reply(f"text {len(seen['messages'])}")

    provider = FunctionProvider(model)

    @agent(provider=provider, prompt="You plan.")
    class Planner:
        def after_response(self, response, ctx):
            ctx.state.append("memory", "Plano: escrever bem")
            ctx.state.append("tasks", "revisar o texto")

    @agent(provider=provider, prompt="You write.", tools=[Look])
    class Writer:
        pass

    @agent(provider=provider, prompt="You review.")
    class Reviewer:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, response, ctx):
            self.s.rounds += 1
            self.s.approved = self.s.rounds >= 3
            self.s.verdict = "ok" if self.s.approved else "again"
            self.s.notes.append(f"note {self.s.rounds}")
            if self.s.rounds == 2:
                self.s.label = "second"

    @workflow(state=S, steps=[Planner, loop([Writer, Reviewer], until=lambda ctx, s: s.approved, max_iterations=5)])
    class W:
        pass

    return W, seen


async def run_watched(wf, controller: Controller, *, on_pause=None):
    """Run ``wf`` to its end, moving on at every pause; returns (events, pauses, the run)."""
    events: list = []
    loop_ = asyncio.get_running_loop()

    def sink(ev):
        events.append(ev)
        if ev.type == "run.pause":
            if on_pause is not None:
                on_pause(ev)
            loop_.call_soon(controller.resume)

    run = bootstrap(wf).prepare("go", controller=controller, on_event=sink)
    await run.execute()
    return events, [e for e in events if e.type == "run.pause"], run


def event_at(events, seq):
    return next(e for e in events if e.seq == seq)


def state_changes(events, path):
    return [e for e in events if e.type == "workflow_state.change" and e.path == path]


async def test_a_state_field_change_fires_at_each_change():
    wf, _ = make_flow()
    events, pauses, _ = await run_watched(wf, Controller(watch=["state.rounds"]))
    changes = state_changes(events, "rounds")
    assert [p.watch[0].seq for p in pauses] == [c.seq for c in changes] and len(changes) == 3
    assert [p.watch[0].detail for p in pauses] == ["state.rounds: 0 → 1", "state.rounds: 1 → 2", "state.rounds: 2 → 3"]
    assert {(p.reason, p.point) for p in pauses} == {("watchpoint", "loop_iteration")}  # the next pause point


@pytest.mark.parametrize("expr,path,new,detail", [
    ("state.rounds >= 2", "rounds", 2, "state.rounds = 2"),
    ("state.approved == true", "approved", True, "state.approved = true"),
    ("state.verdict == 'again'", "verdict", "again", "state.verdict = 'again'"),  # stays 'again' on round 2
    ("state.label != null", "label", "second", "state.label = 'second'"),
    ("len(state.notes) >= 2", "notes", ["note 1", "note 2"], "len(state.notes) = 2"),
    ("state.notes ~ /note 3/", "notes", ["note 1", "note 2", "note 3"], "state.notes gained 'note 3'"),
])
async def test_a_comparison_fires_once_when_it_becomes_true(expr, path, new, detail):
    wf, _ = make_flow()
    events, pauses, _ = await run_watched(wf, Controller(watch=[expr]))
    assert len(pauses) == 1, [p.watch for p in pauses]  # it stays true afterwards: no second firing
    (hit,) = pauses[0].watch
    trigger = event_at(events, hit.seq)
    assert (trigger.type, trigger.path, trigger.new) == ("workflow_state.change", path, new)
    assert (hit.expr, hit.detail, hit.workflow, pauses[0].reason) == (expr, detail, "W", "watchpoint")


@pytest.mark.parametrize("expr,bucket,item", [
    ("memory ~ /plano/i", "memory", "Plano: escrever bem"),
    ("tasks ~ /revis/", "tasks", "revisar o texto"),
])
async def test_memory_and_tasks_fire_when_a_matching_item_arrives(expr, bucket, item):
    wf, _ = make_flow()
    events, pauses, _ = await run_watched(wf, Controller(watch=[expr]))
    (pause,) = pauses
    trigger = event_at(events, pause.watch[0].seq)
    assert (trigger.type, trigger.bucket, trigger.item) == ("state.append", bucket, item)
    assert (pause.point, pause.name) == ("agent", "Writer")  # the first pause point after the Planner's hook


async def test_prompt_tokens_pause_before_the_model_call_that_is_too_big():
    wf, seen = make_flow()
    await run_watched(wf, Controller())
    sizes = [sum(estimate_tokens(m) for m in messages) for messages in seen["messages"]]
    assert sizes[2] < sizes[3]
    wf, seen = make_flow()
    paused_after: list[int] = []
    events, pauses, _ = await run_watched(wf, Controller(watch=[f"prompt.tokens > {sizes[3] - 1}"]),
                                          on_pause=lambda ev: paused_after.append(len(seen["messages"])))
    assert len(pauses) == 1 and paused_after == [3]  # three calls made; the fourth waits
    assert (pauses[0].point, pauses[0].watch[0].detail) == ("chat", f"prompt.tokens = {sizes[3]}")
    last_content = [e for e in events if e.type in ("state.append", "state.set") and e.seq < pauses[0].seq][-1]
    assert pauses[0].watch[0].seq == last_content.seq  # the event that made the prompt that big


@pytest.mark.parametrize("expr,detail", [("cost > 0.6", "cost = 0.75"), ("tokens > 300", "tokens = 330")])
async def test_cost_and_tokens_fire_when_the_model_call_that_crosses_them_ends(expr, detail):
    wf, _ = make_flow(cost=0.25)
    events, pauses, run = await run_watched(wf, Controller(watch=[expr]))
    (pause,) = pauses
    trigger = event_at(events, pause.watch[0].seq)
    chats = [e for e in events if e.type == "node.end" and e.kind == "chat"]
    assert trigger is chats[2] and pause.watch[0].detail == detail


@pytest.mark.parametrize("expr", ["cost >= 0", "tokens > -1", "tokens < 1000000"])
async def test_a_total_already_true_as_the_run_starts_never_fires(expr):
    # as a state field's comparison does: it waits until it has been false (it fired at the first call's end)
    wf, _ = make_flow(cost=0.25)
    _, pauses, _ = await run_watched(wf, Controller(watch=[expr]))
    assert pauses == []


async def test_repeat_pauses_before_the_third_identical_call_runs():
    wf, seen = make_flow(calls=4)
    ran: list[int] = []
    events, pauses, _ = await run_watched(wf, Controller(watch=["repeat(look) >= 3"]),
                                          on_pause=lambda ev: ran.append(len(seen["look"])))
    assert len(pauses) == 1 and ran == [2]  # two calls ran; the third waits at its pause point
    assert (pauses[0].point, pauses[0].name, pauses[0].call["args"]) == ("tool", "look", {"q": "a"})
    trigger = event_at(events, pauses[0].watch[0].seq)
    assert trigger.type == "state.append" and trigger.item.tool_calls[0].name == "look"
    assert pauses[0].watch[0].detail == "repeat(look) = 3"  # and not again at the fourth: it stayed true


async def test_a_condition_that_turns_false_fires_again_when_it_turns_true():
    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class Flip:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, response, ctx):
            self.s.approved = not self.s.approved

    @workflow(state=S, steps=[loop([Flip], max_iterations=6)])
    class FlipFlow:
        pass

    events, pauses, _ = await run_watched(FlipFlow, Controller(watch=["state.approved == true"]))
    rises = [e.seq for e in state_changes(events, "approved") if e.new is True]
    assert [p.watch[0].seq for p in pauses] == rises and len(rises) == 3


async def test_no_watchpoint_changes_nothing_and_costs_no_call(monkeypatch):
    calls = []
    original = Watchpoints.__call__
    monkeypatch.setattr(Watchpoints, "__call__", lambda self, ev: (calls.append(ev.type), original(self, ev)))

    def untimed(value):  # what a run says, without its timings
        if isinstance(value, dict):
            return {k: untimed(v) for k, v in value.items() if k not in ("ts", "run_id", "duration_ms", "elapsed_s")}
        return [untimed(v) for v in value] if isinstance(value, list) else value

    def shape(events):
        return [untimed(e.model_dump()) for e in events]

    wf, _ = make_flow()
    plain = Controller()
    bare, pauses, _ = await run_watched(wf, plain)
    assert calls == [] and not plain.watch.attached and pauses == []
    wf, _ = make_flow()
    quiet = Controller(watch=["state.rounds >= 99", "memory ~ /never/"])
    watched, pauses, _ = await run_watched(wf, quiet)
    assert len(calls) == len(watched) and pauses == []  # checked after every event, never fired
    assert shape(watched) == shape(bare)
    wf, _ = make_flow()
    assert shape((await run_watched(wf, Controller(start_paused=False)))[0]) == shape(bare)


async def test_an_unknown_state_field_is_refused_naming_the_class_and_its_fields():
    wf, _ = make_flow()
    with pytest.raises(WatchError) as caught:
        bootstrap(wf).prepare("go", controller=Controller(watch=["cost > 1", "len(state.roundz) > 1"]))
    assert caught.value.column == 11 and caught.value.message == "unknown state field 'roundz'"
    assert caught.value.hint == "S (the state of W) has the fields rounds, approved, verdict, label, notes"


async def test_an_edit_made_while_paused_fires_at_once():
    wf, _ = make_flow()
    ctl = Controller(start_paused=True, watch=["tasks ~ /urgente/"])
    events: list = []
    run = bootstrap(wf).prepare("go", controller=ctl, on_event=events.append)
    task = asyncio.ensure_future(run.execute())
    while not ctl.paused:
        await asyncio.sleep(0)
    run.edits.add_item("tasks", "algo urgente")
    pauses = [e for e in events if e.type == "run.pause"]
    assert [p.reason for p in pauses] == ["start", "watchpoint"] and ctl.paused
    added = event_at(events, pauses[1].watch[0].seq)
    assert (added.type, added.origin, pauses[1].name) == ("state.append", "user", "Planner")
    ctl.step()
    while len([e for e in events if e.type == "run.pause"]) < 3:
        await asyncio.sleep(0)
    assert [e for e in events if e.type == "run.pause"][-1].watch is None  # said once, not again
    ctl.stop()
    await task


async def test_a_watchpoint_set_mid_run_starts_from_what_is_true_then():
    wf, _ = make_flow()
    ctl = Controller(start_paused=True)
    events: list = []
    run = bootstrap(wf).prepare("go", controller=ctl, on_event=events.append)
    task = asyncio.ensure_future(run.execute())
    while not (ctl.paused and ctl.paused_at.kind == "loop_iteration"):
        await asyncio.sleep(0)
        if ctl.paused:
            ctl.step()
    assert run.workflow_state.rounds == 1
    for expr in ("state.rounds >= 1", "len(memory) >= 1", "state.rounds >= 2"):  # the first two are true already
        ctl.watch.add(expr)
    ctl.watch.add("state.rounds>=2")  # the same one, spelled otherwise
    assert ctl.watch.texts == ["state.rounds >= 1", "len(memory) >= 1", "state.rounds >= 2"]
    assert ctl.watch.remove("len(memory)>=1") and not ctl.watch.remove("cost > 1")
    ctl.resume()
    while not task.done():  # on to the end, past the watchpoint's pause
        if ctl.paused:
            ctl.resume()
        await asyncio.sleep(0)
    fired = [h.expr for p in events if p.type == "run.pause" and p.watch for h in p.watch]
    assert fired == ["state.rounds >= 2"]


async def test_stop_mode_ends_the_run_at_the_watchpoint():
    wf, _ = make_flow()
    events: list = []
    run = bootstrap(wf).prepare("go", controller=Controller(watch=["state.rounds >= 2"], on_watch="stop"),
                                on_event=events.append)
    await run.execute()
    seq = state_changes(events, "rounds")[1].seq
    assert [e.type for e in events[-5:]].count("run.resume") == 1
    end = events[-1]
    assert (end.status, end.reason) == ("stopped", f"watchpoint state.rounds >= 2 fired at event #{seq} in W "
                                                   "(state.rounds = 2)")


# --- child workflows ---------------------------------------------------------------------------------


class ChildState(BaseModel):
    found: int = 0


class P(BaseModel):
    asked: int = 0


def parent_flow(*, parent_state: type | None):
    @agent(provider=FunctionProvider(lambda m, t: "achei"), prompt="You search.")
    class Searcher:
        def __init__(self, s: ChildState = State()):
            self.s = s

        def after_response(self, response, ctx):
            self.s.found += 1

    @workflow(state=ChildState, steps=[Searcher, Searcher])
    class Child:
        pass

    class Ask(BaseModel):
        q: str

    @tool(name="delegate", schema=Ask)
    class Delegate:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: Ask = Input()):
            return await self.runtime.run(Child, input=args.q)

    replies = iter([{"content": "", "tool_calls": [{"name": "delegate", "args": {"q": "x"}}]}, "pronto"])

    @agent(provider=FunctionProvider(lambda m, t: next(replies)), prompt="You delegate.", tools=[Delegate])
    class Boss:
        pass

    @workflow(state=parent_state, steps=[Boss, Boss])
    class Parent:
        pass

    return Parent


async def test_a_watchpoint_fires_in_a_child_run_and_says_which():
    events, pauses, run = await run_watched(parent_flow(parent_state=None), Controller(watch=["state.found >= 2"]))
    (pause,) = pauses
    (hit,) = pause.watch
    child_start = next(e for e in events if e.type == "run.start" and e.workflow == "Child")
    assert (hit.run_id, hit.workflow) == (child_start.run_id, "Child") and hit.run_id != run.id
    assert event_at(events, hit.seq).run_id == child_start.run_id
    # fired at the child's last step: it pauses at the child's end, still in the child (it paused in the
    # parent, the child ended: nothing of it could be looked at or edited)
    child_end = next(e for e in events if e.type == "run.end" and e.run_id == child_start.run_id)
    assert (pause.run_id, pause.point) == (child_start.run_id, "end") and pause.seq < child_end.seq


async def test_a_child_whose_state_is_a_dataclass_or_a_plain_class_is_checked_by_what_its_class_tells():
    # a dataclass state's fields are known from its class; a plain class's only from an instance: nothing refused
    import dataclasses

    @dataclasses.dataclass
    class Found:
        found: int = 0

    class Loose:
        def __init__(self):
            self.seen = 0

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class Worker:
        pass

    @workflow(state=Found, steps=[Worker])
    class DataChild:
        pass

    @workflow(state=Loose, steps=[Worker])
    class LooseChild:
        pass

    @workflow(steps=[Worker])
    class Root:
        pass

    for kept in ("cost > 0.5", "memory ~ /x/", "state.found > 1", "DataChild: state.found > 1",
                 "LooseChild: state.anything > 1", "state.seen >= 1"):
        bootstrap(Root).prepare("go", controller=Controller(watch=[kept]))
    with pytest.raises(WatchError, match="unknown state field 'fuond'"):
        bootstrap(Root).prepare("go", controller=Controller(watch=["DataChild: state.fuond > 1"]))


async def test_a_parent_with_state_refuses_a_child_field_unless_the_watch_names_the_child():
    wf = parent_flow(parent_state=P)
    with pytest.raises(WatchError, match="unknown state field 'found'"):
        bootstrap(wf).prepare("go", controller=Controller(watch=["state.found >= 2"]))
    events, pauses, _ = await run_watched(wf, Controller(watch=["Child: state.found >= 2", "Parent: state.asked"]))
    assert [(h.expr, h.workflow) for p in pauses for h in p.watch] == [("Child: state.found >= 2", "Child")]


# --- watchpoints that could never fire are refused when set ----------------------------------------------

@pytest.mark.parametrize("expr,column,message,hint", [
    ("len(state.rounds) > 1", 11, "len() of state.rounds, which is int: it has no length",
     "len() takes a list or a text; compare state.rounds itself (e.g. state.rounds > 1)"),
    ("cost > 1 or len(state.approved) >= 1", 23, "len() of state.approved, which is bool: it has no length", None),
    ("state.notes >= 2", 7, "state.notes is list[str]: it is never >= a number",
     "compare its length: len(state.notes) >= 2"),
    ("repeat(nope) >= 2", 8, "no tool 'nope' in this flow", "W's agents have the tools look"),
    ("state.rounds >= 1 and repeat( 'nope' ) >= 2", 32, "no tool 'nope' in this flow", None),
    ("Foo: state.rounds >= 1", 1, "no workflow 'Foo' in this flow", None),
    ("  Foo : memory", 3, "no workflow 'Foo' in this flow", None),
    # equal to a value of another type: a flag is never 'true', a count never 'x', a list never 3
    ("state.approved == 'true'", 7, "state.approved is bool: it never equals 'true'",
     "compare it with a value of its type, e.g. state.approved == true"),
    ("state.rounds != 'x'", 7, "state.rounds is int: it never equals 'x'", None),
    ("state.notes == 3", 7, "state.notes is list[str]: it never equals 3", "compare its length: len(state.notes) == 3"),
    # a flag is never 1, a count never true, a field that is never null never null (they were taken, and
    # never fired: a newcomer's state.approved == 1 as the flag became true)
    ("state.approved == 1", 7, "state.approved is bool: it never equals 1",
     "compare it with a value of its type, e.g. state.approved == true"),
    ("state.approved != 0", 7, "state.approved is bool: it never equals 0", None),
    ("state.rounds == true", 7, "state.rounds is int: it never equals true",
     "compare it with a value of its type, e.g. state.rounds == 3"),
    ("state.notes == null", 7, "state.notes is list[str]: it never equals null", None),
    # a path that holds nothing
    ("state.rounds.0 > 1", 7, "state.rounds is int: it has no part 0", None),
    ("len(state.notes.first) > 1", 11, "state.notes is list[str]: its items are taken by index, not by a name "
     "('first')", "name a field the state has, and an item of a list by its index (state.notas.0)"),
    ("len(state.notes.01) > 1", 11, "state.notes is list[str]: write its index 1, not 01", None),
    # ordered against a value of another type, or a pattern on what holds no text (taken, never fired)
    ("state.rounds > 'a'", 7, "state.rounds is int: it is never > a text",
     "compare it with a value of its type, e.g. state.rounds > 3"),
    ("state.approved > 0", 7, "state.approved is bool: it is never > a number",
     "compare it with true or false: state.approved == true"),
    ("state.notes <= 'x'", 7, "state.notes is list[str]: it is never <= a text", None),
    ("state.rounds ~ /1/", 7, "state.rounds is int: a pattern matches only texts",
     "compare it instead, e.g. state.rounds == 3"),
    ("state.approved ~ /True/", 7, "state.approved is bool: a pattern matches only texts", None),
])
async def test_a_watchpoint_that_can_never_fire_is_refused_naming_the_part_at_fault(expr, column, message, hint):
    wf, _ = make_flow()
    with pytest.raises(WatchError) as caught:
        bootstrap(wf).prepare("go", controller=Controller(watch=[expr]))
    assert (caught.value.column, caught.value.message) == (column, message)
    if hint is not None:
        assert caught.value.hint == hint
    # set on a controller described by the workflow (the worker's way, before the run exists): the same
    ctl = Controller()
    ctl.watch.describe(bootstrap(wf).workflow, list(S.model_fields))
    with pytest.raises(WatchError) as again:
        ctl.watch.add(expr)
    assert again.value.message == message and ctl.watch.texts == []


@pytest.mark.parametrize("expr", [
    "len(state.notes) >= 2", "len(state.verdict) > 3", "state.rounds >= 2", "repeat(look) >= 3",
    "W: state.rounds >= 1", "len(state.label) > 1", "state.label ~ /x/",
    "state.approved == true", "state.label == 'x'", "state.verdict != 'ok'", "state.rounds == 2",
    "state.notes.0 ~ /x/", "len(state.notes.1) > 2",
    "state.label == null", "state.label != null", "state.rounds == 2.0", "state.approved != false",
    "state.verdict > 'a'", "state.label <= 'x'", "state.notes ~ /x/", "state.verdict ~ /ok/",
])
async def test_a_watchpoint_that_can_fire_is_kept(expr):
    wf, _ = make_flow()
    run = bootstrap(wf).prepare("go", controller=Controller(watch=[expr]))
    assert run is not None


async def test_a_child_workflow_defined_in_the_flow_and_its_tools_are_known():
    wf = parent_flow(parent_state=P)
    bootstrap(wf).prepare("go", controller=Controller(watch=["Child: state.found >= 2", "repeat(delegate) >= 2"]))
    with pytest.raises(WatchError) as caught:
        bootstrap(wf).prepare("go", controller=Controller(watch=["Kid: state.found >= 2"]))
    assert caught.value.message == "no workflow 'Kid' in this flow"
    assert "the flow runs Parent and defines" in caught.value.hint and "Child" in caught.value.hint


async def test_the_tools_a_watchpoint_names_are_its_own_workflows_even_when_another_shares_its_name():
    @tool(name="echo", schema=Q)
    class Echo:
        async def execute(self, args: Q = Input()):
            return args.q

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p", tools=[Echo])
    class Other:
        pass

    @workflow(steps=[Other])
    class W:  # the same name as make_flow's, alive at the same time (as in one test process)
        pass

    wf, _ = make_flow()
    with pytest.raises(WatchError) as caught:
        bootstrap(wf).prepare("go", controller=Controller(watch=["repeat(nope) >= 2"]))
    assert caught.value.hint == "W's agents have the tools look"  # not echo: that W is another one
    assert W is not wf


class ScoreState(BaseModel):
    score: float = 0.0


@pytest.mark.parametrize("expr,fires_at", [
    ("state.score > 1", float("inf")), ("state.score < 0", float("-inf")), ("state.score == 2", 2.0)])
async def test_a_comparison_orders_an_infinity_as_the_number_it_is(expr, fires_at):
    """The run says a float JSON cannot hold in words ("Infinity"): a watchpoint compared that text
    with a number, never true, and state.score > 1 missed a score gone infinite."""
    import math

    values = [float("nan"), float("-inf"), float("inf"), 2.0, 0.5]  # (a watchpoint fires at the next pause point)

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class Scorer:
        def __init__(self, s: ScoreState = State()):
            self.s = s

        def after_response(self, response, ctx):
            self.s.score = values.pop(0)

    @workflow(state=ScoreState, steps=[Scorer] * 5)
    class W:
        pass

    events, pauses, _ = await run_watched(W, Controller(watch=[expr]))
    trigger = event_at(events, pauses[0].watch[0].seq)
    said = {math.inf: "Infinity", -math.inf: "-Infinity"}.get(fires_at, fires_at)
    assert (trigger.path, trigger.new) == ("score", said)


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Point(Enum):
    ORIGIN = (0, 0)


class Shade(str, Enum):
    DARK = "dark"


class TypedState(BaseModel):
    point: Point = Point.ORIGIN
    amount: Decimal = Decimal("0.1")
    color: Color = Color.RED
    shade: Shade = Shade.DARK
    by_id: dict[int, str] = {}
    by_code: dict[str, str] = {}


@pytest.mark.parametrize("expr,path", [
    ("state.amount > 1", "amount"),  # a Decimal is journaled as its digits: compared as the number
    ("state.amount == 2.5", "amount"),
    ("state.amount == '2.50'", "amount"),  # or as its text, as the journal holds it
    ("state.color == 'blue'", "color"),  # an enum as its value (it was refused: "never equals 'blue'")
    ("state.by_id.3 == 'three'", "by_id"),  # a dict's int keys are text in JSON
    ("state.by_code.01 == 'first'", "by_code"),  # and key "01" is not key "1"
])
async def test_a_watchpoint_on_a_decimal_an_enum_or_a_dict_by_int_key_fires(expr, path):
    """Accepted, they never fired (a Decimal is a text in the journal, a dict's keys too), or were
    refused: an enum field could not be watched at all."""
    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class Setter:
        def __init__(self, s: TypedState = State()):
            self.s = s

        def after_response(self, response, ctx):
            self.s.amount = Decimal("2.50")
            self.s.color = Color.BLUE
            self.s.by_id = {3: "three"}
            self.s.by_code = {"1": "one", "01": "first"}

    @workflow(state=TypedState, steps=[Setter, Setter])
    class W:
        pass

    events, pauses, _ = await run_watched(W, Controller(watch=[expr]))
    assert len(pauses) == 1, [p.watch for p in pauses]
    trigger = event_at(events, pauses[0].watch[0].seq)
    assert (trigger.type, trigger.path) == ("workflow_state.change", path)


async def test_an_enum_field_equal_to_no_value_of_its_enum_is_refused_with_one_of_them_as_the_example():
    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class Setter:
        def __init__(self, s: TypedState = State()):
            self.s = s

    @workflow(state=TypedState, steps=[Setter])
    class W:
        pass

    with pytest.raises(WatchError) as caught:
        bootstrap(W).prepare("go", controller=Controller(watch=["state.color == 'green'"]))
    assert caught.value.message == "state.color is Color: it never equals 'green'"
    assert caught.value.hint == "compare it with a value of its type, e.g. state.color == 'red'"
    with pytest.raises(WatchError) as caught:  # a value no watchpoint can write is not given as an example
        bootstrap(W).prepare("go", controller=Controller(watch=["state.point == 3"]))
    assert caught.value.hint == "compare it with a value of its type, e.g. state.point == ..."
    with pytest.raises(WatchError) as caught:  # an enum of texts is no text to take the length of
        bootstrap(W).prepare("go", controller=Controller(watch=["state.shade == 1"]))
    assert caught.value.hint == "compare it with a value of its type, e.g. state.shade == 'dark'"
