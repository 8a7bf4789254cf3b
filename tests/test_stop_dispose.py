"""ctx.stop() (end the run gracefully after the current unit) and ctx.on_dispose (cleanups when
the run ends, whatever the outcome)."""

from __future__ import annotations

import asyncio
import re

import pytest
from pydantic import BaseModel

from flowtui import (
    AgentContext, Context, FunctionProvider, Input, WorkflowRuntime, agent, bootstrap, loop, tool, until_answered,
    workflow,
)
from fakes import call, counting, run_collect, scripted


class Nada(BaseModel):
    pass


@tool(name="finalizar", schema=Nada)
class Finalizar:
    def execute(self, args: Nada = Input(), ctx: AgentContext = Context()):
        ctx.stop()
        return "relatório final"


@tool(name="outra", schema=Nada)
class Outra:
    def execute(self, args: Nada = Input()):
        raise AssertionError("never runs: the run is stopping")


def agent_names(events):
    return [e.name for e in events if e.type == "node.start" and e.kind == "agent"]


async def test_ctx_stop_in_a_tool_finishes_the_turn_then_ends_the_run_with_its_output():
    provider, calls = scripted({"content": "", "tool_calls": [{"name": "finalizar", "args": {}},
                                                              {"name": "outra", "args": {}}]})
    after = []

    @agent(provider=provider, tools=[Finalizar, Outra])
    class A:
        def after_response(self, response, ctx):
            after.append(response)

    later, later_calls = counting("later")

    @agent(provider=later)
    class Later:
        pass

    @workflow(steps=[loop([A], until=until_answered, max_iterations=5), Later])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "relatório final"  # the output so far: the stopping tool's result
    assert after == ["relatório final"] and later_calls == []
    tools = [(e.item.tool_name, e.item.content, e.item.is_error) for e in events
             if e.type == "state.append" and e.item.role == "tool"]
    assert tools == [("finalizar", "relatório final", False),
                     ("outra", "Tool call outra was not run: the run is stopping (ctx.stop()).", True)]
    assert run.ctx.loop.stopped_by == "stop" and run.ctx.turn.tool_name == "finalizar"
    (loop_end,) = [e for e in events if e.type == "node.end" and e.kind == "loop"]
    assert (loop_end.status, loop_end.data["stopped_by"], loop_end.data["iterations"]) == ("stopped", "stop", 1)
    end = events[-1]
    assert (end.type, end.status, end.reason, end.output) == \
        ("run.end", "stopped", "stopped by ctx.stop() in tool:finalizar", "relatório final")
    assert agent_names(events) == ["A"]


async def test_ctx_stop_in_before_tool_keeps_that_tool_from_running():
    """before_tool is the gate before a tool: a stop called there ran the tool anyway (one that deletes
    did delete), and only the calls after it were left out."""
    provider, calls = scripted({"content": "", "tool_calls": [{"name": "outra", "args": {}},
                                                              {"name": "finalizar", "args": {}}]})

    @agent(provider=provider, tools=[Outra, Finalizar])
    class A:
        def before_tool(self, call, ctx):
            ctx.stop()

    @workflow(steps=[A])
    class W:
        pass

    out, events, run = await run_collect(W)
    tools = [(e.item.tool_name, e.item.content, e.item.is_error) for e in events
             if e.type == "state.append" and e.item.role == "tool"]
    assert tools == [("outra", "Tool call outra was not run: the run is stopping (ctx.stop()).", True),
                     ("finalizar", "Tool call finalizar was not run: the run is stopping (ctx.stop()).", True)]
    assert [e.status for e in events if e.type == "node.end" and e.kind == "tool"] == ["stopped"]
    assert not run.ctx.turn.called_tool  # no tool ran in the turn
    end = events[-1]
    assert (end.type, end.status, end.reason) == ("run.end", "stopped", "stopped by ctx.stop() in hook:A.before_tool")


async def test_an_agents_own_run_calls_no_tool_once_the_run_is_stopping():
    """self.tools["x"]() inside run() ran the tool after ctx.stop(), though no tool starts once it is said."""
    @agent(provider=FunctionProvider(lambda m, t: "unused"), tools=[Finalizar, Outra])
    class Manual:
        async def run(self, input, ctx):
            first = await self.tools["finalizar"]()
            second = await self.tools["outra"]()  # would raise AssertionError, had it run
            return f"{first.content} | {second.content} ({second.is_error})"

    @workflow(steps=[Manual])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "relatório final | Tool call outra was not run: the run is stopping (ctx.stop()). (True)"
    assert [e.name for e in events if e.type == "node.start" and e.kind == "tool"] == ["finalizar"]
    assert (events[-1].status, events[-1].reason) == ("stopped", "stopped by ctx.stop() in tool:finalizar")


async def test_ctx_stop_in_until_ends_the_loop_as_a_stop():
    provider, calls = counting()

    @agent(provider=provider)
    class A:
        pass

    def until(ctx):
        if ctx.output == "reply 2":
            ctx.stop()
        return False

    @workflow(steps=[loop([A], until=until, max_iterations=10)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "reply 2" and len(calls) == 2
    assert run.ctx.loop.stopped_by == "stop"
    assert (events[-1].status, events[-1].reason) == ("stopped", "stopped by ctx.stop() in until")


async def test_ctx_stop_in_a_hook_skips_the_remaining_steps():
    a, _ = counting("a")
    b, b_calls = counting("b")

    @agent(provider=a)
    class A:
        async def after_response(self, response, ctx):
            ctx.stop()

    @agent(provider=b)
    class B:
        pass

    @workflow(steps=[A, B])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "a 1" and b_calls == []
    assert (events[-1].status, events[-1].reason) == ("stopped", "stopped by ctx.stop() in hook:A.after_response")


async def test_ctx_stop_in_the_last_step_still_reports_the_run_as_stopped():
    a, _ = counting("a")

    @agent(provider=a)
    class A:
        def after_response(self, response, ctx):
            ctx.stop()

    @workflow(steps=[A])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert (out, events[-1].status) == ("a 1", "stopped")
    assert events[-1].reason == "stopped by ctx.stop() in hook:A.after_response"


async def test_ctx_stop_in_a_cleanup_does_not_change_how_the_run_ended():
    """A cleanup (after every step had finished) calling ctx.stop() made a finished run a stopped one."""
    a, _ = counting("a")

    @agent(provider=a)
    class A:
        def after_response(self, response, ctx):
            ctx.on_dispose(lambda: ctx.stop())

    @workflow(steps=[A])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert (out, events[-1].status, events[-1].reason) == ("a 1", "finished", None)


async def test_ctx_stop_in_a_child_workflow_ends_the_child_only():
    @agent(provider=FunctionProvider(lambda m, t: call("finalizar")), tools=[Finalizar])
    class ChildAgent:
        pass

    @workflow(steps=[ChildAgent, ChildAgent])
    class Child:
        pass

    @tool(name="delegar", schema=Nada)
    class Delegar:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: Nada = Input()):
            return await self.runtime.run(Child, input="x")

    provider, _ = scripted(call("delegar"), "o pai continua")

    @agent(provider=provider, tools=[Delegar])
    class Parent:
        pass

    @workflow(steps=[loop([Parent], until=until_answered, max_iterations=3)])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert out == "o pai continua"
    ends = [(e.run_id == run.id, e.status) for e in events if e.type == "run.end"]
    assert ends == [(False, "stopped"), (True, "finished")]
    assert agent_names(events).count("ChildAgent") == 1


# --- ctx.on_dispose ---------------------------------------------------------------------

async def test_cleanups_run_last_first_sync_and_async_and_one_that_raises_is_reported():
    done = []

    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        def before_prompt(self, prompt, ctx):
            ctx.on_dispose(lambda: done.append("first"))

            @ctx.on_dispose
            async def close_client():
                await asyncio.sleep(0)
                done.append("second")

            @ctx.on_dispose
            def broken():
                raise OSError("socket already closed")

            ctx.on_dispose(lambda: done.append("fourth"))

    @workflow(steps=[A])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert done == ["fourth", "second", "first"]
    tail = [(e.type, getattr(e, "cleanup", None), getattr(e, "error", None)) for e in events[-2:]]
    assert tail[0][0] == "dispose.error" and tail[0][1].endswith("broken")
    assert re.fullmatch(r"OSError: socket already closed \(at tests/test_stop_dispose\.py:\d+ in broken\)", tail[0][2])
    assert tail[1][0] == "run.end" and events[-1].status == "finished"


async def test_cleanups_run_when_the_run_fails_too():
    done = []

    def model(messages, tools):
        raise RuntimeError("model down")

    @agent(provider=FunctionProvider(model))
    class A:
        def before_prompt(self, prompt, ctx):
            ctx.on_dispose(lambda: done.append("closed"))

    @workflow(steps=[A])
    class W:
        pass

    app = bootstrap(W)
    events = []
    app.subscribe(events.append)
    with pytest.raises(RuntimeError, match="model down"):
        await app.run("x")
    assert done == ["closed"] and events[-1].status == "failed"


def test_stop_and_on_dispose_are_not_fields():
    from flowtui.runtime.context import AgentContext as Ctx
    from flowtui.runtime.conversation import ConversationState

    ctx = Ctx(ConversationState(lambda *a, **k: None), lambda *a, **k: None, run_id="r")
    with pytest.raises(AttributeError, match="ctx.stop is reserved"):
        ctx.stop = True
    with pytest.raises(TypeError, match="must be callable"):
        ctx.on_dispose("close")


async def test_while_cleanups_run_the_status_says_so():
    """A cleanup that never returned left a bare "running" once every step had ended."""
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.control import waiting_for

    view = RunView()
    seen = []

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def after_response(self, response, ctx):
            seen.append((view.status_line(), waiting_for(view)))  # a step: not the cleanups
            ctx.on_dispose(lambda: seen.append((view.status_line(), waiting_for(view))))

    @workflow(steps=[A])
    class W:
        pass

    run = bootstrap(W).prepare("x", on_event=view.apply)
    await run.execute()
    assert seen == [("running", "agent A"),
                    ("running: its cleanups (ctx.on_dispose), after its steps", "its cleanups (ctx.on_dispose)")]
    assert view.status_line() == "finished"


@pytest.mark.parametrize("cleanup", [True, False])
async def test_after_its_steps_a_run_says_cleanups_only_when_it_has_some(cleanup):
    """A run with no cleanup said its cleanups were running while its last events were written (a large
    output takes seconds)."""
    from flowtui.runtime.fold import RunView

    view = RunView()
    seen = []

    def follow(event):
        view.apply(event)
        if event.type == "node.end" and event.kind == "workflow":
            seen.append(view.status_line())

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        def after_response(self, response, ctx):
            if cleanup:
                ctx.on_dispose(lambda: None)

    @workflow(steps=[A])
    class W:
        pass

    await bootstrap(W).prepare("x", on_event=follow).execute()
    assert seen == ["running: its cleanups (ctx.on_dispose), after its steps" if cleanup else
                    "running: its steps are done, ending"]
    assert view.status_line() == "finished"


async def test_a_cleanup_that_adds_a_cleanup_is_refused_not_run_forever():
    """A cleanup registering another each time it ran kept the run ending until its process was killed."""
    ran = []

    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        def after_response(self, response, ctx):
            def again():
                ran.append("again")
                ctx.on_dispose(again)

            ctx.on_dispose(again)
            ctx.on_dispose(lambda: ran.append("other"))

    @workflow(steps=[A])
    class W:
        pass

    out, events, run = await asyncio.wait_for(run_collect(W), 30)
    assert ran == ["other", "again"] and events[-1].status == "finished"
    refused = [e for e in events if e.type == "dispose.error"]
    assert len(refused) == 1 and "a cleanup cannot add another" in refused[0].error


async def test_a_cleanup_raising_a_base_exception_of_the_flows_own_is_reported_and_the_others_still_run():
    done = []

    class Fatal(BaseException):
        pass

    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        def before_prompt(self, prompt, ctx):
            ctx.on_dispose(lambda: done.append("first"))

            @ctx.on_dispose
            def broken():
                raise Fatal("pool gone")

    @workflow(steps=[A])
    class W:
        pass

    out, events, run = await run_collect(W)
    assert done == ["first"]
    (error,) = [e for e in events if e.type == "dispose.error"]
    assert error.cleanup.endswith("broken") and error.error.startswith("Fatal: pool gone"), error
    assert events[-1].type == "run.end" and events[-1].status == "finished"


async def test_a_cleanup_running_a_child_workflow_after_a_stop_ends_there_and_the_run_still_ends(tmp_path):
    """The run's stop stopped a child workflow a cleanup ran, at its first step; what that raised left the
    run's execute: no run.end, the cleanups after it unrun, and `flowtui run` waited until it killed the
    run's process ("its cleanups did not return"). The run's end says the stop, and a re-execution of its
    journal stops the child again there (it ran the child, and diverged)."""
    from flowtui.runtime.control import Controller

    done = []

    @agent(provider=FunctionProvider(lambda m, t: "resumo"))
    class Resumidor:
        pass

    @workflow(steps=[Resumidor])
    class Filho:
        pass

    @tool(name="demorar", schema=Nada)
    class Demorar:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: Nada = Input(), ctx: AgentContext = Context()):
            ctx.on_dispose(lambda: done.append("registered first, run last"))

            async def summarize():
                await self.runtime.run(Filho, input="limpeza")
                done.append("the child finished")

            ctx.on_dispose(summarize)
            await asyncio.sleep(0.3)
            return "ok"

    provider, _ = scripted(call("demorar"), "fim")

    @agent(provider=provider, tools=[Demorar])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    events: list = []
    journal = tmp_path / "j.jsonl"
    run = bootstrap(W).prepare("go", controller=Controller(), on_event=events.append, journal=str(journal))
    run.controller.resume()
    task = asyncio.ensure_future(run.execute())
    while not any(e.type == "node.start" and e.kind == "tool" for e in events):
        await asyncio.sleep(0.01)
    run.controller.stop()
    await asyncio.wait_for(task, 30)  # (it raised here, past its end)
    assert done == ["registered first, run last"]
    (child_end,) = [e for e in events if e.type == "run.end" and e.run_id != run.id]
    assert (child_end.status, child_end.reason) == ("stopped", "stopped by user")
    (error,) = [e for e in events if e.type == "dispose.error"]
    assert error.cleanup.endswith("summarize")
    assert error.error == "a child workflow it ran was stopped (stopped by user); the cleanup ended there"
    end = events[-1]
    assert (end.type, end.run_id, end.status, end.reason) == ("run.end", run.id, "stopped", "stopped by user")

    done.clear()
    again: list = []
    await asyncio.wait_for(bootstrap(W).run(resume_from=str(journal), on_event=again.append), 30)
    assert not [e for e in again if e.type == "run.diverged"]
    assert done == ["registered first, run last"]  # (the child stopped again, at its first step)
    assert [e.reason for e in again if e.type == "run.end"] == [
        f"stopped again where the run of {journal} was stopped (stopped by user)"] * 2
