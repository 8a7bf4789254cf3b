"""History is always a valid conversation (issue: views and edits you can trust).

One rule (runtime/wellformed.py): every tool message answers a call of the
assistant message before it, each call is answered once, before the next
user or assistant turn. History written by user code that breaks it fails the
model call with a message naming the orphan, and the provider is never called.
"""

from __future__ import annotations

import pytest

from flowtui import ConversationError, Message, ToolCall, agent, workflow
from flowtui.runtime.wellformed import call_of, problems, results_of
from fakes import run_collect, scripted


def user(text="hi"):
    return Message(role="user", content=text)


def asks(*ids, content=""):
    return Message(role="assistant", content=content,
                   tool_calls=tuple(ToolCall(name="busca", args={}, id=i) for i in ids))


def result(call_id, text="ok", name="busca"):
    return Message(role="tool", content=text, tool_call_id=call_id, tool_name=name)


def test_valid_conversations_have_no_problems():
    assert problems([]) == []
    assert problems([user(), Message(role="assistant", content="oi")]) == []
    assert problems([user(), asks("c0", "c1"), result("c1"), result("c0"), Message(role="assistant", content="x")]) == []
    # a call without an id is answered by a result without one (paired like the providers pair them)
    assert problems([user(), Message(role="assistant", tool_calls=(ToolCall(name="busca"),)),
                     Message(role="tool", content="r", tool_name="busca")]) == []


def test_an_orphan_tool_result_is_named_by_its_index_and_call():
    found = problems([user(), result("call_0")])
    assert found == ["history[1] answers call_0, which no assistant message makes"]
    found = problems([user(), asks("c1"), result("c1"), result("call_0")])
    assert found[0].startswith("history[3] answers call_0, which no assistant message makes")
    assert "history[1]" in found[0]


def test_unanswered_and_twice_answered_calls_are_problems():
    assert problems([user(), asks("c0"), user("again")]) == [
        "history[1] makes c0, which no tool message answers before history[2]"]
    assert problems([user(), asks("c0")]) == ["history[1] makes c0, which no tool message answers at the end"]
    assert problems([user(), asks("c0"), result("c0"), result("c0")]) == ["history[3] answers c0 a second time"]


def test_results_of_and_call_of_pair_messages_both_ways():
    history = [user(), asks("c0", "c1"), result("c0"), result("c1"), Message(role="assistant", content="x")]
    assert results_of(history, 1) == [2, 3]
    assert results_of(history, 4) == []
    assert call_of(history, 3) == 1
    assert call_of(history, 0) is None


def _flow(before_prompt):
    provider, calls = scripted("the answer")

    @agent(provider=provider, prompt="You answer.")
    class Answerer:
        def before_prompt(self, prompt, ctx):
            before_prompt(ctx)

    @workflow(steps=[Answerer])
    class Flow:
        pass

    return Flow, calls


async def test_history_broken_by_user_code_fails_the_call_naming_the_orphan_and_never_reaches_the_provider():
    def orphan(ctx):
        ctx.state.append("history", result("call_0"))

    flow, calls = _flow(orphan)
    with pytest.raises(ConversationError) as caught:
        await run_collect(flow)
    assert calls == []  # refused before it left: no provider's 400
    message = str(caught.value)
    assert "history[1] answers call_0, which no assistant message makes" in message
    assert "Answerer" in message
    assert caught.value.problems == ["history[1] answers call_0, which no assistant message makes"]


async def test_a_history_fixed_by_user_code_before_the_call_passes():
    def orphan_then_fixed(ctx):
        ctx.state.append("history", result("call_0"))
        ctx.state.set("history", [m for m in ctx.state.history if m.role != "tool"])

    flow, calls = _flow(orphan_then_fixed)
    out, _, _ = await run_collect(flow)
    assert out == "the answer" and len(calls) == 1


async def test_a_middleware_that_breaks_the_request_is_named():
    class DropsAssistant:
        name = "DropsAssistant"

        async def model(self, request, call_next):
            kept = [m for m in request.messages if m.role != "assistant"]
            return await call_next(request.model_copy(update={"messages": kept}))

    replies = [{"content": "", "tool_calls": [{"name": "busca", "args": {}}]}, "done"]
    provider, calls = scripted(*replies)
    from flowtui import bootstrap, tool

    @tool(name="busca", description="finds")
    def busca() -> str:
        return "found"

    @agent(provider=provider, prompt="p", tools=[busca])
    class A:
        pass

    from flowtui import loop, until_answered

    @workflow(steps=[loop(steps=[A], until=until_answered, max_iterations=3)])
    class Flow:
        pass

    app = bootstrap(Flow)
    app.use(DropsAssistant())
    with pytest.raises(ConversationError) as caught:
        await app.prepare("go").execute()
    assert len(calls) == 1  # the second request was refused before it left
    assert "DropsAssistant" in str(caught.value)
    assert caught.value.problems[0].startswith("messages[2] answers call_")  # [prompt, user, the orphan]
    assert "which no assistant message makes" in caught.value.problems[0]
