"""View 2 is the request: at every pause before a model call, "what the model sees" (the fold's
``model_sees()``, as the app gets it over the wire) is exactly what a strict OpenAI-compatible
server then receives, for a top-level run and a child run, after every kind of edit."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from loopback_openai import LoopbackOpenAI, as_sent, reply
from flowtui import (
    Controller, Input, LiteLLMProvider, WorkflowRuntime, agent, bootstrap, loop, tool, until_answered, workflow,
)
from flowtui.runtime.encoding import encode_event
from flowtui.runtime.events import parse_event
from flowtui.runtime.fold import RunView
from flowtui.runtime.secrets import Redactor


class Q(BaseModel):
    q: str


def provider(server):
    class Model(LiteLLMProvider):
        model = "openai/gpt-test"
        api_base = server.base_url

    return Model(api_key="sk-loopback-FAKE-0123456789")


def flow(server):
    @tool(name="busca", description="Finds things.", schema=Q)
    def busca(args: Q) -> str:
        return f"found {args.q}"

    @agent(provider=provider(server), prompt="You research.", tools=[busca])
    class Pesquisador:
        pass

    @workflow(steps=[loop(steps=[Pesquisador], until=until_answered, max_iterations=3)])
    class Pesquisa:
        pass

    @tool(name="pesquisar", description="Delegates research.", schema=Q)
    class Pesquisar:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: Q = Input()):
            return await self.runtime.run(Pesquisa, input=args.q, memory={"pedido": "curto"})

    @agent(provider=provider(server), prompt="You review, with tools.", tools=[busca, Pesquisar])
    class Revisor:
        pass

    @workflow(steps=[loop(steps=[Revisor], until=until_answered, max_iterations=4)])
    class Revisao:
        pass

    return Revisao


def as_seen(messages):
    return [(m.role, m.content, [(c.id, c.name, dict(c.args)) for c in m.tool_calls], m.tool_call_id)
            for m in messages]


class Session:
    """A paused run and the app's fold of it (events through their JSON lines, as over the wire)."""

    def __init__(self, server):
        self.server = server
        self.view = RunView()
        self.redactor = Redactor.from_environment()
        self.ctl = Controller(start_paused=True)
        self.run = bootstrap(flow(server)).prepare("revise o texto", controller=self.ctl, on_event=self.fold)
        self.pauses = 0
        self.seen_at_calls: list = []

    def fold(self, event):
        self.view.apply(parse_event(encode_event(event, self.redactor)))
        if event.type == "run.pause":
            self.pauses += 1

    async def next_pause(self, command):
        seen = self.pauses
        command()
        for _ in range(10_000):
            if (self.ctl.paused and self.pauses > seen) or self.task.done():
                return self.ctl.paused_at
            await asyncio.sleep(0.001)
        raise AssertionError("no pause")

    async def to_chat(self):
        """Step to the next pause before a model call; remember what view 2 shows there."""
        while True:
            at = await self.next_pause(self.ctl.step)
            assert at is not None, "the run ended"
            if at.kind == "chat":
                return at

    def check(self, label):
        """The request that follows is what view 2 shows now."""
        shown = as_seen(self.view.model_sees())
        self.seen_at_calls.append((label, shown, len(self.server.requests)))

    def verify(self):
        for label, shown, before in self.seen_at_calls:
            received = as_sent(self.server.requests[before].body["messages"])
            assert received == shown, label


@pytest.fixture
def server():
    with LoopbackOpenAI() as s:
        yield s


async def test_view_2_is_what_the_server_receives_after_every_edit_top_level_and_child(server):
    server.script(
        reply("REPROVADO: faltam fontes", tool_calls=[{"name": "busca", "args": {"q": "a"}},
                                                      {"name": "busca", "args": {"q": "b"}}]),
        reply("", tool_calls=[{"name": "pesquisar", "args": {"q": "ctx.state"}}]),
        reply("ctx.state é a conversa"),  # the child's researcher
        reply("APROVADO"),
    )
    s = Session(server)
    s.task = asyncio.ensure_future(s.run.execute())
    await s.to_chat()
    s.check("first call")
    await s.next_pause(s.ctl.step)  # the model answered with two calls: paused before the first
    await s.to_chat()  # both results in; before the second call
    edits = s.run.edits
    # every edit, then undo, then the ones that stay
    edits.add_item("tasks", "cite as fontes")
    edits.add_item("memory", "o autor prefere frases curtas")
    edits.edit_message(0, "revise o texto, por favor")
    edits.delete_message(3)  # a tool result: its call leaves the reply too
    edits.undo()
    edits.promote(1)  # the reply that made two calls: its two results leave with it
    assert s.view.memory == ["o autor prefere frases curtas", "REPROVADO: faltam fontes"]
    s.check("after add, edit, delete, undo, promote")
    # into the child: paused before the researcher's call, view 2 is the child's request
    await s.next_pause(s.ctl.step)  # before the tool pesquisar
    await s.to_chat()
    assert s.view.shown.run_id != s.view.run_id
    s.run.edits_for(s.view.shown.run_id).add_item("memory", "responda em uma frase")
    s.check("child, after an edit of the child")
    await s.to_chat()  # back in the parent: its second turn
    assert s.view.shown.run_id == s.view.run_id
    s.check("parent after the child")
    s.ctl.resume()
    assert await asyncio.wait_for(s.task, 10) == "APROVADO"
    assert len(server.requests) == 4 and all(r.body for r in server.requests)
    s.verify()
    child = as_sent(server.requests[2].body["messages"])
    assert child[1][1] == "pedido: curto\n\nresponda em uma frase" and child[2][1] == "ctx.state"
