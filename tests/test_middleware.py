"""Middlewares and plugins: app.use(...) around every model and tool call, first registered
outermost; deny, change, retry; setup/dispose; ContextWindow."""

from __future__ import annotations

import asyncio
import re

import pytest
from pydantic import BaseModel

from flowtui import (
    ConfigError, ContextWindow, FunctionProvider, Input, Message, Middleware, ToolCall, ToolOutput,
    WorkflowRuntime, agent, bootstrap, loop, tool, until_answered, workflow,
)
from fakes import call, scripted


class Q(BaseModel):
    q: str


def _busca(executed: list):
    @tool(name="busca", schema=Q)
    class Busca:
        def execute(self, args: Q = Input()):
            executed.append(args.q)
            if args.q == "falha":
                raise RuntimeError("índice fora do ar")
            return f"achei {args.q}"

    return Busca


def _flow(provider, executed, **workflow_kwargs):
    @agent(provider=provider, prompt="p", tools=[_busca(executed)])
    class A:
        pass

    @workflow(steps=[loop([A], until=until_answered, max_iterations=6)], **workflow_kwargs)
    class W:
        pass

    return W


async def _run(app, input="oi", **kw):
    events = []
    app.subscribe(events.append)
    out = await app.run(input, **kw)
    return out, events


def tool_results(events):
    return [(e.item.content, e.item.is_error) for e in events if e.type == "state.append" and e.item.role == "tool"]


def chat_requests(events):
    """The request each chat node started with, and the data each ended with (its sent_request...)."""
    return ([e.data["request"] for e in events if e.type == "node.start" and e.kind == "chat"],
            [e.data for e in events if e.type == "node.end" and e.kind == "chat"])


class Tracer:
    """Records when its tool and model layers are entered and left."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    async def tool(self, invocation, call_next):
        self.log.append(f"{self.name}>tool:{invocation.name}")
        out = await call_next(invocation)
        self.log.append(f"{self.name}<tool")
        return out

    async def model(self, request, call_next):
        self.log.append(f"{self.name}>model:{request.agent}")
        reply = await call_next(request)
        self.log.append(f"{self.name}<model")
        return reply


async def test_middlewares_wrap_every_call_in_registration_order_first_outermost():
    log, executed = [], []
    provider, _ = scripted(call("busca", q="x"), "fim")
    app = bootstrap(_flow(provider, executed))
    app.use(Tracer("outer", log))
    app.use(Tracer("inner", log))
    out, events = await _run(app)
    assert out == "fim" and executed == ["x"]
    assert log == ["outer>model:A", "inner>model:A", "inner<model", "outer<model",
                   "outer>tool:busca", "inner>tool:busca", "inner<tool", "outer<tool",
                   "outer>model:A", "inner>model:A", "inner<model", "outer<model"]


async def test_a_tool_middleware_denies_a_call_and_the_model_reads_why():
    executed, seen = [], []

    def model(messages, tools):
        seen.append(messages[-1])
        return call("busca", q="segredo") if len(seen) == 1 else "entendi"

    def guard(invocation, call_next):  # a sync middleware: returns a value or call_next(...)
        if invocation.args.get("q") == "segredo":
            return ToolOutput(content="busca por 'segredo' não é permitida", is_error=True)
        return call_next(invocation)

    app = bootstrap(_flow(FunctionProvider(model), executed))
    app.use(Middleware(name="guard", tool=guard))
    out, events = await _run(app)
    assert executed == [] and out == "entendi"
    assert tool_results(events) == [("busca por 'segredo' não é permitida", True)]
    assert (seen[1].role, seen[1].content, seen[1].is_error) == ("tool", "busca por 'segredo' não é permitida", True)
    (tool_end,) = [e for e in events if e.type == "node.end" and e.kind == "tool"]
    assert tool_end.status == "error"


async def test_a_tool_middleware_changes_the_arguments_and_retries_a_failure():
    executed = []
    provider, _ = scripted(call("busca", q="falha"), "fim")

    async def retry_once(invocation, call_next):
        out = await call_next(invocation)
        if out.is_error:
            out = await call_next(invocation.replace(args={"q": "de novo"}))
        return out

    app = bootstrap(_flow(provider, executed))
    app.use(Middleware(name="retry", tool=retry_once))
    turns = []
    app.subscribe(lambda e: turns.append(e.value) if e.type == "ctx.set" and e.name == "turn" else None)
    out, events = await _run(app)
    assert executed == ["falha", "de novo"]
    assert tool_results(events) == [("achei de novo", False)]
    assert turns[0]["tool_name"] == "busca" and turns[0]["tool_error"] is False
    (end,) = [e for e in events if e.type == "node.end" and e.kind == "tool"]
    assert end.data["ran"] == {"name": "busca", "args": {"q": "de novo"}}  # what reached the tool last


async def test_a_model_middleware_changes_the_request_and_the_chat_node_records_it():
    executed, sent = [], []

    def model(messages, tools):
        sent.append([(m.role, m.content) for m in messages])
        return "ok"

    async def tone(request, call_next):
        extra = Message(role="system", content="Responda em português.")
        return await call_next(request.model_copy(update={"messages": [*request.messages, extra]}))

    app = bootstrap(_flow(FunctionProvider(model), executed))
    app.use(Middleware(name="tone", model=tone))
    out, events = await _run(app, "hi")
    assert sent == [[("system", "p"), ("user", "hi"), ("system", "Responda em português.")]]
    (chat_end,) = [e for e in events if e.type == "node.end" and e.kind == "chat"]
    assert chat_end.data["changed_by"] == ["tone"] and chat_end.data["sent"] == 3 and "trimmed" not in chat_end.data
    (chat_start,) = [e for e in events if e.type == "node.start" and e.kind == "chat"]
    assert chat_start.data["messages"] == 2  # what the agent built; sent=3 is what left


async def test_a_model_middleware_calling_the_model_twice_is_counted_and_held_to_the_budget():
    """A retry middleware (call_next twice) spent two calls for each the run counted: past
    max_chat_calls, its totals and journal one call short each time."""
    from flowtui import Budget, FunctionProvider, loop

    calls: list[int] = []

    def model(messages, tools):
        calls.append(1)
        return f"reply {len(calls)}"

    async def twice(request, call_next):
        await call_next(request)
        return await call_next(request)

    @agent(provider=FunctionProvider(model), prompt="p")
    class A:
        pass

    @workflow(steps=[loop(steps=[A], until=lambda ctx: False, max_iterations=5)],
              middlewares=[Middleware(name="twice", model=twice)], budget=Budget(max_chat_calls=3, mode="stop"))
    class W:
        pass

    events: list = []
    await bootstrap(W).run("go", on_event=events.append)
    end = events[-1]
    assert end.reason == "budget: max_chat_calls" and end.totals.chat_calls == len(calls) == 3, (end, calls)
    chat_ends = [e for e in events if e.type == "node.end" and e.kind == "chat"]
    assert [len(e.data.get("provider_replies", [])) for e in chat_ends] == [2, 0], chat_ends
    assert [r["content"] for r in chat_ends[0].data["provider_replies"]] == ["reply 1", "reply 2"]


async def test_a_model_middleware_that_returns_no_reply_is_named():
    """"a model middleware returned NoneType": which one, of several, was not said."""
    async def passes(request, call_next):
        return await call_next(request)

    async def forgets(request, call_next):
        await call_next(request)  # (no return)

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        pass

    @workflow(steps=[A], middlewares=[Middleware(name="outer", model=passes), Middleware(name="forgetful", model=forgets)])
    class W:
        pass

    events: list = []
    with pytest.raises(TypeError, match="^model middleware 'forgetful' returned NoneType, not a ChatReply"):
        await bootstrap(W).run("go", on_event=events.append)
    assert "model middleware 'forgetful' returned NoneType" in events[-1].error


async def test_a_model_middleware_passing_on_no_message_or_an_orphan_result_is_named_before_it_is_sent():
    """A request a middleware emptied went to the provider, which refused it with a 400 that named no
    middleware; one left with a tool result whose call it dropped was refused as history's fault."""
    from flowtui import ConversationError

    sent = []

    async def empties(request, call_next):
        return await call_next(request.model_copy(update={"messages": []}))

    async def orphans(request, call_next):
        extra = Message(role="tool", content="r", tool_call_id="call_9", tool_name="busca")
        return await call_next(request.model_copy(update={"messages": [*request.messages, extra]}))

    for name, layer, problem in [("emptier", empties, "it holds no message"),
                                 ("orphaner", orphans, "answers call_9, which no assistant message makes")]:
        @agent(provider=FunctionProvider(lambda m, t: sent.append(m) or "ok"), prompt="p")
        class A:
            pass

        @workflow(steps=[A], middlewares=[Middleware(name=name, model=layer)])
        class W:
            pass

        with pytest.raises(ConversationError) as caught:
            await bootstrap(W).run("go")
        said = str(caught.value)
        assert f"the request {name} passed on is not a valid conversation" in said and problem in said, said
        assert said.endswith(f"fix {name}: it passes on what the model is sent") and "orphan in the app" not in said
    assert sent == []  # neither reached the provider


@pytest.mark.parametrize("messages,held", [("'not a list'", "str 'not a list'"),
                                           ("[*request.messages, {'role': 'user', 'content': 'x'}]",
                                            "dict {'role': 'user', 'content': 'x'}")])
async def test_a_model_middleware_passing_on_messages_that_are_no_messages_is_named(messages, held):
    # a text was validated as the recorded request's list, one fault per character, naming no middleware
    sent = []

    async def odd(request, call_next):
        return await call_next(request.model_copy(update={"messages": eval(messages)}))

    @agent(provider=FunctionProvider(lambda m, t: sent.append(m) or "ok"), prompt="p")
    class A:
        pass

    @workflow(steps=[A], middlewares=[Middleware(name="odd", model=odd)])
    class W:
        pass

    with pytest.raises(TypeError, match=f"odd'? passed on a request whose messages hold {re.escape(held)}; "
                                        r"request.messages is a list of Message"):
        await bootstrap(W).run("go")
    assert sent == []


def test_a_pydantic_fault_in_the_flows_code_is_said_on_one_line_with_what_was_given():
    from flowtui import ChatReply, ToolCall
    from flowtui.runtime.errors import describe_error

    for make, said in [(lambda: ToolCall(name="t1", args="x=1"),
                        "ValidationError: ToolCall: args: Input should be a valid dictionary (given str 'x=1')"),
                       (lambda: ChatReply(content=123),
                        "ValidationError: ChatReply: content: Input should be a valid string (given int 123)")]:
        with pytest.raises(Exception) as caught:
            make()
        assert describe_error(caught.value).startswith(said) and "errors.pydantic.dev" not in describe_error(
            caught.value)


async def test_a_request_a_middleware_changes_in_place_is_recorded_checked_and_stays_its_own():
    """request.messages.append(...) and request.sampling[...] = ... (no model_copy): the provider got them,
    the journal said neither, an orphan result went unchecked, and the temperature stayed for every later
    call of the agent."""
    from flowtui import ConversationError

    sent, told = [], []

    def model(messages, tools):
        sent.append([(m.role, m.content) for m in messages])
        told.append(sorted(s["function"]["name"] for s in tools))
        return "ok"

    extra = {"type": "function", "function": {"name": "extra", "description": "x", "parameters": {}}}

    def louder(request, call_next):
        request.messages.append(Message(role="user", content="(be brief)"))
        request.sampling["temperature"] = 0.3
        if request.turn == 1:  # (a list in the request: the agent's own, until this call changed it)
            request.sampling["stop"].append("X")
            request.tools.append(extra)
        return call_next(request)

    @agent(provider=FunctionProvider(model), prompt="p", sampling={"temperature": 0.9, "stop": ["\n"]},
           tools=[_busca([])])
    class A:
        pass

    @workflow(steps=[A, A], middlewares=[Middleware(name="louder", model=louder)])
    class W:
        pass

    out, events = await _run(bootstrap(W), "go")
    assert sent[0] == [("system", "p"), ("user", "go"), ("user", "(be brief)")]
    assert told == [["busca", "extra"], ["busca"]]  # the first call's change stayed with it
    starts, ends = chat_requests(events)
    assert [s.sampling for s in starts] == [{"temperature": 0.9, "stop": ["\n"]}] * 2  # the agent's own, each call
    assert [d["sent_request"].sampling["stop"] for d in ends] == [["\n", "X"], ["\n"]]
    assert [d["sent_request"].tools for d in ends] == [["busca", "extra"], ["busca"]]
    assert ends[0]["sent_request"].tools_digest != starts[0].tools_digest == ends[1]["sent_request"].tools_digest
    for data in ends:
        assert data["changed_by"] == ["louder"] and data["sent_request"].sampling["temperature"] == 0.3
        assert data["sent_request"].messages[-1].content == "(be brief)"

    def orphans(request, call_next):
        request.messages.append(Message(role="tool", content="r", tool_call_id="call_9", tool_name="busca"))
        return call_next(request)

    @workflow(steps=[A], middlewares=[Middleware(name="orphaner", model=orphans)])
    class Broken:
        pass

    sent.clear()
    with pytest.raises(ConversationError, match="the request orphaner passed on is not a valid conversation"):
        await bootstrap(Broken).run("go")
    assert sent == []


async def test_a_tool_schema_a_middleware_changes_inside_is_recorded_and_stays_with_its_call():
    """request.tools[0]["function"]["description"] = ...: the schema was the agent's own, so the change
    reached every later call, and the journal (tools compared by identity) said no middleware changed
    the request, with the digest of the schemas as they came in."""
    described = []

    def model(messages, tools):
        described.append(tools[0]["function"]["description"])
        return "ok"

    def reworded(request, call_next):
        if request.turn == 1:
            request.tools[0]["function"]["description"] = "Search, briefly."
        return call_next(request)

    @agent(provider=FunctionProvider(model), prompt="p", tools=[_busca([])])
    class A:
        pass

    @workflow(steps=[A, A], middlewares=[Middleware(name="reworded", model=reworded)])
    class W:
        pass

    out, events = await _run(bootstrap(W), "go")
    assert described[0] == "Search, briefly." != described[1]  # the first call's change stayed with it
    starts, ends = chat_requests(events)
    assert ends[0]["changed_by"] == ["reworded"] and "changed_by" not in ends[1]
    assert ends[0]["sent_request"].tools_digest != starts[0].tools_digest == starts[1].tools_digest


async def test_a_tool_schema_holding_what_cannot_be_copied_still_runs_under_a_middleware():
    """A tool object's schema is used as given: one holding a lock failed every run with a model
    middleware ("cannot pickle '_thread.lock' object"), as the request's own copy was made."""
    import threading

    class Lookup:
        name, description = "lookup", "Look up."
        schema = {"type": "object", "properties": {"q": {"type": "string"}}, "x-lock": threading.Lock()}

        def execute(self, args):
            return "ok"

    told = []

    @agent(provider=FunctionProvider(lambda m, t: told.append(t) or "done"), prompt="p", tools=[Lookup()])
    class A:
        pass

    @workflow(steps=[A], middlewares=[Middleware(name="passes", model=lambda request, call_next: call_next(request))])
    class W:
        pass

    assert await bootstrap(W).run("go") == "done"
    assert told[0][0]["function"]["parameters"]["x-lock"] is Lookup.schema["x-lock"]


async def test_the_journal_names_the_tools_a_request_sends_not_the_ones_it_came_with():
    """A middleware's copy without a tool, and an agent's own run() with tools=[...]: the journal named
    the turn's tools (or none), not the ones the model was told of."""
    told = []

    def model(messages, tools):
        told.append(sorted(s["function"]["name"] for s in tools))
        return "ok"

    def no_busca(request, call_next):
        return call_next(request.model_copy(update={"tools": [s for s in request.tools
                                                               if s["function"]["name"] != "busca"]}))

    @tool(name="outra", description="Another.")
    def outra() -> str:
        return "x"

    @agent(provider=FunctionProvider(model), prompt="p", tools=[_busca([]), outra])
    class A:
        pass

    @workflow(steps=[A], middlewares=[Middleware(name="no_busca", model=no_busca)])
    class W:
        pass

    out, events = await _run(bootstrap(W), "go")
    (end,) = [e.data for e in events if e.type == "node.end" and e.kind == "chat"]
    assert told == [["outra"]] and end["sent_request"].tools == ["outra"]

    from flowtui import ChatRequest

    @agent(provider=FunctionProvider(model), prompt="p", tools=[_busca([]), outra])
    class Manual:
        async def run(self, input, ctx):
            request = ChatRequest(messages=[Message(role="user", content=input)], tools=[self.tools["busca"].schema])
            return (await self.provider.complete(request)).content

    @workflow(steps=[Manual])
    class Own:
        pass

    out, events = await _run(bootstrap(Own), "go")
    (start,) = [e.data for e in events if e.type == "node.start" and e.kind == "chat"]
    assert told[-1] == ["busca"] and start["request"].tools == ["busca"]


async def test_events_a_middleware_causes_name_it_as_their_origin():
    executed = []
    provider, _ = scripted(call("busca", q="x"), "fim")

    def count(invocation, call_next):
        invocation.ctx.chamadas = invocation.ctx.get("chamadas", 0) + 1
        return call_next(invocation)

    app = bootstrap(_flow(provider, executed))
    app.use(Middleware(name="contador", tool=count))
    out, events = await _run(app)
    assert [(e.value, e.origin) for e in events if e.type == "ctx.set" and e.name == "chamadas"] == \
        [(1, "middleware:contador")]


@pytest.mark.parametrize("body", ["return call_next(request).content and call_next", "call_next(request)",
                                  "return call_next(request)['content']"],
                         ids=["reads-the-reply", "drops-it", "indexes-the-reply"])
async def test_a_sync_model_middleware_that_uses_call_next_without_awaiting_it_is_told_how(body):
    """The README says sync methods work: one reading the reply failed with "'coroutine' object has no attribute
    'content'", and one dropping it printed Python's "coroutine ... was never awaited", raw."""
    import gc
    import warnings

    namespace: dict = {}
    exec(f"def model(request, call_next):\n    {body}", namespace)

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        pass

    @workflow(steps=[A], middlewares=[Middleware(name="audit", model=namespace["model"])])
    class W:
        pass

    events: list = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError, match=r"^middleware audit: model\(\) used what call_next\(...\) returned "
                                            r"without awaiting it: .* make it `async def model\(...\)`"):
            await bootstrap(W).run("go", on_event=events.append)
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)], [str(w.message) for w in caught]
    assert events[-1].type == "run.end" and events[-1].status == "failed"


async def test_an_async_middleware_that_raises_after_call_next_or_drops_it_is_said_as_such():
    """A guard raising PermissionError after call_next(...) was said as a TypeError telling it to be async def,
    which it was."""
    async def guard(request, call_next):
        call_next(request)
        raise PermissionError("not today")

    async def drops(request, call_next):
        call_next(request)
        return None

    for mw, raised, said in ((guard, PermissionError, "^not today$"),
                             (drops, TypeError, r"^middleware m: drops\(\) neither awaited nor returned what "
                                                r"call_next\(...\) gave")):
        @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
        class A:
            pass

        @workflow(steps=[A], middlewares=[Middleware(name="m", model=mw)])
        class W:
            pass

        with pytest.raises(raised, match=said):
            await bootstrap(W).run("go")


async def test_a_sync_model_middleware_returning_call_next_as_it_is_runs():
    seen = []

    class Audit:
        def model(self, request, call_next):
            seen.append(len(request.messages))
            return call_next(request)

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        pass

    @workflow(steps=[A], middlewares=[Audit()])
    class W:
        pass

    assert await bootstrap(W).run("go") == "ok" and seen == [2]


def test_a_middleware_hook_that_cannot_take_its_arguments_is_refused_at_load():
    """`def model(self, request)` loaded, and failed at the first call: "Audit.model() takes 2 positional
    arguments but 3 were given", with no line."""
    class Audit:
        def model(self, request):
            return request

    with pytest.raises(ConfigError, match=r"Audit.model\(request\) cannot be called as model\(request, "
                                          r"call_next\); define it as model\(self, request, call_next\)"):
        bootstrap(_flow(scripted("x")[0], [])).use(Audit())
    with pytest.raises(ConfigError, match=r"Middleware guard's tool= function \(invocation\) cannot be called"):
        @workflow(steps=[_flow(scripted("x")[0], [])],
                  middlewares=[Middleware(name="guard", tool=lambda invocation: 1)])
        class W:
            pass


def test_what_is_not_a_middleware_is_refused_naming_it():
    app = bootstrap(_flow(scripted("x")[0], []))
    with pytest.raises(ConfigError, match=r"ContextWindow is a class; pass an instance, e.g. ContextWindow\(...\)"):
        app.use(ContextWindow)
    with pytest.raises(ConfigError, match="is not a middleware: it needs at least one of tool"):
        app.use(object())
    with pytest.raises(ConfigError, match="give at least one of tool=, model=, setup=, dispose="):
        Middleware(name="nada")
    for name, said in ((123, "not int 123"), ("", "not empty")):  # (taken: the journal's origins said middleware:)
        with pytest.raises(ConfigError, match=f"name= is the text the panes and the journal call it by.*{said}"):
            Middleware(name=name, dispose=print)
    # a misspelled parameter or method: a bare TypeError, and the object's repr naming flowtui's module for the flow
    with pytest.raises(ConfigError, match=r"Middleware\(name='guard', ...\) has no parameter tools=; did you mean "
                                          r"tool=\? it takes name=, tool=, model=, setup=, dispose="):
        Middleware(name="guard", tools=print)

    class Audit:
        def modle(self, request, call_next):
            return call_next(request)

    with pytest.raises(ConfigError, match=r"^app.use\(...\): Audit\(\) is not a middleware: .*; did you mean "
                                          r"model\(\) for its modle\(\)\?$"):
        app.use(Audit())
    # a text is no misspelled middleware (told to write setup() for its strip()), and a hook set to a value is
    # said as such (told it needed at least one hook)
    with pytest.raises(ConfigError, match=r"'a string' is not a middleware: .*; or use Middleware\(name=.*\)$"):
        app.use("a string")

    class Numbered:
        model = 5

    with pytest.raises(ConfigError, match=r"Numbered.model is int 5, not a method; define it as "
                                          r"model\(self, request, call_next\)"):
        app.use(Numbered())

    class Summarize:  # a value of its own under a hook's name, beside a hook: a middleware all the same
        def __init__(self):
            self.model = "openai/gpt-4o-mini"

        async def tool(self, invocation, call_next):
            return await call_next(invocation)

    assert app.use(Summarize()).model == "openai/gpt-4o-mini"
    with pytest.raises(ConfigError, match=r"ContextWindow\(max_tokens=0\)"):
        ContextWindow(max_tokens=0)


async def test_setup_runs_once_async_before_the_first_run_and_dispose_when_the_app_closes():
    log = []

    class Plugin:
        name = "audit"

        async def setup(self, app):
            log.append("setup")
            app.subscribe(lambda e: log.append("seen run.start") if e.type == "run.start" else None)

        async def dispose(self):
            await asyncio.sleep(0)
            log.append("dispose audit")

    class Broken:
        def dispose(self):
            raise OSError("already closed")

    other = Middleware(name="other", dispose=lambda: log.append("dispose other"))
    W = _flow(scripted("a", "b", when_done="c")[0], [])
    async with bootstrap(W) as app:
        app.use(Plugin())
        app.use(Broken())
        app.use(other)
        await app.run("1")
        await app.run("2")
        with pytest.raises(OSError, match="already closed"):
            await app.aclose()
    # setup once, its subscription saw the first run; dispose once, last registered first
    assert log == ["setup", "seen run.start", "seen run.start", "dispose other", "dispose audit"]
    # closed, it runs no more through the middlewares it disposed (it did), nor takes another (never disposed)
    for closed in (lambda: app.prepare("3"), lambda: app.use(Middleware(name="late", dispose=lambda: None))):
        with pytest.raises(ConfigError, match=r"this app is closed \(its middlewares were disposed.*bootstrap\(W\) "
                                              "again for another run"):
            closed()
    assert log[-1] == "dispose audit"


async def test_workflow_middlewares_apply_to_every_app_and_wrap_child_workflows_too():
    log = []

    @tool(name="busca", schema=Q)
    class Busca:
        def execute(self, args: Q = Input()):
            return "filho achou"

    @agent(provider=scripted(call("busca", q="y"), "filho pronto")[0], tools=[Busca])
    class ChildAgent:
        pass

    @workflow(steps=[loop([ChildAgent], until=until_answered, max_iterations=3)])
    class Child:
        pass

    @tool(name="delegar", schema=Q)
    class Delegar:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: Q = Input()):
            return await self.runtime.run(Child, input=args.q)

    @agent(provider=scripted(call("delegar", q="sub"), "pai pronto")[0], tools=[Delegar])
    class Parent:
        pass

    @workflow(steps=[loop([Parent], until=until_answered, max_iterations=3)], middlewares=[Tracer("wf", log)])
    class W:
        pass

    out, events = await _run(bootstrap(W))
    assert out == "pai pronto"
    assert [x for x in log if ">tool" in x] == ["wf>tool:delegar", "wf>tool:busca"]


# --- ContextWindow -------------------------------------------------------------------------

def test_context_window_drops_the_oldest_turns_never_a_tool_result_without_its_call():
    from flowtui.runtime.context_window import fit
    from flowtui.runtime.messages import ToolCall

    one = lambda m: 1  # noqa: E731 - every message costs one token
    calls = (ToolCall(name="busca", args={}, id="c1"), ToolCall(name="busca", args={}, id="c2"))
    messages = [Message(role="system", content="prompt"), Message(role="system", content="memory"),
                Message(role="user", content="u1"),
                Message(role="assistant", tool_calls=calls),
                Message(role="tool", content="r1", tool_call_id="c1"),
                Message(role="tool", content="r2", tool_call_id="c2"),
                Message(role="assistant", content="a1"), Message(role="user", content="u2")]
    assert fit(messages, 100, one) == messages
    kept = fit(messages, 6, one)  # u1 goes, then the call and both its results go together
    assert [m.content for m in kept] == ["prompt", "memory", "a1", "u2"]
    kept = fit(messages, 7, one)
    assert [m.content for m in kept] == ["prompt", "memory", "", "r1", "r2", "a1", "u2"]
    assert [m.content for m in fit(messages, 1, one)] == ["prompt", "memory", "u2"]  # the latest turn always goes


async def test_context_window_trims_what_is_sent_keeps_history_and_shows_it_on_the_chat_node():
    from flowtui.runtime.fold import RunView

    sent = []

    def model(messages, tools):
        sent.append([m.content for m in messages])
        return f"resposta {len(sent)} " + "x" * 40

    @agent(provider=FunctionProvider(model), prompt="Seja breve.")
    class A:
        pass

    @workflow(steps=[A, A, A], middlewares=[ContextWindow(max_tokens=40)])
    class W:
        pass

    app = bootstrap(W)
    view = RunView()
    app.subscribe(view.apply)
    out, events = await _run(app, "pergunta " + "y" * 40)
    assert sent[0] == ["Seja breve.", "pergunta " + "y" * 40]
    assert sent[2][0] == "Seja breve." and len(sent[2]) == 2  # only the latest turn fits beside the prompt
    assert len(view.history) == 4  # the history keeps everything
    chats = [e.data for e in events if e.type == "node.end" and e.kind == "chat"]
    assert "trimmed" not in chats[0]
    assert chats[2]["trimmed"] == {"dropped": 2, "by": ["ContextWindow"]} and chats[2]["sent"] == 2
    last_chat = [n for n in view.nodes.values() if n.kind == "chat"][-1]
    assert last_chat.data["trimmed"]["by"] == ["ContextWindow"]
    assert len(view.model_sees()) == 5  # prompt + 4: before the middleware; the node says what it left out


async def test_a_context_window_counter_that_is_no_counter_is_named():
    # it failed on "unsupported operand type(s) for +: 'int' and 'str'", with no word of ContextWindow
    with pytest.raises(ConfigError, match=r"ContextWindow\(count_tokens=3\): give a function of one message"):
        ContextWindow(max_tokens=40, count_tokens=3)

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        pass

    @workflow(steps=[A], middlewares=[ContextWindow(max_tokens=40, count_tokens=lambda m: "x")])
    class W:
        pass

    with pytest.raises(TypeError, match=r"ContextWindow: count_tokens returned str 'x' for a user message, not its "
                                        r"number of tokens"):
        await bootstrap(W).run("go")

    def raises(message):
        return message.usage["tok"]

    @workflow(steps=[A], middlewares=[ContextWindow(max_tokens=40, count_tokens=raises)])
    class Raising:
        pass

    with pytest.raises(ConfigError, match=r"^ContextWindow: count_tokens raised AttributeError: .* for a user message$"):
        await bootstrap(Raising).run("go")  # (a bare AttributeError, naming neither)


# --- inside run(): self.prompt, self.provider, self.tools ----------------------------------------

async def test_run_gets_prompt_provider_and_tools_that_go_through_the_app():
    from flowtui import ChatRequest

    log, executed = [], []

    def model(messages, tools):
        return f"modelo viu {len(messages)} mensagens e {len(tools)} tool"

    @agent(provider=FunctionProvider(model), prompt="Você é o agente.", tools=[_busca(executed)])
    class Manual:
        async def run(self, input, ctx):
            found = await self.tools["busca"](q=input)
            request = ChatRequest(messages=[Message(role="system", content=self.prompt),
                                            Message(role="user", content=found.content)],
                                  tools=[t.schema for t in self.tools.values()])
            reply = await self.provider.complete(request)
            return reply.content

    @workflow(steps=[Manual])
    class W:
        pass

    app = bootstrap(W)
    app.use(Tracer("mw", log))
    out, events = await _run(app, "ctx")
    assert out == "modelo viu 2 mensagens e 1 tool" and executed == ["ctx"]
    assert log == ["mw>tool:busca", "mw<tool", "mw>model:Manual", "mw<model"]
    kinds = [(e.kind, e.name) for e in events if e.type == "node.start"]
    assert kinds == [("workflow", "W"), ("agent", "Manual"), ("tool", "busca"), ("chat", "Manual")]
    assert events[-1].totals.chat_calls == 1 and events[-1].totals.tool_calls == 1
    assert [e for e in events if e.type == "state.append" and e.item.role == "tool"] == []  # no history


def test_a_plugin_whose_setup_raises_is_a_load_error_naming_it(tmp_path):
    from flowtui import FlowLoadError
    from flowtui.runtime.loader import load_flow

    path = tmp_path / "flow.py"
    path.write_text(
        "from flowtui import FunctionProvider, Middleware, agent, workflow\n"
        "def setup(app):\n"
        "    raise KeyError('METRICS_URL')\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'ok'))\n"
        "class A: pass\n"
        "@workflow(steps=[A], middlewares=[Middleware(name='metrics', setup=setup)])\n"
        "class W: pass\n")
    with pytest.raises(FlowLoadError, match=r"metrics.setup\(app\) raised KeyError: 'METRICS_URL'") as info:
        load_flow(str(path))
    assert info.value.cls == "W"


async def test_an_async_setup_that_raises_fails_the_run_naming_it_and_every_later_run_of_the_app(tmp_path):
    """It was raised before run.start, bare (a ValueError naming nothing), leaving an empty journal; the
    next run went through the middleware its setup never made. Under flowtui run the run never ended."""
    through = []

    async def setup(app):
        raise ValueError("async setup boom")

    async def model(request, call_next):
        through.append("model")
        return await call_next(request)

    W = _flow(scripted("a", when_done="b")[0], [], middlewares=[Middleware(name="metrics", setup=setup, model=model)])
    app = bootstrap(W)
    for n in (1, 2):
        events = []
        with pytest.raises(ConfigError, match=r"^metrics.setup\(app\) raised ValueError: async setup boom$"):
            await app.run("go", on_event=events.append, journal=tmp_path / f"{n}.jsonl")
        assert [e.type for e in events] == ["run.start", "run.end"]
        assert events[-1].status == "failed" and "metrics.setup(app) raised ValueError" in events[-1].error
        assert len((tmp_path / f"{n}.jsonl").read_text().splitlines()) == 2  # the journal says it whole
    assert through == []


def test_flowtui_run_ends_a_run_whose_async_setup_raises_and_names_it(tmp_path):
    import subprocess
    import sys

    flow = tmp_path / "flow.py"
    flow.write_text(
        "from flowtui import FunctionProvider, Middleware, agent, workflow\n"
        "async def setup(app):\n"
        "    raise ValueError('async setup boom')\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'ok'))\n"
        "class A: pass\n"
        "@workflow(steps=[A], middlewares=[Middleware(name='metrics', setup=setup)])\n"
        "class W: pass\n")
    done = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", str(flow),
                           "--input", "hi", "--journal", "j.jsonl"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60)
    assert done.returncode == 1, done.stderr
    assert "the run failed: ConfigError: metrics.setup(app) raised ValueError: async setup boom" in done.stderr
    assert "Traceback" not in done.stderr
    assert [line.split('"type":"')[1].split('"')[0] for line in (tmp_path / "j.jsonl").read_text().splitlines()] \
        == ["run.start", "run.end"]


async def test_a_tool_middleware_that_forgets_to_return_fails_the_call_naming_it():
    """`await call_next(inv)` without return: every tool result the model read was blank, and nothing said so."""
    executed = []

    class Audit:
        async def tool(self, invocation, call_next):
            await call_next(invocation)

    W = _flow(scripted(call("busca", q="x"), "fim")[0], executed)
    app = bootstrap(W)
    app.use(Audit())
    out, events = await _run(app)
    assert executed == ["x"]  # the tool ran; what the middleware gave back is the fault
    assert tool_results(events) == [("Tool busca failed: tool middleware 'Audit' returned None, not a ToolOutput "
                                     "(return await call_next(invocation), or a ToolOutput of your own)", True)]


@pytest.mark.parametrize("update,said", [
    ({"content": 5}, "returned a ChatReply whose content is int 5: Input should be a valid string"),
    ({"tool_calls": [{"name": "busca", "args": {"q": "x"}}]},
     "returned a ChatReply whose tool_calls hold a dict, not a ToolCall(name=..., args=..., id=...)"),
    # (an object no model sends: its repr raised in the runtime, or a cycle ended in a RecursionError)
    ({"tool_calls": [ToolCall(name="busca", args={"q": object()})]},
     "returned a tool call 'busca' whose args['q'] is object; a model's tool-call arguments are JSON"),
])
async def test_a_model_middleware_whose_copied_reply_holds_a_wrong_value_fails_naming_it(update, said):
    """model_copy(update=...) is not validated: the run failed on a raw pydantic error about a Message,
    or on "'dict' object has no attribute 'id'", neither naming the middleware."""

    class Rewrite:
        async def model(self, request, call_next):
            return (await call_next(request)).model_copy(update=update)

    app = bootstrap(_flow(scripted("a", when_done="b")[0], []))
    app.use(Rewrite())
    with pytest.raises(TypeError) as info:
        await _run(app)
    assert str(info.value).startswith(f"model middleware 'Rewrite' {said}")


async def test_a_tool_middleware_whose_copied_output_holds_a_wrong_value_fails_the_call_naming_it():
    """It failed the whole run with a raw pydantic error, where a middleware's failure fails the call."""

    class Rewrite:
        async def tool(self, invocation, call_next):
            return (await call_next(invocation)).model_copy(update={"content": 42})

    app = bootstrap(_flow(scripted(call("busca", q="x"), "fim")[0], []))
    app.use(Rewrite())
    out, events = await _run(app)
    assert out == "fim"
    assert tool_results(events) == [("Tool busca failed: tool middleware 'Rewrite' returned a ToolOutput whose "
                                     "content is int 42: Input should be a valid string", True)]


class _Generator:
    def tool(self, invocation, call_next):
        yield "checking"
        yield call_next(invocation)


class _Number:
    async def tool(self, invocation, call_next):
        await call_next(invocation)
        return 42


@pytest.mark.parametrize("middleware, said", [
    (_Generator(), "tool middleware '_Generator' returned generator, not a ToolOutput or a str (return await "
                   "call_next(invocation), or ToolOutput(content=...) of your own); a method with yield in it is a "
                   "generator: return await call_next(invocation) instead"),
    (_Number(), "tool middleware '_Number' returned int, not a ToolOutput or a str (return await "
                "call_next(invocation), or ToolOutput(content=...) of your own)"),
])
async def test_a_tool_middleware_that_returns_neither_an_output_nor_a_str_fails_the_call_naming_it(middleware, said):
    """A generator middleware: the model read '["checking", "<coroutine object ...>"]' as the result, the tool never
    ran, its node ✓, and a RuntimeWarning on stderr; 42 was read as "42"."""
    executed = []
    W = _flow(scripted(call("busca", q="x"), "fim")[0], executed)
    app = bootstrap(W)
    app.use(middleware)
    out, events = await _run(app)
    assert tool_results(events) == [(f"Tool busca failed: {said}", True)]


async def test_a_dispose_raising_a_base_exception_of_the_flows_own_is_reported_and_the_others_still_run():
    """A class of the flow's own deriving from BaseException: the dispose() of the middlewares registered before
    it never ran, and flowtui run said nothing, exit 0."""
    log = []

    class Fatal(BaseException):
        pass

    def broken():
        raise Fatal("dispose base")

    W = _flow(scripted("a", when_done="c")[0], [])
    app = bootstrap(W)
    app.use(Middleware(name="closer", dispose=lambda: log.append("closer")))
    app.use(Middleware(name="bad", dispose=broken))
    await app.run("1")
    with pytest.raises(Fatal, match="dispose base"):
        await app.aclose()
    assert log == ["closer"]


async def test_a_middleware_whose_name_raises_is_refused_naming_it():
    """flowtui run printed a traceback of flowtui's own and 'the worker process ended before the flow loaded';
    from Python, app.use took it and the run raised a bare RuntimeError, no journal written."""
    class Named:
        @property
        def name(self):
            raise RuntimeError("no name")

        async def tool(self, invocation, call_next):
            return await call_next(invocation)

    app = bootstrap(_flow(scripted("a")[0], []))
    with pytest.raises(ConfigError, match=r"^app\.use\(\.\.\.\): Named\.name raised RuntimeError: no name; a "
                                          r"middleware's name is a str"):
        app.use(Named())


async def test_the_same_middleware_registered_twice_is_refused_naming_it():
    """It was set up twice, changed each request twice and was disposed twice."""
    log = []

    class Tag:
        async def model(self, request, call_next):
            log.append("model")
            return await call_next(request)

        def setup(self, app):
            log.append("setup")

        def dispose(self):
            log.append("dispose")

    tag = Tag()
    app = bootstrap(_flow(scripted("a")[0], []))
    app.use(tag)
    with pytest.raises(ConfigError, match=r"^app\.use\(\.\.\.\): Tag\(\) is already in use \(the middleware #1\); "
                                          r"a middleware is set up, wraps each call and is disposed once"):
        app.use(tag)
    app.use(Tag())  # another instance is another middleware
    await app.run("1")
    await app.aclose()
    assert log == ["setup", "setup", "model", "model", "dispose", "dispose"]
    with pytest.raises(ConfigError, match=r"^@workflow\(middlewares=\[\.\.\.\]\) of W: Tag\(\) is already in use "
                                          r"\(the middleware #2\)"):
        _flow(scripted("a")[0], [], middlewares=[Tag(), tag, tag])


@pytest.mark.parametrize("change, said", [
    ("request.sampling = None", "a request whose sampling is NoneType None, not a dict of sampling parameters"),
    ("request.tools = None", "a request whose tools is NoneType None, not a list of tool schemas (dicts)"),
    ("request.messages = None", "a request whose messages hold NoneType None; request.messages is a list of Message"),
    ("request = 'not a request'", "str 'not a request', not a ChatRequest (pass the request it got"),
    ("request = request.model_copy(update={'messages': [*request.messages[:-1], "
     "request.messages[-1].model_copy(update={'content': 5})]})",
     "a request whose messages[1].content is int 5: Input should be a valid string"),
    ("request.messages.append(request.messages[-1].model_copy(update={'role': 'wizard'}))",
     "a request whose messages[2].role is str 'wizard': Input should be 'system', 'user', 'assistant' or 'tool'"),
])
async def test_a_model_middleware_passing_on_a_request_of_the_wrong_shape_is_named(change, said):
    """Changed in place or copied without validation, the request failed the run with Python's own words
    ("'NoneType' object is not iterable", naming no middleware), or reached the provider: a message of content 5
    or role "wizard" was sent, and journaled as sent."""
    sent = []

    async def odd(request, call_next):
        exec(change, {}, scope := {"request": request})
        return await call_next(scope["request"])

    @agent(provider=FunctionProvider(lambda m, t: sent.append(m) or "ok"), prompt="p")
    class A:
        pass

    @workflow(steps=[A], middlewares=[Middleware(name="odd", model=odd)])
    class W:
        pass

    with pytest.raises(TypeError) as caught:
        await bootstrap(W).run("go")
    assert str(caught.value).startswith(f"model middleware 'odd' passed on {said}"), caught.value
    assert sent == []


@pytest.mark.parametrize("passed, said", [
    ("invocation.replace(args='notadict')",
     "tool middleware 'guard' passed on an invocation whose args is str 'notadict', not the call's arguments"),
    ("'x'", "tool middleware 'guard' passed on str 'x', not a ToolInvocation (pass the invocation it got"),
])
async def test_a_tool_middleware_passing_on_no_invocation_fails_the_call_naming_it(passed, said):
    """The model read pydantic's four lines ("1 validation error for ToolCall ... For further information visit
    https://errors.pydantic.dev/...") or "'str' object has no attribute 'name'", naming no middleware."""
    executed = []

    async def guard(invocation, call_next):
        return await call_next(eval(passed))

    W = _flow(scripted(call("busca", q="x"), "fim")[0], executed)
    app = bootstrap(W)
    app.use(Middleware(name="guard", tool=guard))
    out, events = await _run(app)
    assert executed == []
    ((text, is_error),) = tool_results(events)
    assert is_error and text.startswith(f"Tool busca failed: {said}"), text
