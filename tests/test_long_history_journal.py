"""A long run's requests in the journal: each chat ``node.start`` records the request whole, and a
history past a few dozen messages is encoded part by part (its messages once, not once a turn). Whatever
the history holds, every request the journal records is the one the model got: the same messages, in
order, with their tool calls as sent, credentials redacted and terminal controls escaped.

The runs below make their history long first, then change it the ways a part-by-part encoding could
miss: a call's arguments changed in place, terminal controls, a credential."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from loopback_openai import LoopbackOpenAI, as_sent, reply
from flowtui import AgentContext, FunctionProvider, LiteLLMProvider, State, agent, bootstrap, loop, tool, workflow
from flowtui.runtime.journal import read_journal

KEY = "zq-LONGRUN-0123456789abcdefXYZ"
PLAIN = "\"quoted\" \\ back 🙂 ação"  # (written as they are)
HOSTILE = "\x9b[31mred\x1b[0m \u202eevil\u202c \x7f \u2028"  # (escaped)
ODD = {"metadata": {"request": {"messages": []}}}  # (what the request's own JSON starts with)
ROUNDS = 44  # turns: a call of the tool, then an answer


class Q(BaseModel):
    q: str
    n: float = 0.0
    nested: dict = {}


class Rounds(BaseModel):
    done: int = 0


def flow(server):
    class Model(LiteLLMProvider):
        model = "openai/gpt-test"
        api_base = server.base_url

    @tool(name="busca", description="Finds things.", schema=Q)
    def busca(args: Q) -> str:
        return {"leak": f"the key is {KEY}; GET /v1/items?access_token=Zk39fQpL2mX8", "hostile": HOSTILE}.get(
            args.q, f"found {args.q}: {PLAIN}")

    @agent(provider=Model(api_key="sk-loopback-FAKE-0123456789"), prompt="You review.", tools=[busca])
    class Revisor:
        def __init__(self, s: Rounds = State()):
            self.s = s

        def after_response(self, resposta: str, ctx: AgentContext):
            self.s.done += 1
            if self.s.done == 26:  # a call's arguments changed in place (a dict): sent so from then on
                called = next(m for m in ctx.state.history if m.tool_calls)
                called.tool_calls[0].args["q"] = "changed in place"
            if self.s.done == 28:  # an earlier message replaced by an edited copy
                history = list(ctx.state.history)
                history[3] = history[3].model_copy(update={"content": "edited"})
                ctx.state.set("history", history)

    @workflow(state=Rounds, steps=[loop(steps=[Revisor], until=lambda ctx, s: s.done >= ROUNDS,
                                        max_iterations=ROUNDS)])
    class Longa:
        pass

    return Longa


def as_server_got(messages):
    return [(role, content.replace(KEY, "[redacted]").replace("Zk39fQpL2mX8", "[redacted]"), calls, call_id)
            for role, content, calls, call_id in as_sent(messages)]


def as_journaled(messages):
    return [(m["role"], m["content"], [(c["id"], c["name"], c["args"]) for c in m.get("tool_calls", [])],
             m.get("tool_call_id")) for m in messages]


@pytest.mark.parametrize("late", ["leak", "hostile"])  # (either makes every request after it encoded whole)
async def test_every_request_of_a_long_run_is_journaled_as_the_server_got_it(tmp_path, monkeypatch, late):
    monkeypatch.setenv("LONGRUN_API_KEY", KEY)
    journal = tmp_path / "run.jsonl"
    with LoopbackOpenAI() as server:
        script = []
        for i in range(ROUNDS // 2):
            q = late if i == 16 else f"{i} {PLAIN}"
            script += [reply("", tool_calls=[{"name": "busca", "args": {"q": q, "n": i + 0.5,
                                                                         "nested": {"a": [1, True, None]}}}]),
                       reply(f"REPROVADO {i}: {PLAIN}")]
        server.script(*script)
        await bootstrap(flow(server)).run("revise", journal=journal)
        received = [as_server_got(r.body["messages"]) for r in server.requests]
    raw = journal.read_bytes()
    assert KEY.encode() not in raw and b"Zk39fQpL2mX8" not in raw
    assert not any(c.encode() in raw for c in ("\x9b", "\x1b", "\u202e", "\x7f", "\u2028"))
    starts = [e for e in read_journal(journal) if e.type == "node.start" and e.kind == "chat"]
    journaled = [as_journaled(e.data["request"]["messages"]) for e in starts]
    assert len(journaled) == len(received) == ROUNDS
    assert len(journaled[-1]) > ROUNDS  # (long enough to be encoded part by part)
    for i, (ours, theirs) in enumerate(zip(journaled, received)):
        assert ours == theirs, f"request {i}"
    first_call = journaled[-1][2][2][0]
    assert first_call[2]["q"] == "changed in place"  # (the later requests sent it so)
    assert journaled[-1][4][:2] == ("assistant", "edited")  # (after the system prompt)
    assert any(("[redacted]" if late == "leak" else HOSTILE) in m[1] for m in journaled[-1])


@pytest.mark.parametrize("agents", [1, 3])
async def test_agents_taking_turns_each_have_their_requests_journaled_whole(tmp_path, agents):
    """Agents alternate (each its own system prompt, one shared history), each request as its handler got it;
    a sampling value shaped like a request stays where it is."""
    got = []

    def answer(messages, tools):
        got.append([(m.role, m.content) for m in messages])
        return f"reply {len(got)} \"ação\" 😀"

    class Turns(BaseModel):
        n: int = 0

    def make(i):
        @agent(provider=FunctionProvider(answer), prompt=f"You are agent {i}.", name=f"A{i}", sampling=ODD)
        class A:
            def __init__(self, s: Turns = State()):
                self.s = s

            def after_response(self, resposta, ctx):
                self.s.n += 1
        return A

    @workflow(state=Turns, steps=[loop(steps=[make(i) for i in range(agents)], until=lambda ctx, s: s.n >= 90,
                                       max_iterations=90)])
    class Alternate:
        pass

    journal = tmp_path / "run.jsonl"
    await bootstrap(Alternate).run("go", journal=journal)
    starts = [e for e in read_journal(journal) if e.type == "node.start" and e.kind == "chat"]
    assert [[(m["role"], m["content"]) for m in e.data["request"]["messages"]] for e in starts] == got
    assert all(e.data["request"]["sampling"] == ODD for e in starts)
    assert len(got[-1]) > 60
