"""A reply's tool calls as the history keeps them and the next request sends them back: what a
provider refuses (a made-up tool name, an id given twice) is never sent back."""

from __future__ import annotations

import re

import pytest

from fakes import run_collect, scripted
from flowtui import ChatReply, ToolCall, agent, tool, workflow
from flowtui.runtime.errors import ConfigError
from flowtui.runtime.wellformed import problems


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return f"echo: {text}"


def flow(*replies):
    provider, sent = scripted(*replies, when_done="done")

    @agent(provider=provider, tools=[echo])
    class A:
        pass

    @workflow(steps=[A, A])
    class W:
        pass

    return W, sent


async def test_a_made_up_tool_name_is_sent_back_as_a_name_the_provider_takes():
    """`functions.echo` sent back in the next request was refused with a 400: the run failed."""
    W, sent = flow({"content": "", "tool_calls": [{"name": "functions.echo", "args": {"text": "hi"}, "id": "c1"},
                                                  {"name": "", "args": {}, "id": "c2"}]})
    out, events, run = await run_collect(W)
    assert out == "done" and events[-1].status == "finished"
    back = sent[1]  # the second request: the first reply's calls, as sent back
    calls = [c for m in back if m.role == "assistant" for c in m.tool_calls]
    assert [c.name for c in calls] == ["functions_echo", "unnamed_tool"]
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", c.name) for c in calls)  # what OpenAI takes
    results = [m for m in back if m.role == "tool"]
    assert [m.tool_name for m in results] == ["functions_echo", "unnamed_tool"]
    assert results[0].is_error and results[0].content.startswith("Unknown tool 'functions_echo'. Available tools: echo")
    assert not problems(back)
    # what the model answered stays recorded as it came
    chat_end = next(e for e in events if e.type == "node.end" and e.kind == "chat")
    assert [c["name"] for c in chat_end.data["reply"]["tool_calls"]] == ["functions.echo", ""]


async def test_an_id_given_twice_is_made_unique_and_each_call_answered_once():
    """Both calls ran, then the history answered `dup` twice and the next call failed, blaming the user's code."""
    W, sent = flow(ChatReply(content="", tool_calls=[ToolCall(name="echo", args={"text": "a"}, id="dup"),
                                                     ToolCall(name="echo", args={"text": "b"}, id="dup"),
                                                     ToolCall(name="echo", args={"text": "c"}, id="call_1")]))
    out, events, run = await run_collect(W)
    assert out == "done" and events[-1].status == "finished"
    calls = [c for m in sent[1] if m.role == "assistant" for c in m.tool_calls]
    assert len({c.id for c in calls}) == 3 and calls[0].id == "dup" and calls[2].id == "call_1"
    assert [m.content for m in sent[1] if m.role == "tool"] == ["echo: a", "echo: b", "echo: c"]
    assert not problems(sent[1])


@pytest.mark.parametrize("name", ["web.search", "buscar notícias", "x" * 65])
def test_a_tool_named_so_no_provider_takes_it_is_a_load_error_naming_a_name_that_works(name):
    """A request naming it is refused (400) at the first model call."""
    with pytest.raises(ConfigError, match=r"would be refused by the model's provider .* name it '[A-Za-z0-9_-]+'"):
        @tool(name=name)
        def f(text: str) -> str:
            """f."""
            return text


def test_a_function_named_with_an_accent_is_no_tool_name_either():
    with pytest.raises(ConfigError, match=r"@tool concluír: the tool name 'concluír' .* name it 'conclu_r'"):
        @tool
        def concluír(text: str) -> str:
            """f."""
            return text


def test_an_empty_tool_name_is_refused_not_replaced_by_the_functions():
    with pytest.raises(ConfigError,
                       match=r"@tool\(name=''\): the tool name '' would be refused .* name it 'unnamed_tool'"):
        @tool(name="")
        def f(text: str) -> str:
            """f."""
            return text


async def test_an_id_a_server_gives_again_in_a_later_turn_is_renamed():
    """A server that numbers each reply's calls from call_0 (and calls found in the text of two
    agents' first turns, both call_1_0) put one id twice in the history; a provider that takes
    the history as tool-use blocks refuses it."""
    provider, sent = scripted(*[ChatReply(content="", tool_calls=[ToolCall(name="echo", args={"text": t}, id="call_0")])
                                for t in "ab"], when_done="done")

    @agent(provider=provider, tools=[echo])
    class A:
        pass

    @workflow(steps=[A, A, A])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "done"
    last = sent[2]  # the third request: both turns, as sent back
    assert [c.id for m in last if m.role == "assistant" for c in m.tool_calls] == ["call_0", "call_0_1"]
    assert [(m.tool_call_id, m.content) for m in last if m.role == "tool"] == [("call_0", "echo: a"),
                                                                               ("call_0_1", "echo: b")]
    assert not problems(last)


async def test_an_id_too_long_to_send_back_is_shortened_and_one_given_twice_stays_short():
    """A 65-character id (a proxy's) was sent back as it came, and the next request was refused:
    'string too long. Expected a string with maximum length 40'. Renaming a repeated 40-character
    id made it 42."""
    long, forty = "call_" + "x" * 60, "c" * 40
    W, sent = flow(ChatReply(content="", tool_calls=[ToolCall(name="echo", args={"text": "a"}, id=long),
                                                     ToolCall(name="echo", args={"text": "b"}, id=forty),
                                                     ToolCall(name="echo", args={"text": "c"}, id=forty)]))
    out, events, run = await run_collect(W)
    assert out == "done"
    ids = [c.id for m in sent[1] if m.role == "assistant" for c in m.tool_calls]
    assert all(len(i) <= 40 for i in ids) and len(set(ids)) == 3 and ids[1] == forty and ids[0].startswith("call_x")
    assert [m.tool_call_id for m in sent[1] if m.role == "tool"] == ids
    assert not problems(sent[1])


async def test_an_id_an_agents_own_run_put_in_the_history_is_not_given_again():
    """The ids were read from the history once, then grown only by the replies' own: an id that an
    agent's run() (or a hook, or an edit) put there later was given to a renamed call again."""
    from flowtui import Message

    provider, sent = scripted(*[ChatReply(content="", tool_calls=[ToolCall(name="echo", args={"text": t}, id="call_0")])
                                for t in "ab"], when_done="done")

    @agent(provider=provider, tools=[echo])
    class A:
        pass

    @agent(provider=provider)
    class B:
        async def run(self, input, ctx):
            ctx.state.append("history", Message(role="assistant", content="", tool_calls=(
                ToolCall(name="echo", args={"text": "b"}, id="call_0_1"),)))
            ctx.state.append("history", Message(role="tool", content="done by hand", tool_name="echo",
                                                tool_call_id="call_0_1"))
            return None

    @workflow(steps=[A, B, A, A])
    class W:
        pass

    out, events, run = await run_collect(W)
    ids = [c.id for m in run.state.history if m.role == "assistant" for c in m.tool_calls]
    assert ids[:2] == ["call_0", "call_0_1"] and len(ids) == len(set(ids)) == 3, ids
