"""The workflow state: one instance per run, observed by assignment and by in-place comparison."""

import asyncio
from dataclasses import dataclass, field

import pytest
from pydantic import BaseModel

from flowtui import FunctionProvider, State, agent, bootstrap, loop, workflow
from flowtui.runtime.observe import coerce


class PlainState:  # a plain class: its list default lives on the class
    aprovado = False
    problemas = []


def flow_for(state_cls):
    @agent(provider=FunctionProvider(lambda m, t: "APROVADO"), prompt="p")
    class Revisor:
        def __init__(self, s: state_cls = State()):
            self.s = s

        def after_response(self, resposta, ctx):
            self.s.problemas.append(resposta)  # in place: found by comparison
            self.s.aprovado = True             # assignment: seen as it happens

    @workflow(state=state_cls, steps=[loop(steps=[Revisor], until=lambda ctx, s: s.aprovado)])
    class W:
        pass

    return W, Revisor


@pytest.mark.parametrize("kind", ["plain", "pydantic", "dataclass"])
async def test_no_mutable_default_leaks_between_runs(kind):
    if kind == "plain":
        cls = PlainState
    elif kind == "pydantic":
        class cls(BaseModel):
            aprovado: bool = False
            problemas: list[str] = []
    else:
        @dataclass
        class cls:
            aprovado: bool = False
            problemas: list[str] = field(default_factory=list)
    W, _ = flow_for(cls)
    app = bootstrap(W)
    finals = []
    app.subscribe(lambda e: finals.append(e) if e.type == "workflow_state.change" else None)
    await app.run("a")
    await app.run("b")
    problemas = [e.new for e in finals if e.path == "problemas"]
    assert problemas == [["APROVADO"], ["APROVADO"]]  # the second run starts from an empty list
    assert PlainState.problemas == []  # the class default itself is never touched


async def test_change_events_carry_path_old_new_and_origin():
    class S(BaseModel):
        aprovado: bool = False
        problemas: list[str] = []

    W, _ = flow_for(S)
    app = bootstrap(W)
    events = []
    app.subscribe(events.append)
    await app.run("x")
    changes = [(e.path, e.old, e.new, e.origin) for e in events if e.type == "workflow_state.change"]
    assert changes == [
        ("aprovado", False, True, "hook:Revisor.after_response"),
        ("problemas", [], ["APROVADO"], "hook:Revisor.after_response"),
    ]
    start = events[0]
    assert start.type == "run.start" and start.state == {"aprovado": False, "problemas": []}


async def test_everyone_gets_the_same_instance_and_runs_never_share_it():
    class S(BaseModel):
        n: int = 0

    seen = []

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def __init__(self, s: S = State()):
            self.s = s

        async def after_response(self, r, ctx):
            await asyncio.sleep(0.01)
            self.s.n += 1
            seen.append(id(self.s))

    def until(ctx, s):
        seen.append(id(s))
        return True

    @workflow(state=S, steps=[loop(steps=[A], until=until)])
    class W:
        pass

    app = bootstrap(W)
    await asyncio.gather(app.run("a"), app.run("b"))
    assert len(seen) == 4 and len(set(seen)) == 2


def test_coerce_validates_against_the_field_type():
    class S(BaseModel):
        rodadas: int = 0
        problemas: list[str] = []
        aprovado: bool = False

    assert coerce(S, "rodadas", "5") == 5
    assert coerce(S, "problemas", '["a", "b"]') == ["a", "b"]
    assert coerce(S, "aprovado", "true") is True
    with pytest.raises(ValueError, match="S.rodadas is int: 'abc' refused"):
        coerce(S, "rodadas", "abc")


async def test_a_nan_or_an_infinity_is_said_as_such_and_changes_once(tmp_path):
    """A score gone NaN was shown as null (no score at all), and, NaN being unequal to itself, as a
    change of the field at every check of the state."""
    import json

    class S(BaseModel):
        score: float = 0.0
        scores: list[float] = []

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class Scorer:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, resposta, ctx):
            self.s.score = float("nan")
            self.s.scores.append(float("inf"))
            ctx.ratio = float("-inf")

    @workflow(state=S, steps=[Scorer, Scorer])
    class W:
        pass

    journal = tmp_path / "run.jsonl"
    await bootstrap(W).run("go", journal=journal)
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    changes = [(e["path"], e["old"], e["new"]) for e in lines if e["type"] == "workflow_state.change"]
    assert changes == [("score", 0.0, "NaN"), ("scores", [], ["Infinity"]),
                       ("scores", ["Infinity"], ["Infinity", "Infinity"])]
    assert [e["value"] for e in lines if e["type"] == "ctx.set" and e["name"] == "ratio"] == ["-Infinity"] * 2
