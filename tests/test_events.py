"""Events: ordered, isolated subscribers, a JSONL journal, concurrent runs, import hygiene."""

import asyncio
import json
import subprocess
import sys

import pytest
from pydantic import BaseModel

from flowtui import FunctionProvider, State, agent, bootstrap, loop, workflow
from flowtui.runtime.fold import RunView
from flowtui.runtime.journal import read_journal


class S(BaseModel):
    rodadas: int = 0
    marca: str = ""


def make_flow():
    async def model(messages, tools):
        await asyncio.sleep(0)  # let concurrent runs interleave
        return f"turn {sum(1 for m in messages if m.role == 'assistant')}"

    @agent(provider=FunctionProvider(model), prompt="p")
    class A:
        def __init__(self, s: S = State()):
            self.s = s

        async def after_response(self, r, ctx):
            self.s.rodadas += 1
            self.s.marca = ctx.state.history[0].content
            ctx.minha_marca = self.s.marca

    @workflow(state=S, steps=[loop(steps=[A], until=lambda ctx, s: s.rodadas >= 3)])
    class W:
        pass

    return W


async def test_a_raising_subscriber_is_isolated_and_reported():
    app = bootstrap(make_flow())
    good = []

    def bad(event):
        raise RuntimeError("boom")

    app.subscribe(bad)
    app.subscribe(good.append)
    assert await app.run("x") == "turn 2"
    reports = [e for e in good if e.type == "subscriber.error"]
    assert reports and reports[0].subscriber.endswith("bad") and reports[0].error == "RuntimeError: boom"
    assert good[-1].type == "run.end" and good[-1].status == "finished"
    seqs = [e.seq for e in good]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_a_subscriber_that_would_never_run_is_refused_where_it_is_given():
    # an async def one was never awaited (Python's raw warning pointed into flowtui, nothing ran), and a value
    # that is no function failed at every event, said only in the journal
    from flowtui.runtime.errors import ConfigError

    app = bootstrap(make_flow())

    async def watcher(event):
        pass

    class AsyncCall:
        async def __call__(self, event):
            pass

    for given in (watcher, AsyncCall()):
        with pytest.raises(ConfigError, match=r"is an async def, but a subscriber is called as each event happens"):
            app.subscribe(given)
    with pytest.raises(ConfigError, match=r"subscribe\(\) takes a function called with each event, not str 'nope'"):
        app.subscribe("nope")
    with pytest.raises(ConfigError, match=r"on_event= takes a function called with each event, not int 5"):
        await app.run("x", on_event=5)
    seen = []
    app.subscribe(seen.append)  # what it kept: only the one that runs
    assert await app.run("x") == "turn 2" and seen[-1].type == "run.end"


async def test_unsubscribe_stops_delivery():
    app = bootstrap(make_flow())
    got = []
    unsubscribe = app.subscribe(got.append)
    unsubscribe()
    await app.run("x")
    assert got == []


async def test_journal_is_written_as_it_happens_and_folds_to_the_live_view(tmp_path):
    app = bootstrap(make_flow())
    path = tmp_path / "run.jsonl"
    live = RunView()
    lines_seen_midrun = []

    def watch(event):
        live.apply(event)
        if event.type == "ctx.set" and event.name == "minha_marca":
            lines_seen_midrun.append(len(path.read_text().splitlines()))

    app.subscribe(watch)
    await app.run("primeira", journal=path)
    assert lines_seen_midrun and lines_seen_midrun[0] > 5   # flushed line by line, not at the end
    lines = path.read_text().splitlines()
    assert all(json.loads(line)["type"] for line in lines)
    replay = RunView()
    for event in read_journal(path):
        replay.apply(event)
    assert replay.history == live.history and replay.state == live.state == {"rodadas": 3, "marca": "primeira"}
    assert replay.status == live.status == "finished" and replay.events == live.events == len(lines)


async def test_journal_redacts_credentials(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-value")

    @agent(provider=FunctionProvider(lambda m, t: "the key is sk-very-secret-value"), prompt="p")
    class Leaky:
        pass

    @workflow(steps=[Leaky])
    class W:
        pass

    path = tmp_path / "j.jsonl"
    await bootstrap(W).run("x", journal=path)
    text = path.read_text()
    assert "sk-very-secret-value" not in text and "[redacted]" in text


async def test_fifty_concurrent_runs_never_see_each_other():
    app = bootstrap(make_flow())
    per_run: dict[str, list] = {}

    def collect(event):
        per_run.setdefault(event.run_id, []).append(event)

    app.subscribe(collect)
    results = await asyncio.gather(*(app.run(f"run-{i}") for i in range(50)))
    assert results == ["turn 2"] * 50
    assert len(per_run) == 50
    for events in per_run.values():
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        view = RunView()
        for e in events:
            view.apply(e)
        mark = view.history[0].content
        assert view.state == {"rodadas": 3, "marca": mark}          # its own state instance
        assert view.ctx["minha_marca"] == mark                      # its own ctx
        assert all(m.content == mark or m.role == "assistant" for m in view.history)  # its own history


def test_import_runtime_does_not_import_textual_rich_or_litellm():
    code = ("import sys, flowtui, flowtui.runtime.cli, flowtui.runtime.providers.litellm, "
            "flowtui.runtime.providers.cassette; "
            "print(','.join(m for m in ('textual', 'rich', 'litellm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == ""


async def test_a_subscriber_that_changes_ctx_does_not_deadlock_and_order_holds():
    app = bootstrap(make_flow())
    runs = {}
    seen = []

    def reactive(event):
        seen.append(event)
        if event.type == "node.end" and event.kind == "agent":
            runs[event.run_id].ctx.seen_agents = runs[event.run_id].ctx.get("seen_agents", 0) + 1

    run = app.prepare("x", on_event=reactive)
    runs[run.id] = run
    assert await asyncio.wait_for(run.execute(), 5) == "turn 2"
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))  # delivered in order, none lost
    marks = [i for i, e in enumerate(seen) if e.type == "ctx.set" and e.name == "seen_agents"]
    ends = [i for i, e in enumerate(seen) if e.type == "node.end" and e.kind == "agent"]
    assert [m - 1 for m in marks] == ends  # each lands right after the event that caused it
    assert run.ctx.seen_agents == 3


async def test_threads_changing_state_keep_events_in_the_order_of_the_changes():
    """Sync hooks run in worker threads; the folded view must match what the model will see."""
    from flowtui import parallel

    def model(messages, tools):
        return "ok"

    def make(name):
        @agent(provider=FunctionProvider(model), prompt="p", name=name)
        class A:
            def after_response(self, response, ctx):  # sync: runs in a worker thread
                for i in range(200):
                    ctx.state.append("memory", f"{name}-{i}")

        return A

    @workflow(steps=[parallel([make("a"), make("b"), make("c")])])
    class W:
        pass

    view = RunView()
    run = bootstrap(W).prepare("x", on_event=view.apply)
    await run.execute()
    assert view.memory == list(run.state.memory) and len(view.memory) == 600


async def test_a_change_from_a_thread_the_flow_started_says_that_thread_as_its_origin():
    """A thread the flow starts holds none of the run's context: what it changed was said to come from
    the runtime, as if flowtui itself had done it."""
    import threading

    @agent(provider=FunctionProvider(lambda messages, tools: "ok"), prompt="p")
    class A:
        def after_response(self, response, ctx):
            helper = threading.Thread(target=lambda: ctx.state.append("memory", "from the helper"),
                                      name="indexer")
            helper.start()
            helper.join()
            ctx.state.append("memory", "from the hook")

    @workflow(steps=[A])
    class W:
        pass

    events: list = []
    await bootstrap(W).prepare("x", on_event=events.append).execute()
    said = [(e.item, e.origin) for e in events if e.type == "state.append" and e.bucket == "memory"]
    assert said == [("from the helper", "thread:indexer"), ("from the hook", "hook:A.after_response")]
    assert {e.origin for e in events if e.type == "node.start"} == {"runtime"}


def test_a_run_prepared_on_one_thread_and_run_on_another_says_runtime_for_its_own_events():
    """The run's thread was the one that prepared it: run on another (asyncio.run in a thread of the
    host's), its own events said thread:NAME."""
    import threading

    @agent(provider=FunctionProvider(lambda messages, tools: "ok"), prompt="p")
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    events: list = []
    run = bootstrap(W).prepare("x", on_event=events.append)
    host = threading.Thread(target=lambda: asyncio.run(run.execute()), name="host-loop")
    host.start()
    host.join()
    assert events and {e.origin for e in events if e.type in ("run.start", "node.start", "run.end")} == {"runtime"}


async def test_a_run_refused_before_it_starts_leaves_no_journal(tmp_path):
    from flowtui import ConfigError

    snap = tmp_path / "bad.toml"
    snap.write_text('[state]\nrodadas = "muitas"\n')
    journal = tmp_path / "j.jsonl"
    with pytest.raises(ConfigError, match="rodadas"):
        bootstrap(make_flow()).prepare("x", journal=journal, snapshot=snap)
    assert not journal.exists()


async def test_a_journal_without_pauses_still_knows_the_prompt_each_call_sent(tmp_path):
    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="Você escreve.")
    class Escritor:
        def before_prompt(self, prompt, ctx):
            return prompt + " Curto."

    @workflow(steps=[Escritor])
    class W:
        pass

    path = tmp_path / "j.jsonl"
    await bootstrap(W).run("oi", journal=path)
    view = RunView()
    for event in read_journal(path):
        view.apply(event)
    assert [(m.role, m.content) for m in view.model_sees()][0] == ("system", "Você escreve. Curto.")


async def test_a_subscriber_that_unsubscribes_during_a_run_gets_no_more_of_its_events():
    """The run kept the subscribers it started with: unsubscribe() took effect only at the next run."""
    from flowtui import bootstrap

    seen, others = [], []
    app = bootstrap(_unsubscribing_flow())

    def first_three(event):
        seen.append(event.type)
        if len(seen) == 3:
            unsubscribe()

    unsubscribe = app.subscribe(first_three)
    app.subscribe(lambda event: others.append(event.type))
    await app.run("go")
    assert len(seen) == 3 and seen == others[:3]
    assert len(others) > 6 and others[-1] == "run.end"  # the one after it in the list missed none


def _unsubscribing_flow():
    from flowtui import FunctionProvider, agent, workflow

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        pass

    @workflow(steps=[A, A])
    class Twice:
        pass

    return Twice


async def test_a_subscriber_that_raises_on_run_end_is_said_on_stderr_not_after_run_end(tmp_path, capsys):
    """Its report followed run.end in the journal: nothing follows a run's end."""
    from flowtui import bootstrap
    from flowtui.runtime.journal import load_runs

    def at_the_end(event):
        if event.type == "run.end":
            raise ValueError("closing the report failed")

    app = bootstrap(_unsubscribing_flow())
    app.subscribe(at_the_end)
    await app.run("go", journal=tmp_path / "j.jsonl")
    assert load_runs(tmp_path / "j.jsonl")[-1][-1].type == "run.end"
    assert "<locals>.at_the_end raised on run.end: ValueError: closing the report failed" in capsys.readouterr().err
