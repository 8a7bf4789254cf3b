"""Tools (SPEC §1.5): schemas the model sees, injection into execute, failure as observation,
hooks around a tool call, FatalToolError, and sync tools that do not block the loop."""

from __future__ import annotations

import json
from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from flowtui import (
    AgentContext,
    ChatReply,
    Context,
    FatalToolError,
    FunctionProvider,
    Input,
    Message,
    State,
    ToolCall,
    ToolOutput,
    ToolResult,
    agent,
    bootstrap,
    loop,
    tool,
    until_answered,
    workflow,
)
from flowtui.runtime.events import end_note
from fakes import call


# --- helpers ---------------------------------------------------------------

def script(*replies, seen: list | None = None, tools_seen: list | None = None):
    """A FunctionProvider that answers with ``replies`` in order and records what it was sent."""
    queue = list(replies)

    def handler(messages, tools):
        if seen is not None:
            seen.append(list(messages))
        if tools_seen is not None:
            tools_seen.append(tools)
        return queue.pop(0) if queue else "done"

    return FunctionProvider(handler)


async def run_collect(wf, input="go", **kw):
    app = bootstrap(wf)
    events = []
    app.subscribe(events.append)
    out = await app.run(input, **kw)
    return out, events


def tool_messages(events):
    """The tool messages that joined history, in order."""
    return [e.item for e in events if e.type == "state.append" and e.bucket == "history" and e.item.role == "tool"]


def node_ends(events, kind):
    return [e for e in events if e.type == "node.end" and e.kind == kind]


class LerArgs(BaseModel):
    caminho: str = Field(description="relative path, e.g. src/main.py")
    linhas: int = Field(default=10, description="how many lines to read")


class Counter:
    def __init__(self):
        self.n = 0
        self.seen: list[str] = []


# --- the schema the model sees ------------------------------------------------

async def test_model_sees_json_schema_with_field_descriptions():
    @tool(name="ler_arquivo", description="Reads a project file.", schema=LerArgs)
    class LerTool:
        async def execute(self, args: LerArgs = Input()):
            return f"read {args.caminho} ({args.linhas})"

    tools_seen: list = []

    @agent(provider=script(call("ler_arquivo", caminho="a.py"), tools_seen=tools_seen), tools=[LerTool])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    out, _ = await run_collect(W)
    assert out == "read a.py (10)"
    assert len(tools_seen) == 1
    (spec,) = tools_seen[0]
    assert spec["type"] == "function"
    fn = spec["function"]
    assert fn["name"] == "ler_arquivo"
    assert fn["description"] == "Reads a project file."
    params = fn["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["caminho"]
    assert params["properties"]["caminho"]["type"] == "string"
    assert params["properties"]["caminho"]["description"] == "relative path, e.g. src/main.py"
    assert params["properties"]["linhas"]["description"] == "how many lines to read"
    assert params["properties"]["linhas"]["default"] == 10
    json.dumps(tools_seen[0])  # the specs are plain JSON


async def test_agent_without_tools_sends_no_tool_specs():
    tools_seen: list = []

    @agent(provider=script("hi", tools_seen=tools_seen))
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    assert await bootstrap(W).run("x") == "hi"
    assert tools_seen == [[]]


# --- execute's parameters -------------------------------------------------------

class EchoArgs(BaseModel):
    text: str


@pytest.mark.parametrize("order", ["input_ctx_state", "state_input_ctx", "ctx_state_input", "annotated"])
async def test_execute_gets_input_context_state_in_any_order(order):
    seen = {}

    if order == "input_ctx_state":
        @tool(name="echo", schema=EchoArgs)
        class Echo:
            def execute(self, args: EchoArgs = Input(), ctx: AgentContext = Context(), s: Counter = State()):
                seen.update(args=args, ctx=ctx, s=s)
                return args.text
    elif order == "state_input_ctx":
        @tool(name="echo", schema=EchoArgs)
        class Echo:
            async def execute(self, s: Counter = State(), args: EchoArgs = Input(), ctx: AgentContext = Context()):
                seen.update(args=args, ctx=ctx, s=s)
                return args.text
    elif order == "ctx_state_input":
        @tool(name="echo", schema=EchoArgs)
        class Echo:
            async def execute(self, ctx: AgentContext = Context(), s: Counter = State(), args: EchoArgs = Input()):
                seen.update(args=args, ctx=ctx, s=s)
                return args.text
    else:
        @tool(name="echo", schema=EchoArgs)
        class Echo:
            async def execute(self, s: Annotated[Counter, State()], ctx: Annotated[AgentContext, Context()],
                              args: Annotated[EchoArgs, Input()]):
                seen.update(args=args, ctx=ctx, s=s)
                return args.text

    @agent(provider=script(call("echo", text="olá")), tools=[Echo])
    class A:
        def __init__(self, s: Counter = State()):
            self.s = s

        def after_response(self, response, ctx):
            ctx.agent_state = self.s

    @workflow(state=Counter, steps=[A])
    class W:
        pass

    out, events = await run_collect(W)
    assert out == "olá"
    assert isinstance(seen["args"], EchoArgs) and seen["args"].text == "olá"
    assert isinstance(seen["s"], Counter)
    # the same ctx and the same state instance the agent got
    assert seen["ctx"].run_id == events[0].run_id
    assert seen["ctx"].get("agent_state") is seen["s"]


async def test_execute_without_markers_gets_validated_args():
    got = []

    @tool(name="echo", schema=EchoArgs)
    class Echo:
        def execute(self, a):
            got.append(a)
            return a.text.upper()

    @agent(provider=script(call("echo", text="abc")), tools=[Echo])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    out, _ = await run_collect(W)
    assert out == "ABC"
    assert len(got) == 1 and isinstance(got[0], EchoArgs)


async def test_tool_result_becomes_tool_message_and_turn_summary():
    @tool(name="echo", schema=EchoArgs)
    class Echo:
        async def execute(self, args: EchoArgs = Input()):
            return {"echo": args.text}

    @agent(provider=script(call("echo", text="x")), tools=[Echo])
    class A:
        def after_response(self, response, ctx):
            ctx.turn_before = ctx.get("turn")

    @workflow(steps=[A])
    class W:
        pass

    app = bootstrap(W)
    run = app.prepare("go")
    out = await run.execute()
    assert out == '{"echo": "x"}'
    history = list(run.ctx.state.history)
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[1].tool_calls[0].name == "echo"
    assert history[2] == Message(role="tool", content='{"echo": "x"}', tool_name="echo",
                                 tool_call_id=history[1].tool_calls[0].id, is_error=False, agent="A")
    turn = run.ctx.turn
    assert (turn.agent, turn.called_tool, turn.tool_name, turn.tool_error, turn.tool_call_source) == \
        ("A", True, "echo", False, "native")


async def _what_the_model_reads_of(returned) -> str:
    """The text the model reads of a tool that returned ``returned`` (a one-turn run's output)."""
    @tool(name="echo", schema=EchoArgs)
    class Echo:
        async def execute(self, args: EchoArgs = Input()):
            return returned

    @agent(provider=script(call("echo", text="x")), tools=[Echo])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    return await bootstrap(W).run("go")


async def test_a_result_that_is_no_json_reaches_the_model_as_json_pydantic_makes():
    """A set reached the model as the text "{1, 2}", a date as "datetime.date(2026, 1, 2)"."""
    import dataclasses
    import datetime

    @dataclasses.dataclass
    class Point:
        x: int

    out = await _what_the_model_reads_of({"tags": {"b"}, "day": datetime.date(2026, 1, 2), "at": Point(3),
                                          "odd": object()})
    assert json.loads(out) == {"tags": ["b"], "day": "2026-01-02", "at": {"x": 3}, "odd": "<object object>"}


@pytest.mark.parametrize("returned,said", [
    ("thing", "<test_tools.Thing object>"),  # no JSON form: its repr, not the JSON string of it
    ("day", "2026-01-02"),
    ("path", "notes/a.txt"),
])
async def test_a_result_whose_json_is_a_string_reaches_the_model_as_that_text_unquoted(returned, said):
    """A tool returning an object with no JSON form sent the model "\\"<flowtui_flow_x_1.Thing object>\\"":
    quoted, and named by the module the flow was imported under."""
    import datetime
    from pathlib import Path

    values = {"thing": Thing(), "day": datetime.date(2026, 1, 2), "path": Path("notes/a.txt")}
    assert await _what_the_model_reads_of(values[returned]) == said


class Thing:
    pass


async def test_an_object_of_a_flow_file_is_named_by_the_file_not_the_module_it_was_imported_as(tmp_path):
    """<flowtui_flow_my-flow_1.Thing object>: the name the loader imports a flow file under, which says
    nothing to the model (nor, counting loads, the same in two runs)."""
    from flowtui.runtime.loader import load_flow

    flow = tmp_path / "my-flow.v2.py"
    flow.write_text("from flowtui import ScriptedProvider, agent, tool, workflow\n"
                    "class Thing:\n    pass\n"
                    "@tool\ndef obj() -> str:\n    \"\"\"An object.\"\"\"\n    return Thing()\n"
                    "@agent(provider=ScriptedProvider([{'tool_calls': [{'name': 'obj', 'args': {}}]}]), prompt='p', "
                    "tools=[obj])\nclass A:\n    pass\n"
                    "@workflow(steps=[A])\nclass W:\n    pass\n")
    assert await load_flow(str(flow)).run("go") == "<my-flow.v2.Thing object>"


# --- the four failure modes -----------------------------------------------------

def _failing_tools():
    @tool(name="explode", schema=EchoArgs)
    class Explode:
        async def execute(self, args: EchoArgs = Input()):
            raise RuntimeError(f"disk on fire near {args.text}")

    @tool(name="soft_fail", schema=EchoArgs)
    class SoftFail:
        async def execute(self, args: EchoArgs = Input()):
            return ToolOutput(content=f"no file named {args.text}", is_error=True)

    return [Explode, SoftFail]


@pytest.mark.parametrize("reply, expected", [
    (call("explode", text="x"), ["failed", "disk on fire near x"]),
    (call("soft_fail", text="y"), ["no file named y"]),
    (call("nope", text="z"), ["Unknown tool", "nope", "explode", "soft_fail"]),
    (call("explode", txt="wrong"), ["Invalid arguments", "explode", "text", "Field required"]),
], ids=["execute_raises", "tool_output_is_error", "unknown_tool", "bad_arguments"])
async def test_tool_failure_is_an_observation_the_next_turn_reads(reply, expected):
    seen: list = []

    @agent(provider=script(reply, "I see the error", seen=seen), tools=_failing_tools())
    class A:
        pass

    @workflow(steps=[A, A])
    class W:
        pass

    app = bootstrap(W)
    events: list = []
    app.subscribe(events.append)
    out = await app.run("go")

    # the run goes on: the second turn answered
    assert out == "I see the error"
    (msg,) = tool_messages(events)
    assert msg.is_error is True
    for text in expected:
        assert text in msg.content
    # the next model call reads the error as a tool message
    second = seen[1]
    assert second[-1] == msg
    # ctx.turn after the first turn says the tool failed
    turn_sets = [e for e in events if e.type == "ctx.set" and e.name == "turn"]
    assert turn_sets[0].value["tool_error"] is True
    assert turn_sets[0].value["called_tool"] is True
    assert turn_sets[1].value["tool_error"] is False
    # the tool node ended in error, with is_error in its data; the run did not fail
    (tool_end,) = node_ends(events, "tool")
    assert tool_end.status == "error"
    assert tool_end.data["is_error"] is True
    assert tool_end.error and expected[0] in tool_end.error
    assert events[-1].type == "run.end" and events[-1].status == "finished"


async def test_ctx_turn_tool_error_is_set_after_a_failing_call():
    @agent(provider=script(call("soft_fail", text="q")), tools=_failing_tools())
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    run = bootstrap(W).prepare("go")
    out = await run.execute()
    assert out == "no file named q"
    assert run.ctx.turn.tool_error is True
    assert run.ctx.turn.tool_name == "soft_fail"


# --- before_tool / after_tool ------------------------------------------------------

async def test_before_tool_returning_a_toolcall_replaces_the_call():
    executed = []

    @tool(name="echo", schema=EchoArgs)
    class Echo:
        async def execute(self, args: EchoArgs = Input()):
            executed.append(("echo", args.text))
            return args.text

    @tool(name="shout", schema=EchoArgs)
    class Shout:
        async def execute(self, args: EchoArgs = Input()):
            executed.append(("shout", args.text))
            return args.text.upper() + "!"

    calls_seen = []
    results = []

    @agent(provider=script(call("echo", text="hi")), tools=[Echo, Shout])
    class A:
        def before_tool(self, c: ToolCall, ctx):
            calls_seen.append(c)
            return ToolCall(name="shout", args={"text": c.args["text"] + " there"})

        def after_tool(self, result, ctx):
            results.append(result)

    @workflow(steps=[A])
    class W:
        pass

    events: list = []
    run = bootstrap(W).prepare("go", on_event=events.append)
    out = await run.execute()
    assert calls_seen == [ToolCall(name="echo", args={"text": "hi"}, id="call_1_0")]  # turn 1, call 0
    assert executed == [("shout", "hi there")]
    assert out == "HI THERE!"
    # after_tool and ctx.turn see the call that actually ran
    assert results == [ToolResult(name="shout", args={"text": "hi there"}, output="HI THERE!", is_error=False)]
    assert run.ctx.turn.tool_name == "shout"
    # the tool message still answers the model's call id
    (msg,) = tool_messages(events)
    assert msg.content == "HI THERE!" and msg.is_error is False
    assert msg.tool_call_id == "call_1_0"
    # the tool's node says the call the tool got, beside the one the model made (it said only the model's)
    (start,) = [e for e in events if e.type == "node.start" and e.kind == "tool"]
    (end,) = [e for e in events if e.type == "node.end" and e.kind == "tool"]
    assert start.data["args"] == {"text": "hi"}
    assert end.data["ran"] == {"name": "shout", "args": {"text": "hi there"}}
    assert end_note(end) == 'ran as shout {"text": "hi there"}: before_tool or a middleware changed the call'


async def test_on_fail_names_the_tool_before_tool_swapped_in_as_after_tool_does():
    """FailInfo.tool said the tool the model asked for, after_tool and ctx.turn the one that ran."""
    from flowtui import loop

    @tool(name="echo", schema=EchoArgs)
    class Echo:
        async def execute(self, args: EchoArgs = Input()):
            return args.text

    @tool(name="broken", schema=EchoArgs)
    class Broken:
        async def execute(self, args: EchoArgs = Input()):
            raise RuntimeError("out of order")

    failed = []

    @agent(provider=script(call("echo", text="hi")), tools=[Echo, Broken])
    class A:
        def before_tool(self, c: ToolCall, ctx):
            return ToolCall(name="broken", args=c.args)

    @workflow(steps=[loop([A], until=lambda ctx: True, on_fail=lambda ctx, info: failed.append(info.tool))])
    class W:
        pass

    run = bootstrap(W).prepare("go")
    await run.execute()
    assert failed == ["broken"] and run.ctx.turn.tool_name == "broken"


async def test_a_call_before_tool_changed_in_place_is_said_as_the_tool_got_it():
    """before_tool changing call.args in place (returning None, or the call) left the node saying the
    model's arguments, with no word of the change: the tool got others."""
    got = []

    @tool(name="echo", schema=EchoArgs)
    class Echo:
        async def execute(self, args: EchoArgs = Input()):
            got.append(args.text)
            return args.text

    @agent(provider=script(call("echo", text="hi"), "done"), tools=[Echo])
    class A:
        def before_tool(self, c, ctx):
            c.args["text"] = "changed in place"

    @workflow(steps=[A])
    class W:
        pass

    events: list = []
    await bootstrap(W).prepare("go", on_event=events.append).execute()
    (start,) = [e for e in events if e.type == "node.start" and e.kind == "tool"]
    (end,) = [e for e in events if e.type == "node.end" and e.kind == "tool"]
    assert got == ["changed in place"] and start.data["args"] == {"text": "hi"}
    assert end.data["ran"] == {"name": "echo", "args": {"text": "changed in place"}}


async def test_before_tool_returning_none_keeps_the_call():
    executed = []

    @tool(name="echo", schema=EchoArgs)
    class Echo:
        async def execute(self, args: EchoArgs = Input()):
            executed.append(args.text)
            return args.text

    @agent(provider=script(call("echo", text="kept")), tools=[Echo])
    class A:
        async def before_tool(self, c, ctx):
            return None

    @workflow(steps=[A])
    class W:
        pass

    out, _ = await run_collect(W)
    assert (out, executed) == ("kept", ["kept"])


async def test_before_tool_raising_cancels_the_tool_with_an_error_observation():
    executed = []

    @tool(name="rm", schema=EchoArgs)
    class Rm:
        async def execute(self, args: EchoArgs = Input()):
            executed.append(args.text)
            return "deleted"

    seen: list = []

    @agent(provider=script(call("rm", text="/"), "ok, not deleting", seen=seen), tools=[Rm])
    class A:
        def before_tool(self, c, ctx):
            raise PermissionError("rm is not allowed on /")

    @workflow(steps=[A, A])
    class W:
        pass

    out, events = await run_collect(W)
    assert executed == []
    assert out == "ok, not deleting"
    (msg,) = tool_messages(events)
    assert msg.is_error is True
    assert "cancelled" in msg.content and "rm is not allowed on /" in msg.content
    assert seen[1][-1] == msg
    (end,) = node_ends(events, "tool")
    assert end.status == "error"


@pytest.mark.parametrize("tool_fails", [False, True])
async def test_after_tool_returning_str_replaces_output_and_keeps_is_error(tool_fails):
    @tool(name="echo", schema=EchoArgs)
    class Echo:
        async def execute(self, args: EchoArgs = Input()):
            return ToolOutput(content="raw " + args.text, is_error=tool_fails)

    results = []

    @agent(provider=script(call("echo", text="v")), tools=[Echo])
    class A:
        def after_tool(self, result: ToolResult, ctx):
            results.append(result)
            return result.output.replace("raw", "clean")

    @workflow(steps=[A])
    class W:
        pass

    out, events = await run_collect(W)
    assert results == [ToolResult(name="echo", args={"text": "v"}, output="raw v", is_error=tool_fails)]
    assert out == "clean v"
    (msg,) = tool_messages(events)
    assert (msg.content, msg.is_error) == ("clean v", tool_fails)
    (end,) = node_ends(events, "tool")
    assert end.status == ("error" if tool_fails else "ok")


async def test_after_tool_returning_tooloutput_replaces_text_and_error_flag():
    @tool(name="echo", schema=EchoArgs)
    class Echo:
        async def execute(self, args: EchoArgs = Input()):
            raise ValueError("boom")

    @agent(provider=script(call("echo", text="v")), tools=[Echo])
    class A:
        async def after_tool(self, result, ctx):
            assert result.is_error and "boom" in result.output
            return ToolOutput(content="recovered: cached value", is_error=False)

    @workflow(steps=[A])
    class W:
        pass

    events: list = []
    run = bootstrap(W).prepare("go", on_event=events.append)
    out = await run.execute()
    assert out == "recovered: cached value"
    (msg,) = tool_messages(events)
    assert (msg.content, msg.is_error) == ("recovered: cached value", False)
    assert run.ctx.turn.tool_error is False
    (end,) = node_ends(events, "tool")
    assert end.status == "ok"


async def test_hook_order_around_a_tool_call():
    order = []

    @tool(name="echo", schema=EchoArgs)
    class Echo:
        async def execute(self, args: EchoArgs = Input()):
            order.append("execute")
            return args.text

    @agent(provider=script(call("echo", text="t")), tools=[Echo])
    class A:
        def before_prompt(self, prompt, ctx):
            order.append("before_prompt")

        def before_tool(self, c, ctx):
            order.append("before_tool")

        def after_tool(self, r, ctx):
            order.append("after_tool")

        def after_response(self, r, ctx):
            order.append("after_response")

    @workflow(steps=[A])
    class W:
        pass

    out, events = await run_collect(W)
    assert order == ["before_prompt", "before_tool", "execute", "after_tool", "after_response"]
    nodes = [(e.type, e.kind, e.name) for e in events if e.type.startswith("node.")]
    assert nodes == [
        ("node.start", "workflow", "W"), ("node.start", "agent", "A"),
        ("node.start", "chat", "A"), ("node.end", "chat", "A"),
        ("node.start", "tool", "echo"), ("node.end", "tool", "echo"),
        ("node.end", "agent", "A"), ("node.end", "workflow", "W"),
    ]


# --- FatalToolError -------------------------------------------------------------------

SECRET = "s3cr3t-db-password-XYZZY"


@pytest.mark.parametrize("where", ["execute", "before_tool"])
async def test_a_tool_out_of_memory_fails_the_run_not_the_call(where):
    """A tool whose process ran out of memory was a tool error the model was told about, and the run
    finished: nothing the model can fix, and the run had lost its process's memory."""
    @tool(name="load", schema=EchoArgs)
    class Load:
        def execute(self, args: EchoArgs = Input()):
            raise MemoryError

    @agent(provider=script(call("load", text="q"), "fine"), tools=[Load])
    class A:
        def before_tool(self, call, ctx):
            if where == "before_tool":
                raise MemoryError

    @workflow(steps=[A])
    class W:
        pass

    app = bootstrap(W)
    events: list = []
    app.subscribe(events.append)
    with pytest.raises(MemoryError):
        await app.run("go")
    # no observation the run goes on with: the call is answered as the run ends (its history stays a conversation)
    (told,) = [m.content for m in tool_messages(events)]
    assert told.startswith("Tool call load gave no result: the run failed (MemoryError (at tests/test_tools.py:")
    assert told.endswith(f" in {where})).")
    end = events[-1]
    assert end.type == "run.end" and end.status == "failed" and end.error.startswith("MemoryError"), end


@pytest.mark.parametrize("raised,told", [
    (KeyError("x"), "KeyError: 'x'"),  # (its message is the key alone: the model was told "failed: 'x'")
    (KeyError(), "KeyError"),
    (IndexError("list index out of range"), "list index out of range"),
    (ValueError("bad value"), "bad value"),
])
async def test_what_a_tool_raised_is_told_to_the_model_in_words_that_say_what_went_wrong(raised, told):
    @tool(name="look", schema=EchoArgs)
    class Look:
        def execute(self, args: EchoArgs = Input()):
            raise raised

    @agent(provider=script(call("look", text="q"), "ok"), tools=[Look])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    out, events = await run_collect(W)
    assert [m.content for m in tool_messages(events)] == [f"Tool look failed: {told}"]


async def test_what_a_tool_raised_is_said_to_people_with_its_type_and_where(tmp_path):
    """The model is told "Tool lookup failed: <message>"; the tool's node said only that, even with --debug:
    no exception type, no line of the flow's code. It now says both (``raised``), in the node tree and on the
    command line; a re-execution, which serves the result and raises nothing, does not diverge on it."""
    from flowtui.runtime.fold import RunView

    @tool
    def lookup(q: str) -> str:
        """Look up a thing."""
        return q.uper()  # type: ignore[attr-defined]

    provider = FunctionProvider(lambda messages, tools: "fim" if any(m.role == "tool" for m in messages)
                                else {"content": "", "tool_calls": [{"name": "lookup", "args": {"q": "x"}}]})

    @agent(provider=provider, tools=[lookup])
    class A:
        pass

    @workflow(steps=[loop([A], until=until_answered, max_iterations=3)])
    class W:
        pass

    journal = tmp_path / "j.jsonl"
    events: list = []
    assert await bootstrap(W).run("go", journal=str(journal), on_event=events.append) == "fim"
    assert [m.content for m in tool_messages(events)] == ["Tool lookup failed: 'str' object has no attribute 'uper'"]
    (end,) = [e for e in events if e.type == "node.end" and e.kind == "tool"]
    assert end.data["raised"].startswith("AttributeError: 'str' object has no attribute 'uper' (at ")
    assert end.data["raised"].endswith(" in lookup)") and "test_tools.py:" in end.data["raised"]
    view = RunView()
    for event in events:
        view.apply(event)
    assert [n.error for n in view.nodes.values() if n.kind == "tool"] == [end.data["raised"]]
    again: list = []
    assert await bootstrap(W).run(resume_from=str(journal), on_event=again.append) == "fim"
    assert not [e for e in again if e.type == "run.diverged"]


async def test_a_request_too_large_to_allocate_is_told_to_the_model():
    """numpy says "Unable to allocate 8.00 TiB for an array" with a subclass of MemoryError: the process
    is not out of memory, and the model can ask for less. It ended the run as if it were."""
    class ArrayMemoryError(MemoryError):  # numpy's _ArrayMemoryError, without numpy
        pass

    @tool(name="load", schema=EchoArgs)
    class Load:
        def execute(self, args: EchoArgs = Input()):
            raise ArrayMemoryError("Unable to allocate 8.00 TiB for an array with shape (10**12,)")

    @agent(provider=script(call("load", text="q"), "smaller then"), tools=[Load])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    app = bootstrap(W)
    events: list = []
    app.subscribe(events.append)
    await app.run("go")
    (told,) = tool_messages(events)
    assert told.content == "Tool load failed: Unable to allocate 8.00 TiB for an array with shape (10**12,)", told
    assert events[-1].type == "run.end" and events[-1].status == "finished", events[-1]


async def test_fatal_tool_error_ends_the_run_and_keeps_its_cause_private(tmp_path):
    @tool(name="db", schema=EchoArgs)
    class Db:
        async def execute(self, args: EchoArgs = Input()):
            try:
                raise ConnectionError(f"could not connect with password {SECRET}")
            except ConnectionError as exc:
                raise FatalToolError("database unavailable", cause=exc)

    seen: list = []
    after = []

    @agent(provider=script(call("db", text="q"), "never", seen=seen), tools=[Db])
    class A:
        def after_response(self, r, ctx):
            after.append(r)

        def on_error(self, error, ctx):
            return "recovered?"  # a fatal error cannot be turned into output

    @agent(provider=script("never reached", seen=seen))
    class B:
        pass

    @workflow(steps=[A, B])
    class W:
        pass

    app = bootstrap(W)
    events: list = []
    app.subscribe(events.append)
    journal = tmp_path / "j.jsonl"
    with pytest.raises(FatalToolError) as info:
        await app.run("go", journal=journal)
    assert info.value.message == "database unavailable"
    assert isinstance(info.value.cause, ConnectionError)  # the caller may still inspect it
    assert SECRET in str(info.value.cause)
    import pickle
    import traceback
    assert SECRET not in repr(info.value) and SECRET not in "".join(traceback.format_exception(info.value))
    assert pickle.loads(pickle.dumps(info.value)).cause is None  # a copy sent elsewhere leaves it behind

    # the run ended, failed, and no later step ran
    assert len(seen) == 1
    assert after == []
    end = events[-1]
    assert end.type == "run.end" and end.status == "failed"
    assert "database unavailable" in end.error
    assert not [e for e in events if e.type == "node.start" and e.name == "B"]
    # no observation the run goes on with: the call is answered as the run ends (its history stays a conversation)
    assert [m.content for m in tool_messages(events)] == [
        "Tool call db gave no result: the run failed (FatalToolError: database unavailable)."]
    (tool_end,) = node_ends(events, "tool")
    assert tool_end.status == "error" and tool_end.error == "FatalToolError: database unavailable"

    # the cause is nowhere: not in what the model saw, not in events, not on disk
    for messages in seen:
        for m in messages:
            assert SECRET not in m.model_dump_json()
    for e in events:
        assert SECRET not in e.model_dump_json()
    text = journal.read_text()
    assert text.count("\n") == len(events)
    assert "database unavailable" in text
    assert SECRET not in text
    assert "ConnectionError" not in text


@pytest.mark.parametrize("raised", [FatalToolError("gone"), SystemExit(3)], ids=["FatalToolError", "SystemExit"])
async def test_a_tool_call_that_ends_the_run_counts_in_the_runs_totals(raised):
    """The run's totals said tool_calls 0 for a run whose only tool call ran and raised what ends the run."""
    @tool(name="db", schema=EchoArgs)
    class Db:
        def execute(self, args: EchoArgs = Input()):
            raise raised

    @agent(provider=script(call("db", text="q"), "never"), tools=[Db])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    app = bootstrap(W)
    events: list = []
    app.subscribe(events.append)
    with pytest.raises(type(raised)):
        await app.run("go")
    end = events[-1]
    assert end.type == "run.end" and end.status == "failed"
    assert end.totals.tool_calls == 1 and end.totals.chat_calls == 1, end.totals


async def test_a_stopiteration_from_the_flows_code_is_said_as_itself_not_as_the_runtimes_runtimeerror():
    """Python turns a StopIteration leaving a coroutine into "RuntimeError: coroutine raised StopIteration"
    (PEP 479): a sync tool's next() on an empty iterator told the model that, and a hook's failed the run
    with it, at no line of the flow's."""
    @tool(name="first", schema=EchoArgs)
    class First:
        def execute(self, args: EchoArgs = Input()):
            return next(iter([]))

    @agent(provider=script(call("first", text="q")), tools=[First])
    class A:
        pass

    @agent(provider=script("done"))
    class B:
        def after_response(self, response, ctx):
            next(iter([]))

    @workflow(steps=[A, B])
    class W:
        pass

    app = bootstrap(W)
    events: list = []
    app.subscribe(events.append)
    with pytest.raises(RuntimeError):
        await app.run("go")
    (told,) = tool_messages(events)
    assert told.content == "Tool first failed: StopIteration", told
    end = events[-1]
    assert end.type == "run.end" and end.status == "failed"
    assert end.error.startswith("StopIteration (at ") and "test_tools.py:" in end.error, end.error
    assert "after_response" in end.error, end.error


async def test_a_tool_result_holding_a_lone_surrogate_is_sent_as_the_journal_holds_it(tmp_path):
    """A tool's os.fsdecode of a file name that is no UTF-8: a provider of the flow's own was sent "caf\\udce9",
    while the journal, --json and the panes said "caf\ufffd"."""
    import os

    from flowtui import FunctionProvider

    got = []

    def model(messages, tools):
        got.append(messages[-1].content)
        return {"content": "", "tool_calls": [{"name": "ls", "args": {}}]} if len(got) == 1 else "ok"

    @tool
    def ls() -> str:
        """Lists files."""
        return os.fsdecode(b"caf\xe9.txt")

    @agent(provider=FunctionProvider(model), prompt="p", tools=[ls])
    class A:
        pass

    @workflow(steps=[A, A])
    class W:
        pass

    journal = tmp_path / "j.jsonl"
    await bootstrap(W).run("go", journal=journal)
    assert got[1] == "caf\ufffd.txt"
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    kept = [e["item"]["content"] for e in events if e["type"] == "state.append" and e["item"]["role"] == "tool"]
    assert kept == [got[1]]


async def test_native_arguments_that_are_not_json_become_an_error_observation():
    from flowtui.runtime.providers.base import RAW_ARGUMENTS_KEY

    class Args(BaseModel):
        q: str

    @tool(name="busca", schema=Args)
    class Busca:
        def execute(self, args: Args = Input()):
            return "nunca"

    replies = iter([
        ChatReply(content="", tool_calls=[ToolCall(name="busca", args={RAW_ARGUMENTS_KEY: "{q: sem aspas"}, id="c1")]),
        "ok",
    ])

    @agent(provider=FunctionProvider(lambda m, t: next(replies)), prompt="p", tools=[Busca])
    class A:
        pass

    @workflow(steps=[loop(steps=[A], until=until_answered)])
    class W:
        pass

    app = bootstrap(W)
    seen = []
    app.subscribe(lambda e: seen.append(e) if e.type == "state.append" and e.item.role == "tool" else None)
    await app.run("x")
    msg = seen[0].item
    assert msg.is_error and "not a JSON object" in msg.content and "{q: sem aspas" in msg.content


async def fails(wf, match: str) -> None:
    """Run ``wf``: it fails with a RuntimeError matching ``match``, and its journal ends it failed."""
    app = bootstrap(wf)
    events = []
    app.subscribe(events.append)
    with pytest.raises(RuntimeError, match=match):
        await app.run("x")
    assert events[-1].type == "run.end" and events[-1].status == "failed"


async def test_a_cancelled_error_nothing_caused_fails_the_tool_or_the_hook_not_the_run_as_a_stop():
    """A tool that awaited a task it had cancelled raised CancelledError: the run ended "stopped
    (cancelled)", exit 0, its tool call never answered (a snapshot of it could not be run again)."""
    import asyncio

    class Args(BaseModel):
        pass

    @tool(name="t", description="d", schema=Args)
    class T:
        async def execute(self, args: Args = Input()):
            inner = asyncio.create_task(asyncio.sleep(10))
            await asyncio.sleep(0)
            inner.cancel()
            await inner

    @agent(provider=FunctionProvider(lambda m, t: ChatReply(content="", tool_calls=[ToolCall(name="t", args={})])),
           prompt="p", tools=[T])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    app = bootstrap(W)
    events = []
    app.subscribe(events.append)
    output = await app.run("x")  # the turn's output: the tool's result
    assert output.startswith("Tool t failed: tool t raised CancelledError, and nothing stopped the run")
    end = events[-1]
    assert end.type == "run.end" and end.status == "finished"
    result = [e.item for e in events if e.type == "state.append" and e.item.role == "tool"]
    assert len(result) == 1 and result[0].is_error
    assert "tool t raised CancelledError, and nothing stopped the run" in result[0].content

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class B:
        async def after_response(self, response, ctx):
            raise asyncio.CancelledError()

    @workflow(steps=[B])
    class V:
        pass

    await fails(V, "hook B.after_response raised CancelledError")


async def test_a_value_python_cannot_write_as_text_is_the_tools_result_not_its_failure():
    """A tool returning 10**100000 was said to have failed ("Tool t failed: Exceeds the limit (4300
    digits)"): the tool had returned; writing its value as text had failed."""

    class Args(BaseModel):
        pass

    @tool(name="t", description="d", schema=Args)
    class T:
        def execute(self, args: Args = Input()):
            return 10 ** 100000

    @agent(provider=FunctionProvider(lambda m, t: ChatReply(content="", tool_calls=[ToolCall(name="t", args={})])),
           prompt="p", tools=[T])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    events = []
    app = bootstrap(W)
    app.subscribe(events.append)
    output = await app.run("x")
    assert output.startswith("<int the tool returned, which cannot be written as text: ValueError: Exceeds")
    result = [e.item for e in events if e.type == "state.append" and e.item.role == "tool"][0]
    assert not result.is_error and result.content == output


async def test_a_cancelled_error_from_the_provider_fails_the_model_call_not_the_run_as_a_stop():
    """A provider awaiting a task cancelled inside its library ended the run "stopped (cancelled)", exit 0,
    and the agent's on_error never saw it."""
    import asyncio

    def model(messages, tools):
        raise asyncio.CancelledError("inside the client library")

    @agent(provider=FunctionProvider(model), prompt="p")
    class A:
        def on_error(self, error, ctx):
            return f"recovered from {type(error).__name__}: {error}"

    @workflow(steps=[A])
    class W:
        pass

    out = await bootstrap(W).run("x")
    assert out.startswith("recovered from CancelledInCode: provider FunctionProvider raised CancelledError")

    @agent(provider=FunctionProvider(model), prompt="p")
    class B:
        pass

    @workflow(steps=[B])
    class V:
        pass

    await fails(V, "provider FunctionProvider raised CancelledError")


async def test_tool_call_arguments_holding_a_lone_surrogate_are_given_and_sent_as_the_journal_holds_them(tmp_path):
    """A provider of the flow's own that asked for a call on a file name that is no UTF-8 (``os.fsdecode``): the tool
    was given "caf\\udce9" and the next request sent it back so, while the journal and the panes said "caf\ufffd"."""
    import os

    from flowtui import FunctionProvider

    got, given = [], []

    def model(messages, tools):
        got.append(messages)
        if len(got) == 1:
            return {"content": "", "tool_calls": [{"name": "cat", "args": {"path": os.fsdecode(b"caf\xe9.txt")}}]}
        return "ok"

    @tool
    def cat(path: str) -> str:
        """Reads a file."""
        given.append(path)
        return "text"

    @agent(provider=FunctionProvider(model), prompt="p", tools=[cat])
    class A:
        pass

    @workflow(steps=[A, A])
    class W:
        pass

    journal = tmp_path / "j.jsonl"
    await bootstrap(W).run("go", journal=journal)
    assert given == ["caf\ufffd.txt"]
    (sent,) = [m for m in got[1] if m.tool_calls]
    assert sent.tool_calls[0].args == {"path": "caf\ufffd.txt"}
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    kept = [e["item"]["tool_calls"][0]["args"] for e in events
            if e["type"] == "state.append" and e["item"]["tool_calls"]]
    assert kept == [{"path": "caf\ufffd.txt"}]


async def test_a_message_appended_with_a_lone_surrogate_in_its_call_is_kept_as_the_journal_holds_it():
    """ctx.state.append of a message of the flow's own making: its call's arguments too, as the journal keeps them."""
    from flowtui.runtime.conversation import ConversationState
    from flowtui.runtime.messages import Message, ToolCall

    state = ConversationState(lambda cls, **fields: None)
    call = ToolCall(name="cat", args={"p\udc80": ["a\udce9", 1]}, id="c\udc801")
    state.append("history", Message(role="assistant", tool_calls=(call,)))
    (kept,) = state.history[-1].tool_calls
    assert kept.args == {"p\ufffd": ["a\ufffd", 1]} and kept.id == "c\ufffd1"
