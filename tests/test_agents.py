"""Agents: one turn, the five hooks (replace or keep), the run() escape hatch, prompts, promotion."""

import inspect
import os
import re

import pytest
from pydantic import BaseModel

from flowtui import (
    AgentContext, FunctionProvider, Input, PromptNotFoundError, ToolCall, agent, bootstrap, loop, tool, workflow,
)


class Args(BaseModel):
    q: str


@tool(name="busca", description="search", schema=Args)
class Busca:
    def execute(self, args: Args = Input()):
        return f"achei {args.q}"


async def run_collect(W, input="oi"):
    app = bootstrap(W)
    events = []
    app.subscribe(events.append)
    out = await app.run(input)
    return out, events


async def test_hook_order_of_a_turn_with_a_tool():
    calls = []

    def model(messages, tools):
        return {"content": "vou buscar", "tool_calls": [{"name": "busca", "args": {"q": "x"}}]}

    @agent(provider=FunctionProvider(model), prompt="p", tools=[Busca])
    class A:
        def before_prompt(self, prompt, ctx):
            calls.append("before_prompt")

        async def before_tool(self, call, ctx):
            calls.append(f"before_tool:{call.name}")

        def after_tool(self, result, ctx):
            calls.append(f"after_tool:{result.output}")

        async def after_response(self, response, ctx):
            calls.append(f"after_response:{response}")

    @workflow(steps=[A])
    class W:
        pass

    out, events = await run_collect(W)
    assert calls == ["before_prompt", "before_tool:busca", "after_tool:achei x", "after_response:achei x"]
    assert out == "achei x"  # a turn that ran a tool answers with the tool's text
    seq = [(e.type, getattr(e, "kind", None) or getattr(e, "bucket", None) or getattr(e, "name", None))
           for e in events]
    assert seq == [
        ("run.start", None), ("state.append", "history"),
        ("node.start", "workflow"), ("node.start", "agent"),
        ("node.start", "chat"), ("node.end", "chat"),
        ("state.append", "history"),                      # the assistant turn
        ("node.start", "tool"), ("state.append", "history"), ("node.end", "tool"),  # the tool turn
        ("ctx.set", "turn"), ("ctx.set", "output"),
        ("node.end", "agent"), ("node.end", "workflow"), ("run.end", None),
    ]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    tool_msg = [e.item for e in events if e.type == "state.append"][-1]
    assert (tool_msg.role, tool_msg.tool_name, tool_msg.content, tool_msg.tool_call_id) == (
        "tool", "busca", "achei x", "call_1_0")


async def test_returning_a_value_replaces_and_none_keeps():
    seen = []

    def model(messages, tools):
        seen.append(messages[0].content)
        return {"content": "", "tool_calls": [{"name": "busca", "args": {"q": "original"}}]}

    @agent(provider=FunctionProvider(model), prompt="prompt original", tools=[Busca])
    class A:
        def before_prompt(self, prompt, ctx):
            return prompt + " + extra"

        def before_tool(self, call, ctx):
            return ToolCall(name=call.name, args={"q": "trocado"})

        def after_tool(self, result, ctx):
            return None  # keep

        def after_response(self, response, ctx: AgentContext):
            return response.upper()

    @workflow(steps=[A])
    class W:
        pass

    out, events = await run_collect(W)
    assert seen == ["prompt original + extra"]
    assert out == "ACHEI TROCADO"
    history = [e.item for e in events if e.type == "state.append"]
    assert history[-1].content == "achei trocado"  # the history keeps what the tool said


@pytest.mark.parametrize("hook, returned, expect", [
    ("before_prompt", ["x"], "A.before_prompt returned list ['x'] (defined at {file}:{line}); return the prompt "
                             "as a str, or None to keep it"),
    ("after_response", True, "A.after_response returned bool True (defined at {file}:{line}); return a str to "
                             "replace ctx.output, or None to keep it"),
    ("after_tool", {"n": 1}, "A.after_tool returned dict {{'n': 1}} (defined at {file}:{line}); return a str or a "
                             "ToolOutput to replace the tool's output, or None to keep it"),
    # (the call ran as the model asked, the hook's dict unsaid)
    ("before_tool", {"name": "busca"}, "A.before_tool returned dict {{'name': 'busca'}} (defined at {file}:{line}); "
                                       "return a ToolCall to replace the call, or None to keep it"),
])
async def test_a_hook_returning_something_not_text_fails_the_run_naming_it(hook, returned, expect):
    """str() of it went to the model or became the run's output in silence (the prompt "['x']")."""
    seen = []

    def model(messages, tools):
        seen.append(messages[0].content)
        return {"content": "", "tool_calls": [{"name": "busca", "args": {"q": "x"}}]} if len(seen) == 1 else "ok"

    def returns(self, value, ctx):
        return returned

    A = agent(provider=FunctionProvider(model), prompt="p", tools=[Busca])(type("A", (), {hook: returns}))

    @workflow(steps=[A])
    class W:
        pass

    app = bootstrap(W)
    events = []
    app.subscribe(events.append)
    with pytest.raises(TypeError) as info:
        await app.run("oi")
    line = inspect.getsourcelines(returns)[1]
    assert str(info.value) == expect.format(file=os.path.relpath(__file__), line=line)
    assert events[-1].type == "run.end" and events[-1].status == "failed"
    assert "['x']" not in seen  # the model never got str() of it


async def test_sync_hook_with_fewer_parameters_like_the_seed():
    got = []

    @agent(provider=FunctionProvider(lambda m, t: "APROVADO"), prompt="p")
    class A:
        def after_response(self, resposta):
            got.append(resposta)

    @workflow(steps=[A])
    class W:
        pass

    await run_collect(W)
    assert got == ["APROVADO"]


async def test_on_error_string_recovers_and_none_reraises():
    def broken(messages, tools):
        raise RuntimeError("model down")

    @agent(provider=FunctionProvider(broken), prompt="p")
    class Recovers:
        def on_error(self, error, ctx):
            return f"fallback after {error}"

    @workflow(steps=[Recovers])
    class W:
        pass

    out, events = await run_collect(W)
    assert out == "fallback after model down"
    agent_end = [e for e in events if e.type == "node.end" and e.kind == "agent"][0]
    assert agent_end.status == "error" and agent_end.data["recovered"] is True
    assert events[-1].status == "finished"
    # said where the ✗ is drawn (flowtui run's tree, the app's node tree): it read as a failed agent
    import io

    from flowtui.runtime.cli import TreePrinter
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.node_tree import node_label

    out_text, view = io.StringIO(), RunView()
    tree = TreePrinter(out_text)
    for ev in events:
        tree(ev)
        view.apply(ev)
    assert re.search(r"◂ agent Recovers \S+ ✗  \(recovered by on_error: what it returned is the agent's answer\)",
                     out_text.getvalue()), out_text.getvalue()
    label = node_label(view.nodes[agent_end.node_id]).plain
    assert label.startswith("✗ agent Recovers") and label.endswith("(recovered by on_error)"), label

    @agent(provider=FunctionProvider(broken), prompt="p")
    class Gives:
        def on_error(self, error, ctx):
            return None

    @workflow(steps=[Gives])
    class W2:
        pass

    app = bootstrap(W2)
    ends = []
    app.subscribe(lambda e: ends.append(e) if e.type == "run.end" else None)
    with pytest.raises(RuntimeError, match="model down"):
        await app.run("x")
    assert ends[0].status == "failed"
    assert re.fullmatch(r"RuntimeError: model down \(at tests/test_agents\.py:\d+ in broken\)", ends[0].error)


async def test_run_escape_hatch_takes_over_without_hooks():
    called = []

    @agent(provider=FunctionProvider(lambda m, t: pytest.fail("no model call")), prompt="p")
    class Custom:
        def before_prompt(self, prompt, ctx):
            called.append("hook")

        async def run(self, input, ctx):
            ctx.state.append("memory", f"input was {input}")
            return "custom output"

    @workflow(steps=[Custom])
    class W:
        pass

    out, events = await run_collect(W, input="abc")
    assert out == "custom output" and called == []
    assert [e.item for e in events if e.type == "state.append" and e.bucket == "memory"] == ["input was abc"]


async def test_promotion_moves_the_plan_from_history_to_memory_for_the_next_agent():
    requests = []

    def model(messages, tools):
        requests.append([(m.role, m.content) for m in messages])
        return "1. plan step" if len(requests) == 1 else "escrito"

    @agent(provider=FunctionProvider(model), prompt="planner")
    class Planner:
        def after_response(self, plano, ctx):
            ctx.state.set("history", ctx.state.history[:-1])
            ctx.state.append("memory", f"Plano a seguir:\n{plano}")
            ctx.plan = plano

    @agent(provider=FunctionProvider(model), prompt="writer")
    class Writer:
        pass

    @workflow(steps=[Planner, Writer])
    class W:
        pass

    out, events = await run_collect(W, input="Olá")
    assert requests[1] == [("system", "writer"), ("system", "Plano a seguir:\n1. plan step"), ("user", "Olá")]
    promo = [(e.type, getattr(e, "bucket", getattr(e, "name", None)), e.origin) for e in events
             if e.type in ("state.set", "state.append", "ctx.set")][:5]
    assert promo == [
        ("state.append", "history", "input"),
        ("state.append", "history", "agent:Planner"),
        ("state.set", "history", "hook:Planner.after_response"),
        ("state.append", "memory", "hook:Planner.after_response"),
        ("ctx.set", "plan", "hook:Planner.after_response"),
    ]


def test_prompt_path_is_relative_to_the_defining_file(tmp_path):
    (tmp_path / "x.agent.md").write_text("You are X.\n")
    src = tmp_path / "flow.py"
    src.write_text(
        "from flowtui import FunctionProvider, agent\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='./x.agent.md')\n"
        "class X: pass\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='./missing.agent.md')\n"
        "class Y: pass\n")
    ns = {}
    with pytest.raises(PromptNotFoundError) as info:
        exec(compile(src.read_text(), str(src), "exec"), ns)
    assert ns["X"].__flowtui__.prompt == "You are X."
    assert str(tmp_path / "missing.agent.md") in str(info.value)
    assert info.value.cls == "Y"


async def test_a_recovered_turn_is_the_turn_until_answered_sees():
    from flowtui import loop, until_answered

    replies = iter([{"content": "", "tool_calls": [{"name": "busca", "args": {"q": "x"}}]}, RuntimeError("down")])

    def model(messages, tools):
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    @agent(provider=FunctionProvider(model), prompt="p", tools=[Busca])
    class A:
        def on_error(self, error, ctx):
            return "fallback"

    @workflow(steps=[loop(steps=[A], until=until_answered, max_iterations=5)])
    class W:
        pass

    out, events = await run_collect(W)
    assert out == "fallback"
    turns = [e.value for e in events if e.type == "ctx.set" and e.name == "turn"]
    assert turns[-1]["called_tool"] is False and turns[-1]["response"] == "fallback"
    loop_end = [e for e in events if e.type == "node.end" and e.kind == "loop"][0]
    assert loop_end.data["iterations"] == 2 and loop_end.data["stopped_by"] == "until"


# --- the run() escape hatch is a turn; on_error's string is the agent's speech --------------

async def test_a_run_escape_hatch_is_a_turn_that_called_no_tool_so_until_answered_ends_the_loop():
    from flowtui import loop, until_answered

    runs = []

    calls_busca = {"content": "", "tool_calls": [{"name": "busca", "args": {"q": "a"}}]}

    @agent(provider=FunctionProvider(lambda m, t: calls_busca), prompt="p", tools=[Busca])
    class CallsATool:  # leaves a stale ctx.turn with called_tool=True behind
        pass

    @agent(provider=FunctionProvider(lambda m, t: pytest.fail("no model call")))
    class Custom:
        def run(self, input, ctx):
            runs.append(ctx.turn.agent)  # the turn before this one
            return "pronto"

    @workflow(steps=[CallsATool, loop([Custom], until=until_answered, max_iterations=5)])
    class W:
        pass

    out, events = await run_collect(W)
    assert out == "pronto"
    assert runs == ["CallsATool"]  # one iteration: the loop ended on Custom's own turn
    turns = [e.value for e in events if e.type == "ctx.set" and e.name == "turn"]
    assert turns[-1] == {"agent": "Custom", "called_tool": False, "tool_name": None, "tool_error": False,
                         "tool_call_source": None, "response": "pronto"}
    loop_end = [e for e in events if e.type == "node.end" and e.kind == "loop"][0]
    assert (loop_end.data["iterations"], loop_end.data["stopped_by"]) == (1, "until")


async def test_on_errors_string_enters_history_as_the_agents_reply_for_the_next_agent():
    seen = []

    def broken(messages, tools):
        raise RuntimeError("model down")

    def next_model(messages, tools):
        seen.append([(m.role, m.content) for m in messages])
        return "ok"

    @agent(provider=FunctionProvider(broken), prompt="first")
    class First:
        def on_error(self, error, ctx):
            return "Não consegui agora; siga sem mim."

    @agent(provider=FunctionProvider(next_model), prompt="second")
    class Second:
        pass

    @workflow(steps=[First, Second])
    class W:
        pass

    out, events = await run_collect(W, input="Olá")
    assert seen == [[("system", "second"), ("user", "Olá"), ("assistant", "Não consegui agora; siga sem mim.")]]
    appended = [(e.item.role, e.item.agent, e.origin) for e in events
                if e.type == "state.append" and e.bucket == "history"]
    assert appended[1] == ("assistant", "First", "hook:First.on_error")


async def test_on_error_after_a_tool_call_answers_the_calls_left_unanswered_before_its_speech():
    seen = []

    def model(messages, tools):
        if not seen:
            seen.append(None)
            return {"content": "", "tool_calls": [{"name": "busca", "args": {"q": "a"}},
                                                  {"name": "busca", "args": {"q": "b"}}]}
        seen.append([(m.role, m.tool_call_id) for m in messages])
        return "fim"

    @agent(provider=FunctionProvider(model), prompt="p", tools=[Busca])
    class A:
        def after_tool(self, result, ctx):
            raise RuntimeError("hook bug")  # the first call ran; neither result joined history

        def on_error(self, error, ctx):
            return "recuperado"

    @agent(provider=FunctionProvider(model), prompt="q")
    class B:
        pass

    @workflow(steps=[A, B])
    class W:
        pass

    out, events = await run_collect(W)
    history = [e.item for e in events if e.type == "state.append" and e.bucket == "history"]
    ids = [c.id for c in history[1].tool_calls]
    assert [(m.role, m.tool_call_id, m.is_error) for m in history[1:]] == [
        ("assistant", None, False),
        ("tool", ids[0], True),  # each call answered, so B's model gets a valid conversation
        ("tool", ids[1], True),
        ("assistant", None, False),
        ("assistant", None, False),  # B's reply
    ]
    # the first call's tool ran (after_tool raised after it): "was not run" would have it done again
    assert history[2].content.startswith("Tool call busca gave no result: the turn failed (RuntimeError: hook bug")
    assert "was not run" in history[3].content and "hook bug" in history[3].content
    assert history[4].content == "recuperado"
    assert seen[1] == [("system", None), ("user", None), ("assistant", None), ("tool", ids[0]), ("tool", ids[1]),
                       ("assistant", None)]


# --- a provider factory: a function called once per run ------------------------------------

async def test_a_provider_factory_is_called_once_per_run_and_shared_by_its_agents():
    made = []

    def per_tenant():
        n = len(made) + 1
        made.append(n)
        return FunctionProvider(lambda m, t: f"provider {n}")

    @agent(provider=per_tenant)
    class A:
        pass

    @agent(provider=per_tenant)
    class B:
        pass

    @workflow(steps=[A, B])
    class W:
        pass

    app = bootstrap(W)
    assert made == []  # not at import, not at bootstrap
    assert await app.run("x") == "provider 1"
    assert await app.run("y") == "provider 2"
    assert made == [1, 2]


async def test_a_lambda_provider_works_and_a_bad_factory_is_named():
    from flowtui import ConfigError

    @agent(provider=lambda: FunctionProvider(lambda m, t: "from a lambda"))
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    assert await bootstrap(W).run("x") == "from a lambda"

    with pytest.raises(ConfigError, match="this function needs key"):
        @agent(provider=lambda key: FunctionProvider(lambda m, t: key))
        class NeedsArgs:
            pass

    @agent(provider=lambda: "not a provider")
    class Wrong:
        pass

    @workflow(steps=[Wrong])
    class W2:
        pass

    with pytest.raises(ConfigError, match=r"Wrong: the provider function .* returned 'not a provider', not a Provider"):
        await bootstrap(W2).run("x")


async def test_an_error_with_a_huge_message_is_said_cut_in_each_end_it_is_in():
    """A hook raising an exception with a 10 MB message: 20 MB on flowtui run's stderr and 40 MB of
    journal, the message copied into the end of every node it ended and the run's."""
    class Huge(Exception):
        def __str__(self):
            return "H" * 10_000_000

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class Raises:
        def after_response(self, response, ctx):
            raise Huge()

    @workflow(steps=[loop(steps=[Raises], max_iterations=2)])
    class W:
        pass

    app = bootstrap(W)
    errors = []
    app.subscribe(lambda e: errors.append(e.error) if e.type in ("node.end", "run.end") and e.error else None)
    with pytest.raises(Huge):
        await app.run("x")
    assert len(errors) == 4  # the agent, the loop, the workflow and the run
    for error in errors:
        assert len(error) < 5_000 and "H" * 4096 + "… (10,000,000 characters, cut) (at tests/test_agents.py:" in error



@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt(), type("Boom", (BaseException,), {})("x")])
async def test_a_tool_that_raises_a_base_exception_ends_the_run_with_every_call_answered(raised):
    """SystemExit, KeyboardInterrupt or a BaseException of the flow's own from a tool ended the run with the
    reply's calls unanswered: its snapshot was refused when loaded ("history[1] makes call_1_0, call_1_1, which
    no tool message answers"), and so was a fork from its end. A FatalToolError's answered them already."""
    def model(messages, tools):
        if not any(m.role == "tool" for m in messages):
            return {"content": "", "tool_calls": [{"name": "quebra", "args": {}}, {"name": "depois", "args": {}}]}
        return "fim"

    @tool
    def quebra() -> str:
        """Raises."""
        raise raised

    @tool
    def depois() -> str:
        """Never runs."""
        return "depois"

    @agent(provider=FunctionProvider(model), prompt="p", tools=[quebra, depois])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    events: list = []
    with pytest.raises(type(raised)):
        await bootstrap(W).run("go", on_event=events.append)
    assert events[-1].type == "run.end" and events[-1].status == "failed"
    told = [e.item.content for e in events if e.type == "state.append" and e.item.role == "tool"]
    assert told[0].startswith("Tool call quebra gave no result: the run failed (") and len(told) == 2
    assert told[1].startswith("Tool call depois was not run: the run failed (")


async def test_an_exception_whose_message_cannot_be_read_is_named_where_it_was_raised():
    """An exception whose __str__ raised (or returned no text) failed the run with the error __str__ raised,
    of another type and at __str__'s line ("ValueError: str boom (at f.py:3 in __str__)"); a tool's failure
    told the model __str__'s error."""

    class StrBoom(Exception):
        def __str__(self):
            raise ValueError("str boom")

    class StrFive(Exception):
        def __str__(self):
            return 5

    def model(messages, tools):
        if not any(m.role == "tool" for m in messages):
            return {"content": "", "tool_calls": [{"name": "quebra", "args": {}}]}
        return "fim"

    @tool
    def quebra() -> str:
        """Raises."""
        raise StrBoom()

    @agent(provider=FunctionProvider(model), prompt="p", tools=[quebra])
    class A:
        def after_response(self, reply, ctx):
            if reply == "fim":
                raise StrFive()

    @workflow(steps=[A, A])
    class W:
        pass

    events: list = []
    with pytest.raises(StrFive):
        await bootstrap(W).run("go", on_event=events.append)
    told = [e.item.content for e in events if e.type == "state.append" and e.item.role == "tool"]
    assert told == ["Tool quebra failed: (its message could not be read: StrBoom.__str__ raised ValueError)"]
    error = events[-1].error
    assert error.startswith("StrFive: (its message could not be read: StrFive.__str__ raised TypeError) (at ")
    assert error.endswith(" in after_response)")


async def test_a_hook_made_with_functools_partialmethod_is_taken_and_called():
    """It was refused at load: "after_response needs ctx, which flowtui does not pass" (its self was counted
    as one of the arguments flowtui passes)."""
    import functools

    from flowtui import ScriptedProvider, agent, bootstrap, workflow

    def ending(self, response, ctx, suffix):
        return response + suffix

    @agent(provider=ScriptedProvider(["ok"]), prompt="p")
    class Writer:
        after_response = functools.partialmethod(ending, suffix="?")

    @workflow(steps=[Writer])
    class W:
        pass

    assert await bootstrap(W).run("go") == "ok?"
