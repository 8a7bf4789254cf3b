"""ctx.data: the run's own data, read by tools, hooks and until, never in a model message,
in run.start (so the app can show it), in snapshots, and inherited by child workflows."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from flowtui import (
    AgentContext, ConfigError, Context, FunctionProvider, Input, WorkflowRuntime, agent, bootstrap, loop, tool,
    workflow,
)
from fakes import call, run_collect, scripted

SECRETISH = "conta-acme-4242"


class NoArgs(BaseModel):
    pass


def _flow(seen_by_model: list, read: list):
    @tool(name="conta", schema=NoArgs)
    class Conta:
        def execute(self, args: NoArgs = Input(), ctx: AgentContext = Context()):
            read.append(("tool", ctx.data["conta_id"]))
            return "conta ok"  # uses the data without repeating it to the model

    def model(messages, tools):
        seen_by_model.append(messages)
        return call("conta") if len(seen_by_model) == 1 else "pronto"

    @agent(provider=FunctionProvider(model), prompt="p", tools=[Conta])
    class A:
        def before_prompt(self, prompt, ctx):
            read.append(("hook", ctx.data["conta_id"]))

    def until(ctx):
        read.append(("until", ctx.data.get("conta_id")))
        return ctx.output == "pronto"

    @workflow(steps=[loop([A], until=until, max_iterations=4)])
    class W:
        pass

    return W


async def test_tools_hooks_and_until_read_ctx_data_and_no_message_ever_holds_it():
    seen, read = [], []
    out, events, run = await run_collect(_flow(seen, read), data={"conta_id": SECRETISH})
    assert out == "pronto"
    assert read == [("hook", SECRETISH), ("tool", SECRETISH), ("until", SECRETISH),
                    ("hook", SECRETISH), ("until", SECRETISH)]
    assert events[0].type == "run.start" and events[0].data == {"conta_id": SECRETISH}
    assert len(seen) == 2
    for messages in seen:
        assert all(SECRETISH not in m.model_dump_json() for m in messages)
    # shown (run.start) but never part of the conversation, nor a ctx field
    assert [e.type for e in events if SECRETISH in e.model_dump_json()] == ["run.start"]


async def test_ctx_data_is_read_only_and_the_callers_dict_is_not_shared():
    given = {"conta_id": "acme"}
    tries = []

    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        def after_response(self, r, ctx):
            try:
                ctx.data["conta_id"] = "outra"
            except TypeError as exc:
                tries.append(str(exc))
            try:
                ctx.data = {}
            except AttributeError as exc:
                tries.append(str(exc))

    @workflow(steps=[A])
    class W:
        pass

    out, events, run = await run_collect(W, data=given)
    given["conta_id"] = "changed later"
    assert tries[0].startswith("ctx.data is the run's read-only data (given as app.run(data=...)")  # not "mappingproxy"
    assert "ctx.data is the run's read-only data, given as app.run(data=...)" in tries[1]
    assert run.ctx.data == {"conta_id": "acme"}


async def test_a_bad_data_argument_is_refused_before_the_run_starts():
    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    app = bootstrap(W)
    with pytest.raises(ConfigError, match=r"run\(data=...\) must be a mapping"):
        await app.run("x", data=["conta_id"])
    with pytest.raises(ConfigError, match=r"keys must be str"):
        await app.run("x", data={1: "a"})
    # memory= too: "'int' object is not iterable" named neither the argument nor what it takes
    with pytest.raises(TypeError, match=r"run\(memory=...\) must be a str, a list of str or a mapping .*got int 123"):
        await app.run("x", memory=123)
    with pytest.raises(TypeError, match=r"run\(memory=...\): item 1 is int"):
        await app.run("x", memory=["a", 2])


async def test_the_fold_and_a_snapshot_keep_the_data(tmp_path):
    from flowtui.runtime.fold import RunView
    from flowtui.runtime.snapshot import load_snapshot, snapshot_toml

    seen, read = [], []
    app = bootstrap(_flow(seen, read))
    view = RunView()
    app.subscribe(view.apply)
    await app.run("oi", data={"conta_id": "acme", "limite": 3})
    assert view.data == {"conta_id": "acme", "limite": 3}
    path = tmp_path / "s.toml"
    path.write_text(snapshot_toml(view))
    assert load_snapshot(path).data == {"conta_id": "acme", "limite": 3}
    read.clear()
    seen.clear()
    await app.run("de novo", snapshot=path, data={"limite": 5})  # given data wins key by key
    assert read[0] == ("hook", "acme")


async def test_a_child_workflow_reads_its_parents_data_unless_given_its_own():
    got = []

    @agent(provider=FunctionProvider(lambda m, t: "filho"))
    class Child:
        def after_response(self, r, ctx):
            got.append(dict(ctx.data))

    @workflow(steps=[Child])
    class ChildW:
        pass

    class Q(BaseModel):
        own: bool

    @tool(name="delegar", schema=Q)
    class Delegar:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: Q = Input()):
            return await self.runtime.run(ChildW, input="x", data={"conta_id": "child"} if args.own else None)

    provider, _ = scripted(call("delegar", own=False), call("delegar", own=True), "fim")

    @agent(provider=provider, tools=[Delegar])
    class Parent:
        pass

    @workflow(steps=[Parent, Parent, Parent])
    class W:
        pass

    await run_collect(W, data={"conta_id": "acme"})
    assert got == [{"conta_id": "acme"}, {"conta_id": "child"}]


def test_a_snapshot_an_editor_saved_with_a_bom_loads(tmp_path):
    from flowtui.runtime.snapshot import load_snapshot

    path = tmp_path / "snap.toml"
    path.write_bytes(b"\xef\xbb\xbfmemory = [\"plano: pro\"]\n")
    assert load_snapshot(path).memory == ["plano: pro"]


async def test_a_child_given_data_and_input_json_cannot_hold_still_starts_as_an_event_a_client_reads():
    """data={"b": b"\\xff"} or a list holding itself: the child's run.start said its data as one string,
    which the protocol refuses (the app lost the child's start and showed the parent's conversation
    inside it), and an input holding itself failed the tool ("Circular reference detected")."""
    from flowtui.runtime.encoding import encode_event
    from flowtui.runtime.events import parse_event
    from flowtui.runtime.secrets import Redactor

    looped: list = [1]
    looped.append(looped)

    @agent(provider=FunctionProvider(lambda m, t: "filho"))
    class Child:
        pass

    @workflow(steps=[Child])
    class ChildW:
        pass

    @tool(name="delegar", schema=NoArgs)
    class Delegar:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: NoArgs = Input()):
            return await self.runtime.run(ChildW, input={"r": looped}, data={"b": b"\xff", "r": looped, "n": 2})

    provider, _ = scripted(call("delegar"), "fim")

    @agent(provider=provider, tools=[Delegar])
    class Parent:
        pass

    @workflow(steps=[Parent, Parent])
    class W:
        pass

    out, events, _ = await run_collect(W)
    assert out == "fim"
    child = [e for e in events if e.type == "run.start"][1]
    assert set(child.data) == {"b", "r", "n"} and child.data["n"] == 2
    assert child.data["b"].startswith("b'\\xff' (not shown") and child.data["r"].startswith("[1, [...]] (not shown")
    assert child.input["r"].startswith("[1, [...]] (not shown")
    again = parse_event(encode_event(child, Redactor([])))  # what a client reads of it
    assert again.data == child.data and again.input == child.input
    first = [e.item.content for e in events if e.type == "state.append" and e.run_id == child.run_id][0]
    assert first.startswith('{"r": "[1, [...]] (not shown'), first  # the child's first message
