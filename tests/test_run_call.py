"""One call: run(Agent or Workflow, input, **options) returns the output."""

from __future__ import annotations

import pytest

from flowtui import (
    AgentContext, ConfigError, FunctionProvider, Middleware, State, agent, run, run_workflow, tool, workflow,
)
from fakes import call, scripted


@tool
def somar(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


async def test_run_an_agent_without_a_workflow_until_it_answers():
    provider, calls = scripted(call("somar", a=2, b=3), "Dá 5.")

    @agent(provider=provider, prompt="Calcule.", tools=[somar])
    class Calculadora:
        pass

    events = []
    assert await run(Calculadora, "2 + 3?", on_event=events.append) == "Dá 5."
    assert len(calls) == 2
    assert [(e.kind, e.name) for e in events if e.type == "node.start" and e.kind in ("workflow", "agent")] == \
        [("workflow", "Calculadora"), ("agent", "Calculadora"), ("agent", "Calculadora")]


async def test_run_a_workflow_with_run_options_and_the_old_name_still_works():
    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        def after_response(self, r, ctx: AgentContext):
            return f"{r} para {ctx.data['conta_id']}"

    @workflow(steps=[A])
    class W:
        pass

    assert await run(W, "x", data={"conta_id": "acme"}) == "ok para acme"
    assert await run_workflow(W, "x", data={"conta_id": "beta"}) == "ok para beta"
    # an agent's option given to a workflow was dropped, unsaid
    with pytest.raises(ConfigError, match=r"^run\(W, max_iterations=...\): it is the ceiling of the loop run\(Agent, "):
        await run(W, "x", max_iterations=1)


async def test_an_agent_asking_for_state_gets_one_with_state_and_middlewares_are_disposed():
    class Notas:
        vistas: list[str] = []

    closed = []

    @agent(provider=FunctionProvider(lambda m, t: "lido"))
    class Leitor:
        def __init__(self, s: Notas = State()):
            self.s = s

        def after_response(self, r, ctx):
            self.s.vistas.append(r)
            return ", ".join(self.s.vistas)

    mw = Middleware(name="m", dispose=lambda: closed.append("m"))
    assert await run(Leitor, "x", state=Notas, middlewares=[mw], max_iterations=1) == "lido"
    assert closed == ["m"]


async def test_the_one_call_passes_the_listen_options_on_as_app_run_takes_them():
    # as its docstring and the README say: listen=, token= and listen_public= were refused as unknown options
    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        pass

    with pytest.raises(ConfigError, match=r"^listen='nowhere': expected HOST:PORT"):  # App.run's own check
        await run(A, "x", listen="nowhere", token="t" * 20, listen_public=False)
    with pytest.raises(ConfigError, match=r"^listen=5: expected HOST:PORT as a text"):  # (int.rpartition failed)
        await run(A, "x", listen=5)
    with pytest.raises(ConfigError, match=r"^listen=0.0.0.0:0: 0.0.0.0 is not loopback; .* Add listen_public=True to"):
        await run(A, "x", listen="0.0.0.0:0")  # (it was told the command line's --listen-public)


async def test_mistakes_in_the_one_call_are_named(tmp_path):
    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        pass

    with pytest.raises(ConfigError, match="unknown option\\(s\\) memroy; known: "):
        await run(A, "x", memroy="typo")
    with pytest.raises(ConfigError, match="pass an @agent or a @workflow class"):
        await run(dict, "x")
    # values of the wrong kind, named where they are given (they were Python's own errors, naming neither)
    with pytest.raises(ConfigError, match=r"run\(A, middlewares=...\) takes a list of middlewares, not object"):
        await run(A, "x", middlewares=object())
    with pytest.raises(ConfigError, match=r"journal= takes the path of the file to write \(a str or a Path\), "
                                          r"not int 5"):
        await run(A, "x", journal=5)
    # a journal it cannot write says what to give from Python too (it named --journal and --no-journal alone)
    with pytest.raises(ConfigError, match=r"is a folder, not a journal file; name a file you can write \(--journal FILE; from Python, "
                                          r"journal=\), or run without one \(--no-journal; from Python, leave journal="):
        await run(A, "x", journal=tmp_path)
    with pytest.raises(ConfigError, match=r"bootstrap\(A, model=''\): give a litellm model name"):
        await run(A, "x", model="")  # (blank: refused as --model and FLOWTUI_MODEL are; it was taken)


def test_a_run_whose_code_is_all_sync_can_be_timed_out_and_its_journal_ends(tmp_path):
    # its models, hooks and tools sync, a run never let the event loop run: asyncio.wait_for never fired,
    # other tasks starved, ctrl-C under asyncio.run did nothing, and the journal had no run.end
    import json
    import subprocess
    import sys
    import textwrap

    journal = tmp_path / "run.jsonl"
    script = tmp_path / "timed.py"
    script.write_text(textwrap.dedent(f"""
        import asyncio, math
        from flowtui import FunctionProvider, agent, bootstrap, loop, workflow

        @agent(provider=FunctionProvider(lambda messages, tools: "again"), prompt="p")
        class A:
            pass

        @workflow(steps=[loop([A], until=lambda ctx: False, max_iterations=math.inf)])
        class W:
            pass

        async def main():
            ticks = []

            async def tick():
                while True:
                    ticks.append(1)
                    await asyncio.sleep(0.05)

            ticker = asyncio.ensure_future(tick())
            try:
                await asyncio.wait_for(bootstrap(W).run("go", journal={str(journal)!r}), 1.0)
            except TimeoutError:
                print("timed out", len(ticks) > 1)
            ticker.cancel()

        asyncio.run(main())
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "timed out True", done.stderr
    end = json.loads(journal.read_text().splitlines()[-1])
    assert (end["type"], end["status"], end["reason"]) == ("run.end", "stopped", "cancelled")


async def test_the_output_returned_is_the_text_run_end_says_as_a_child_s_is():
    """A value left on ctx.output came back from app.run as it was ([1, 2]) while run.end, flowtui run and a
    child workflow's result said its JSON text, as the README and the `-> str | None` say."""
    from flowtui import bootstrap, loop

    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        pass

    @workflow(steps=[loop([A], max_iterations=1, on_exhausted=lambda ctx, n: setattr(ctx, "output", [1, {"a": 2}]))])
    class W:
        pass

    events: list = []
    out = await bootstrap(W).run("x", on_event=events.append)
    assert out == '[1,{"a":2}]' == events[-1].output


async def test_a_prepared_run_runs_once():
    """Executed again, a prepared run called the model again on its history, every event of it dropped: no
    journal line, no run.end, and the output of a run nobody saw."""
    from flowtui import bootstrap

    calls = []

    @agent(provider=FunctionProvider(lambda m, t: calls.append(len(m)) or "ok"))
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    events: list = []
    prepared = bootstrap(W).prepare("x", on_event=events.append)
    assert await prepared.execute() == "ok"
    with pytest.raises(ConfigError, match=r"has run already: a run runs once; prepare another"):
        await prepared.execute()
    assert len(calls) == 1 and events[-1].type == "run.end"


async def test_an_agent_asking_for_state_run_without_one_is_told_to_give_run_a_state():
    """It was told to "add state=YourStateClass to @workflow(...)": run(Agent) has no @workflow to add it to."""
    from flowtui import InjectionError

    class Notas:
        vistas: list[str] = []

    @agent(provider=FunctionProvider(lambda m, t: "lido"))
    class Leitor:
        def __init__(self, s: Notas = State()):
            self.s = s

    with pytest.raises(InjectionError) as caught:
        await run(Leitor, "x")
    assert caught.value.message == ("State() in __init__ parameter 's'; give the agent a state: "
                                    "run(Leitor, ..., state=YourStateClass)")
    assert caught.value.cls == "Leitor" and caught.value.line is not None


async def test_a_run_that_has_ended_is_freed_at_once_not_left_to_the_garbage_collector():
    """Each run held itself three ways (its root, its runs, its editor): a service running short flows
    left every run to the collector, whose collections then went through them all (about 60 objects a
    run). It is freed as its last reference goes."""
    import gc
    import weakref

    from pydantic import BaseModel

    class S(BaseModel):
        rodadas: int = 0

    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        def __init__(self, s: S = State()):
            self.s = s

        def after_response(self, r, ctx):
            self.s.rodadas += 1

    @workflow(state=S, steps=[A])
    class W:
        pass

    from flowtui import bootstrap

    app = bootstrap(W)
    prepared = app.prepare("go")
    assert await prepared.execute() == "ok"
    gone = weakref.ref(prepared)
    collections = sum(s["collections"] for s in gc.get_stats())
    del prepared
    assert sum(s["collections"] for s in gc.get_stats()) == collections  # (no collection did it)
    assert gone() is None
