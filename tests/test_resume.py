"""Re-executing a run against its journal (``--resume-from JOURNAL[@K]``): a checked prefix, then live.

Every flow of flows/ re-executed against its own journal reproduces it event
for event (ids, timestamps and durations aside) while no model and no tool is
called; a change to a prompt file, a hook, a tool's result or a loop's
``until`` is reported at the right event with the right words (headless:
exit 3); a person's edits are made again where they were made; ``@K`` goes
on live after K.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from flowtui import (
    AgentContext, Context, Controller, FunctionProvider, Input, LiteLLMProvider, Middleware, ScriptedProvider, State, ToolOutput, agent,
    bootstrap, loop, tool, until_answered, workflow,
)
from flowtui.runtime import plans as plans_module
from flowtui.runtime.compare import model_key
from flowtui.runtime.errors import ConfigError, ResumeError
from flowtui.runtime.fold import RunView
from flowtui.runtime.journal import read_journal
from flowtui.runtime.loader import load_flow
from flowtui.runtime.providers.litellm import Retry
from loopback_openai import LoopbackOpenAI, reply, server_error
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
FLOWS = ROOT / "flows"

# Every flow of flows/, with what it is run with.
FLOW_RUNS = {
    "revisao.py": ("Escreva um parágrafo sobre ctx.state", None),
    "leitor.py": ("Quantas rodadas o revisor precisa em revisao.py?", None),
    "subagente.py": ("Resuma o que é ctx.state", None),
    "pesquisa.py": ("O que é ctx.state?", None),
    "conta.py": ("Quero cancelar a fatura de 2025-03", {"conta_id": "acme"}),
}
# pesquisar runs a child workflow: re-executed, its child's model calls and tools served; faturas keeps a
# live connection in ctx, so it is declared replay="rerun"
RERUN = {"pesquisar", "faturas"}


def recorded_events(path: Path, *, skip=("run.pause", "run.resume")) -> list[dict]:
    """A journal's events as compared by a person: no ids, times or durations, no pause points."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["type"] in skip:
            continue
        for key in ("seq", "ts", "run_id", "node_id", "parent_id", "resumed_from"):
            event.pop(key, None)
        out.append(_timeless(event))
    return out


async def _paused(run, ctl) -> asyncio.Task:
    """``run`` started, once it has paused (or ended)."""
    task = asyncio.ensure_future(run.execute())
    for _ in range(5000):
        if ctl.paused or task.done():
            break
        await asyncio.sleep(0.001)
    return task


def _timeless(value):
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k not in ("duration_ms", "elapsed_s", "duration_s")}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def no_live(monkeypatch):
    """Makes every model and every tool refuse to be called; returns what was called anyway."""
    called: list = []

    def guard() -> None:
        async def refuse(self, request):
            called.append(("model", request.agent))
            raise AssertionError(f"model of {request.agent} called in the prefix")

        monkeypatch.setattr(ScriptedProvider, "complete", refuse)
        monkeypatch.setattr(FunctionProvider, "complete", refuse)
        real = plans_module.build_instances

        def guarded(run, **kw):
            agents, tools, providers = real(run, **kw)
            for spec in list(tools):
                if spec.name not in RERUN:
                    tools[spec] = _refusing(spec.name, called)
            return agents, tools, providers

        monkeypatch.setattr(plans_module, "build_instances", guarded)

    return guard, called


def _refusing(name, called):
    def execute(*args, **kwargs):
        called.append(("tool", name))
        raise AssertionError(f"tool {name} executed in the prefix")

    return execute


async def test_a_run_of_a_journal_picked_by_its_id_is_that_one_not_the_last(tmp_path):
    """The app forks the run it shows: one appended to the journal after it was re-executed instead."""
    from flowtui.runtime.recorded import load_recorded

    journal = tmp_path / "two.jsonl"
    flow = load_flow(str(FLOWS / "revisao.py"))
    await flow.run("primeira", journal=journal)
    await flow.run("segunda", journal=journal)
    first, second = (ev for ev in lines(journal) if ev["type"] == "run.start")
    picked = load_recorded(str(journal), at=5, run_id=first["run_id"])
    assert picked.run_id == first["run_id"] and picked.start["input"] == "primeira"
    assert {ev["run_id"].split(".")[0] for ev in picked.events} == {first["run_id"]}  # none of the second's
    assert picked.last == max(ev["seq"] for ev in lines(journal)[:len(picked.events)])
    assert load_recorded(str(journal), at=5).run_id == second["run_id"]  # none named: the last, as before
    with pytest.raises(ResumeError, match="holds no run r9-gone"):
        load_recorded(str(journal), at=5, run_id="r9-gone")
    out = await flow.run(resume_from=picked)  # re-executed whole: the first run's own end
    assert out == (await load_flow(str(FLOWS / "revisao.py")).run("primeira"))


# --- every flow reproduces itself ----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FLOW_RUNS))
async def test_every_flow_reexecuted_against_its_journal_reproduces_it(name, tmp_path, no_live):
    guard, called = no_live
    message, data = FLOW_RUNS[name]
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    await load_flow(str(FLOWS / name)).run(message, data=data, journal=first)
    guard()
    events: list = []
    out = await load_flow(str(FLOWS / name)).run(journal=second, resume_from=str(first), on_event=events.append)
    assert called == []  # no model, no tool ran in the prefix
    assert [e.type for e in events].count("run.diverged") == 0
    assert recorded_events(second) == recorded_events(first)
    start, recorded = lines(second)[0], lines(first)
    assert start["resumed_from"] == {"journal": str(first), "run_id": recorded[0]["run_id"],
                                     "at": recorded[-1]["seq"]}
    assert out == recorded[-1]["output"]
    again, before = folded(second), folded(first)  # the new journal replays on its own, prefix included
    assert (again.status, again.output, again.history) == (before.status, before.output, before.history)
    assert again.resumed_from.journal == str(first)


async def test_a_budget_limit_raised_before_re_executing_is_no_divergence(tmp_path, no_live):
    """run.start says the budget's limits (the sidebar shows them from the start): a limit raised for
    the re-execution, the commonest change, must not diverge at the run's start."""
    from flowtui import Budget

    guard, called = no_live
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    await load_flow(str(FLOWS / "revisao.py")).run(FLOW_RUNS["revisao.py"][0], journal=first,
                                                    budget=Budget(max_chat_calls=40))
    assert lines(first)[0]["budget"] == {"max_chat_calls": 40, "mode": "stop"}
    guard()
    events: list = []
    await load_flow(str(FLOWS / "revisao.py")).run(journal=second, resume_from=str(first), on_event=events.append,
                                                    budget=Budget(max_chat_calls=80))
    assert called == [] and "run.diverged" not in [e.type for e in events]
    assert lines(second)[0]["budget"] == {"max_chat_calls": 80, "mode": "stop"}


@pytest.mark.parametrize("recorded_with", [True, False])
async def test_a_budget_taken_away_or_added_is_no_divergence(tmp_path, recorded_with):
    """What was spent (ctx.budget) is not compared, nor how often it is said: a budget added or taken away diverged
    at the first call, and so did a journal of a flowtui that did not say a child's calls on its parent."""
    from flowtui import Budget

    first = tmp_path / "first.jsonl"
    budget = Budget(max_chat_calls=40)
    await load_flow(str(FLOWS / "revisao.py")).run(FLOW_RUNS["revisao.py"][0], journal=first,
                                                    budget=budget if recorded_with else None)
    assert any(e["type"] == "ctx.set" and e["name"] == "budget" for e in lines(first)) is recorded_with
    events: list = []
    await load_flow(str(FLOWS / "revisao.py")).run(resume_from=str(first), on_event=events.append,
                                                    budget=None if recorded_with else budget)
    assert "run.diverged" not in [e.type for e in events]
    assert (events[-1].type, events[-1].status) == ("run.end", "finished")


async def test_a_run_failed_on_a_raise_budget_re_executes_to_the_same_failure(tmp_path, no_live):
    """The failure's text said the time the run had taken: a re-execution diverged on it, at the run's end."""
    from flowtui import Budget, BudgetExceededError

    guard, called = no_live
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    budget = Budget(max_chat_calls=2, mode="raise")
    with pytest.raises(BudgetExceededError):
        await load_flow(str(FLOWS / "revisao.py")).run(FLOW_RUNS["revisao.py"][0], journal=first, budget=budget)
    guard()
    events: list = []
    with pytest.raises(BudgetExceededError) as info:
        await load_flow(str(FLOWS / "revisao.py")).run(journal=second, resume_from=str(first),
                                                        on_event=events.append, budget=budget)
    assert called == [] and "run.diverged" not in [e.type for e in events]
    assert str(info.value) == "budget exceeded: max_chat_calls=2 (used: chat_calls=2, tool_calls=0, tokens=" \
        f"{info.value.usage.tokens}, cost_usd=0.0)"
    end = lines(second)[-1]
    assert (end["type"], end["status"], end["error"]) == ("run.end", "failed", lines(first)[-1]["error"])


def folded(journal: Path) -> RunView:
    view = RunView()
    for event in read_journal(journal):
        view.apply(event)
    return view


def test_every_flow_of_the_folder_is_covered():
    assert {p.name for p in FLOWS.glob("*.py")} == set(FLOW_RUNS)


# --- a changed flow diverges at the right event, said in words ----------------------------------


def flowtui(*args, cwd):
    return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def _seq(journal: Path, **match) -> int:
    """The seq of the first recorded event with these fields (``nth``: skip that many)."""
    nth = match.pop("nth", 0)
    for event in lines(journal):
        if all(event.get(k) == v for k, v in match.items()):
            if nth == 0:
                return event["seq"]
            nth -= 1
    raise AssertionError(f"no event {match}")


CHANGES = {
    "prompt file": ("revisor.agent.md", "Você é o revisor.", "Você é o revisor exigente.",
                    dict(type="node.start", kind="chat", name="RevisorAgent"),
                    "RevisaoWorkflow › loop 1 › RevisorAgent › chat",
                    '  request.messages[0].content: prompt file revisor.agent.md changed: "Você é o revisor. Leia'),
    "hook": ("revisao.py", "self.s.rodadas += 1", "self.s.rodadas += 2",
             dict(type="workflow_state.change", path="rodadas"),
             "RevisaoWorkflow › loop 1 › RevisorAgent", "  state.rodadas: recorded 1, now 2"),
    "tool result": ("revisao.py", 'f"Problema registrado (', 'f"Problema anotado (',
                    dict(type="state.append", origin="tool:registrar_problema"),
                    "RevisaoWorkflow › loop 1 › RevisorAgent › registrar_problema",
                    "  history[+].content: tool registrar_problema (replay='rerun') returned another result: "
                    '"Problema registrado (1 no total)'),
    "until": ("revisao.py", "until=lambda ctx, s: s.aprovado", "until=lambda ctx, s: True",
              dict(type="node.start", kind="agent", name="EscritorAgent", nth=1),
              "RevisaoWorkflow › loop 2 › EscritorAgent",
              "  the loop now stops after iteration 1 (until); the recorded run went on"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_flow_diverges_at_the_right_event_with_the_right_words(change, tmp_path):
    file, old, new, where, path, said = CHANGES[change]
    flows = tmp_path / "flows"
    shutil.copytree(FLOWS, flows)
    flow = flows / "revisao.py"
    rerun = flow.read_text().replace('schema=ProblemaArgs)', 'schema=ProblemaArgs, replay="rerun")')
    flow.write_text(rerun)  # the reviewer's tool runs again in a re-execution: its result is checked
    journal = tmp_path / "run.jsonl"
    res = flowtui("run", str(flow), "--input", "Escreva", "--journal", str(journal), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    same = flowtui("run", str(flow), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert same.returncode == 0, same.stderr  # unchanged: no divergence
    target = flows / file
    assert old in target.read_text()
    target.write_text(target.read_text().replace(old, new))
    res = flowtui("run", str(flow), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    at = _seq(journal, **where)
    report = res.stderr[res.stderr.index("flowtui: the run diverged"):].splitlines()
    assert report[0] == f"flowtui: the run diverged from {journal} at event #{at} ({path})"
    assert report[1].startswith("  recorded: ") and report[2].startswith("  now:      ")
    assert any(line.startswith(said) for line in report[3:]), report
    assert report[-1].startswith("  the run stopped there, before doing anything live")
    assert res.stdout == ""  # no output: the run did not finish


def test_a_tool_result_edited_in_the_journal_is_said_so_not_blamed_on_a_hook_the_flow_lacks(tmp_path):
    """It said "the result of tool registrar_problema was changed after it ran (its after_tool hook, or a
    middleware)" of a flow with neither. (A tool that runs a child workflow: the child runs again.)"""
    journal = tmp_path / "run.jsonl"
    flow = tmp_path / "parent.py"
    flow.write_text(textwrap.dedent('''\
        from pydantic import BaseModel
        from flowtui import FunctionProvider, Input, WorkflowRuntime, agent, tool, workflow

        @agent(provider=FunctionProvider(lambda m, t: "child final"), prompt="c")
        class ChildAgent:
            pass

        @workflow(steps=[ChildAgent])
        class Child:
            pass

        class Q(BaseModel):
            q: str

        @tool(name="delegate", description="runs the child", schema=Q)
        class Delegate:
            def __init__(self, runtime: WorkflowRuntime):
                self.runtime = runtime

            async def execute(self, args: Q = Input()):
                return await self.runtime.run(Child, input=args.q)

        def parent(messages, tools):
            if messages[-1].role == "tool":
                return "parent done"
            return {"tool_calls": [{"name": "delegate", "args": {"q": "go"}}]}

        @agent(provider=FunctionProvider(parent), prompt="p", tools=[Delegate])
        class ParentAgent:
            pass

        @workflow(steps=[ParentAgent, ParentAgent])
        class Parent:
            pass
        '''))
    res = flowtui("run", f"{flow}:Parent", "--input", "go", "--journal", str(journal), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    events = lines(journal)
    told = next(e for e in events if e["type"] == "state.append" and e["origin"] == "tool:delegate")
    told["item"]["content"] = "FORGED"
    journal.write_text("".join(json.dumps(e if e["seq"] != told["seq"] else told) + "\n" for e in events))
    res = flowtui("run", f"{flow}:Parent", "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    assert f"at event #{told['seq']} (" in res.stderr
    assert ("history[+].content: the result of tool delegate is not the journal's, and nothing in the flow changes a "
            "result once its tool returned (no after_tool hook, no tool middleware): the journal was edited here, or "
            "the tool (a child workflow it runs) returned another result") in res.stderr
    hooked = flow.read_text().replace("class ParentAgent:\n    pass",
                                      "class ParentAgent:\n    def after_tool(self, result, ctx):\n        return None")
    assert hooked != flow.read_text()
    flow.write_text(hooked)  # a flow that may change a result after its tool: that is named
    res = flowtui("run", f"{flow}:Parent", "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    assert "history[+].content: the result of tool delegate was changed after it ran (ParentAgent.after_tool)" \
        in res.stderr
    # a child workflow's own tool middleware is named too (its tools' results go through it)
    marked = flow.read_text().replace(
        "@workflow(steps=[ChildAgent])",
        "async def mark(invocation, call_next):\n    return await call_next(invocation)\n\n"
        "from flowtui import Middleware\n\n@workflow(steps=[ChildAgent], middlewares=[Middleware(name='mark', "
        "tool=mark)])").replace("    def after_tool(self, result, ctx):\n        return None", "    pass")
    flow.write_text(marked)
    res = flowtui("run", f"{flow}:Parent", "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    assert "the result of tool delegate was changed after it ran (tool middleware mark)" in res.stderr, res.stderr


def test_a_loop_ceiling_raised_past_what_the_loop_used_reexecutes_and_one_lowered_below_it_diverges(tmp_path):
    """max_iterations 5 → 10 for a loop its until ended after 3 rounds diverged at the loop's start
    (the ceiling is repeated in its events), so edit-and-continue refused the commonest tweak."""
    flows = tmp_path / "flows"
    shutil.copytree(FLOWS, flows)
    flow = flows / "revisao.py"
    journal = tmp_path / "run.jsonl"
    res = flowtui("run", str(flow), "--input", "Escreva", "--journal", str(journal), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert [e["value"]["iterations"] for e in lines(journal) if e.get("name") == "loop" and e["type"] == "ctx.set"
            ][-1] == 3
    source = flow.read_text()
    flow.write_text(source.replace("max_iterations=5", "max_iterations=10"))
    res = flowtui("run", str(flow), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 0 and "diverged" not in res.stderr, res.stderr
    flow.write_text(source.replace("max_iterations=5", "max_iterations=2"))
    res = flowtui("run", str(flow), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    report = res.stderr[res.stderr.index("flowtui: the run diverged"):].splitlines()
    assert report[0].endswith("(RevisaoWorkflow › loop 3 › EscritorAgent)"), report
    assert "  the loop now stops after iteration 2 (exhausted); the recorded run went on" in report, report
    assert "■ stopped (diverged" not in res.stderr  # the report says it, once


def journaled(tmp_path: Path, name: str, source: str) -> tuple[Path, Path]:
    """``source`` written as flow ``name`` and run headless: (the flow, its journal)."""
    flow, journal = tmp_path / name, tmp_path / "run.jsonl"
    flow.write_text(source)
    res = flowtui("run", str(flow), "--input", "x", "--journal", str(journal), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    return flow, journal


def reexecuted(flow: Path, journal: Path) -> subprocess.CompletedProcess:
    """The flow re-executed against the whole journal, which it reproduces: no divergence."""
    res = flowtui("run", str(flow), "--resume-from", str(journal), "--no-journal", cwd=flow.parent)
    assert res.returncode == 0 and "diverged" not in res.stderr, res.stderr
    return res


def rewritten(journal: Path, events: list[dict]) -> None:
    journal.write_text("".join(json.dumps(ev) + "\n" for ev in events))


def test_a_journal_of_an_older_flowtui_with_an_exhausted_loop_reexecutes(tmp_path):
    """An older flowtui said an exhausted loop's last ctx.loop twice, and its loops' events had no `until`:
    its journals are re-executed without a divergence there."""
    flow, journal = journaled(tmp_path, "ex.py", "from flowtui import FunctionProvider, agent, loop, workflow\n"
                              "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\nclass A:\n    pass\n"
                              "@agent(provider=FunctionProvider(lambda m, t: 'fim'), prompt='p')\nclass B:\n    pass\n"
                              "@workflow(steps=[loop([A], max_iterations=2), B])\nclass W:\n    pass\n")
    older = []
    for ev in lines(journal):  # as the older flowtui wrote it
        if ev["type"] in ("node.start", "node.end") and ev.get("kind") == "loop":
            assert ev["data"].pop("until") is False
        older.append(ev)
        if ev["type"] == "ctx.set" and ev["name"] == "loop" and ev["value"]["stopped_by"] == "exhausted":
            older.append(dict(ev))
    for seq, ev in enumerate(older, 1):
        ev["seq"] = seq
    rewritten(journal, older)
    assert reexecuted(flow, journal).stdout == "fim\n"


def failing_among_calls(flow: Path, tool: str, raises: str) -> Path:
    """A flow whose one reply asks for three calls of ``tool``, the second of which ``raises``."""
    flow.write_text(textwrap.dedent(f'''\
        from flowtui import FatalToolError, FunctionProvider, agent, tool, workflow

        @tool
        def {tool}(x: int) -> str:
            """A tool.

            Args:
                x: a number
            """
            if x == 2:
                {raises}
            return f"row {{x}}"

        def model(messages, tools):
            return {{"tool_calls": [{{"name": "{tool}", "args": {{"x": n}}}} for n in (1, 2, 3)]}}

        @agent(provider=FunctionProvider(model), prompt="p", tools=[{tool}])
        class A:
            pass

        @workflow(steps=[A])
        class W:
            pass
        '''))
    return flow


def test_a_journal_of_an_older_flowtui_that_left_a_failed_runs_calls_unanswered_reexecutes(tmp_path):
    """A run that fails among a reply's calls now answers the ones left; an older flowtui did not, and its
    journals diverged there ("the code did another thing here") where they re-executed to the same failure."""
    flow = failing_among_calls(tmp_path / "fatal.py", "db", 'raise FatalToolError("database unavailable")')
    journal = tmp_path / "run.jsonl"
    res = flowtui("run", str(flow), "--input", "x", "--journal", str(journal), cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    answers = [ev for ev in lines(journal) if ev["type"] == "state.append" and ev["origin"] == "runtime"]
    assert [ev["item"]["content"] for ev in answers] == [
        "Tool call db gave no result: the run failed (FatalToolError: database unavailable).",
        "Tool call db was not run: the run failed (FatalToolError: database unavailable)."]
    older = [ev for ev in lines(journal) if ev not in answers]  # as the older flowtui wrote it
    for seq, ev in enumerate(older, 1):
        ev["seq"] = seq
    rewritten(journal, older)
    res = flowtui("run", str(flow), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 1 and "diverged" not in res.stderr, res.stderr
    assert "database unavailable" in res.stderr


def test_a_run_a_tools_memory_error_ended_reexecutes_to_the_same_failure(tmp_path):
    """The recorded MemoryError was served back as an empty result the run went on with: it diverged there, so
    such a run could not be forked past the tool."""
    flow = failing_among_calls(tmp_path / "oom.py", "load", "raise MemoryError")
    journal, again = tmp_path / "run.jsonl", tmp_path / "again.jsonl"
    res = flowtui("run", str(flow), "--input", "x", "--journal", str(journal), cwd=tmp_path)
    assert res.returncode == 1 and "MemoryError (at oom.py:" in res.stderr, res.stderr
    res = flowtui("run", str(flow), "--resume-from", str(journal), "--journal", str(again), cwd=tmp_path)
    assert res.returncode == 1 and "diverged" not in res.stderr, res.stderr
    assert lines(again)[-1]["error"] == lines(journal)[-1]["error"]  # said as recorded, where the tool raised it


def test_a_journal_of_an_older_flowtui_whose_loops_set_ctx_loop_only_after_an_iteration_reexecutes(tmp_path):
    """ctx.loop is set as a loop starts now (iterations 0); a journal of an older flowtui has no such
    event: re-executed without a divergence there, and a divergence later names the right iteration."""
    source = ("from flowtui import FunctionProvider, agent, loop, workflow\n"
              "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\nclass A:\n    pass\n"
              "@workflow(steps=[loop([loop([A], max_iterations=2, name='inner')], max_iterations=2, name='outer')])\n"
              "class W:\n    pass\n")
    flow, journal = journaled(tmp_path, "old.py", source)
    starts = [ev for ev in lines(journal) if ev["type"] == "ctx.set" and ev["name"] == "loop"
              and ev["value"]["iterations"] == 0]
    assert len(starts) == 3  # the outer loop's and each inner loop's
    older = [ev for ev in lines(journal) if ev not in starts]
    for seq, ev in enumerate(older, 1):
        ev["seq"] = seq
    rewritten(journal, older)
    reexecuted(flow, journal)
    flow.write_text(source.replace("class A:\n    pass", "class A:\n    def before_prompt(self, prompt, ctx):\n"
                                   "        return prompt if len(ctx.state.history) < 3 else 'changed'"))
    res = flowtui("run", str(flow), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 3 and "(W › outer 2 › inner 1 › A › chat)" in res.stderr, res.stderr


def test_a_journal_of_an_older_flowtui_with_a_call_before_tool_changed_reexecutes(tmp_path):
    """An older flowtui did not say, on a tool's end, the call before_tool changed (`ran`): its journals
    diverged there, `ran: recorded (absent), now {...}`."""
    flow, journal = journaled(
        tmp_path, "bt.py", "from flowtui import ScriptedProvider, ToolCall, agent, tool, workflow\n"
        "@tool(description='Busca.')\ndef busca(q: str) -> str:\n    return 'achei ' + q\n"
        "@agent(provider=ScriptedProvider([{'tool_calls': [{'name': 'busca', 'args': {'q': 'x'}}]}, "
        "'fim']), prompt='p', tools=[busca])\nclass A:\n"
        "    def before_tool(self, call, ctx):\n        return ToolCall(name='busca', args={'q': 'y'})\n"
        "@workflow(steps=[A])\nclass W:\n    pass\n")
    older = lines(journal)
    (end,) = [ev for ev in older if ev["type"] == "node.end" and ev.get("kind") == "tool"]
    assert end["data"].pop("ran") == {"name": "busca", "args": {"q": "y"}}  # as the older flowtui wrote it
    rewritten(journal, older)
    reexecuted(flow, journal)


def test_a_run_whose_flow_starts_threads_reexecutes_though_their_names_differ(tmp_path):
    """A change from a thread the flow started says thread:NAME, and a default name counts the process's
    threads: re-executed (its tool served, so one thread fewer), the same code diverged at the origin."""
    flow, journal = journaled(
        tmp_path, "thr.py", "import threading\nfrom flowtui import ScriptedProvider, agent, tool, workflow\n"
        "def later(f):\n    t = threading.Thread(target=f)\n    t.start()\n    t.join()\n"
        "@tool(description='Conta.')\ndef conta(q: str) -> str:\n    later(lambda: None)\n    return q\n"
        "@agent(provider=ScriptedProvider([{'tool_calls': [{'name': 'conta', 'args': {'q': 'x'}}]}, "
        "'fim']), prompt='p', tools=[conta])\nclass A:\n"
        "    def after_response(self, response, ctx):\n"
        "        later(lambda: ctx.state.append('memory', 'from a thread'))\n"
        "@workflow(steps=[A])\nclass W:\n    pass\n")
    assert any(ev.get("origin", "").startswith("thread:Thread-") for ev in lines(journal))
    reexecuted(flow, journal)


def test_a_set_in_the_state_is_journaled_in_one_order_whatever_the_process(tmp_path):
    """A set's order is its strings' hash order, which each Python process draws anew: a run
    re-executed in another process diverged at its start (state.tags[0] 'delta' -> 'gamma') about
    half the time, and flowtui diff found differences between two runs of the same flow."""
    import os

    flow = tmp_path / "sets.py"
    flow.write_text(
        "from pydantic import BaseModel\nfrom flowtui import ScriptedProvider, State, agent, workflow\n"
        "class S(BaseModel):\n    tags: set[str] = {'alpha', 'beta', 'gamma', 'delta', 'epsilon'}\n"
        "    frozen: frozenset[str] = frozenset({'a', 'b', 'c', 'd'})\n"
        "@agent(provider=ScriptedProvider(['ok']), prompt='p')\nclass A:\n"
        "    def __init__(self, s: S = State()):\n        self.s = s\n"
        "    def after_response(self, response, ctx):\n        self.s.tags.add('zeta')\n"
        "@workflow(state=S, steps=[A])\nclass W:\n    pass\n")

    def in_a_process(seed: int, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", str(flow),
                               *args], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)})

    journals = []
    for seed in range(4):  # the order of five strings differs between some of these
        journals.append(tmp_path / f"run{seed}.jsonl")
        assert in_a_process(seed, "--input", "x", "--journal", str(journals[-1])).returncode == 0
    states = {json.dumps([ev.get("state") or ev.get("new") for ev in lines(journal)
                          if ev["type"] in ("run.start", "workflow_state.change")]) for journal in journals}
    assert states == {json.dumps([{"tags": ["alpha", "beta", "delta", "epsilon", "gamma"],
                                   "frozen": ["a", "b", "c", "d"]},
                                  ["alpha", "beta", "delta", "epsilon", "gamma", "zeta"]])}
    for seed in range(4):
        res = in_a_process(seed + 10, "--resume-from", str(journals[seed]), "--no-journal")
        assert res.returncode == 0 and "diverged" not in res.stderr, res.stderr


def test_a_divergence_says_why_its_event_numbers_differ_when_they_do():
    """`diverged … at event #33` beside `now: … (event #23)`, unexplained: the recorded run's pauses are
    events, which the re-execution goes past."""
    from types import SimpleNamespace

    from flowtui.runtime.divergence import report

    ev = SimpleNamespace(journal="a.jsonl", path="W › A", at=33, now=23, recorded="node.start agent A",
                         current="node.start agent B", differences=[], edits_not_made=[], action="stopped")
    lines = report(ev).splitlines()
    assert lines[2] == "  now:      node.start agent B (event #23 of this run: the recorded run's numbers count " \
                       "events a re-execution does not repeat, such as its pauses)", lines
    ev.now = 33
    assert report(ev).splitlines()[2] == "  now:      node.start agent B (event #33)"


def test_a_field_only_the_journal_has_is_said_apart_from_the_value_and_as_absent_now(tmp_path):
    """A ctx.set with a key x beside its value read 'ctx.turnx: recorded 1, now "(none)"': the field glued to
    the name, and the absence quoted as if it were the text "(none)"."""
    journal = tmp_path / "run.jsonl"
    res = flowtui("run", str(FLOWS / "revisao.py"), "--input", "Escreva", "--journal", str(journal), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    events = lines(journal)
    turn = next(e for e in events if e["type"] == "ctx.set" and e["name"] == "turn")
    turn["x"] = 1
    journal.write_text("".join(json.dumps(e) + "\n" for e in events))
    res = flowtui("run", str(FLOWS / "revisao.py"), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    assert "  ctx.turn (x): recorded 1, now (absent)\n" in res.stderr, res.stderr


def test_a_journal_of_another_workflow_diverges_at_its_start_saying_so(tmp_path):
    journal = tmp_path / "run.jsonl"
    res = flowtui("run", str(FLOWS / "pesquisa.py"), "--input", "x", "--journal", str(journal), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    res = flowtui("run", str(FLOWS / "revisao.py"), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    report = res.stderr[res.stderr.index("flowtui: the run diverged"):].splitlines()
    assert report[0] == f"flowtui: the run diverged from {journal} at event #1"
    assert report[3] == ('  workflow: the journal is a run of another workflow (a journal of another flow, or the '
                         'workflow was renamed): "PesquisaWorkflow" → "RevisaoWorkflow"')
    assert report[4].endswith("it differs from its very start: run it without --resume-from")


def test_bad_resume_from_values_exit_2_naming_the_file_and_k(tmp_path):
    journal = tmp_path / "run.jsonl"
    res = flowtui("run", str(FLOWS / "pesquisa.py"), "--input", "x", "--journal", str(journal), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    last = lines(journal)[-1]["seq"]
    (tmp_path / "notes.txt").write_text("not a journal\n")
    cases = {
        "missing.jsonl": "--resume-from missing.jsonl: no such file",
        f"{journal}@{last + 5}": f"--resume-from {journal}@{last + 5}: K={last + 5} is beyond its end: "
                                 f"the recorded run",
        "notes.txt": "--resume-from notes.txt: not a flowtui journal (line 1: not JSON)",
        str(tmp_path): f"--resume-from {tmp_path}: is a folder, not a journal file",
    }
    for value, said in cases.items():
        res = flowtui("run", str(FLOWS / "pesquisa.py"), "--resume-from", value, "--no-journal", cwd=tmp_path)
        assert res.returncode == 2, (value, res.stderr)
        assert f"flowtui: {said}" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr
    with pytest.raises(ResumeError, match=f"K={last + 1} is beyond its end"):
        load_flow(str(FLOWS / "pesquisa.py")).prepare(resume_from=f"{journal}@{last + 1}")
    # another start than the recorded run's: it diverged at once (exit 3, "input: recorded ..., now ..."),
    # as if the code had changed; the options conflict, and are refused as such
    for extra, said in ((("--input", "other"), "--input cannot"), (("--input", ""), "--input cannot"),
                        (("--memory", "a=b", "--data", "c=d"), "--memory and --data cannot")):
        res = flowtui("run", str(FLOWS / "pesquisa.py"), "--resume-from", str(journal), *extra, "--no-journal",
                      cwd=tmp_path)
        assert res.returncode == 2, res.stderr
        assert f"flowtui: {said} be given with --resume-from: a re-execution starts with the recorded run's" \
            in res.stderr, res.stderr


# --- a person's edits and decisions are made again ----------------------------------------------


async def _drive(run, ctl, decide):
    """Run ``run`` to its end; at each pause, ``decide(point)`` acts like a person, then it goes on."""
    task = asyncio.ensure_future(run.execute())
    seen = None
    while not task.done():
        await asyncio.sleep(0.001)
        if ctl.paused and ctl.paused_at is not seen:
            seen = ctl.paused_at
            decide(seen)
    return await task


async def _edited_at_first_iteration(app, message, journal, edit) -> None:
    """Run ``app`` to its end, journaled, a person calling ``edit(run)`` at the end of its first loop
    iteration (once), then going on."""
    ctl = Controller(breakpoints=["loop"])
    run = app.prepare(message, controller=ctl, journal=journal)
    made: list = []

    def person(point):
        if point.kind == "loop_iteration" and not made:
            edit(run)
            made.append(True)
        ctl.resume()

    await _drive(run, ctl, person)


async def test_an_edit_of_the_parent_made_while_paused_in_its_child_is_made_again_on_the_parent(tmp_path):
    """Paused in a child workflow's step, a person added a memory item to the parent: every re-execution
    made it again on the child (the run paused there), and diverged ("run: recorded the top-level run,
    now .1")."""
    first = tmp_path / "first.jsonl"
    ctl = Controller(start_paused=True)
    run = load_flow(str(FLOWS / "subagente.py")).prepare("Resuma ctx.state", controller=ctl, journal=first)
    made: list = []

    def person(point):
        if "PesquisaWorkflow" in point.path and not made:
            run.edits_for(None).add_item("memory", "nota-pai")
            made.append(point)
        ctl.step() if not made else ctl.resume()

    await _drive(run, ctl, person)
    assert made and run.state.memory[-1] == "nota-pai"
    events: list = []
    again = load_flow(str(FLOWS / "subagente.py")).prepare(resume_from=str(first), on_event=events.append)
    await again.execute()
    assert [e for e in events if e.type == "run.diverged"] == []
    assert again.status == "finished" and again.state.memory[-1] == "nota-pai"
    assert [e.run_id for e in events if e.type == "state.append" and e.item == "nota-pai"] == [again.id]


async def test_a_fork_at_k_inside_a_promote_or_its_undo_goes_back_to_before_that_edit(tmp_path, no_live):
    """A promote is two events (the reply leaves the history, then joins memory), its undo two more. K
    between them re-executed a state nobody saw: the reply in neither place (or in both), no warning. K
    inside one edit now stops before it, said as for a K inside a tool call; the status counts it once."""
    from flowtui.runtime.recorded import load_recorded

    guard, called = no_live
    first = tmp_path / "first.jsonl"
    before: dict = {}

    def edit(run):
        edits = run.edits_for(None)
        history = run.state.history
        escritor = next(i for i, m in enumerate(history) if m.role == "assistant" and m.agent == "EscritorAgent")
        before.update(history=list(history), memory=list(run.state.memory))
        edits.promote(escritor)
        edits.undo()
        edits.promote(escritor)

    await _edited_at_first_iteration(load_flow(str(FLOWS / "revisao.py")), "Escreva", first, edit)
    user = [e for e in lines(first) if e.get("origin") == "user"]
    notes = [e.get("note") for e in user]
    assert len(user) == 6 and notes[0].startswith("promoted #") and notes[1].endswith(" (added)"), notes
    assert notes[2] == f"undone: {notes[0].split(' (')[0]} (history as before it)", notes
    assert notes[3] == f"undone: {notes[0].split(' (')[0]} (memory as before it, with the above)", notes
    assert folded(first).user_edits == 3  # promote, undo, promote (it said 6)
    guard()
    for a in (0, 2, 4):  # K on each edit's first event: half of it
        k = user[a]["seq"]
        recorded = load_recorded(f"{first}@{k}")
        assert (recorded.at, recorded.asked, recorded.inside_edit) == (k - 1, k, notes[a])
    assert load_recorded(f"{first}@{user[1]['seq']}").asked is None  # the promote whole: as asked

    again = load_flow(str(FLOWS / "revisao.py"))
    ctl2 = Controller(start_paused=True)  # as the app starts a fork
    fork = again.prepare(resume_from=f"{first}@{user[0]['seq']}", controller=ctl2, journal=tmp_path / "fork.jsonl")
    task = await _paused(fork, ctl2)
    assert list(fork.state.history) == before["history"] and list(fork.state.memory) == before["memory"]
    assert "which is inside an edit (promoted #" in folded(tmp_path / "fork.jsonl").status_line()
    ctl2.stop()
    await asyncio.wait_for(task, 60)
    res = flowtui("run", str(FLOWS / "revisao.py"), "--resume-from", f"{first}@{user[2]['seq']}", "--no-journal",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (f"! event #{user[2]['seq']} is inside an edit ({notes[2]}): re-executed up to event "
            f"#{user[2]['seq'] - 1}, before it") in res.stderr, res.stderr


async def test_a_journal_with_edits_and_decisions_reexecutes_identically(tmp_path, no_live):
    guard, called = no_live
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    app = load_flow(str(FLOWS / "revisao.py"))
    ctl = Controller(breakpoints=["loop"], approve=["registrar_problema"])
    run = app.prepare("Escreva", controller=ctl, journal=first)
    done: list[str] = []

    def person(point):
        edits = run.edits_for(None)
        if point.kind == "tool" and "deny" not in done:
            done.append("deny")
            edits.decide("deny", "not now")  # the model reads "denied by the user: not now"
            return
        if point.kind == "tool":
            edits.decide("approve")
            return
        if point.kind == "loop_iteration" and "edit" not in done:
            done.append("edit")
            history = run.state.history
            escritor = next(i for i, m in enumerate(history) if m.role == "assistant" and m.agent == "EscritorAgent")
            edits.promote(escritor, "Rascunho 1, promovido")
            edits.set_field("rodadas", "7")
            edits.add_item("tasks", "revisar de novo")
        ctl.resume()

    await _drive(run, ctl, person)
    assert done == ["deny", "edit"]
    kinds = [(e["type"], e.get("origin")) for e in lines(first)]
    assert ("tool.decision", "user") in kinds and ("workflow_state.change", "user") in kinds
    # each decision once (a deny's result, appended as the run goes on, is part of it: it counted twice),
    # the promote once, the field and the task: the status's N edits
    decisions = [e for e in lines(first) if e["type"] == "tool.decision" and e["decision"] != "edited"]
    assert folded(first).user_edits == len(decisions) + 3
    guard()
    events: list = []
    again = load_flow(str(FLOWS / "revisao.py"))
    await again.run(journal=second, resume_from=str(first), on_event=events.append,
                    controller=Controller(approve=["registrar_problema"]))
    assert called == []
    assert "run.diverged" not in [e.type for e in events]
    assert "run.pause" not in [e.type for e in events]  # the prefix never waits for a person
    assert recorded_events(second) == recorded_events(first)
    # and the re-execution's journal re-executes on its own: its edits have no pause before them (the
    # prefix never paused), and were taken for what the code did (diverged: "edited here by hand")
    third: list = []
    await load_flow(str(FLOWS / "revisao.py")).run(journal=tmp_path / "third.jsonl", resume_from=str(second),
                                                   on_event=third.append,
                                                   controller=Controller(approve=["registrar_problema"]))
    assert called == []
    assert "run.diverged" not in [e.type for e in third], [e for e in third if e.type == "run.diverged"]
    assert recorded_events(tmp_path / "third.jsonl") == recorded_events(first)


async def test_a_stop_command_in_the_journal_stops_the_reexecution_there(tmp_path, no_live):
    guard, called = no_live
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    ctl = Controller(breakpoints=["RevisorAgent"])
    run = load_flow(str(FLOWS / "revisao.py")).prepare("Escreva", controller=ctl, journal=first)
    await _drive(run, ctl, lambda point: ctl.stop())
    assert lines(first)[-1]["status"] == "stopped"
    guard()
    await load_flow(str(FLOWS / "revisao.py")).run(journal=second, resume_from=str(first))
    assert called == []
    *made, end = recorded_events(second)
    *was, recorded_end = recorded_events(first)
    assert made == was
    # its end says the stop was made again, and whose (the recorded words alone said "stopped by user")
    assert end["reason"] == f"stopped again where the run of {first} was stopped (stopped by user)"
    assert {**end, "reason": None} == {**recorded_end, "reason": None}
    # and the re-execution's journal stops a re-execution of it there too (it went on past the stop: diverged)
    third = tmp_path / "third.jsonl"
    await load_flow(str(FLOWS / "revisao.py")).run(journal=third, resume_from=str(second))
    *again, end = recorded_events(third)
    assert again == was and called == []
    assert end["reason"] == f"stopped again where the run of {second} was stopped (stopped by user)"


async def test_a_reexecution_stopped_again_where_a_watchpoint_stopped_it_says_so_and_exits_0(tmp_path):
    # it exited 4, its end naming a watchpoint this run never had, at the recorded run's event, and no line said why
    first = tmp_path / "w.jsonl"
    flowtui = [sys.executable, "-m", "flowtui.tui.cli", "run", str(FLOWS / "revisao.py")]
    done = subprocess.run([*flowtui, "--input", "x", "--watch", "state.rodadas >= 2", "--journal", str(first)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    done = subprocess.run([*flowtui, "--resume-from", str(first), "--no-journal"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"■ stopped (stopped again where the run of {first} was stopped (watchpoint "
                           "state.rodadas >= 2 fired at event #"), done.stderr
    assert "◆" not in done.stderr


# --- @K: the checked prefix ends at K, then the run is live ------------------------------------


async def test_resuming_at_k_serves_up_to_k_then_pauses_and_goes_on_live(tmp_path, monkeypatch):
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    await load_flow(str(FLOWS / "revisao.py")).run("Escreva", journal=first)
    recorded = lines(first)
    chats = [e for e in recorded if e["type"] == "node.end" and e["kind"] == "chat"]
    k = chats[3]["seq"]  # four model calls in the prefix, three live after it
    asked: list[str] = []
    real = ScriptedProvider.complete

    async def counting(self, request):
        asked.append(request.agent)
        return await real(self, request)

    monkeypatch.setattr(ScriptedProvider, "complete", counting)
    ctl = Controller(start_paused=True)  # as the app starts a run
    events: list = []
    run = load_flow(str(FLOWS / "revisao.py")).prepare(controller=ctl, journal=second, resume_from=f"{first}@{k}",
                                                       on_event=events.append)
    task = await _paused(run, ctl)
    pause = events[-1]
    assert pause.type == "run.pause" and pause.reason == "resumed"  # the first pause point after K
    assert asked == [] and pause.seq > k  # nothing live yet: the prefix, events 1..K, was served
    ctl.resume()
    await task
    assert asked == [e["name"] for e in chats[4:]]  # the script went on at its next reply
    assert recorded_events(second) == recorded_events(first)
    assert lines(second)[0]["resumed_from"]["at"] == k


def test_headless_resume_at_k_goes_on_running_and_journals_the_whole_run(tmp_path):
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    flow = str(FLOWS / "revisao.py")
    res = flowtui("run", flow, "--input", "Escreva", "--journal", str(first), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    k = [e for e in lines(first) if e["type"] == "node.end" and e["kind"] == "chat"][2]["seq"]
    again = flowtui("run", flow, "--resume-from", f"{first}@{k}", "--journal", str(second), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout == res.stdout  # after K, the scripted model went on at its next reply
    start = lines(second)[0]
    assert start["resumed_from"] == {"journal": str(first), "run_id": lines(first)[0]["run_id"], "at": k}
    assert recorded_events(second) == recorded_events(first)  # the whole run, prefix included


# --- the checks, in flows of the test's own -----------------------------------------------------


class Counter(BaseModel):
    rodadas: int = 0


KNOBS = {"step": 1, "deny": True, "prompt": "Note, then answer."}


def counting_flow(answers: list):
    """An agent that calls ``anotar`` then answers; its hook counts rounds by KNOBS["step"]."""

    def model(messages, tools):
        answers.append(len(messages))
        if not any(m.role == "tool" for m in messages):
            return {"content": "", "tool_calls": [{"name": "anotar", "args": {"texto": "x"}}]}
        return f"feito {len(messages)}"

    @tool(name="anotar", description="Notes a text.")
    def anotar(texto: str) -> str:
        return f"anotado: {texto}"

    def deny(invocation, call_next):
        if KNOBS["deny"]:
            return ToolOutput(content="not allowed", is_error=True)
        return call_next(invocation)

    @agent(provider=FunctionProvider(model), prompt=KNOBS["prompt"], tools=[anotar])
    class Anotador:
        def __init__(self, s: Counter = State()):
            self.s = s

        def after_response(self, response, ctx):
            self.s.rodadas += KNOBS["step"]

    @workflow(state=Counter, steps=[loop(steps=[Anotador], until=until_answered, max_iterations=4)],
              middlewares=[Middleware(name="guard", tool=deny)])
    class Anotacao:
        pass

    return Anotacao


@pytest.fixture
def knobs():
    KNOBS.update(step=1, deny=True, prompt="Note, then answer.")
    yield KNOBS
    KNOBS.update(step=1, deny=True, prompt="Note, then answer.")


async def test_a_run_an_older_flowtui_started_from_a_snapshot_is_not_said_to_diverge_for_a_change_of_code(tmp_path):
    """Its state came from a snapshot its journal does not name (an older flowtui's run.start had no snapshot):
    "state.aprovado: recorded true, now false" was all it said, as if the code had changed (it had not)."""
    from flowtui.runtime.snapshot import Snapshot

    journal = tmp_path / "snap.jsonl"
    flow = load_flow(str(FLOWS / "revisao.py"))
    await flow.run("de novo", snapshot=Snapshot(state={"rodadas": 3}), journal=journal)
    older = lines(journal)
    del older[0]["snapshot"]
    journal.write_text("".join(json.dumps(e) + "\n" for e in older))
    events: list = []
    await flow.run(resume_from=str(journal), on_event=events.append)
    diverged = next(e for e in events if e.type == "run.diverged")
    assert diverged.at == 1 and [(d.field, d.recorded, d.now) for d in diverged.differences] == [("state.rodadas", 3, 0)]
    assert diverged.differences[0].why.endswith("or the recorded run started from a snapshot (--from-snapshot) its "
                                                "journal does not name (one an older flowtui wrote)")


def described_flow(description: str):
    """One agent with a tool described as ``description``: it calls it once, then answers."""

    @tool(name="anotar", description=description)
    class Anotar:
        def execute(self):
            return "anotado"

    def model(messages, tools):
        return "fim" if any(m.role == "tool" for m in messages) else {
            "content": "", "tool_calls": [{"name": "anotar", "args": {}}]}

    @agent(provider=FunctionProvider(model), prompt="p", tools=[Anotar])
    class A:
        pass

    @workflow(steps=[A])
    class Descrito:
        pass

    return Descrito


async def test_a_changed_tool_description_is_a_divergence_of_the_request(tmp_path):
    """What the model is told of a tool (its description, its arguments' schema) changed, and the
    re-execution saw the same request: only the tools' names were recorded."""
    journal = tmp_path / "d.jsonl"
    await bootstrap(described_flow("Notes a fact.")).run("go", journal=journal)
    events: list = []
    await bootstrap(described_flow("Notes a fact. ALWAYS call it ten times.")).run(
        resume_from=str(journal), on_event=events.append)
    diverged = next(e for e in events if e.type == "run.diverged")
    (difference,) = diverged.differences
    assert difference.field == "request.tools_digest" and "agent's tools changed" in difference.why
    events = []  # the same code: the same digest, no divergence
    await bootstrap(described_flow("Notes a fact.")).run(resume_from=str(journal), on_event=events.append)
    assert not [e for e in events if e.type == "run.diverged"]
    old = tmp_path / "old.jsonl"  # a journal from before the digest was recorded re-executes as before
    recorded = lines(journal)
    for event in recorded:
        event.get("data", {}).get("request", {}).pop("tools_digest", None)
    old.write_text("".join(json.dumps(event) + "\n" for event in recorded))
    events = []
    await bootstrap(described_flow("Notes a fact.")).run(resume_from=str(old), on_event=events.append)
    assert not [e for e in events if e.type == "run.diverged"]
    from flowtui.runtime.diff import diff_runs, load_run  # flowtui diff says it too (not "the same")

    other = tmp_path / "other.jsonl"
    await bootstrap(described_flow("Notes a fact. ALWAYS call it ten times.")).run("go", journal=other)
    assert [d.field for d in diff_runs(load_run(journal).events, load_run(other).events)] == ["tools_digest"]
    assert diff_runs(load_run(journal).events, load_run(old).events) == []  # (one from before: not compared)


def object_flow():
    """A tool that keeps a live object in ctx (a connection), made on its first call, used on each."""

    class Conexao:
        def __init__(self):
            self.usos = 0

        def usar(self):
            self.usos += 1
            return self.usos

    @tool(name="usar", description="Uses the connection.")
    class Usar:
        def execute(self, ctx: AgentContext = Context()):
            if ctx.get("conn") is None:
                ctx.conn = Conexao()
            return f"uso {ctx.conn.usar()}"

    def model(messages, tools):
        done = sum(m.role == "tool" for m in messages)
        return "fim" if done >= 3 else {"content": "", "tool_calls": [{"name": "usar", "args": {}}]}

    @agent(provider=FunctionProvider(model), prompt="p", tools=[Usar])
    class A:
        pass

    @workflow(steps=[loop(steps=[A], until=lambda ctx: ctx.turn.response == "fim", max_iterations=5)])
    class ObjWorkflow:
        pass

    return ObjWorkflow


async def test_a_ctx_object_the_journal_kept_as_text_is_not_made_again_as_that_text(tmp_path):
    """ctx.conn = Conexao() in a served tool came back as the text "<...Conexao object>": the live part
    after K failed on it ('str' object has no attribute 'usar'), and nothing said why."""
    journal = tmp_path / "obj.jsonl"
    await bootstrap(object_flow()).run("go", journal=journal)
    k = _seq(journal, type="node.end", kind="agent")  # after the first turn: the tool has made its object
    events: list = []
    await bootstrap(object_flow()).run(resume_from=f"{journal}@{k}", on_event=events.append)
    diverged = next(e for e in events if e.type == "run.diverged")
    (difference,) = diverged.differences
    assert difference.field == "ctx.conn" and difference.recorded.endswith("Conexao object>")
    assert 'give the tool replay="rerun"' in difference.why
    ctl = Controller()  # paused there, then continued: the tool runs, live, and makes its object
    events = []
    run = bootstrap(object_flow()).prepare(controller=ctl, resume_from=f"{journal}@{k}", on_divergence="pause",
                                           on_event=events.append)
    task = await _paused(run, ctl)
    ctl.resume()
    await asyncio.wait_for(task, 10)
    results = [e.item.content for e in events if e.type == "state.append" and getattr(e.item, "role", "") == "tool"]
    assert results == ["uso 1", "uso 2", "uso 3"], results


async def test_a_ctx_value_whose_json_reads_back_as_another_type_is_not_made_again_as_its_json(tmp_path):
    """ctx.when = datetime(...) in a served tool came back as its ISO text (a Decimal as a text, a tuple
    as a list): the re-execution of unchanged code failed ('str' object has no attribute 'year'), said
    as a divergence of the hook that read it."""
    import datetime

    @tool(name="marcar", description="Marks the time.")
    class Marcar:
        def execute(self, ctx: AgentContext = Context()):
            ctx.quando = datetime.datetime(2024, 5, 6)
            ctx.nomes = ["a", "b"]  # JSON already: served as it is
            return "marcado"

    def model(messages, tools):
        return "fim" if any(m.role == "tool" for m in messages) else \
            {"content": "", "tool_calls": [{"name": "marcar", "args": {}}]}

    years = []

    @agent(provider=FunctionProvider(model), prompt="p", tools=[Marcar])
    class A:
        def after_response(self, response, ctx):
            years.append(ctx.quando.year)

    @workflow(steps=[A])
    class TimeWorkflow:
        pass

    journal = tmp_path / "when.jsonl"
    await bootstrap(TimeWorkflow).run("go", journal=journal)
    sets = {ev["name"]: ev.get("typed") for ev in lines(journal) if ev["type"] == "ctx.set" and ev["origin"] != "runtime"}
    assert sets == {"quando": "datetime", "nomes": None}
    # written only where it says something: a journal of a flowtui before it is the same line by line
    assert not [ev for ev in lines(journal) if "typed" in ev and ev["typed"] is None]
    events: list = []
    await bootstrap(TimeWorkflow).run(resume_from=str(journal), on_event=events.append)
    diverged = next(e for e in events if e.type == "run.diverged")
    (difference,) = diverged.differences
    assert (difference.field, difference.recorded) == ("ctx.quando", '"2024-05-06T00:00:00"')
    assert "a datetime the journal keeps only as its JSON form" in difference.why
    assert 'give the tool replay="rerun"' in difference.why
    assert years == [2024]  # the hook never read a text in its place


def test_a_tool_before_tool_stopped_is_journaled_as_not_run_and_a_flow_that_now_runs_it_diverges(tmp_path):
    """Its node ended "stopped" with nothing said of its running: a re-execution took it for a call that
    never returned, checked nothing after it, and ran it live (a flow whose hook no longer stops ran
    the deleting tool without a word)."""
    source = ("from flowtui import ScriptedProvider, agent, tool, workflow\n"
              "@tool(description='Deletes.')\ndef apagar(q: str) -> str:\n    open('apagado.txt', 'w').write(q)\n"
              "    return 'apagado'\n"
              "@agent(provider=ScriptedProvider([{'tool_calls': [{'name': 'apagar', 'args': {'q': 'x'}}]}, 'fim']), "
              "prompt='p', tools=[apagar])\nclass A:\n"
              "    def before_tool(self, call, ctx):\n        ctx.stop()\n"
              "@workflow(steps=[A])\nclass W:\n    pass\n")
    flow, journal = journaled(tmp_path, "bt.py", source)
    (end,) = [ev for ev in lines(journal) if ev["type"] == "node.end" and ev["kind"] == "tool"]
    assert (end["status"], end["data"]["executed"]) == ("stopped", 0)
    res = reexecuted(flow, journal)
    assert "never returned" not in res.stderr and not (tmp_path / "apagado.txt").exists()
    flow.write_text(source.replace("        ctx.stop()\n", "        pass\n"))
    res = flowtui("run", str(flow), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
    assert res.returncode == 3 and "the recorded run did not run tool apagar here" in res.stderr, res.stderr
    assert not (tmp_path / "apagado.txt").exists()


async def test_a_divergence_can_pause_and_continuing_goes_on_live(tmp_path, knobs):
    answers: list = []
    first = tmp_path / "first.jsonl"
    await bootstrap(counting_flow(answers)).run("go", journal=first)
    assert len(answers) == 2
    knobs["step"] = 2
    ctl = Controller()
    events: list = []
    run = bootstrap(counting_flow(answers)).prepare(controller=ctl, resume_from=str(first),
                                                    on_divergence="pause", on_event=events.append)
    task = await _paused(run, ctl)
    diverged = next(e for e in events if e.type == "run.diverged")
    assert diverged.action == "paused" and diverged.path == "Anotacao › loop 1 › Anotador"
    assert [(d.field, d.recorded, d.now) for d in diverged.differences] == [("state.rodadas", 1, 2)]
    assert diverged.at == _seq(first, type="workflow_state.change", path="rodadas")
    assert events[-1].type == "run.pause" and events[-1].reason == "diverged"
    assert len(answers) == 2  # nothing live while it waits
    ctl.resume()
    await task
    assert len(answers) == 3  # continuing called the model, live
    assert events[-1].type == "run.end" and events[-1].status == "finished"


async def test_a_divergence_names_the_edits_up_to_k_it_will_not_make_again(tmp_path, knobs):
    """Continuing live after a divergence dropped the person's later recorded edits in silence: only a
    diff of the two journals showed them gone. The divergence names them (flowtui run, the app)."""
    from textual.app import App

    from flowtui.runtime.divergence import report
    from flowtui.tui.screens.diverged import DivergedScreen

    answers: list = []
    first = tmp_path / "first.jsonl"

    def edit(run):
        edits = run.edits_for(None)
        edits.add_item("memory", "lembrete")
        edits.add_item("tasks", "revisar")
        edits.undo()
        edits.set_field("rodadas", "3")

    await _edited_at_first_iteration(bootstrap(counting_flow(answers)), "go", first, edit)
    knobs["step"] = 2  # diverges at the first turn's hook, before the pause where the edits were made
    events: list = []
    again = bootstrap(counting_flow(answers)).prepare(controller=Controller(), resume_from=str(first),
                                                      on_divergence="pause", on_event=events.append)
    task = await _paused(again, again.controller)
    diverged = next(e for e in events if e.type == "run.diverged")
    assert diverged.edits_not_made == ['added memory[0]: "lembrete"', 'added tasks[0]: "revisar"',
                                       "undone: added tasks[0] (tasks as before it)", "set rodadas to 3"]
    assert ('  4 of your edits (added memory[0]: "lembrete"; added tasks[0]: "revisar"; undone: added tasks[0] '
            "(tasks as before it); set rodadas to 3) that the recorded run holds after this point: not made "
            "again") in report(diverged)

    class Shows(App):
        def on_mount(self) -> None:
            self.push_screen(DivergedScreen(diverged))

    app = Shows()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        said = str(app.screen.query_one("#diverged-edits").render())
        assert said.startswith('4 of your edits (added memory[0]: "lembrete";') and "will not be made again" in said
    again.controller.stop()
    await task


async def test_a_divergence_in_a_recorded_edit_names_the_edits_made_after_it(tmp_path):
    """A recorded edit that comes out otherwise now (its field's validator changed) diverges while the
    edits at that pause are made again: the ones after it were neither made nor named."""
    from pydantic import ConfigDict, field_validator

    clamp = {"at": 10}

    class S(BaseModel):
        model_config = ConfigDict(validate_assignment=True)
        n: int = 0

        @field_validator("n")
        @classmethod
        def _at_most(cls, value: int) -> int:
            return min(value, clamp["at"])

    @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
    class A:
        pass

    @workflow(state=S, steps=[loop(steps=[A], max_iterations=2)])
    class W:
        pass

    first = tmp_path / "first.jsonl"

    def edit(run):
        run.edits_for(None).set_field("n", "7")
        run.edits_for(None).add_item("memory", "depois")

    await _edited_at_first_iteration(bootstrap(W), "go", first, edit)
    clamp["at"] = 5  # the set field now comes out 5, not 7
    events: list = []
    again = bootstrap(W).prepare(controller=Controller(), resume_from=str(first), on_divergence="pause",
                                 on_event=events.append)
    task = await _paused(again, again.controller)
    diverged = next(e for e in events if e.type == "run.diverged")
    assert [(d.field, d.recorded, d.now) for d in diverged.differences] == [("state.n", 7, 5)], diverged
    assert diverged.edits_not_made == ['added memory[0]: "depois"']
    from flowtui.runtime.divergence import report  # (one edit: not "1 of your edit")

    assert '  your edit (added memory[0]: "depois") that the recorded run holds after this point' in report(diverged)
    again.controller.stop()
    await task


async def _paused_after_divergence(first, answers) -> tuple[list, Controller, asyncio.Task]:
    ctl = Controller()
    events: list = []
    run = bootstrap(counting_flow(answers)).prepare(controller=ctl, resume_from=str(first),
                                                    on_divergence="pause", on_event=events.append)
    task = await _paused(run, ctl)
    return events, ctl, task


async def test_the_pause_after_a_divergence_names_the_agent_and_the_tool_once(tmp_path, knobs):
    """The run waits inside the node about to go live (the model call, the tool): its path says
    ``Anotador › chat`` and ``Anotador › anotar``, as an ordinary pause point's does."""
    answers: list = []
    first = tmp_path / "first.jsonl"
    await bootstrap(counting_flow(answers)).run("go", journal=first)
    knobs["prompt"] = "Note twice, then answer."  # diverges at the model call itself
    events, ctl, task = await _paused_after_divergence(first, answers)
    pause = events[-1]
    assert pause.type == "run.pause" and pause.reason == "diverged" and pause.point == "chat"
    assert pause.path == ["Anotacao", "loop 1/4", "Anotador", "chat"]
    view = RunView()
    view.apply_many(events)
    assert view.path() == ["Anotacao", "loop 1/4", "Anotador", "chat"]
    ctl.stop()
    await task

    knobs.update(prompt="Note, then answer.", deny=False)  # diverges at the tool the recorded run did not run
    events, ctl, task = await _paused_after_divergence(first, answers)
    pause = events[-1]
    assert pause.type == "run.pause" and pause.reason == "diverged" and pause.point == "tool"
    assert pause.path == ["Anotacao", "loop 1/4", "Anotador", "anotar"]
    ctl.stop()
    await task


async def test_a_tool_the_recorded_run_did_not_run_is_a_divergence_not_a_live_call(tmp_path, knobs):
    answers: list = []
    first = tmp_path / "first.jsonl"
    await bootstrap(counting_flow(answers)).run("go", journal=first)
    tool_end = next(e for e in lines(first) if e["type"] == "node.end" and e["kind"] == "tool")
    assert tool_end["data"]["executed"] == 0  # the middleware answered in its place
    knobs["deny"] = False
    events: list = []
    await bootstrap(counting_flow(answers)).run(resume_from=str(first), on_event=events.append)
    diverged = next(e for e in events if e.type == "run.diverged")
    assert diverged.at == tool_end["seq"] and diverged.differences[0].field == "tool"
    assert "did not run tool anotar here" in diverged.differences[0].why
    assert events[-1].status == "stopped" and events[-1].reason.startswith("diverged from")
    assert len(answers) == 2


# --- a real provider through a cassette ----------------------------------------------------------


class SomaArgs(BaseModel):
    a: int
    b: int


@tool(name="somar", description="Adds two integers.", schema=SomaArgs)
class Somar:
    def execute(self, args: SomaArgs = Input()):
        return str(args.a + args.b)


def litellm_flow(server):
    class Model(LiteLLMProvider):
        model = "openai/gpt-test"
        api_base = server.base_url
        retry = Retry(attempts=2, base_delay_s=0.001, max_delay_s=0.01)

    @agent(provider=Model(api_key="sk-loopback-FAKE-0123456789"), prompt="Use somar.", tools=[Somar])
    class Calc:
        pass

    @workflow(steps=[loop(steps=[Calc], until=until_answered, max_iterations=4)])
    class CalcWorkflow:
        pass

    return CalcWorkflow


async def test_a_real_provider_run_reexecutes_with_no_request_and_a_cassette_goes_on_after_k(tmp_path):
    first, second, third = (tmp_path / f"{n}.jsonl" for n in ("first", "second", "third"))
    cassette = tmp_path / "calc.cassette.jsonl"
    with LoopbackOpenAI() as server:
        server.script(reply("", tool_calls=[{"name": "somar", "args": {"a": 2, "b": 3}}]), reply("2 + 3 = 5"))
        flow = litellm_flow(server)
        assert await bootstrap(flow, record=cassette).run("quanto é 2+3?", journal=first) == "2 + 3 = 5"
        assert len(server.requests) == 2
        events: list = []
        out = await bootstrap(flow).run(journal=second, resume_from=str(first), on_event=events.append)
        assert out == "2 + 3 = 5" and len(server.requests) == 2  # no request in the prefix
        assert "run.diverged" not in [e.type for e in events]
        # the same events; the request names the same model, which the first run was recording to a cassette
        assert _model_key(recorded_events(second)) == _model_key(recorded_events(first))
        k = next(e["seq"] for e in lines(first) if e["type"] == "node.end" and e["kind"] == "chat")
        out = await bootstrap(flow, replay=cassette).run(journal=third, resume_from=f"{first}@{k}")
        assert out == "2 + 3 = 5" and len(server.requests) == 2  # after K: the cassette's next exchange
    # the same run, but for the live call's request, sent through the cassette (it names no model)
    assert _no_model(recorded_events(third)) == _no_model(recorded_events(first))


def _model_key(events: list[dict]) -> list[dict]:
    for event in events:
        request = event.get("data", {}).get("request") if event["type"] == "node.start" else None
        if request is not None:
            request["model"] = model_key(request["model"])
    return events


def _no_model(events: list[dict]) -> list[dict]:
    for event in events:
        request = event.get("data", {}).get("request") if event["type"] == "node.start" else None
        if request is not None:
            request.pop("model")
    return events


def test_values_shown_by_their_repr_reexecute_without_a_divergence(tmp_path):
    """A generator or a plain object set on ctx is shown by its repr, which names a memory address
    that differs from run to run: shown without it, a re-execution does not take it for a change."""
    flow = tmp_path / "objects.py"
    flow.write_text(
        "from flowtui import FunctionProvider, agent, workflow\n"
        "class Thing:\n    pass\n"
        "class A:\n"
        "    def after_response(self, response, ctx):\n"
        "        ctx.thing = Thing()\n"
        "        ctx.pending = (n for n in range(3))\n"
        "A = agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')(A)\n"
        "@workflow(steps=[A])\nclass Objects:\n    pass\n")
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    assert flowtui("run", str(flow), "--input", "go", "--journal", str(first), cwd=tmp_path).returncode == 0
    shown = {e["name"]: e["value"] for e in lines(first) if e["type"] == "ctx.set"}
    assert shown["thing"].endswith(".Thing object>")
    assert " at 0x" not in shown["pending"]
    again = flowtui("run", str(flow), "--resume-from", str(first), "--journal", str(second), cwd=tmp_path)
    assert again.returncode == 0, again.stderr  # 3 and a report at a divergence
    assert recorded_events(second) == recorded_events(first)


def test_estimated_usage_reexecutes_as_recorded_and_so_does_a_journal_from_before_it(tmp_path):
    """A reply that said no usage is estimated and marked so; served from the journal it lost the mark
    (a divergence at the first model call). A journal written before replies were estimated (0 tokens,
    no mark) re-executes as it was recorded too."""
    flow = tmp_path / "fn.py"
    flow.write_text("from flowtui import FunctionProvider, agent, workflow\n"
                    "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\nclass A:\n    pass\n"
                    "@workflow(steps=[A, A])\nclass W:\n    pass\n")
    first, old = tmp_path / "first.jsonl", tmp_path / "old.jsonl"
    assert flowtui("run", str(flow), "--input", "go", "--journal", str(first), cwd=tmp_path).returncode == 0
    chats = [e for e in lines(first) if e["type"] == "node.end" and e["kind"] == "chat"]
    assert chats and all(e["data"]["usage_estimated"] is True and e["data"]["prompt_tokens"] > 0 for e in chats)
    before = []
    for event in lines(first):
        if event["type"] == "node.end" and event["kind"] == "chat":
            data = event["data"]
            del data["usage_estimated"]
            data["prompt_tokens"] = data["completion_tokens"] = 0
            data["reply"]["usage"] = {"prompt_tokens": 0, "completion_tokens": 0}
        for totals in (event.get("totals"), (event.get("data") or {}).get("totals")):
            if totals:  # the run's and the workflow's: they added up the zeros
                totals["tokens"] = {"prompt": 0, "completion": 0, "total": 0}
        before.append(json.dumps(event))
    old.write_text("\n".join(before) + "\n")
    for journal in (first, old):
        again = flowtui("run", str(flow), "--resume-from", str(journal), "--no-journal", cwd=tmp_path)
        assert again.returncode == 0, (journal.name, again.stderr)  # 3 and a report at a divergence


async def test_continuing_from_a_pause_pauses_at_that_same_place(tmp_path):
    """Paused before an agent after n (next turn), K its pause: the re-executed run paused at the end of
    the loop iteration before, a pause point the recorded run went past on its way there."""
    first = tmp_path / "first.jsonl"

    async def wait_paused(ctl, task):
        for _ in range(5000):
            if ctl.paused or task.done():
                return
            await asyncio.sleep(0.001)

    ctl = Controller(start_paused=True)
    events: list = []
    run = load_flow(str(FLOWS / "revisao.py")).prepare("Escreva", controller=ctl, journal=first,
                                                       on_event=events.append)
    task = asyncio.ensure_future(run.execute())
    for _ in range(3):  # from PlannerAgent to the loop's EscritorAgent, RevisorAgent, then EscritorAgent again
        await wait_paused(ctl, task)
        ctl.next_turn()
        await asyncio.sleep(0.01)
    await wait_paused(ctl, task)
    there = events[-1]
    assert there.type == "run.pause" and (there.point, there.name) == ("agent", "EscritorAgent")
    assert "loop 2/5" in there.path  # the second iteration: the first one's end was passed on the way
    ctl.stop()
    await task
    again = Controller(start_paused=True)
    later: list = []
    run = load_flow(str(FLOWS / "revisao.py")).prepare(controller=again, resume_from=f"{first}@{there.seq}",
                                                       on_event=later.append)
    task = asyncio.ensure_future(run.execute())
    await wait_paused(again, task)
    pause = later[-1]
    assert pause.type == "run.pause" and pause.reason == "resumed"
    assert (pause.point, pause.name, pause.path) == (there.point, there.name, there.path)
    again.stop()
    await task


# --- K inside a tool call: the prefix ends before the call, which runs live once -----------------


def side_effect_flow(tmp_path: Path) -> tuple[Path, Path]:
    """flows/revisao.py whose reviewer tool also appends the problem to a file: an effect on the world."""
    flows = tmp_path / "flows"
    shutil.copytree(FLOWS, flows)
    flow, side = flows / "revisao.py", tmp_path / "SIDE"
    text, anchor = flow.read_text(), "        s.problemas.append(args.descricao)\n"
    assert anchor in text
    flow.write_text(text.replace(anchor, f"        open({str(side)!r}, 'a').write(args.descricao + '\\n')\n" + anchor))
    return flow, side


async def test_k_inside_a_tool_call_pauses_before_that_call_and_nothing_of_it_runs(tmp_path):
    """Its effects (events start..end-1: its ctx fields, state, result message) come only from running
    it: K there ran the tool live inside the prefix, before the pause that said 'before tool'."""
    flow, side = side_effect_flow(tmp_path)
    first = tmp_path / "first.jsonl"
    await load_flow(str(flow)).run("Escreva", journal=first)
    calls = side.read_text().count("\n")
    start = _seq(first, type="node.start", kind="tool")
    end = _seq(first, type="node.end", kind="tool")
    assert calls >= 2 and end - start >= 3  # the call's own events lie between them
    for k in range(start, end):
        side.write_text("")
        ctl, events = Controller(start_paused=True), []
        second = tmp_path / f"at{k}.jsonl"
        run = load_flow(str(flow)).prepare(controller=ctl, journal=second, resume_from=f"{first}@{k}",
                                           on_event=events.append)
        task = await _paused(run, ctl)
        pause = events[-1]
        assert (pause.type, pause.reason, pause.point, pause.name) == ("run.pause", "resumed", "tool",
                                                                       "registrar_problema"), k
        assert side.read_text() == "", k  # nothing of the tool ran
        assert events[0].resumed_from.model_dump() == {"journal": str(first), "run_id": lines(first)[0]["run_id"],
                                                       "at": start - 1, "before_tool": "registrar_problema",
                                                       "asked": k}
        view = RunView()
        view.apply_many(events)
        assert view.status_line() == (f"paused before tool registrar_problema (re-executed up to event #{start - 1} "
                                      f"of its journal, not #{k}, which is inside tool registrar_problema's call; "
                                      "live from here)")
        ctl.resume()
        await task
        assert side.read_text().count("\n") == calls  # each call ran once, live: none twice
        assert recorded_events(second) == recorded_events(first)


def test_headless_k_inside_a_tool_call_says_so_and_runs_the_call_once(tmp_path):
    flow, side = side_effect_flow(tmp_path)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    res = flowtui("run", str(flow), "--input", "Escreva", "--journal", str(first), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    calls = side.read_text().count("\n")
    start = _seq(first, type="node.start", kind="tool")
    k = _seq(first, type="workflow_state.change", origin="tool:registrar_problema")  # inside the first call
    side.write_text("")
    again = flowtui("run", str(flow), "--resume-from", f"{first}@{k}", "--journal", str(second), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[0] == (f"! event #{k} is inside the call of tool registrar_problema (what it did "
                                            f"there comes only from running it): re-executed up to event "
                                            f"#{start - 1}, and that call runs live")
    assert side.read_text().count("\n") == calls
    assert lines(second)[0]["resumed_from"] == {"journal": str(first), "run_id": lines(first)[0]["run_id"],
                                                "at": start - 1, "before_tool": "registrar_problema", "asked": k}
    assert recorded_events(second) == recorded_events(first)


async def test_k_inside_a_tool_that_runs_a_child_workflow_is_kept(tmp_path):
    """That tool runs again in the prefix anyway (its child's steps are re-executed and checked): K in
    its child's steps is honoured as asked, and a fork there pauses inside the child."""
    first = tmp_path / "first.jsonl"
    await load_flow(str(FLOWS / "subagente.py")).run("Resuma", journal=first)
    start = _seq(first, type="node.start", kind="tool", name="pesquisar")
    k = _seq(first, type="node.start", kind="agent", name="PesquisadorAgent")
    assert start < k < _seq(first, type="node.end", kind="tool", name="pesquisar")
    ctl, events = Controller(start_paused=True), []
    run = load_flow(str(FLOWS / "subagente.py")).prepare(controller=ctl, resume_from=f"{first}@{k}",
                                                         on_event=events.append)
    task = await _paused(run, ctl)
    assert events[0].resumed_from.at == k and events[0].resumed_from.before_tool is None
    pause = events[-1]
    assert (pause.type, pause.reason, pause.point, pause.name) == ("run.pause", "resumed", "chat", "PesquisadorAgent")
    ctl.stop()
    await task


# --- K inside a model call: the prefix ends before the call, which the model answers live once ---------



async def test_k_inside_a_model_call_pauses_before_that_call_and_the_model_is_not_asked(tmp_path):
    """From its node.start to just before its node.end (a failed attempt between them): K there asked the
    model live inside the prefix, with no pause before it (money spent, another reply, nothing edited first)."""
    first = tmp_path / "first.jsonl"
    script = (server_error(), reply("", tool_calls=[{"name": "somar", "args": {"a": 2, "b": 3}}]), reply("2 + 3 = 5"))
    with LoopbackOpenAI() as server:
        server.script(*script)
        flow = litellm_flow(server)
        assert await bootstrap(flow).run("quanto é 2+3?", journal=first) == "2 + 3 = 5"
        start = _seq(first, type="node.start", kind="chat")
        end = _seq(first, type="node.end", kind="chat")
        assert start < _seq(first, type="chat.attempt") < end  # the first call's failed attempt
        for k in range(start, end):
            sent = len(server.requests)
            server.script(*script)
            ctl, events = Controller(start_paused=True), []
            second = tmp_path / f"at{k}.jsonl"
            task = await _paused(bootstrap(flow).prepare(controller=ctl, journal=second, resume_from=f"{first}@{k}",
                                                         on_event=events.append), ctl)
            pause = events[-1]
            assert (pause.type, pause.reason, pause.point, pause.name) == ("run.pause", "resumed", "chat", "Calc"), k
            assert len(server.requests) == sent, k  # nothing asked of the model before the pause
            assert events[0].resumed_from.model_dump() == {"journal": str(first), "run_id": lines(first)[0]["run_id"],
                                                           "at": start - 1, "before_model": "Calc", "asked": k}
            view = RunView()
            view.apply_many(events)
            assert view.status_line() == (f"paused before the model call of Calc (re-executed up to event #{start - 1} "
                                          f"of its journal, not #{k}, which is inside the model call of Calc; "
                                          "live from here)")
            ctl.resume()
            assert await task == "2 + 3 = 5"
            assert len(server.requests) == sent + 3  # each request sent once, live
            assert _no_wait(recorded_events(second)) == _no_wait(recorded_events(first))


async def test_k_inside_a_model_call_of_an_agents_own_run_pauses_before_that_call(tmp_path):
    """run()'s model calls had no pause point: K inside one re-executed up to before it, then asked the
    model at once, with no pause to edit anything first."""
    from fakes import checking_twice

    asked = []

    def model(messages, tools):
        asked.append(messages[-1].content)
        return f"reply to {messages[-1].content}"

    W = checking_twice(model)
    first = tmp_path / "first.jsonl"
    assert await bootstrap(W).run("go", journal=first) == "reply to second look"
    k = _seq(first, type="node.start", kind="chat", nth=1)  # the second call's start: inside it
    asked.clear()
    ctl, events = Controller(start_paused=True), []
    task = await _paused(bootstrap(W).prepare(controller=ctl, resume_from=f"{first}@{k}", on_event=events.append), ctl)
    pause = events[-1]
    assert (pause.type, pause.reason, pause.point, pause.name) == ("run.pause", "resumed", "chat", "Checker")
    assert asked == []  # the first call served from the journal, the second not asked yet
    assert [m["content"] for m in pause.request["messages"]] == ["Check twice.", "second look"]
    assert events[0].resumed_from.before_model == "Checker" and events[0].resumed_from.at == k - 1
    ctl.resume()
    assert await task == "reply to second look" and asked == ["second look"]


def _no_wait(events: list[dict]) -> list[dict]:
    """Events without a failed attempt's wait before the retry (jittered: another each time)."""
    return [{k: v for k, v in e.items() if k != "retry_in_s"} for e in events]


def test_headless_k_inside_a_model_call_says_so_and_asks_the_model_once(tmp_path):
    flow, asked = tmp_path / "counted.py", tmp_path / "ASKED"
    flow.write_text(
        "from flowtui import FunctionProvider, agent, workflow\n"
        "def model(messages, tools):\n"
        f"    open({str(asked)!r}, 'a').write('x\\n')\n"
        "    return 'ok'\n"
        "A = agent(provider=FunctionProvider(model), prompt='p')(type('A', (), {}))\n"
        "B = agent(provider=FunctionProvider(model), prompt='q')(type('B', (), {}))\n"
        "@workflow(steps=[A, B])\nclass Counted:\n    pass\n")
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    res = flowtui("run", str(flow), "--input", "go", "--journal", str(first), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert asked.read_text() == "x\nx\n"
    k = _seq(first, type="node.start", kind="chat", name="B")
    asked.write_text("")
    again = flowtui("run", str(flow), "--resume-from", f"{first}@{k}", "--journal", str(second), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[0] == (f"! event #{k} is inside the model call of B (a recorded reply is served "
                                            f"only whole): re-executed up to event #{k - 1}, and that call runs live")
    assert asked.read_text() == "x\n"  # B's model call, once; A's was served
    assert lines(second)[0]["resumed_from"] == {"journal": str(first), "run_id": lines(first)[0]["run_id"],
                                                "at": k - 1, "before_model": "B", "asked": k}
    assert recorded_events(second) == recorded_events(first)


async def test_k_inside_a_model_call_of_a_child_workflow_pauses_before_it(tmp_path, monkeypatch):
    """The tool that runs the child runs again, so K inside it stays; a model call of the child's steps
    that K falls inside is met further on, and the prefix stops before it as before any other."""
    first = tmp_path / "first.jsonl"
    await load_flow(str(FLOWS / "subagente.py")).run("Resuma", journal=first)
    start = _seq(first, type="node.start", kind="chat", name="PesquisadorAgent")
    asked: list = []
    real = ScriptedProvider.complete

    async def counted(self, request):
        asked.append(request.agent)
        return await real(self, request)

    monkeypatch.setattr(ScriptedProvider, "complete", counted)
    ctl, events = Controller(start_paused=True), []
    task = await _paused(load_flow(str(FLOWS / "subagente.py")).prepare(
        controller=ctl, resume_from=f"{first}@{start}", on_event=events.append), ctl)
    pause = events[-1]
    assert (pause.type, pause.reason, pause.point, pause.name) == ("run.pause", "resumed", "chat", "PesquisadorAgent")
    assert asked == []  # the coordinator's call was served; the researcher's waits for the person
    r = events[0].resumed_from
    assert (r.at, r.before_model, r.before_tool, r.asked) == (start - 1, "PesquisadorAgent", None, start)
    ctl.resume()
    await task
    assert asked == ["PesquisadorAgent", "CoordenadorAgent"]  # live from the researcher's call on, once each
    assert events[-1].type == "run.end" and events[-1].status == "finished"


async def test_a_model_call_the_recorded_run_never_returned_from_is_made_live_after_a_pause(tmp_path):
    """Stopped inside the model call (no reply recorded), the call was served an empty reply, which diverged
    from the recorded stop; its process killed there (no node.end at all), the model was asked with no pause."""
    hang, asked = asyncio.Event(), []

    async def model(messages, tools):
        asked.append(len(messages))
        await hang.wait()
        return "ok"

    A = agent(provider=FunctionProvider(model), prompt="p")(type("A", (), {}))
    flow = workflow(steps=[A])(type("W", (), {}))
    first, killed = tmp_path / "first.jsonl", tmp_path / "killed.jsonl"
    task = asyncio.ensure_future(bootstrap(flow).prepare("go", controller=Controller(), journal=first).execute())
    for _ in range(5000):
        if asked or task.done():
            break
        await asyncio.sleep(0.001)
    task.cancel()  # as a stop does while the model is answering
    await asyncio.gather(task, return_exceptions=True)
    start = _seq(first, type="node.start", kind="chat")
    end = next(e for e in lines(first) if e["type"] == "node.end" and e["kind"] == "chat")
    assert end["status"] == "stopped" and "reply" not in end["data"]
    killed.write_text("".join(first.read_text().splitlines(keepends=True)[:start]))  # its lines up to that call
    hang.set()
    for journal in (first, killed):
        asked.clear()
        ctl, events = Controller(start_paused=True), []
        task = await _paused(bootstrap(flow).prepare(controller=ctl, resume_from=str(journal),
                                                     on_event=events.append), ctl)
        pause = events[-1]
        assert (pause.type, pause.reason, pause.point, pause.name) == ("run.pause", "resumed", "chat", "A"), journal
        assert asked == [], journal
        assert events[0].resumed_from.model_dump() == {"journal": str(journal), "run_id": lines(first)[0]["run_id"],
                                                       "at": start - 1, "before_model": "A"}
        view = RunView()
        view.apply_many(events)
        assert view.status_line() == (f"paused before the model call of A (re-executed up to event #{start - 1} of "
                                      "its journal, where the recorded run never returned from the model call of A; "
                                      "live from here)")
        ctl.resume()
        await task
        assert len(asked) == 1 and events[-1].type == "run.end" and events[-1].status == "finished", journal
        assert "run.diverged" not in [e.type for e in events]


PARALLEL_FLOW = """
from flowtui import ScriptedProvider, agent, loop, parallel, tool, workflow

RAN = []

@tool
def side_effect(note: str) -> str:
    '''Notes something.

    Args:
        note: what to note
    '''
    RAN.append(note)
    return "noted"

script = ScriptedProvider({"A": ["A says hi."],
                           "B": [{"content": "", "tool_calls": [{"name": "side_effect", "args": {"note": "B"}}]},
                                 "B done."]})

@agent(provider=script, prompt="You are A.")
class A:
    pass

@agent(provider=script, prompt="You are B.", tools=[side_effect])
class B:
    pass

@workflow(steps=[STEPS])
class ParFlow:
    pass
"""


@pytest.mark.parametrize("steps", ["parallel([A, B])",
                                   # branches whose paths read the same: loops of one name
                                   "parallel([loop([A], max_iterations=1), loop([B], max_iterations=1)])"])
async def test_a_fork_at_a_pause_in_one_parallel_branch_holds_the_other_branch_until_it_is_there(tmp_path, steps):
    """Forked at A's pause before its model call (B waiting to pause before its own), B's model was called
    live and its tool run before the fork paused, at B's tool: a call the person never saw nor could edit."""
    flow = tmp_path / "par.py"
    flow.write_text(PARALLEL_FLOW.replace("STEPS", steps))
    first = tmp_path / "first.jsonl"
    ctl = Controller(start_paused=True)
    run = load_flow(str(flow)).prepare("go", controller=ctl, journal=first)
    await _drive(run, ctl, lambda point: ctl.step())
    pauses = [(e["seq"], e["point"], e["name"]) for e in lines(first) if e["type"] == "run.pause"]
    k = next(seq for seq, point, name in pauses if (point, name) == ("chat", "A"))
    after = [(point, name) for seq, point, name in pauses if seq >= k]
    assert ("chat", "B") in after  # B paused after A, as stepped

    forked = load_flow(str(flow))
    ctl2 = Controller(start_paused=True)  # as the app starts a fork
    fork = forked.prepare(controller=ctl2, resume_from=f"{first}@{k}", journal=tmp_path / "fork.jsonl")
    task = await _paused(fork, ctl2)
    assert (ctl2.paused_at.kind, ctl2.paused_at.name) == ("chat", "A")
    assert [m.agent for m in fork.state.history if m.role == "assistant"] == []  # B's model not called
    stepped = []  # then B pauses where the recorded run did, before its model call

    def person(point):
        stepped.append((point.kind, point.name))
        ctl2.step()

    seen = ctl2.paused_at
    person(seen)
    for _ in range(20_000):  # (a bound: a hang fails the test)
        if task.done():
            break
        await asyncio.sleep(0.001)
        if ctl2.paused and ctl2.paused_at is not seen:
            seen = ctl2.paused_at
            person(seen)
    await asyncio.wait_for(task, 60)
    assert stepped == after
    assert fork.status == "finished"
    assert recorded_events(tmp_path / "fork.jsonl") == recorded_events(first)


async def test_a_parallel_step_whose_calls_overlapped_reexecutes_its_calls_in_their_recorded_order(tmp_path, no_live):
    """Served at once, the branches' replies and tool results came back in another order than
    recorded (the slow branch's reply had ended after the fast branch's next call began), and unchanged
    code diverged at the first event of another branch."""
    from flowtui import parallel

    @tool(name="olhar", description="Looks.")
    class Olhar:
        async def execute(self, ctx: AgentContext = Context()):
            await asyncio.sleep(0.05)
            return "visto"

    def model(delay):
        async def answer(messages, tools):
            await asyncio.sleep(delay)
            if not any(m.role == "tool" for m in messages):
                return {"content": "", "tool_calls": [{"name": "olhar", "args": {}}]}
            return "pronto"
        return FunctionProvider(answer)

    @agent(provider=model(1.0), prompt="a", tools=[Olhar])  # (1 s: the premise below holds on a loaded machine)
    class Lento:
        pass

    @agent(provider=model(0), prompt="b", tools=[Olhar])
    class Rapido:
        pass

    @workflow(steps=[parallel([loop([Lento], until=until_answered, max_iterations=3),
                               loop([Rapido], until=until_answered, max_iterations=3)])])
    class ParWorkflow:
        pass

    journal = tmp_path / "par.jsonl"
    await bootstrap(ParWorkflow).run("go", journal=journal)
    ends = [ev["name"] for ev in lines(journal) if ev["type"] == "node.end" and ev["kind"] == "chat"]
    assert ends[:2] == ["Rapido", "Rapido"]  # the fast branch's calls ended while the slow one's was out
    guard, called = no_live
    guard()
    events: list = []
    await bootstrap(ParWorkflow).run(resume_from=str(journal), on_event=events.append)
    assert called == []
    assert [e for e in events if e.type == "run.diverged"] == [] and events[-1].status == "finished"


def test_a_fork_inside_a_child_workflow_of_a_stopped_run_stays_where_it_was_asked(tmp_path):
    """A fork made while paused in a child stops the run there first: the tool that ran the child never
    returned, and the re-execution went back to before that tool (the person's place in the child lost),
    though a tool that runs a child runs again in the prefix anyway."""
    flow = tmp_path / "parent.py"
    flow.write_text(
        "from pydantic import BaseModel\n"
        "from flowtui import FunctionProvider, State, WorkflowRuntime, agent, loop, tool, until_answered, workflow\n"
        "class CS(BaseModel):\n    n: int = 0\n"
        "@agent(provider=FunctionProvider(lambda m, t: 'c'), prompt='c')\nclass C:\n"
        "    def __init__(self, s: CS = State()):\n        self.s = s\n"
        "    def after_response(self, r, ctx):\n        self.s.n += 1\n"
        "@workflow(state=CS, steps=[loop([C], max_iterations=4)])\nclass ChildWorkflow:\n    pass\n"
        "@tool(name='sub', description='Runs the child.')\nclass Sub:\n"
        "    def __init__(self, runtime: WorkflowRuntime):\n        self.runtime = runtime\n"
        "    async def execute(self):\n        return await self.runtime.run(ChildWorkflow, input='x')\n"
        "def model(messages, tools):\n"
        "    if not any(m.role == 'tool' for m in messages):\n"
        "        return {'content': '', 'tool_calls': [{'name': 'sub', 'args': {}}]}\n    return 'fim'\n"
        "@agent(provider=FunctionProvider(model), prompt='p', tools=[Sub])\nclass P:\n    pass\n"
        "@workflow(steps=[loop([P], until=until_answered, max_iterations=3)])\nclass ParentWorkflow:\n    pass\n")
    journal = tmp_path / "w.jsonl"
    res = flowtui("run", f"{flow}:ParentWorkflow", "--input", "hi", "--journal", str(journal),
                  "--watch", "ChildWorkflow: state.n >= 3", cwd=tmp_path)
    assert res.returncode == 4, res.stderr  # stopped at the watchpoint, inside the child
    k = [ev["seq"] for ev in lines(journal) if ev["type"] == "workflow_state.change"][-1]
    again = tmp_path / "again.jsonl"
    res = flowtui("run", f"{flow}:ParentWorkflow", "--resume-from", f"{journal}@{k}", "--journal", str(again),
                  cwd=tmp_path)
    assert res.returncode == 0 and "never returned" not in res.stderr, res.stderr
    assert lines(again)[0]["resumed_from"]["at"] == k


@pytest.mark.parametrize("slow", [0.0, 0.03])
@pytest.mark.parametrize("controlled", [True, False])
async def test_a_parallel_step_of_two_loops_ending_alike_reexecutes_without_diverging(tmp_path, slow, controlled):
    # the second loop's last ctx.loop (3 of 3, exhausted) was taken for the first's said twice and left out,
    # and the re-execution diverged at the end (with a controller); models slower than 20 ms made the run
    # let the other branch go at a time no journal says (without one)
    import time

    from flowtui import parallel

    def model(tag):
        def answer(messages, tools):
            time.sleep(slow)
            return tag
        return answer

    @agent(provider=FunctionProvider(model("a")), prompt="a")
    class A:
        pass

    @agent(provider=FunctionProvider(model("b")), prompt="b")
    class B:
        pass

    @workflow(steps=[parallel([loop([A], max_iterations=3, name="la"), loop([B], max_iterations=3, name="lb")])])
    class W:
        pass

    journal = tmp_path / "run.jsonl"
    options = {"controller": Controller()} if controlled else {}
    await bootstrap(W).run("go", journal=journal, **options)
    events: list = []
    options = {"controller": Controller()} if controlled else {}
    await bootstrap(W).run(resume_from=str(journal), on_event=events.append, **options)
    assert [e for e in events if e.type == "run.diverged"] == []
    assert events[-1].status == "finished"


async def test_an_edit_at_the_divergence_pause_reaches_the_model_call_it_is_paused_before(tmp_path, knobs):
    """The divergence is found in the model call's request, as it was built: the run waited there, the person
    edited the user message, the panes showed it edited, and the model got it as it was (only the call after
    it got the edit). The call's request is built again, and the journal says what was sent."""
    from flowtui.runtime.edits import Editor

    answers: list = []
    first = tmp_path / "first.jsonl"
    await bootstrap(counting_flow(answers)).run("go", journal=first)
    knobs["prompt"] = "Note twice, then answer."  # diverges at the model call itself
    ctl = Controller()
    events: list = []
    second = tmp_path / "second.jsonl"
    run = bootstrap(counting_flow(answers)).prepare(controller=ctl, resume_from=str(first), on_divergence="pause",
                                                    on_event=events.append, journal=second)
    task = await _paused(run, ctl)
    pause = events[-1]
    assert pause.type == "run.pause" and pause.reason == "diverged" and pause.point == "chat"
    Editor(run).edit_message(0, "go, EDITED")
    ctl.resume()
    await asyncio.wait_for(task, 30)
    chat_end = next(e for e in events if e.type == "node.end" and e.kind == "chat" and e.seq > pause.seq)
    sent = chat_end.data["sent_request"].messages
    assert [m.content for m in sent] == ["Note twice, then answer.", "go, EDITED"]
    assert chat_end.data["changed_by"] == ["the person, at the divergence pause"]

    # re-executed, that journal waited for ever for a pause point inside the model call: its edit is made again
    again: list = []
    out = await asyncio.wait_for(bootstrap(counting_flow(answers)).run(resume_from=str(second), on_event=again.append),
                                 30)
    assert out == events[-1].output and again[-1].status == "finished" and not any(
        e.type == "run.diverged" for e in again)


async def test_a_run_its_time_budget_stopped_reexecutes_to_the_same_stop(tmp_path):
    """The served calls take no time: re-executed, a run that max_duration_s had stopped went on past where it
    stopped, and diverged there ("the loop no longer stops after iteration 3 (budget)"), exit 3."""
    from flowtui import Budget

    @tool(name="esperar", description="Waits.")
    class Esperar:
        def execute(self):
            import time

            time.sleep(0.2)
            return "feito"

    @agent(provider=FunctionProvider(lambda m, t: {"content": "", "tool_calls": [{"name": "esperar", "args": {}}]}),
           prompt="p", tools=[Esperar])
    class T:
        pass

    @workflow(steps=[loop([T], max_iterations=20)], budget=Budget(max_duration_s=0.5))
    class D:
        pass

    journal = tmp_path / "d.jsonl"
    first: list = []
    await bootstrap(D).run("go", journal=journal, on_event=first.append)
    assert first[-1].totals.exceeded == "max_duration_s" and first[-1].totals.tool_calls < 20  # the premise
    again: list = []
    await bootstrap(D).run(resume_from=str(journal), on_event=again.append)
    assert [e for e in again if e.type == "run.diverged"] == []
    assert again[-1].type == "run.end" and again[-1].totals.exceeded == "max_duration_s"
    assert again[-1].totals.tool_calls == first[-1].totals.tool_calls  # stopped where the recorded run stopped


async def test_a_fork_made_after_a_calls_approval_reexecutes_with_the_edits_made_at_its_pause(tmp_path, no_live):
    """A fork at K just after an approval the recorded run made: its prefix made the decision again, then paused
    there, and a person added a memory item and stopped. Re-executed, that journal's run made the decision at the
    tool's pause point and went on to the tool: "the recorded run was edited here by hand", exit 3."""
    guard, called = no_live
    first, fork_journal = tmp_path / "first.jsonl", tmp_path / "fork.jsonl"
    ctl = Controller(approve=["registrar_problema"])
    run = load_flow(str(FLOWS / "revisao.py")).prepare("Escreva", controller=ctl, journal=first)
    await _drive(run, ctl, lambda point: run.edits_for(None).decide("approve") if point.kind == "tool"
                 else ctl.resume())
    approvals = [e["seq"] for e in lines(first) if e["type"] == "tool.decision" and e["decision"] == "approved"]
    assert len(approvals) >= 2
    guard()
    ctl2 = Controller(start_paused=True, approve=["registrar_problema"])  # as the app's f makes a fork
    fork = load_flow(str(FLOWS / "revisao.py")).prepare(resume_from=f"{first}@{approvals[1]}", controller=ctl2,
                                                         journal=fork_journal)
    task = await _paused(fork, ctl2)
    assert ctl2.paused_at.kind == "tool" and fork.pending is not None and fork.pending.decision == "approved"
    fork.edits_for(None).add_item("memory", "lembrete")
    ctl2.stop()
    await asyncio.wait_for(task, 60)
    events: list = []
    again = load_flow(str(FLOWS / "revisao.py"))
    await again.run(journal=tmp_path / "again.jsonl", resume_from=str(fork_journal), on_event=events.append,
                    controller=Controller(approve=["registrar_problema"]))
    assert [e for e in events if e.type == "run.diverged"] == []
    assert called == []
    assert [e.item for e in events if e.type == "state.append" and e.origin == "user"] == ["lembrete"]
    assert events[-1].reason == f"stopped again where the run of {fork_journal} was stopped (stopped by user)"


async def test_undo_in_a_fork_says_its_edits_were_made_again_from_the_journal(tmp_path, no_live):
    """Paused in a fork where the recorded run's edit was made again (the status counting it), u said only
    "Nothing to undo."."""
    guard, called = no_live
    first = tmp_path / "first.jsonl"
    await _edited_at_first_iteration(load_flow(str(FLOWS / "revisao.py")), "Escreva", first,
                                     lambda run: run.edits_for(None).add_item("memory", "nota"))
    (added,) = [e["seq"] for e in lines(first) if e.get("origin") == "user"]
    guard()
    ctl = Controller(start_paused=True)
    fork = load_flow(str(FLOWS / "revisao.py")).prepare(resume_from=f"{first}@{added}", controller=ctl,
                                                         journal=tmp_path / "fork.jsonl")
    task = await _paused(fork, ctl)
    assert fork.state.memory[-1] == "nota"
    edits = fork.edits_for(None)
    said = (r"^nothing to undo: the edits before were made again from the journal this run re-executes "
            r"\(.*first\.jsonl\), and only one made since it went live can be undone; fork \(f\) from before an edit")
    with pytest.raises(ConfigError, match=said):
        edits.undo()
    edits.add_item("tasks", "revisar")
    assert edits.undo() is True and list(fork.state.tasks) == []
    with pytest.raises(ConfigError, match=said):
        edits.undo()
    ctl.stop()
    await asyncio.wait_for(task, 60)


def test_a_run_started_from_a_snapshot_reexecutes_from_it(tmp_path):
    """It diverged at its first event (state.rodadas: recorded 3, now 0), and --from-snapshot is refused with
    --resume-from: a run from a snapshot could not be re-executed at all."""
    snap = tmp_path / "s.toml"
    snap.write_text('workflow = "RevisaoWorkflow"\nmemory = ["nota do snapshot"]\ntasks = ["tarefa 1"]\n\n'
                    "[state]\nrodadas = 3\n")
    journal = tmp_path / "j.jsonl"
    done = flowtui("run", str(FLOWS / "revisao.py"), "--input", "x", "--journal", str(journal), "--from-snapshot",
                   str(snap), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    start = lines(journal)[0]
    assert start["snapshot"] == {"file": str(snap), "state": {"rodadas": 3}}
    again = tmp_path / "again.jsonl"
    res = flowtui("run", str(FLOWS / "revisao.py"), "--resume-from", str(journal), "--journal", str(again),
                  cwd=tmp_path)
    assert res.returncode == 0 and "diverged" not in res.stderr, res.stderr
    assert recorded_events(again) == recorded_events(journal)
    assert [e["items"] for e in lines(again) if e.get("origin") == "snapshot"] == [["tarefa 1"]]


def test_a_recorded_tool_result_with_a_redacted_query_value_reexecutes_as_it_was(tmp_path):
    """A tool's output with a credential in a URL's query (`?api_key=...`) was journaled `[redacted]`; given
    back by the re-execution it was redacted again, `[redacted]]`, and `flowtui diff` of the two journals
    said they differed there."""
    flow, journal = journaled(tmp_path, "link.py", textwrap.dedent('''\
        from flowtui import FunctionProvider, agent, tool, workflow

        @tool(name="link", description="A link.")
        def link() -> str:
            return "see https://gw.example/v1?api_key=abc123def456&page=2"

        def model(messages, tools):
            if messages[-1].role == "tool":
                return messages[-1].content
            return {"content": "", "tool_calls": [{"name": "link", "args": {}}]}

        @agent(provider=FunctionProvider(model), prompt="p", tools=[link])
        class A:
            pass

        @workflow(steps=[A, A])
        class W:
            pass
        '''))
    again = tmp_path / "again.jsonl"
    res = flowtui("run", str(flow), "--resume-from", str(journal), "--journal", str(again), cwd=tmp_path)
    assert res.returncode == 0 and "diverged" not in res.stderr, res.stderr
    assert res.stdout == "see https://gw.example/v1?api_key=[redacted]&page=2\n"
    assert "[redacted]]" not in again.read_text()
    diff = flowtui("diff", str(journal), str(again), cwd=tmp_path)
    assert diff.returncode == 0, diff.stdout + diff.stderr


STOPPED_IN_A_TOOL = '''
import asyncio
from pathlib import Path
from flowtui import FunctionProvider, agent, loop, parallel, tool, workflow

@tool
async def lento(x: str) -> str:
    """Waits for the test's go.

    Args:
        x: anything
    """
    with open("calls", "a") as f:
        f.write(x + "\\n")
    Path("started").touch()
    for _ in range(3000):
        if Path("go").exists():
            break
        await asyncio.sleep(0.02)
    return "ok " + x

def model(messages, tools):
    if messages[-1].role == "tool":
        return "fim"
    return {"tool_calls": [{"name": "lento", "args": {"x": messages[0].content}}]}

@agent(provider=FunctionProvider(model), prompt="A", tools=[lento])
class A:
    pass

@agent(provider=FunctionProvider(model), prompt="B", tools=[lento])
class B:
    pass

STEPS = STEPS_HERE

@workflow(steps=STEPS or [A, B])
class W:
    pass
'''


@pytest.mark.parametrize("steps", ["None", "[parallel([A, B])]", "[loop(steps=[A, B], max_iterations=3)]"])
def test_a_run_stopped_from_outside_while_a_tool_ran_reexecutes_to_the_same_stop(tmp_path, steps):
    """ctrl-C while a tool ran lands at the next unit of work, which no event marks: re-executing the journal
    of unchanged code said "diverged" where the recorded run's nodes end stopped (exit 3), or, in a parallel
    step, where the other branch then went on."""
    flow = tmp_path / "flow.py"
    flow.write_text(STOPPED_IN_A_TOOL.replace("STEPS_HERE", steps))
    first, second, third = (tmp_path / f"{n}.jsonl" for n in ("first", "second", "third"))
    command = [sys.executable, "-m", "flowtui.tui.cli", "run", str(flow)]
    proc = subprocess.Popen([*command, "--input", "x", "--journal", str(first)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(3000):  # (a bound: a tool that never starts fails the test)
        if (tmp_path / "started").exists():
            break
        proc.poll()
        assert proc.returncode is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)  # (the stop is asked before the tool returns)
    (tmp_path / "go").touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and err.strip().splitlines()[-2] == "■ stopped (stopped by user)", err
    ran = (tmp_path / "calls").read_text()
    for journal, again in ((first, second), (second, third)):
        done = subprocess.run([*command, "--resume-from", str(journal), "--journal", str(again)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "diverged" not in done.stderr
        assert done.stderr.strip().splitlines()[-2] == \
            f"■ stopped (stopped again where the run of {journal} was stopped (stopped by user))"
        assert (tmp_path / "calls").read_text() == ran  # nothing ran live
        *made, end = recorded_events(again)
        *was, recorded_end = recorded_events(first)
        assert made == was
        assert {**end, "reason": None} == {**recorded_end, "reason": None}


ODD_FLOW = '''
from typing import Any
from pydantic import BaseModel
from flowtui import FunctionProvider, State, agent, tool, workflow

class Bad:
    def __repr__(self):
        raise RuntimeError("repr boom")

class BE(BaseException):
    pass

class M(BaseModel):
    x: Any = None

class S(BaseModel):
    m: Any = None

@tool
def t() -> str:
    """T."""
    TOOL

def handler(messages, tools):
    HANDLER
    if not any(m.role == "tool" for m in messages):
        return {"content": "", "tool_calls": [{"name": "t", "args": {}}]}
    return "done"

@agent(provider=FunctionProvider(handler), prompt="p", tools=[t])
class A:
    def __init__(self, s: S = State()):
        self.s = s

    def after_response(self, response, ctx):
        HOOK

@workflow(state=S, steps=[A])
class W:
    pass
'''


@pytest.mark.parametrize("tool, handler, hook, code", [
    # a result that cannot be written as text: journaled as not run (it ran), re-executed live, and diverged
    ("return Bad()", "pass", "pass", 0),
    ("raise KeyError(Bad())", "pass", "pass", 0),
    # what ended the recorded run, raised again: an empty result was served in its place, and it diverged
    ("raise BE('base')", "pass", "pass", 1),
    ("raise SystemExit(3)", "pass", "pass", 1),
    # a stand-in for the model that raised no ProviderError: re-raised as one, whose attempts the end then said
    ("return 'r'", "raise ValueError('handler bug')", "pass", 1),
    # a model holding itself: its repr names its address, which differs from run to run
    ("return 'r'", "pass", "m = M(); m.x = m; self.s.m = m; ctx.m = m", 0),
])
def test_a_run_with_values_flowtui_describes_reexecutes_without_diverging(tmp_path, tool, handler, hook, code):
    flow = tmp_path / "flow.py"
    flow.write_text(ODD_FLOW.replace("TOOL", tool).replace("HANDLER", handler).replace("HOOK", hook))
    command = [sys.executable, "-m", "flowtui.tui.cli", "run", str(flow)]
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    done = subprocess.run([*command, "--input", "x", "--journal", str(first)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == code, done.stderr
    assert "boom" not in done.stderr and "never arrived" not in done.stderr
    ran = [e for e in lines(first) if e["type"] == "node.end" and e["kind"] == "tool"]
    if ran and "BE" not in tool and "SystemExit" not in tool:
        assert ran[0]["data"]["executed"] == 1  # (the tool ran, and gave a result)
    again = subprocess.run([*command, "--resume-from", str(first), "--journal", str(second)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == code and "diverged" not in again.stderr, again.stderr
    assert recorded_events(second) == recorded_events(first)


KEY_FLOW = '''
from flowtui import FunctionProvider, agent, loop, workflow

@agent(provider=FunctionProvider(lambda messages, tools: "seen: " + messages[-1].content), prompt="p")
class A:
    def after_response(self, response, ctx):
        ctx.state.append("memory", "made by the code: sk-proj-AbC123def456GHI789jkl012MNO345")

@workflow(steps=[loop(steps=[A], max_iterations=2)])
class W:
    pass
'''


@pytest.mark.parametrize("given, held", [("my key is sk-proj-AbC123def456GHI789jkl012MNO345", 3), ("no key", None)])
async def test_a_reexecution_says_how_many_values_it_holds_as_redacted_from_its_journal(tmp_path, given, held):
    """A key typed in an edit, given as input, or in a served reply is journaled as [redacted]: re-executed
    (a reload's "continue from here", a fork), the model got that text where it had got the key, and
    nothing said so. A credential the flow's code makes again is its own, and is not counted."""
    flow, first = tmp_path / "flow.py", tmp_path / "first.jsonl"
    flow.write_text(KEY_FLOW)
    await load_flow(str(flow)).run(given, journal=first)
    k = _seq(first, type="node.end", kind="agent")
    ctl, events = Controller(start_paused=True), []
    run = load_flow(str(flow)).prepare(controller=ctl, resume_from=f"{first}@{k}", on_event=events.append)
    task = await _paused(run, ctl)
    assert events[0].resumed_from.redacted == held
    view = RunView()
    view.apply_many(events)
    said = f"; {held} of its events hold [redacted] for a credential, as that text now" if held else ""
    assert view.status_line().endswith(f"(re-executed up to event #{k} of its journal; live from here{said})")
    ctl.stop()
    await task
    done = subprocess.run([sys.executable, "-m", "flowtui.tui.cli", "run", str(flow), "--resume-from",
                           f"{first}@{k}", "--no-journal"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    note = (f"! {held} event(s) re-executed from {first} carry a credential its journal holds as [redacted]: "
            f"the run holds that text in its place, and what runs live after event #{k} gets it")
    assert (note in done.stderr) == bool(held), done.stderr


CHILD_STOPS = '''
from flowtui import FunctionProvider, agent, workflow

@agent(provider=FunctionProvider(lambda m, t: "child says hi"), prompt="C")
class CA:
    def after_response(self, response, ctx):
        ctx.stop()

@agent(provider=FunctionProvider(lambda m, t: "never"), prompt="C2")
class CB:
    pass

@workflow(steps=[CA, CB])
class Child:
    pass
'''

PARENT_WAITS = '''
import asyncio, os
from pathlib import Path
from pydantic import BaseModel
from child import Child
from flowtui import AgentContext, Context, FunctionProvider, Input, WorkflowRuntime, agent, tool, workflow

class Args(BaseModel):
    q: str

@tool(name="sub", description="runs the child", schema=Args)
class Sub:
    def __init__(self, runtime: WorkflowRuntime):
        self.runtime = runtime

    async def execute(self, args: Args = Input(), ctx: AgentContext = Context()):
        out = await self.runtime.run(Child, input=args.q)
        Path("started").touch()
        for _ in range(3000):
            if Path("go").exists():
                break
            await asyncio.sleep(0.02)
        return "sub: " + str(out) + os.environ.get("SUFFIX", "")

def model(messages, tools):
    return "fim" if messages[-1].role == "tool" else {"tool_calls": [{"name": "sub", "args": {"q": "x"}}]}

@agent(provider=FunctionProvider(model), prompt="P", tools=[Sub])
class P:
    pass

@agent(provider=FunctionProvider(lambda m, t: "q"), prompt="Q")
class Q:
    pass

@workflow(steps=[P, Q])
class W:
    pass
'''


def test_a_childs_own_stop_before_a_stop_from_outside_is_its_codes_and_still_checked(tmp_path):
    """The stop from outside was taken to begin at the child's ctx.stop(): the re-execution of unchanged code
    stopped the parent's tool there, and one of changed code said "stopped again", its divergence unsaid."""
    (tmp_path / "child.py").write_text(CHILD_STOPS)
    (tmp_path / "flow.py").write_text(PARENT_WAITS)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    command = [sys.executable, "-m", "flowtui.tui.cli", "run", str(tmp_path / "flow.py")]
    proc = subprocess.Popen([*command, "--input", "x", "--journal", str(first)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(3000):  # (a bound: a tool that never gets there fails the test)
        if (tmp_path / "started").exists():
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    (tmp_path / "go").touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "■ stopped (stopped by user)" in err, err
    done = subprocess.run([*command, "--resume-from", str(first), "--journal", str(second)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "diverged" not in done.stderr, done.stderr
    *made, _ = recorded_events(second)
    *was, _ = recorded_events(first)
    assert made == was  # (the tool's result served, its agent ended as recorded)
    changed = subprocess.run([*command, "--resume-from", str(first), "--no-journal"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120, env={**os.environ, "SUFFIX": " CHANGED"})
    assert changed.returncode == 3 and "diverged" in changed.stderr, changed.stderr


async def test_a_tool_that_registers_a_cleanup_re_executes_without_diverging(tmp_path):
    """A tool that opens a resource and registers its cleanup (``ctx.on_dispose(conn.close)``, as the README
    writes it) is served in a re-execution, never run, so its cleanup is never registered: the workflow's end
    counted one cleanup fewer, and every re-execution of such a run diverged there; one whose cleanup raised
    diverged at the failure the re-execution could not report again, and one whose cleanup added a memory item
    at that item."""
    closed: list[str] = []

    def model(messages, tools):
        if not any(m.role == "tool" for m in messages):
            return {"content": "", "tool_calls": [{"name": "abrir", "args": {}}]}
        return "fim"

    @tool
    def abrir(ctx: AgentContext = Context()) -> str:
        """Opens a connection, closed when the run ends."""
        ctx.on_dispose(lambda: closed.append("fechado"))
        ctx.on_dispose(lambda: ctx.state.append("memory", "conexão fechada"))

        @ctx.on_dispose
        def broken():
            raise RuntimeError("the pool is gone")

        return "aberto"

    @agent(provider=FunctionProvider(model), tools=[abrir])
    class A:
        pass

    @workflow(steps=[loop([A], until=until_answered, max_iterations=3)])
    class W:
        pass

    first = tmp_path / "first.jsonl"
    recorded: list = []
    assert await bootstrap(W).run("go", journal=str(first), on_event=recorded.append) == "fim"
    assert closed == ["fechado"] and "dispose.error" in [e.type for e in recorded]
    events: list = []
    assert await bootstrap(W).run(resume_from=str(first), on_event=events.append) == "fim"
    assert not [e for e in events if e.type == "run.diverged"]
    assert closed == ["fechado"]  # (the tool was served: nothing was opened, nothing to close)
    assert events[-1].type == "run.end" and events[-1].status == "finished"


async def test_a_divergence_at_the_runs_end_is_said_before_the_end_never_after_it(tmp_path):
    """The recorded run did more before its end (a cleanup that added a memory item, gone from the code now):
    the divergence showed at the end, and its run.diverged came after run.end: the journal then read as a run
    that never ended (flowtui diff skipped its end), and the run said both "stopped" and "diverged"."""
    remember = {"on": True}

    @agent(provider=FunctionProvider(lambda m, t: "ok"))
    class A:
        def after_response(self, response, ctx):
            if remember["on"]:
                ctx.on_dispose(lambda: ctx.state.append("memory", "lembrete"))

    @workflow(steps=[A])
    class W:
        pass

    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    await bootstrap(W).run("go", journal=str(first))
    remember["on"] = False
    events: list = []
    await bootstrap(W).run(resume_from=str(first), journal=str(second), on_event=events.append)
    types = [e.type for e in events]
    assert types[-2:] == ["run.diverged", "run.end"], types
    assert events[-2].recorded.startswith("state.append") and events[-2].current.startswith("run.end")
    assert (events[-1].status, events[-1].reason) == ("stopped", f"diverged from {first} at event #{events[-2].at}")
    assert [json.loads(line)["type"] for line in second.read_text().splitlines()][-1] == "run.end"
    # the app's way (on_divergence="pause"): no pause point comes after it, and the run said "finished"
    ctl, seen = Controller(), []
    run = bootstrap(W).prepare(controller=ctl, resume_from=str(first), on_divergence="pause", on_event=seen.append)
    ctl.resume()
    await asyncio.wait_for(run.execute(), 30)
    assert [e.type for e in seen][-2:] == ["run.diverged", "run.end"]
    assert (seen[-1].status, seen[-1].reason) == ("stopped", f"diverged from {first} at event #{seen[-2].at}")
