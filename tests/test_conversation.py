"""ctx.state: three buckets, read-only views, append/set/get, the projection the model sees."""

import pytest
from pydantic import BaseModel

from flowtui import FunctionProvider, Message, agent, bootstrap, workflow
from flowtui.runtime.conversation import ConversationState, memory_items


def make_state():
    events = []
    state = ConversationState(lambda cls, **f: events.append((cls.__name__, f)), memory=["m0"])
    return state, events


def test_reads_are_immutable_snapshots():
    state, _ = make_state()
    state.append("history", Message(role="user", content="a"))
    before = state.history
    state.append("history", Message(role="user", content="b"))
    assert [m.content for m in before] == ["a"]          # a read never changes afterwards
    assert [m.content for m in state.history] == ["a", "b"]
    with pytest.raises(TypeError, match=r"read-only views.*ctx\.state\.append\(bucket, item\)"):
        state.history.append(Message(role="user", content="x"))  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"cannot be assigned: write ctx\.state\.set\(bucket, items\)"):
        state.memory = ["x"]  # type: ignore[misc]
    assert [m.content for m in state.history] == ["a", "b"] and list(state.memory) == ["m0"]
    with pytest.raises(TypeError):
        state.history[0] = Message(role="user", content="x")  # type: ignore[index]
    with pytest.raises(Exception):
        state.history[0].content = "x"  # messages are frozen


def test_set_with_slice_drops_the_last_turn_and_emits():
    state, events = make_state()
    state.append("history", Message(role="user", content="a"))
    state.append("history", Message(role="assistant", content="b"))
    state.set("history", state.history[:-1])
    assert [m.content for m in state.get("history")] == ["a"]
    assert [name for name, _ in events] == ["StateAppend", "StateAppend", "StateSet"]
    assert events[-1][1]["bucket"] == "history" and len(events[-1][1]["items"]) == 1


def test_wrong_bucket_and_wrong_item_type_name_the_bucket():
    state, _ = make_state()
    with pytest.raises(ValueError, match="no bucket 'memoria'.*'history', 'memory' and 'tasks'"):
        state.append("memoria", "x")
    with pytest.raises(TypeError, match="bucket 'memory'.*str"):
        state.append("memory", 42)
    with pytest.raises(TypeError, match="bucket 'history'.*Message"):
        state.append("history", "hello")
    with pytest.raises(TypeError, match="bucket 'tasks'.*item 1"):
        state.set("tasks", ["ok", 3])
    with pytest.raises(TypeError, match="sequence"):
        state.set("tasks", "not a list")


def test_a_text_of_a_str_subclass_is_kept_as_its_text():
    """A StrEnum's member appended to memory failed the run: "'Plan' object has no attribute 'content'"."""
    import enum

    class Plan(enum.StrEnum):
        PRO = "plano: pro"

    class Note(str):
        pass

    state, events = make_state()
    state.append("memory", Plan.PRO)
    state.set("tasks", [Note("a task")])
    assert list(state.memory) == ["m0", "plano: pro"] and list(state.tasks) == ["a task"]
    assert type(state.memory[1]) is str and type(state.tasks[0]) is str  # (as the journal gives it back)
    assert events[0][1]["item"] == "plano: pro" and type(events[0][1]["item"]) is str


def test_projection_memory_and_tasks_in_one_system_message_on_top():
    state, _ = make_state()
    state.append("memory", "O usuário se chama Castro")
    state.append("tasks", "revisar o texto")
    state.append("history", Message(role="user", content="Olá"))
    msgs = state.to_messages()
    assert [m.role for m in msgs] == ["system", "user"]
    assert msgs[0].content == "m0\n\nO usuário se chama Castro\n\nTasks:\n- revisar o texto"
    empty = ConversationState(lambda *a, **k: None)
    empty.append("history", Message(role="user", content="x"))
    assert [m.role for m in empty.to_messages()] == ["user"]  # no empty system message


def test_memory_seed_forms():
    assert memory_items("one") == ["one"]
    assert memory_items(["a", "b"]) == ["a", "b"]
    assert memory_items({"userId": "123", "plano": "pro"}) == ["userId: 123", "plano: pro"]
    with pytest.raises(TypeError, match="item 1"):
        memory_items(["a", 2])


class _Nothing(BaseModel):
    pass


async def test_run_seeds_memory_and_first_user_turn_and_agent_prompt_comes_first():
    seen = []

    def model(messages, tools):
        seen.append([(m.role, m.content) for m in messages])
        return "oi"

    @agent(provider=FunctionProvider(model), prompt="Você é útil.")
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    out = await bootstrap(W).run(input={"message": "Olá"}, memory={"userId": "123", "plano": "pro"})
    assert out == "oi"
    assert seen == [[("system", "Você é útil."), ("system", "userId: 123\n\nplano: pro"), ("user", "Olá")]]
    seen.clear()
    await bootstrap(W).run(input={"pedido": 7})  # no "message": the input is serialized
    assert seen[0][-1] == ("user", '{"pedido": 7}')
    seen.clear()  # a value other than a string is written as JSON, not Python's repr ({'lang': 'pt'}, True, None)
    await bootstrap(W).run(input="Olá", memory={"prefs": {"lang": "pt", "ok": True}, "n": 3, "nada": None})
    assert seen[0][1] == ("system", 'prefs: {"lang": "pt", "ok": true}\n\nn: 3\n\nnada: null')
    seen.clear()  # a set, bytes: as JSON carries them (Python's {1, 3}); bytes that are no text as Python writes them
    await bootstrap(W).run(input="Olá", memory={"ids": {3, 1}, "raw": b"abc", "bin": b"\xff"})
    assert seen[0][1] == ("system", "ids: [1, 3]\n\nraw: abc\n\nbin: b'\\xff'")
    # the first user turn too: a message that is no text as JSON, as run.start carries it ("{'x': 1}", "None")
    for given, said in (({"message": {"x": 1, "ok": True}}, '{"x": 1, "ok": true}'), ({"a": {2, 1}}, '{"a": [1, 2]}'),
                        ([1, True, None], "[1, true, null]"), (b"bytes", "bytes")):
        seen.clear()
        await bootstrap(W).run(input=given)
        assert seen[0][-1] == ("user", said), given
    seen.clear()
    await bootstrap(W).run(input={"message": None})  # no message: no user turn, as no input
    assert [role for role, _ in seen[0]] == ["system"]
