"""Editing a workflow-state field while paused (the app's ``e`` on a field): the typed text is
checked strictly against the field's type, a refusal names the field, its type and the text, a
value that is set is always an event with origin user, and one that changes nothing says so."""

from __future__ import annotations

import asyncio
import json
import datetime
import time
from decimal import Decimal
from typing import Any, Literal

import pytest
from pydantic import AliasChoices, BaseModel, Field, RootModel, model_validator

from flowtui import ConfigError, Controller, FunctionProvider, agent, bootstrap, workflow


class S(BaseModel):
    rodadas: int = 1
    nota: float = 0.5
    ok: bool = False
    nome: str = "a"
    modo: Literal["rápido", "lento"] = "rápido"
    itens: list[str] = []
    quando: datetime.date | None = None
    limite: int = Field(default=3, ge=0)
    notas: list[float] = []


@agent(provider=FunctionProvider(lambda messages, tools: "done"), prompt="You act.")
class A:
    pass


@workflow(state=S, steps=[A])
class W:
    pass


async def paused_run(flow=W, agent="A"):
    """``flow``'s run, paused before ``agent``: (the run, its events, its controller, its task)."""
    events: list = []
    ctl = Controller(breakpoints=[agent])
    run = bootstrap(flow).prepare("go", controller=ctl, on_event=events.append)
    task = asyncio.ensure_future(run.execute())
    deadline = time.monotonic() + 60
    while not ctl.paused:
        assert not task.done() and time.monotonic() < deadline, "the run never paused"
        await asyncio.sleep(0.005)
    return run, events, ctl, task


def changes(events):
    return [(e.path, e.old, e.new, e.origin) for e in events if e.type == "workflow_state.change"]


@pytest.mark.parametrize(("name", "text", "type_name"), [
    ("rodadas", "false", "int"),
    ("rodadas", "true", "int"),
    ("rodadas", "2.0", "int"),
    ("rodadas", '"3"', "int"),
    ("rodadas", "many", "int"),
    ("nota", "true", "float"),
    ("ok", "1", "bool"),
    ("ok", "yes", "bool"),
    ("itens", '"x"', "list[str]"),
    ("itens", "[1, 2]", "list[str]"),
    ("modo", "médio", "Literal"),
    ("limite", "-1", "int"),
    ("quando", "not a date", "date | None"),
])
async def test_a_value_its_type_refuses_strictly_is_refused_naming_field_type_and_text(name, text, type_name):
    run, events, ctl, task = await paused_run()
    before = getattr(run.workflow_state, name)
    with pytest.raises(ConfigError) as info:
        run.edits.set_field(name, text)
    message = str(info.value)
    # a JSON value said as typed (11 was quoted '11', as if typed as a text), other text quoted
    shown = repr(text) if text in ("many", "yes", "médio", "not a date") else text
    assert f"S.{name} is " in message and type_name in message and f": {shown} refused (" in message, message
    assert "Traceback" not in message
    assert getattr(run.workflow_state, name) == before
    assert changes(events) == []
    ctl.resume()
    await asyncio.wait_for(task, 60)


@pytest.mark.parametrize("text", ['["a", ', '{"x": 1,}', "[1, 2"])
async def test_json_mistyped_for_a_list_is_said_to_be_no_json_where(text):
    """It was read as a text and refused as "Input should be a valid array", with no word of the missing
    bracket (the tool-argument editor says "not JSON (Expecting ...)")."""
    run, events, ctl, task = await paused_run()
    with pytest.raises(ConfigError, match=r"^S\.itens is list\[str\]: .* is not JSON \((Expecting|Illegal)"
                                          r".*\(char \d+\)\); type a value of type list\[str\] as JSON$"):
        run.edits.set_field("itens", text)
    assert changes(events) == []
    ctl.resume()
    await asyncio.wait_for(task, 60)


async def test_a_value_of_the_right_type_a_constraint_refuses_is_not_told_to_be_of_its_type():
    """-1 for Field(ge=0) was told "type a value of type int", and -1 is one."""
    run, events, ctl, task = await paused_run()
    with pytest.raises(ConfigError) as info:
        run.edits.set_field("limite", "-1")
    assert str(info.value) == ("S.limite is int: -1 refused (Input should be greater than or equal to 0); type a "
                               "value it accepts")
    ctl.resume()
    await asyncio.wait_for(task, 60)


@pytest.mark.parametrize(("name", "text", "value"), [
    ("rodadas", "7", 7),
    ("nota", "2", 2.0),
    ("nota", "2.5", 2.5),
    ("ok", "true", True),
    ("nome", "olá mundo", "olá mundo"),
    ("nome", "12", "12"),  # typed in a text field, digits are text
    ("nome", '"quoted"', "quoted"),
    ("modo", "lento", "lento"),
    ("itens", '["a", "b"]', ["a", "b"]),
    ("quando", "2024-05-01", datetime.date(2024, 5, 1)),
    ("quando", '"2024-05-01"', datetime.date(2024, 5, 1)),
    ("limite", "0", 0),
])
async def test_a_value_its_type_takes_is_set_and_recorded_as_a_user_event(name, text, value):
    run, events, ctl, task = await paused_run()
    assert run.edits.set_field(name, text) == value
    assert getattr(run.workflow_state, name) == value
    recorded = changes(events)
    assert len(recorded) == 1 and recorded[0][0] == name and recorded[0][3] == "user"
    ctl.resume()
    await asyncio.wait_for(task, 60)


async def test_an_edit_that_changes_nothing_says_unchanged_and_records_nothing():
    run, events, ctl, task = await paused_run()
    with pytest.raises(ConfigError) as info:
        run.edits.set_field("rodadas", "1")
    assert "S.rodadas is already 1: unchanged" in str(info.value)
    with pytest.raises(ConfigError):  # and `true` is no longer taken for 1
        run.edits.set_field("rodadas", "true")
    assert changes(events) == []
    assert run.edits.set_field("rodadas", "2") == 2
    assert changes(events) == [("rodadas", 1, 2, "user")]
    assert run.edits.undo() is True
    assert run.workflow_state.rodadas == 1
    ctl.resume()
    await asyncio.wait_for(task, 60)


async def test_an_undone_field_edit_is_said_as_an_undo_and_a_reexecution_says_it_so_too(tmp_path):
    """The undo of a field's edit was journaled as a plain change back (rodadas: 7 → 0), where a person's
    undone memory edit says `undone: ...`: a reader of the log could not tell it from another edit."""
    journal = tmp_path / "j.jsonl"
    events: list = []
    ctl = Controller(breakpoints=["A"])
    run = bootstrap(W).prepare("go", controller=ctl, on_event=events.append, journal=journal)
    task = asyncio.ensure_future(run.execute())
    deadline = time.monotonic() + 60
    while not ctl.paused:
        assert not task.done() and time.monotonic() < deadline, "the run never paused"
        await asyncio.sleep(0.005)
    run.edits.set_field("rodadas", "7")
    assert run.edits.undo() is True
    edit, undo = [e for e in events if e.type == "workflow_state.change"]
    assert (edit.old, edit.new, edit.note) == (1, 7, None)
    assert (undo.old, undo.new, undo.origin) == (7, 1, "user")
    assert undo.note == "undone: set rodadas (rodadas as before it)"
    ctl.resume()
    await asyncio.wait_for(task, 60)
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [e.get("note") for e in lines if e["type"] == "workflow_state.change"][-1] == undo.note
    again: list = []  # re-executed against its journal: the undo is made again, said as one
    await bootstrap(W).run(resume_from=str(journal), on_event=again.append)
    assert "run.diverged" not in [e.type for e in again]
    assert [e.note for e in again if e.type == "workflow_state.change"] == [None, undo.note]


class Priced(BaseModel):
    price: Decimal = Field(alias="Price")


class Typed(BaseModel):
    dec: Decimal = Decimal("123456789012345678901234567890.123456789")
    either: int | str = "7"
    pair: Any = (1, 2)
    count: int | float = 1
    amounts: list[Decimal] = []
    lines: dict[str, tuple[Decimal, float]] = {}
    priced: list[Priced] = []


@agent(provider=FunctionProvider(lambda messages, tools: "done"), prompt="You act.")
class B:
    pass


@workflow(state=Typed, steps=[B])
class TypedW:
    pass


async def test_a_value_saved_as_shown_or_as_the_same_json_is_unchanged_and_keeps_its_type():
    """Read again, the text a field was shown as was not always its value: a 30-digit Decimal went
    through a float, the text "7" of an int | str field became the number, a tuple a list; the run's
    value changed though the person changed nothing (and the tuple's change was said as refused)."""
    run, events, ctl, task = await paused_run(TypedW, "B")
    state = run.workflow_state
    for name, text in [("dec", "123456789012345678901234567890.123456789"), ("either", "7"),
                       ("pair", "[1, 2]"), ("pair", "[1,2]")]:
        with pytest.raises(ConfigError, match=f"Typed.{name} is already .*: unchanged"):
            run.edits.set_field(name, text)
    assert (state.dec, state.either, state.pair) == (Decimal("123456789012345678901234567890.123456789"), "7", (1, 2))
    # 1.0 for 1: no event tells them apart, so it is not recorded, and not made either
    with pytest.raises(ConfigError, match="Typed.count kept 1: .*nothing recorded"):
        run.edits.set_field("count", "1.0")
    assert type(state.count) is int
    assert changes(events) == []
    # digits typed for a Decimal are its own, not a float's
    assert run.edits.set_field("dec", "0.1000000000000000000001") == Decimal("0.1000000000000000000001")
    assert state.dec == Decimal("0.1000000000000000000001")
    assert changes(events) == [("dec", "123456789012345678901234567890.123456789", "0.1000000000000000000001",
                                "user")]
    # and so are the ones typed inside a list, a dict or a tuple, next to a float read as a float
    assert run.edits.set_field("amounts", "[0.1000000000000000000001, 12345678901234567890.12, 3]") == [
        Decimal("0.1000000000000000000001"), Decimal("12345678901234567890.12"), Decimal(3)]
    assert run.edits.set_field("lines", '{"pen": [19.990000000000000001, 0.1]}') == {
        "pen": (Decimal("19.990000000000000001"), 0.1)}
    assert run.edits.set_field("priced", '[{"Price": 0.1000000000000000000001}]') == [
        Priced(Price=Decimal("0.1000000000000000000001"))]  # (a model's field by its alias)
    assert changes(events)[1:3] == [("amounts", [], ["0.1000000000000000000001", "12345678901234567890.12", "3"],
                                     "user"),
                                   ("lines", {}, {"pen": ["19.990000000000000001", 0.1]}, "user")]
    ctl.resume()
    await asyncio.wait_for(task, 60)


class Sub(BaseModel):
    x: int = 1
    nome: str = "a"


class Counts(RootModel[dict[str, int]]):
    pass


class Either(BaseModel):
    x: int = Field(0, validation_alias=AliasChoices("x", "ex"))


class Renamed(BaseModel):
    new: int = 0

    @model_validator(mode="before")
    @classmethod
    def _old_name(cls, value: Any) -> Any:
        return {**value, "new": value.pop("old")} if isinstance(value, dict) and "old" in value else value


class Nested(BaseModel):
    sub: Sub = Sub()
    subs: list[Sub] = []
    priced: list[Priced] = []
    by_id: dict[int, Sub] = {}
    counts: Counts = Counts({})
    either: Either = Either()
    renamed: Renamed = Renamed()


@workflow(state=Nested, steps=[B])
class NestedW:
    pass


@pytest.mark.parametrize(("name", "text", "said"), [
    ("sub", '{"x": 3, "nmoe": "b"}', "Nested.sub: sub.nmoe: Sub takes no key 'nmoe' (it takes x, nome)"),
    ("subs", '[{"x": 2}, {"y": 2}]', "Nested.subs: subs.1.y: Sub takes no key 'y' (it takes x, nome)"),
    ("priced", '[{"price": 1.5, "Price": 2}]', "Nested.priced: priced.0.price: Priced takes no key 'price' "
                                                "(it takes Price)"),
    ("by_id", '{"3": {"y": 1}}', "Nested.by_id: by_id.3.y: Sub takes no key 'y' (it takes x, nome)"),
])
async def test_a_key_a_nested_class_has_no_field_for_is_refused_not_dropped(name, text, said):
    # pydantic drops a key a model does not know, in silence: a misspelt one was dropped, the field it was
    # meant for kept its default, and the edit was recorded as set
    run, events, ctl, task = await paused_run(NestedW, "B")
    with pytest.raises(ConfigError) as info:
        run.edits.set_field(name, text)
    assert str(info.value) == said + "; nothing was set"
    assert changes(events) == []
    assert run.edits.set_field("sub", '{"x": 3, "nome": "b"}') == Sub(x=3, nome="b")
    # keys a class takes that are not its fields' names: a root model's, alias choices, a validator's renaming
    assert run.edits.set_field("counts", '{"a": 1}') == Counts({"a": 1})
    assert run.edits.set_field("either", '{"ex": 2}') == Either(x=2)
    assert run.edits.set_field("renamed", '{"old": 3}') == Renamed(new=3)
    ctl.resume()
    await asyncio.wait_for(task, 60)


async def test_an_unknown_field_is_refused_naming_the_fields_there_are():
    run, events, ctl, task = await paused_run()
    with pytest.raises(ConfigError) as info:
        run.edits.set_field("rounds", "1")
    assert "S has no field 'rounds'" in str(info.value) and "rodadas" in str(info.value)
    ctl.resume()
    await asyncio.wait_for(task, 60)


async def test_a_memory_item_or_task_saved_as_it_was_is_refused_and_nothing_recorded():
    """Saved unchanged, it was an edit: an event "edited tasks[0]: x → x", the edit count up, an undo step spent."""
    run, events, ctl, task = await paused_run()
    run.edits.add_item("tasks", "Revisar [b]tudo[/b]")
    run.edits.add_item("memory", "plano: pro")
    before = len([e for e in events if e.origin == "user"])
    with pytest.raises(ConfigError, match=r"tasks\[0\] is unchanged: nothing recorded"):
        run.edits.set_item("tasks", 0, "Revisar [b]tudo[/b]")
    with pytest.raises(ConfigError, match=r"memory\[0\] is unchanged: nothing recorded"):
        run.edits.set_item("memory", 0, "plano: pro")
    assert len([e for e in events if e.origin == "user"]) == before
    run.edits.set_item("tasks", 0, "Revisar tudo")
    assert run.ctx.state.tasks == ["Revisar tudo"]
    ctl.resume()
    await asyncio.wait_for(task, 60)


async def test_a_message_edited_to_nothing_or_left_as_it_was_is_refused_and_nothing_recorded():
    """An empty user message was taken (an API refuses it at the next call); an unchanged one was an edit."""
    run, events, ctl, task = await paused_run()
    with pytest.raises(ConfigError, match=r"message 0 would be empty, which models' APIs refuse \(user messages "
                                          r"need text\); type what it should say, or delete it \(d\)"):
        run.edits.edit_message(0, "  ")
    with pytest.raises(ConfigError, match=r"message 0 is unchanged: nothing recorded"):
        run.edits.edit_message(0, "go")
    assert [e for e in events if e.origin == "user"] == []
    run.edits.edit_message(0, "go on")
    assert run.ctx.state.history[0].content == "go on"
    ctl.resume()
    await asyncio.wait_for(task, 60)


async def test_a_long_refused_value_is_said_by_its_first_faults_and_its_start():
    """3,000 numbers pasted into a list[str]: the message quoted them all with 3,000 faults, and the
    dialog's hint and buttons were pushed off the screen."""
    run, events, ctl, task = await paused_run()
    text = json.dumps(list(range(3000)))
    with pytest.raises(ConfigError) as info:
        run.edits.set_field("itens", text)
    said = str(info.value)
    assert said.startswith(f"S.itens is list[str]: {text[:57]!r}… ({len(text):,} characters) refused (0: Input "
                           "should be a valid string; 1: Input should be a valid string; 2: Input should be a valid "
                           "string; and 2,997 more); type a value of type list[str]"), said
    assert len(said) < 400
    ctl.resume()
    await asyncio.wait_for(task, 60)


async def test_a_very_long_refused_value_is_checked_up_to_its_first_fault():
    """3,000,000 numbers (6 MB) set into a list[str] held 3 GB in the run's process until the next
    command: pydantic made a fault per item, and the message a dict per fault. A long text now stops at
    its first (30,000 items here, so that this test costs little either way)."""
    run, events, ctl, task = await paused_run()
    for name, value in (("itens", list(range(30_000))), ("notas", ["x"] * 30_000)):
        with pytest.raises(ConfigError) as info:
            run.edits.set_field(name, json.dumps(value))
        said = str(info.value)
        assert "(0: Input should be a valid " in said and "more" not in said, said
        assert "a text this long is checked up to its first fault" in said, said
    run.edits.set_field("itens", json.dumps(["ok"] * 30_000))  # a long text it takes is set all the same
    assert run.workflow_state.itens == ["ok"] * 30_000
    ctl.resume()
    await asyncio.wait_for(task, 60)


class T(BaseModel):
    nome: str = ""
    d: dict[str, int] = {}
    f: float = 0.0
    n: int = 0


@workflow(state=T, steps=[A])
class WT:
    pass


@pytest.mark.parametrize(("name", "text", "said"), [
    ("d", '{"a": 1, "a": 2}', "T.d: the key 'a' is given twice; give each key once (JSON keeps only the last)"),
    ("f", "1e400", 'T.f: 1e400 is too large a number: it reads as infinity; type "Infinity" if you mean that'),
    ("n", "9" * 4001, "T.n: a number of 4,001 digits cannot be recorded (a journal holds numbers of up to 4,000"),
    ("n", "9" * 5000, "T.n: a number of 5,000 digits cannot be recorded"),
])
async def test_a_value_json_reads_as_another_or_a_journal_cannot_hold_is_refused(name, text, said):
    """{"a": 1, "a": 2} was set to {"a": 2}, 1e400 to infinity, in silence; 4,001 nines were set, journaled as
    "<int of about 4001 digits>", and a fork then failed on that text; 5,000 were "not a valid integer"."""
    run, events, ctl, task = await paused_run(WT)
    with pytest.raises(ConfigError) as info:
        run.edits.set_field(name, text)
    assert str(info.value).startswith(said), str(info.value)
    assert changes(events) == []
    assert run.edits.set_field("f", '"Infinity"') == float("inf")  # (the word, as the app shows it: taken)
    # a text field takes the text as typed, whatever JSON would read it as
    assert run.edits.set_field("nome", "1e400") == "1e400"
    assert run.edits.set_field("nome", '{"a": 1, "a": 2}') == '{"a": 1, "a": 2}'
    ctl.resume()
    await asyncio.wait_for(task, 60)


async def test_a_value_nested_too_deeply_is_refused_naming_the_field():
    """[[[[...]]]] 100,000 deep: the reply said Python's 'maximum recursion depth exceeded while decoding
    a JSON array', naming nothing."""
    run, events, ctl, task = await paused_run()
    with pytest.raises(ConfigError, match=r"^S\.itens: the text is nested too deeply to be read as JSON; type a "
                                          r"value of type list\[str\]$"):
        run.edits.set_field("itens", "[" * 100_000 + "]" * 100_000)
    ctl.resume()
    await asyncio.wait_for(task, 60)


async def test_a_float_shown_as_nan_or_infinity_saves_as_it_is_shown():
    """The app shows a NaN or an infinity in words ("NaN", "Infinity"), quoted inside a list: saving
    the dialog's own text for a list[float] was refused ('Input should be a valid number')."""
    run, events, ctl, task = await paused_run()
    assert run.edits.set_field("notas", '["NaN", "Infinity", 1.5]')[1:] == [float("inf"), 1.5]
    assert changes(events) == [("notas", [], ["NaN", "Infinity", 1.5], "user")]
    with pytest.raises(ConfigError):  # the words stay words in a text field
        run.edits.set_field("itens", '[1.5]')
    assert run.edits.set_field("itens", '["NaN"]') == ["NaN"]
    ctl.resume()
    await asyncio.wait_for(task, 60)
