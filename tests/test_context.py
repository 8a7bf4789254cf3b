"""ctx: free fields, ctx.get, AttributeError on unset fields, and the runtime's fields."""

import enum

import pytest

from flowtui import FunctionProvider, LoopInfo, TurnInfo, agent, bootstrap, loop, workflow
from flowtui.runtime.context import AgentContext
from flowtui.runtime.conversation import ConversationState


def test_free_fields_get_and_unset_attribute_error():
    events = []
    emit = lambda cls, **f: events.append(f)  # noqa: E731
    ctx = AgentContext(ConversationState(emit), emit, run_id="r")
    assert ctx.get("tentativas", 0) == 0
    ctx.tentativas = ctx.get("tentativas", 0) + 1
    assert ctx.tentativas == 1
    assert events == [{"name": "tentativas", "value": 1}]
    with pytest.raises(AttributeError, match="ctx has no field 'plano'.*ctx.get\\('plano', default\\)"):
        ctx.plano
    with pytest.raises(AttributeError, match="reserved"):
        ctx.state = None


@pytest.mark.parametrize("name, said", [("data", "ctx.data is the run's read-only data"),
                                        ("state", "the conversation is changed with ctx.state.append/set")])
def test_deleting_a_reserved_field_says_it_is_reserved_not_that_it_is_not_there(name, said):
    """`del ctx.data` said "ctx has no field 'data'", a field every hook reads."""
    emit = lambda cls, **f: None  # noqa: E731
    ctx = AgentContext(ConversationState(emit), emit, run_id="r")
    with pytest.raises(AttributeError, match=f"ctx.{name} is reserved") as info:
        delattr(ctx, name)
    assert said in str(info.value) and "has no field" not in str(info.value)
    assert getattr(ctx, name) is not None  # still there


@pytest.mark.parametrize("field,when", [("turn", "after each turn"), ("loop", "as a loop starts and after each of its iterations"),
                                        ("budget", "as a run with a budget starts, and after each model call or tool")])
def test_reading_a_runtime_field_before_it_is_set_says_when_it_will_be_not_to_set_it(field, when):
    """It said "set it first (ctx.turn = ...)", which the runtime then refuses."""
    ctx = AgentContext(ConversationState(lambda cls, **f: None), lambda cls, **f: None, run_id="r")
    with pytest.raises(AttributeError) as info:
        getattr(ctx, field)
    assert str(info.value) == (f"ctx has no field {field!r} yet: the runtime sets it {when}; read it with "
                               f"ctx.get({field!r}, default)")


async def test_runtime_writes_turn_output_and_loop():
    seen = {}

    @agent(provider=FunctionProvider(lambda m, t: "feito"), prompt="p")
    class A:
        def after_response(self, response, ctx):
            seen["turn_before"] = ctx.get("turn")

    @workflow(steps=[loop(steps=[A], until=lambda ctx: ctx.turn.response == "feito", max_iterations=3)])
    class W:
        pass

    app = bootstrap(W)
    events = []
    app.subscribe(events.append)
    assert await app.run("x") == "feito"
    sets = [(e.name, e.origin) for e in events if e.type == "ctx.set"]
    assert sets == [("loop", "runtime"), ("turn", "runtime"), ("output", "runtime"), ("loop", "runtime"),
                    ("loop", "runtime")]
    turn = next(e.value for e in events if e.type == "ctx.set" and e.name == "turn")
    assert TurnInfo(**turn) == TurnInfo(agent="A", response="feito")
    final_loop = [e.value for e in events if e.type == "ctx.set" and e.name == "loop"][-1]
    assert LoopInfo(**final_loop) == LoopInfo(iterations=1, max_iterations=3, stopped_by="until")
    assert seen["turn_before"] is None  # ctx.turn is written after after_response, as the spec orders


@pytest.mark.parametrize("field", ["turn", "loop", "budget"])
async def test_a_field_the_runtime_writes_is_refused_to_user_code_naming_it(tmp_path, field):
    """ctx.turn = "x" in a hook: its event broke the shape the app reads, the app dropped it, and the
    journal had a hole that flowtui diff and --resume-from then refused as damage."""
    from flowtui.runtime.journal import load_runs

    @agent(provider=FunctionProvider(lambda m, t: "feito"), prompt="p")
    class A:
        def after_response(self, response, ctx):
            setattr(ctx, field, "x")

    @workflow(steps=[A])
    class W:
        pass

    journal = tmp_path / "run.jsonl"
    with pytest.raises(AttributeError, match=f"ctx.{field} is written by the runtime .*ctx.my_{field} = "):
        await bootstrap(W).run("x", journal=journal)
    (events,) = load_runs(journal)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[-1].status == "failed" and f"ctx.{field} is written by the runtime" in events[-1].error
    assert not any(e.type == "ctx.set" and e.name == field for e in events)
    ctx = AgentContext(ConversationState(lambda cls, **f: None), lambda cls, **f: None, run_id="r")
    with pytest.raises(AttributeError, match=f"ctx.{field} is written by the runtime"):
        delattr(ctx, field)


async def test_showing_a_value_never_changes_what_the_flow_does():
    seen = {}

    class Loud:
        def __repr__(self):
            raise ValueError("boom")

    class Color(enum.IntEnum):  # written as its value, read back as an int
        RED = 1

    class Array:  # numpy's: == is elementwise, and the truth of what it gives raises
        def __eq__(self, other):
            raise ValueError("The truth value of an array with more than one element is ambiguous")

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def after_response(self, response, ctx):
            ctx.gen = (i for i in range(3))
            seen["gen"] = list(ctx.gen)  # not consumed by its event
            circular = []
            circular.append(circular)
            ctx.circular, ctx.raw, ctx.loud = circular, b"\x00\xff", Loud()
            ctx.arrays = [Array()]
            ctx.color, ctx.ratio, ctx.names = Color.RED, 0.5, ["a", 1, {"b": [2.5]}]  # (the last two read back)
            ctx.colors, ctx.by_color = [Color.RED], {"x": {"y": Color.RED}}  # equal to their JSON, not of its types

    @workflow(steps=[A])
    class W:
        pass

    app = bootstrap(W)
    events = []
    app.subscribe(events.append)
    assert await app.run("x") == "ok"
    assert seen["gen"] == [0, 1, 2]
    shown = {e.name: e.value for e in events if e.type == "ctx.set"}
    assert "shown without being consumed" in shown["gen"]
    assert "Circular reference" in shown["circular"] and "not shown" in shown["raw"] and "boom" in shown["loud"]
    # none of them reads back from its JSON form: each event says its type
    typed = {e.name: e.typed for e in events if e.type == "ctx.set" and e.name != "output" and e.name != "turn"}
    assert typed == {"gen": "generator", "circular": "list", "raw": "bytes", "loud": "Loud", "arrays": "list",
                     "color": "Color", "ratio": None, "names": None, "colors": "list", "by_color": "dict"}


async def test_an_iterator_inside_a_value_the_flow_keeps_is_described_not_consumed():
    """A generator in a dict or a list, on ctx or in the workflow state, was run to its end by the event that
    showed it: the flow then read it empty (and a second, made-up change said the field became empty)."""
    from pydantic import BaseModel

    from flowtui import State

    class S(BaseModel):
        d: dict = {}
        items: list = []

    read = {}

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, response, ctx):
            self.s.d = {"k": (i for i in range(3))}
            self.s.items.append(iter([7, 8]))
            ctx.feed = {"rows": (r for r in ["a", "b"]), "more": [iter("xy")]}

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class B:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, response, ctx):
            read.update(d=list(self.s.d["k"]), items=list(self.s.items[0]), rows=list(ctx.feed["rows"]),
                        more=list(ctx.feed["more"][0]))

    @workflow(state=S, steps=[A, B])
    class W:
        pass

    app = bootstrap(W)
    events = []
    app.subscribe(events.append)
    await app.run("x")
    assert read == {"d": [0, 1, 2], "items": [7, 8], "rows": ["a", "b"], "more": ["x", "y"]}
    changes = [(e.path, e.new) for e in events if e.type == "workflow_state.change"]
    assert [path for path, _ in changes] == ["d", "items"]  # (no made-up change to an empty one)
    assert changes[0][1]["k"].endswith("(an iterator, shown without being consumed)")
    assert changes[1][1][0] == "<list_iterator object> (an iterator, shown without being consumed)"
    feed = next(e.value for e in events if e.type == "ctx.set" and e.name == "feed")
    assert feed["more"] == ["<str_ascii_iterator object> (an iterator, shown without being consumed)"]


def test_a_dataclass_is_looked_into_for_iterators_and_one_with_a_field_unset_is_shown():
    """A generator in a dataclass was consumed; looking into one whose field is init=False and unset failed
    the flow's assignment with an AttributeError (showing a value must never change what the flow does)."""
    from dataclasses import dataclass, field

    from flowtui.runtime.context import jsonable

    @dataclass
    class Rows:
        it: object

    @dataclass
    class Conn:
        host: str = "db"
        handle: object = field(init=False)

    rows = (r for r in ["a", "b"])
    shown = jsonable({"rows": Rows(rows)})
    assert shown["rows"]["it"].endswith("(an iterator, shown without being consumed)") and list(rows) == ["a", "b"]
    assert "Conn" in str(jsonable({"c": Conn()}))
