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


@pytest.mark.parametrize("field, value, said", [
    ("n", 5, "state field S.n refused 5: n must stay under 5"),                # its field_validator
    ("m", -1, "state field S.m refused -1: Input should be greater than or equal to 0"),  # a constraint
    ("k", 7, "state field S.k refused 7: odd"),                                # Annotated[int, AfterValidator]
    ("pair", 3, "state field S.pair refused 3: pair must stay even"),          # a model_validator sees it
])
async def test_a_value_of_the_fields_type_is_still_validated_by_the_class(field, value, said):
    """A value of exactly the field's scalar type skipped validation: `self.s.n = 5` was taken (journaled,
    written to a snapshot) though the class's validator refuses it, and so was -1 for Field(ge=0)."""
    from typing import Annotated

    from pydantic import AfterValidator, Field, field_validator, model_validator

    def even(v: int) -> int:
        if v % 2:
            raise ValueError("odd")
        return v

    class S(BaseModel):
        n: int = 0
        m: int = Field(default=0, ge=0)
        k: Annotated[int, AfterValidator(even)] = 0
        pair: int = 0

        @field_validator("n")
        @classmethod
        def _small(cls, v: int) -> int:
            if v >= 5:
                raise ValueError("n must stay under 5")
            return v

        @model_validator(mode="after")
        def _pair(self) -> "S":
            if self.pair % 2:
                raise ValueError("pair must stay even")
            return self

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, resposta, ctx):
            setattr(self.s, "n", 4)  # one its validator takes: taken
            setattr(self.s, field, value)

    @workflow(state=S, steps=[A])
    class W:
        pass

    events = []
    app = bootstrap(W)
    app.subscribe(events.append)
    with pytest.raises((TypeError, ValueError)) as raised:
        await app.run("x")
    assert str(raised.value).startswith(said), str(raised.value)
    changes = [(e.path, e.new) for e in events if e.type == "workflow_state.change"]
    assert changes == [("n", 4)]  # the refused value never reached the state


def _in_place_state():
    from pydantic import Field, field_validator

    class Sub(BaseModel):
        x: int = Field(default=0, ge=0)

    class Item(BaseModel):
        name: str = Field(alias="Name")  # a model the LLM fills in: built by its alias

    class S(BaseModel):
        tags: list[str] = []
        nums: list[int] = []
        capped: list[int] = Field(default_factory=list, max_length=1)
        codes: list[str] = []
        sub: Sub = Sub()
        items: list[Item] = []
        ordered: list = []

        @field_validator("tags")
        @classmethod
        def _lower(cls, v: list[str]) -> list[str]:
            if any(t != t.lower() for t in v):
                raise ValueError("tags must be lowercase")
            return v

        @field_validator("codes", mode="before")
        @classmethod
        def _upper(cls, v: list) -> list:
            return [c.upper() for c in v]  # (raises AttributeError on an int)

        @field_validator("ordered")
        @classmethod
        def _sorted(cls, v: list) -> list:
            return sorted(v)  # (raises TypeError on a str and an int)

    return S


def _agent_changing(S, change: str, *, cleanup: str | None = None):
    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, resposta, ctx):
            self.s.tags.append("ok")
            exec(change, {"s": self.s})
            if cleanup is not None:
                ctx.on_dispose(lambda: exec(cleanup, {"s": self.s}))

    return A


HOOK = "found as hook A.after_response returned"


@pytest.mark.parametrize("change, error, said", [
    ("s.tags.append('BAD')", ValueError, f"state field S.tags changed in place ({HOOK}) to ['ok', 'BAD']: tags must "
                                         "be lowercase (put back to [])"),
    ("s.nums.append('many')", TypeError, f"state field S.nums (changed in place, {HOOK}) is declared list[int], and "
                                         "['many'] is not one"),
    ("s.capped.extend([1, 2])", ValueError, f"state field S.capped changed in place ({HOOK}) to [1, 2]: List should "
                                            "have at most 1 item after validation, not 2 (put back to [])"),
    ("s.codes.append(5)", ValueError, f"state field S.codes changed in place ({HOOK}) to [5]: its validator raised "
                                      "AttributeError: 'int' object has no attribute 'upper' (put back to [])"),
    ("s.ordered.extend(['a', 1])", ValueError, f"state field S.ordered changed in place ({HOOK}) to ['a', 1]: its "
                                               "validator raised TypeError: '<' not supported between instances of "
                                               "'int' and 'str' (put back to [])"),
])
async def test_a_change_made_in_place_is_validated_and_a_refused_one_put_back(change, error, said, tmp_path):
    """`s.tags.append("BAD")` against a field_validator, or `s.nums.append("many")` to a list[int], was
    journaled and kept: the run went on with a state its own snapshot then refused."""
    S = _in_place_state()

    @workflow(state=S, steps=[_agent_changing(S, change)])
    class W:
        pass

    events = []
    app = bootstrap(W)
    app.subscribe(events.append)
    with pytest.raises(error) as raised:
        await app.run("x", journal=tmp_path / "run.jsonl")
    assert str(raised.value).startswith(said), str(raised.value)
    refused = said.split()[2].removeprefix("S.")
    assert [e.new for e in events if e.type == "workflow_state.change" and e.path == refused] == []  # never reported
    end = events[-1]
    assert end.type == "run.end" and end.status == "failed" and end.origin == "runtime"
    assert "changed in place" in end.error or "is not one" in end.error


async def test_a_change_in_place_the_class_takes_is_reported_and_the_codes_own_error_wins():
    """A valid in-place change is journaled as before (a model built by its alias, a nested model's field
    changed: taken as pydantic takes a model assigned); a hook that raised after an invalid one fails with
    its own error, not the state's refusal."""
    S = _in_place_state()
    A = _agent_changing(S, "s.items.append(type(s).model_fields['items'].annotation.__args__[0](Name='a'))\n"
                           "s.sub.x = -1\n"
                           "if len(s.tags) == 2:\n    s.tags.append('BAD')\n    raise KeyError('its own')")

    @workflow(state=S, steps=[A, A])
    class W:
        pass

    events = []
    app = bootstrap(W)
    app.subscribe(events.append)
    with pytest.raises(KeyError, match="its own"):
        await app.run("x")
    assert [(e.path, e.new) for e in events if e.type == "workflow_state.change"] == [
        ("tags", ["ok"]), ("sub", {"x": -1}), ("items", [{"Name": "a"}]),
        ("items", [{"Name": "a"}, {"Name": "a"}])]  # (tags put back to ["ok"]: the refused BAD, its "ok" with it)


async def test_a_change_in_place_is_kept_as_the_class_converts_it_in_the_object_the_code_holds():
    """`s.nums.append("3")` to a list[int] was validated, then the raw list kept: the state held "3",
    the journal said so, and the flow's next `sum(s.nums)` failed. A refused change to a deque was put
    back in a new deque, so code holding the old one changed a copy nobody watched."""
    from collections import deque

    from pydantic import Field

    class S(BaseModel):
        nums: list[int] = []
        queue: deque[int] = Field(default_factory=deque, max_length=2)

    held, same = [], []

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, resposta, ctx):
            if not held:
                held.extend([self.s.nums, self.s.queue])
                self.s.nums.append("3")
            else:
                same.append((sum(self.s.nums), self.s.nums is held[0]))
                ctx.on_dispose(lambda: same.append(self.s.queue is held[1]))
                self.s.queue.extend([1, 2, 3])

    @workflow(state=S, steps=[A, A])
    class W:
        pass

    events = []
    app = bootstrap(W)
    app.subscribe(events.append)
    with pytest.raises(ValueError, match=r"S\.queue changed in place .* \(put back to \[\]\)"):
        await app.run("x")
    assert [(e.path, e.new) for e in events if e.type == "workflow_state.change"] == [("nums", [3])]
    assert same == [(3, True), True]  # the objects the hook holds: the state's, as the class made them
    assert held == [[3], deque()]


async def test_a_change_in_place_the_class_takes_as_it_is_keeps_the_objects_inside_it():
    """Every accepted change was copied from the class's validated copy, whose inner lists are new: code
    holding `s.notes["a"]` changed a list nobody watched, and its second append was lost unreported. A
    validator that made the change what it was reported a change from ["a"] to ["a"]."""
    from pydantic import field_validator

    class S(BaseModel):
        notes: dict[str, list[str]] = {}
        tags: list[str] = ["a"]

        @field_validator("tags")
        @classmethod
        def _unique(cls, v: list[str]) -> list[str]:
            return sorted(set(v))

    held, seen = [], []

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, resposta, ctx):
            if not held:
                held.append(self.s.notes.setdefault("a", []))
                held[0].append("one")
                self.s.tags.append("a")
            else:
                held[0].append("two")
            seen.append(held[0] is self.s.notes["a"])

    @workflow(state=S, steps=[A, A])
    class W:
        pass

    events = []
    app = bootstrap(W)
    app.subscribe(events.append)
    await app.run("x")
    assert [(e.path, e.new) for e in events if e.type == "workflow_state.change"] == [
        ("notes", {"a": ["one"]}), ("notes", {"a": ["one", "two"]})]  # and no tags ["a"] -> ["a"]
    assert seen == [True, True]


async def test_a_cleanup_changing_the_state_to_what_its_class_refuses_is_its_failure_and_the_run_ends():
    """A refused change made by a ctx.on_dispose cleanup raised past the run's end: no run.end, and
    `flowtui run` hung."""
    S = _in_place_state()

    @workflow(state=S, steps=[_agent_changing(S, "pass", cleanup="s.tags.append('CLOSED')")])
    class W:
        pass

    events = []
    app = bootstrap(W)
    app.subscribe(events.append)
    await asyncio.wait_for(app.run("x"), 30)
    failures = [e.error for e in events if e.type == "dispose.error"]
    assert len(failures) == 1 and ("state field S.tags changed in place (found as a cleanup returned) to "
                                   "['ok', 'CLOSED']") in failures[0]
    assert events[-1].type == "run.end" and events[-1].status == "finished"


async def test_a_change_in_place_runs_the_validators_on_the_runs_state_and_a_strict_class_is_put_back():
    """Checked on a copy, a model validator deriving a field (n_tags = len(tags)) never updated the run's
    state; and a strict class's set could not be rebuilt from its JSON record (a list), so a refused
    change was kept, journaled and written to the snapshot, which the class then refused."""
    from pydantic import ConfigDict, model_validator

    class St(BaseModel):
        model_config = ConfigDict(strict=True)
        tags: list[str] = []
        n_tags: int = 0
        seen: set[str] = set()

        @model_validator(mode="after")
        def _count(self) -> "St":
            if self.n_tags != len(self.tags):
                self.n_tags = len(self.tags)
            return self

    held, seen = [], []

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def __init__(self, s: St = State()):
            self.s = s

        def after_response(self, resposta, ctx):
            self.s.tags.append("x")
            held.append(self.s.tags)
            if len(self.s.tags) == 2:
                seen.append(self.s.seen)
                self.s.seen.add(5)

    @workflow(state=St, steps=[A, A])
    class W:
        pass

    events = []
    app = bootstrap(W)
    app.subscribe(events.append)
    with pytest.raises(TypeError, match=r"St\.seen .* \(put back to \[\]\)"):
        await app.run("x")
    assert [(e.path, e.new) for e in events if e.type == "workflow_state.change"] == [
        ("n_tags", 1), ("tags", ["x"]), ("n_tags", 2), ("tags", ["x", "x"])]  # and no seen = [5]: put back
    assert held[0] is held[1]  # the field kept the very list the hook holds, not a validated copy
    assert seen == [set()]  # put back in place: the set the hook holds is the state's, as it was


async def test_a_model_validator_assigning_a_field_is_run_once_not_for_ever():
    """A model validator setting a derived field unconditionally (fine in pydantic without
    validate_assignment) ran again at its own assignment, which flowtui validates: a RecursionError."""
    from pydantic import model_validator

    class S(BaseModel):
        tags: list[str] = []
        n: int = 0

        @model_validator(mode="after")
        def _count(self) -> "S":
            self.n = len(self.tags)
            return self

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, resposta, ctx):
            self.s.tags = ["a"]
            self.s.tags.append("b")

    @workflow(state=S, steps=[A])
    class W:
        pass

    events = []
    app = bootstrap(W)
    app.subscribe(events.append)
    await app.run("x")
    assert [(e.path, e.new) for e in events if e.type == "workflow_state.change"] == [
        ("n", 1), ("tags", ["a"]), ("n", 2), ("tags", ["a", "b"])]


def test_a_snapshot_value_the_state_class_refuses_is_refused_naming_the_file(tmp_path):
    """A snapshot's `n = 5` of the right type was loaded though the class's validator refuses it."""
    from pydantic import field_validator

    from flowtui import ConfigError

    class S(BaseModel):
        n: int = 0

        @field_validator("n")
        @classmethod
        def _small(cls, v: int) -> int:
            if v >= 5:
                raise ValueError("n must stay under 5")
            return v

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        pass

    @workflow(state=S, steps=[A])
    class W:
        pass

    snap = tmp_path / "snap.toml"
    snap.write_text("[state]\nn = 4\n")
    assert bootstrap(W).prepare("x", snapshot=snap).workflow_state.n == 4
    snap.write_text("[state]\nn = 5\n")
    with pytest.raises(ConfigError, match=r"snap.toml: \[state\] n: S refused it: n must stay under 5"):
        bootstrap(W).prepare("x", snapshot=snap)


def test_a_snapshot_whose_fields_only_hold_together_loads():
    """A model validator relating two fields (lo <= hi): a run's own snapshot (lo = 10, hi = 20) was refused,
    its fields checked one at a time against the defaults (lo 10 > hi 5)."""
    import tempfile
    from pathlib import Path

    from pydantic import model_validator

    from flowtui import ConfigError

    class S(BaseModel):
        lo: int = 0
        hi: int = 5

        @model_validator(mode="after")
        def _ordered(self) -> "S":
            if self.lo > self.hi:
                raise ValueError(f"lo {self.lo} > hi {self.hi}")
            return self

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        pass

    @workflow(state=S, steps=[A])
    class W:
        pass

    with tempfile.TemporaryDirectory() as folder:
        snap = Path(folder) / "snap.toml"
        snap.write_text("[state]\nlo = 10\nhi = 20\n")
        state = bootstrap(W).prepare("x", snapshot=snap).workflow_state
        assert (state.lo, state.hi) == (10, 20)
        snap.write_text("[state]\nlo = 30\nhi = 20\n")
        with pytest.raises(ConfigError, match=r"snap.toml: \[state\] the fields together: S refused it: lo 30 > hi 20"):
            bootstrap(W).prepare("x", snapshot=snap)


def test_a_snapshot_reads_back_the_nan_it_wrote_and_refuses_a_value_flowtui_only_described(tmp_path):
    """--snapshot-out wrote a NaN score as "NaN", which --from-snapshot refused; and the description of
    bytes it could not show ("b'\\xff' (not shown: ...)") was loaded into a bytes field as if data."""
    import math

    from flowtui import ConfigError

    class S(BaseModel):
        score: float = 0.0
        raw: bytes = b""
        big: int = 0

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        pass

    @workflow(state=S, steps=[A])
    class W:
        pass

    snap = tmp_path / "snap.toml"
    snap.write_text('[state]\nscore = "NaN"\n')
    assert math.isnan(bootstrap(W).prepare("x", snapshot=snap).workflow_state.score)
    snap.write_text('[state]\nscore = "-Infinity"\n')
    assert bootstrap(W).prepare("x", snapshot=snap).workflow_state.score == float("-inf")
    for line in ["raw = \"b'\\\\xff\\\\x00' (not shown: UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff)\"",
                 'big = "<int of about 5000 digits>"']:
        snap.write_text(f"[state]\n{line}\n")
        with pytest.raises(ConfigError, match="that is how flowtui described a value it could not show"):
            bootstrap(W).prepare("x", snapshot=snap)


async def test_a_dict_whose_keys_collide_as_json_is_described_not_shown_with_a_value_lost():
    """{1: "x", "1": "y"} was shown (journaled, drawn) as {"1": "y"}: the "x" gone without a word."""

    class S(BaseModel):
        a: object = None

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, response, ctx):
            self.s.a = {1: "x", "1": "y"}
            ctx.fine = {1: "x", 2: "y"}  # keys made text, none lost: shown as JSON

    @workflow(state=S, steps=[A])
    class W:
        pass

    events = []
    app = bootstrap(W)
    app.subscribe(events.append)
    await app.run("x")
    change = next(e for e in events if e.type == "workflow_state.change")
    assert change.new == "{1: 'x', '1': 'y'} (not shown: some of its keys are one key as JSON text, and a value " \
                         "would be lost)"
    assert next(e.value for e in events if e.type == "ctx.set" and e.name == "fine") == {"1": "x", "2": "y"}


def _one_agent_flow(state_cls, after_response=None):
    def __init__(self, s: state_cls = State()):
        self.s = s

    body = {"__init__": __init__, **({"after_response": after_response} if after_response else {})}
    A = agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")(type("A", (), body))

    @workflow(state=state_cls, steps=[A])
    class W:
        pass

    return W


async def test_a_dataclass_state_refuses_an_attribute_it_does_not_declare_naming_the_field_meant():
    """s.aprovdo = True was journaled as a change of a field the class lacks, and went into the run's
    snapshot, which the class then refused; the field meant stayed False."""
    @dataclass
    class S:
        aprovado: bool = False
        rodadas: int = 0

    def after_response(self, response, ctx):
        self.s.aprovdo = True

    app = bootstrap(_one_agent_flow(S, after_response))
    events = []
    app.subscribe(events.append)
    with pytest.raises(AttributeError) as info:
        await app.run("x")
    assert str(info.value) == ("S has no field 'aprovdo'; did you mean 'aprovado'? its fields are aprovado, rodadas "
                               "(declare it in the class; a value that is not the workflow's state: start its name "
                               "with _)")
    assert not [e for e in events if e.type == "workflow_state.change"]


async def test_a_pydantic_state_refuses_a_misspelled_field_naming_the_one_meant():
    """pydantic's own refusal said only '"S" object has no field "aprovdo"'."""
    class S(BaseModel):
        aprovado: bool = False
        rodadas: int = 0

        @property
        def feito(self) -> bool:
            return self.aprovado

        @feito.setter
        def feito(self, value: bool) -> None:
            self.aprovado = value

    def after_response(self, response, ctx):
        self.s.feito = True  # a property's setter: set as usual
        self.s.aprovdo = True

    app = bootstrap(_one_agent_flow(S, after_response))
    events = []
    app.subscribe(events.append)
    with pytest.raises(ValueError, match=r"^S has no field 'aprovdo'; did you mean 'aprovado'\? its fields are "
                                         r"aprovado, rodadas"):
        await app.run("x")
    assert [(e.path, e.new) for e in events if e.type == "workflow_state.change"] == [("aprovado", True)]


async def test_a_plain_class_states_field_a_run_added_reads_back_from_its_snapshot(tmp_path):
    """A plain class declares no fields: one its run sets is a field, and its snapshot was refused."""
    class S:
        def __init__(self):
            self.aprovado = False

    def after_response(self, response, ctx):
        self.s.resultado = [1, 2]

    W = _one_agent_flow(S, after_response)
    snap = tmp_path / "snap.toml"
    snap.write_text("[state]\naprovado = true\nresultado = [1, 2]\n")
    state = bootstrap(W).prepare("x", snapshot=snap).workflow_state
    assert (state.aprovado, state.resultado) == (True, [1, 2])


@pytest.mark.parametrize("default, fault", [
    ("Field(default=-1, ge=0)", "rodadas: Input should be greater than or equal to 0"),
    ('"many"', "rodadas: Input should be a valid integer, unable to parse string as an integer"),
])
def test_a_pydantic_state_whose_default_its_field_refuses_is_a_load_error(default, fault):
    """Pydantic does not validate defaults: -1 for ge=0 was written to the run's snapshot, which the
    class then refused; "many" for an int failed later, in a hook, never naming the default."""
    from pydantic import Field

    from flowtui import InjectionError

    S = type("S", (BaseModel,), {"__annotations__": {"rodadas": int}, "rodadas": eval(default, {"Field": Field})})
    with pytest.raises(InjectionError, match=rf"state class S: a default its own fields refuse \({fault}\); give "
                                          "every field a default of its type"):
        bootstrap(_one_agent_flow(S))
