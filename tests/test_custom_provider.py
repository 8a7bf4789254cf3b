"""Writing your own provider: implement ``async complete(request)``; the base class strips
``<think>`` blocks and rescues tool calls written as text, for every provider."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from pydantic import BaseModel

from flowtui import (
    ChatReply, ChatRequest, Input, Provider, Usage, agent, bootstrap, loop, tool, until_answered, workflow,
)


class Q(BaseModel):
    q: str


@tool(name="buscar", description="Searches.", schema=Q)
class Buscar:
    def execute(self, args: Q = Input()):
        return f"achei {args.q}"


class RawTextModel(Provider):
    """A custom provider whose model writes tool calls as text and thinks out loud."""

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> ChatReply:
        self.requests.append(request)
        if len(self.requests) == 1:
            text = ('<think>I should search.</think>\n'
                    '<tool_call>{"name": "buscar", "arguments": {"q": "ctx"}}</tool_call>')
        else:
            text = "<think>Found it.</think>Está em ctx.state."
        return ChatReply(content=text, usage=Usage(prompt_tokens=3, completion_tokens=2))


def _flow(provider):
    @agent(provider=provider, prompt="Answer.", tools=[Buscar])
    class A:
        pass

    @workflow(steps=[loop([A], until=until_answered, max_iterations=4)])
    class W:
        pass

    return W


async def test_a_custom_provider_returning_raw_text_gets_rescue_and_think_stripping():
    provider = RawTextModel()
    app = bootstrap(_flow(provider))
    events = []
    app.subscribe(events.append)
    assert await app.run("Onde fica?") == "Está em ctx.state."
    history = [e.item for e in events if e.type == "state.append" and e.bucket == "history"]
    call_msg = history[1]
    assert call_msg.content == "" and call_msg.reasoning == "I should search."
    assert [(c.name, c.args, c.id) for c in call_msg.tool_calls] == [("buscar", {"q": "ctx"}, "call_1_0")]
    assert (history[2].role, history[2].content) == ("tool", "achei ctx")
    assert (history[3].content, history[3].reasoning) == ("Está em ctx.state.", "Found it.")
    turns = [e.value for e in events if e.type == "ctx.set" and e.name == "turn"]
    assert turns[0]["tool_call_source"] == "rescued"  # marked as the rescue's
    chat_ends = [e.data for e in events if e.type == "node.end" and e.kind == "chat"]
    assert [d["tool_call_source"] for d in chat_ends] == ["rescued", None]
    assert events[-1].totals.tokens.total == 10  # its Usage counts like any provider's
    # the request it got: the agent's prompt first, then the conversation, and the tool specs
    first = provider.requests[0]
    assert [(m.role, m.content) for m in first.messages] == [("system", "Answer."), ("user", "Onde fica?")]
    assert first.tools[0]["function"]["name"] == "buscar" and first.tool_names == frozenset({"buscar"})


async def test_rescue_can_be_turned_off_per_provider():
    class Literal(RawTextModel):
        rescue_tool_calls = False

    app = bootstrap(_flow(Literal()))
    out = await app.run("x")
    assert out == '<tool_call>{"name": "buscar", "arguments": {"q": "ctx"}}</tool_call>'  # answered, as text


@pytest.mark.parametrize("reply,said", [
    ("cost_usd=float('nan')", "cost_usd=nan: a cost is a finite number of dollars, 0 or more"),
    ("cost_usd=float('inf')", "cost_usd=inf: a cost is a finite number of dollars"),
    ("cost_usd=-100.0", "cost_usd=-100.0: a cost is a finite number of dollars, 0 or more"),
    ("usage=Usage(prompt_tokens=-1000, completion_tokens=1)",
     "usage.prompt_tokens=-1000: a count of tokens is a whole number, 0 or more"),
])
def test_a_cost_or_count_no_budget_can_add_fails_the_call_naming_the_provider(tmp_path, reply, said):
    """A NaN cost made the totals no number: flowtui run dropped the run's end and never exited (the app said
    its cleanups were running), and its journal got two ends; a negative one ran the totals below 0, and no
    budget tripped."""
    flow = tmp_path / "costly.py"
    flow.write_text(textwrap.dedent(f"""
        from flowtui import Budget, ChatReply, Provider, Usage, agent, loop, workflow

        class Costly(Provider):
            async def complete(self, request):
                return ChatReply(**{{"content": "c", "usage": Usage(prompt_tokens=1, completion_tokens=1),
                                    **dict({reply})}})

        @agent(provider=Costly, prompt="p")
        class A:
            pass

        @workflow(steps=[loop([A], max_iterations=3)], budget=Budget(max_tokens=50, max_cost_usd=1.0))
        class W:
            pass
    """))
    journal = tmp_path / "j.jsonl"
    done = subprocess.run([sys.executable, "-m", "flowtui.tui.cli", "run", str(flow), "--input", "hi",
                           "--journal", str(journal)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f"the run failed: ValueError: provider Costly returned a ChatReply with {said}" in done.stderr
    ends = [json.loads(line) for line in journal.read_text().splitlines() if '"run.end"' in line]
    assert [e["status"] for e in ends] == ["failed"] and ends[0]["totals"]["cost_usd"] == 0.0


@pytest.mark.parametrize("call,said", [
    ("on_delta", r"request.on_delta\(text\) takes the reply's next piece of text \(str\), not int 12345"),
    ("on_attempt", r"request.on_attempt\(...\) takes an AttemptInfo\(attempt=.*not str 'nonsense'"),
])
async def test_a_provider_calling_the_requests_callbacks_with_the_wrong_value_is_told_at_the_call(call, said):
    # on_delta(12345) made a chat.delta the app refused ("events 6-7 never arrived"); on_attempt("nonsense")
    # failed on 'str' object has no attribute 'attempt'
    class Streaming(Provider):
        async def complete(self, request):
            request.on_delta("ok ")
            getattr(request, call)(12345 if call == "on_delta" else "nonsense")
            return ChatReply(content="ok")

    @agent(provider=Streaming, prompt="p")
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    events = []
    with pytest.raises(TypeError, match=said):
        await bootstrap(W).run("x", on_event=events.append)
    assert [e.text for e in events if e.type == "chat.delta"] == ["ok "]


async def test_a_fork_that_returns_no_provider_is_named():
    """fork() returning None failed the run with "'NoneType' object has no attribute 'describe'", naming
    neither the provider nor fork, and an agent's on_error took it as an error to recover from."""
    from flowtui import ChatReply, ConfigError, Provider, agent, bootstrap, workflow

    class BadFork(Provider):
        async def complete(self, request):
            return ChatReply(content="ok")

        def fork(self):
            return None

    @agent(provider=BadFork())
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    with pytest.raises(ConfigError, match=r"^A: BadFork\.fork\(\) returned NoneType, not a Provider; "):
        await bootstrap(W).run("go")
