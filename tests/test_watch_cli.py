"""Watchpoints from the command line and over the protocol: `flowtui run --watch EXPR` stops the run
at the pause point after the event that made EXPR true (exit 4) and says which watchpoint and which
event; a malformed or unknown one is refused before anything runs (exit 2, a caret under the fault);
a run served with --listen pauses there instead, and a client sets and clears watchpoints."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_worker import Client, flowtui as spawn

ROOT = Path(__file__).resolve().parents[1]
FLOW = str(ROOT / "tests/tui/flows/watched.py")


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", FLOW,
                           "--input", "go", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def run_flow(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", "st.py",
                           "--input", "go", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def watched(expr: str) -> tuple[list[dict], dict, dict, subprocess.CompletedProcess]:
    """Run the flow with ``--watch expr --json``: (events, the pause, the event that fired it, the process)."""
    res = run("--watch", expr, "--json", "--no-journal")
    events = [json.loads(line) for line in res.stdout.splitlines()]
    pauses = [e for e in events if e["type"] == "run.pause"]
    assert len(pauses) == 1, res.stderr
    (hit,) = pauses[0]["watch"]
    assert (hit["expr"], pauses[0]["reason"]) == (expr, "watchpoint")
    return events, pauses[0], next(e for e in events if e["seq"] == hit["seq"]), res


def history_before(events: list[dict], seq: int) -> list[dict]:
    return [e["item"] for e in events if e["type"] == "state.append" and e["bucket"] == "history" and e["seq"] < seq]


@pytest.mark.parametrize("expr,fired_by,detail", [
    ("state.rounds", ("workflow_state.change", "rounds", 1), "state.rounds: 0 → 1"),
    ("state.rounds >= 2", ("workflow_state.change", "rounds", 2), "state.rounds = 2"),
    ("state.approved == true", ("workflow_state.change", "approved", True), "state.approved = true"),
    ("len(state.notes) > 1", ("workflow_state.change", "notes", ["note 1", "note 2"]), "len(state.notes) = 2"),
    ("memory ~ /plano/i", ("state.append", "memory", "Plano: escrever bem"), "memory gained 'Plano: escrever bem'"),
    ("tasks ~ /revis/", ("state.append", "tasks", "revisar o texto"), "tasks gained 'revisar o texto'"),
])
def test_state_memory_and_tasks_watchpoints_stop_the_run_after_the_event_that_did_it(expr, fired_by, detail):
    events, pause, trigger, res = watched(expr)
    kind, where, value = fired_by
    if kind == "state.append":
        assert (trigger["type"], trigger["bucket"], trigger["item"]) == fired_by
    else:
        assert (trigger["type"], trigger["path"], trigger["new"]) == fired_by
    assert pause["watch"][0]["detail"] == detail
    assert pause["seq"] > trigger["seq"] and not [e for e in events[events.index(trigger) + 1:events.index(pause)]
                                                   if e["type"] == "run.pause"]
    end = events[-1]
    assert (end["type"], end["status"]) == ("run.end", "stopped")
    assert end["reason"].startswith(f"watchpoint {expr} fired at event #{trigger['seq']} in WatchedWorkflow")
    assert res.returncode == 4 and f"the run stopped at a watchpoint {expr} fired" in res.stderr


def test_prompt_tokens_stops_before_the_first_model_call_whose_prompt_is_over():
    events, pause, trigger, res = watched("prompt.tokens > 1500")
    assert (pause["point"], pause["name"]) == ("chat", "Reviewer")  # after the Writer's second look
    assert [m["role"] for m in history_before(events, pause["seq"])].count("tool") == 2  # ~1,000 tokens each
    assert not [e for e in events if e["type"] == "node.start" and e["kind"] == "chat" and e["seq"] > pause["seq"]]
    tokens = int(pause["watch"][0]["detail"].removeprefix("prompt.tokens = "))
    assert 2000 < tokens < 2500 and res.returncode == 4


def test_cost_stops_after_the_model_call_that_crosses_it():
    events, pause, trigger, res = watched("cost > 0.60")  # $0.25 a call: the third one crosses it
    chats = [e for e in events if e["type"] == "node.end" and e["kind"] == "chat"]
    assert trigger is chats[2] and pause["watch"][0]["detail"] == "cost = 0.75" and len(chats) == 3


def test_repeat_stops_before_the_third_identical_call_runs():
    events, pause, trigger, res = watched("repeat(look) >= 3")
    looks = [m for m in history_before(events, pause["seq"]) if m["role"] == "assistant" and m["tool_calls"]]
    assert len(looks) == 3 and trigger["item"] == looks[-1]  # the third request for look(q="a")
    assert (pause["point"], pause["name"], pause["call"]["args"]) == ("tool", "look", {"q": "a"})
    ran = [e for e in events if e["type"] == "node.end" and e["kind"] == "tool"]
    assert len(ran) == 2  # the third never ran


def test_the_tree_says_which_watchpoint_fired_and_where():
    res = run("--watch", "state.rounds >= 2", "--no-journal")
    (line,) = [line for line in res.stderr.splitlines() if line.startswith("◆")]
    assert line.startswith("◆ watchpoint state.rounds >= 2 fired at event #")
    assert line.endswith(" in WatchedWorkflow (state.rounds = 2)") and res.returncode == 4


def test_a_watchpoint_that_never_fires_lets_the_run_finish():
    res = run("--watch", "state.rounds > 10", "--watch", "memory ~ /nunca/", "--no-journal")
    assert res.returncode == 0 and "◆" not in res.stderr and res.stdout == "noted\n"


@pytest.mark.parametrize("expr,message,column", [
    ("state.x >>= 3", "expected a value: a number, 'text', true, false or null", 10),
    ("cost > 'x'", "expected a number for cost", 8),
    ("__import__('os')", "unknown subject '__import__'", 1),
])
def test_a_malformed_watch_is_refused_with_a_caret_before_anything_runs(tmp_path, expr, message, column):
    res = run("--watch", "cost > 1", "--watch", expr, cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines[0] == f"--watch: {message} at column {column}: {expr}"
    assert lines[1] == " " * (len(lines[0]) - len(expr) + column - 1) + "^"
    assert "Traceback" not in res.stderr and not (tmp_path / ".flowtui").exists()  # no run, no journal


@pytest.mark.parametrize("expr,shown,before", [
    ("memory ~ /日本/q", "memory ~ /日本/q", "memory ~ /日本/"),  # two cells each: the caret stood 2 left of q
    ("memory ~ /a\tb/q", "memory ~ /a⇥b/q", "memory ~ /a⇥b/"),  # a raw tab moved the rest of the line
    ("memory ~ /a\nb/q", "memory ~ /a⏎b/q", "memory ~ /a⏎b/"),  # a line break: the caret under the wrong line
])
def test_the_caret_stands_under_the_fault_whatever_comes_before_it(tmp_path, expr, shown, before):
    res = run("--watch", expr, cwd=tmp_path)
    assert res.returncode == 2
    line, caret = res.stderr.splitlines()[:2]
    head = "--watch: unknown pattern flag 'q' (known: i, m, s) at column " + str(len(before) + 1) + ": "
    assert line == head + shown and "\t" not in res.stderr
    assert caret == " " * (len(head) + len(before) + before.count("日") + before.count("本")) + "^"


def test_an_unknown_state_field_is_refused_naming_the_fields_there_are(tmp_path):
    res = run("--watch", "state.rodadas >= 3", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        "--watch: unknown state field 'rodadas' at column 7: state.rodadas >= 3",
        " " * len("--watch: unknown state field 'rodadas' at column 7: ") + "      ^",
        "WatchedState (the state of WatchedWorkflow) has the fields rounds, approved, notes",
    ]
    assert not (tmp_path / ".flowtui").exists()  # the refused run left no journal, nor the folders made for one
    (tmp_path / ".flowtui" / "runs").mkdir(parents=True)
    (tmp_path / ".flowtui" / "runs" / "older.jsonl").touch()
    assert run("--watch", "state.rodadas >= 3", cwd=tmp_path).returncode == 2
    assert [p.name for p in (tmp_path / ".flowtui" / "runs").iterdir()] == ["older.jsonl"]  # what was there stays


# --- over the protocol (--listen) ---------------------------------------------------------------


@pytest.fixture
def listening(tmp_path):
    proc = spawn("run", FLOW, "--input", "go", "--listen", "127.0.0.1:0", "--no-journal",
                 "--watch", "memory ~ /plano/i", cwd=ROOT)
    lines = [proc.stderr.readline(), proc.stderr.readline()]
    yield Client(int(lines[0].rsplit(":", 1)[1]), lines[1].split()[1])
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_a_client_sets_lists_and_clears_watchpoints_and_the_run_pauses_at_them(listening):
    c = listening
    assert c.read()["type"] == "hello"
    assert c.paused()["reason"] == "start"
    assert c.command(type="watch")["value"] == ["memory ~ /plano/i"]  # --watch, listed
    assert c.command(type="watch", expr="state.rounds>=1")["value"] == ["memory ~ /plano/i", "state.rounds>=1"]
    assert c.command(type="watch", expr="tasks ~ /x/")["ok"]
    assert c.command(type="watch", expr="tasks~/x/", on=False)["value"] == ["memory ~ /plano/i",
                                                                           "state.rounds>=1"]  # as written
    bad = c.command(type="watch", expr="state.rounds >>= 1")
    assert not bad["ok"] and bad["value"] == {"expr": "state.rounds >>= 1", "column": 15, "hint": None,
                                              "message": "expected a value: a number, 'text', true, false or null"}
    assert bad["error"].startswith("expected a value: a number, 'text', true, false or null at column 15")
    unknown = c.command(type="watch", expr="state.rodadas")
    assert not unknown["ok"] and unknown["value"]["hint"] == ("WatchedState (the state of WatchedWorkflow) has "
                                                              "the fields rounds, approved, notes")
    assert c.command(type="continue")["ok"]
    first = c.paused()  # --listen pauses rather than stops
    assert (first["reason"], first["watch"][0]["expr"], first["name"]) == ("watchpoint", "memory ~ /plano/i", "Writer")
    assert c.command(type="continue")["ok"]
    second = c.paused()
    assert (second["reason"], second["watch"][0]["expr"]) == ("watchpoint", "state.rounds>=1")
    assert second["watch"][0]["detail"] == "state.rounds = 1"
    changed = next(e for e in c.events if e["seq"] == second["watch"][0]["seq"])
    assert (changed["type"], changed["path"], changed["new"]) == ("workflow_state.change", "rounds", 1)
    assert c.command(type="continue")["ok"]
    end = c.until(lambda ev: ev["type"] in ("run.end", "run.pause"))
    assert (end["type"], end["status"]) == ("run.end", "finished")  # stayed true: it fired once


LAST_STEP = ROOT / "tests/tui/flows/last_step.py"  # copied in as st.py


def test_a_watchpoint_made_true_by_the_last_step_stops_the_run_at_its_end(tmp_path):
    """No pause point came after the change: the run finished, exit 0, and the watchpoint went unsaid (a CI
    check with --watch passed)."""
    shutil.copy(LAST_STEP, tmp_path / "st.py")
    res = run_flow(tmp_path, "--watch", "state.nome", "--json", "--no-journal")
    assert res.returncode == 4, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    (pause,) = [e for e in events if e["type"] == "run.pause"]
    assert (pause["point"], pause["name"], pause["reason"]) == ("end", "StWorkflow", "watchpoint")
    assert pause["watch"][0]["detail"] == "state.nome: '' → 'changed'"
    assert (events[-1]["type"], events[-1]["status"]) == ("run.end", "stopped")
    assert "the run stopped at a watchpoint state.nome fired at event #" in res.stderr  # (--json: no tree)


def test_a_served_run_pauses_at_its_end_for_a_watchpoint_its_last_step_made_true(tmp_path):
    shutil.copy(LAST_STEP, tmp_path / "st.py")
    proc = spawn("run", "st.py", "--input", "go", "--listen", "127.0.0.1:0", "--journal", "j.jsonl", "--watch",
                 "state.nome", cwd=tmp_path)
    try:
        lines = [proc.stderr.readline(), proc.stderr.readline()]
        c = Client(int(lines[0].rsplit(":", 1)[1]), lines[1].split()[1])
        assert c.read()["type"] == "hello"
        assert c.paused()["reason"] == "start"
        assert c.command(type="continue")["ok"]
        at_end = c.paused()
        assert (at_end["point"], at_end["reason"], at_end["watch"][0]["expr"]) == ("end", "watchpoint", "state.nome")
        assert c.command(type="add_item", bucket="memory", text="noted at the end")["ok"]
        assert c.command(type="continue")["ok"]
        end = c.until(lambda ev: ev["type"] in ("run.end", "run.pause"))
        assert (end["type"], end["status"]) == ("run.end", "finished")
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    # re-executed, with no watchpoint: the edit made at the end is made there again, not a divergence
    res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", "st.py",
                          "--resume-from", "j.jsonl", "--journal", "k.jsonl"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert res.returncode == 0 and "diverged" not in res.stderr, res.stderr
    again = [json.loads(line) for line in (tmp_path / "k.jsonl").read_text().splitlines()]
    assert [e["item"] for e in again if e["type"] == "state.append" and e["bucket"] == "memory"] == ["noted at the end"]
    assert (again[-1]["type"], again[-1]["status"]) == ("run.end", "finished")
    # forked at that pause (f, or @K), or at an event after the last pause point before it: the re-execution
    # pauses at the end, as the person was (it finished)
    for k in (at_end["seq"], at_end["seq"] - 1):
        proc = spawn("run", "st.py", "--resume-from", f"j.jsonl@{k}", "--listen", "127.0.0.1:0", "--no-journal",
                     cwd=tmp_path)
        try:
            lines = [proc.stderr.readline(), proc.stderr.readline()]
            c = Client(int(lines[0].rsplit(":", 1)[1]), lines[1].split()[1])
            assert c.read()["type"] == "hello"
            forked = c.paused()
            assert (forked["point"], forked["reason"]) == ("end", "resumed"), k
        finally:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("expr,message", [
    ("len(state.rodadas) > 1", "--watch: len() of state.rodadas, which is int: it has no length at column 11"),
    ("repeat(nope) >= 2", "--watch: no tool 'nope' in this flow at column 8"),
    ("Foo: state.x >= 1", "--watch: no workflow 'Foo' in this flow at column 1"),
])
def test_a_watchpoint_that_can_never_fire_is_refused_before_the_run_with_exit_2(expr, message):
    res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                          str(ROOT / "flows/revisao.py"), "--input", "go", "--no-journal", "--watch", expr],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
    assert "^" in res.stderr


def test_a_run_a_watchpoint_stopped_between_a_replys_calls_reexecutes_without_a_divergence(tmp_path):
    """Its calls left unanswered were answered naming the watchpoint; re-executed, the run stops there as
    a person's stop, and the words differed: a false divergence (exit 3)."""
    flow = tmp_path / "echo3.py"
    flow.write_text(
        "from flowtui import FunctionProvider, agent, tool, workflow\n\n"
        "@tool\n"
        "def echo(text: str) -> str:\n"
        "    \"\"\"Echo.\"\"\"\n"
        "    return f'echo: {text}'\n\n"
        "def model(messages, tools):\n"
        "    if any(m.role == 'tool' for m in messages):\n"
        "        return 'done'\n"
        "    calls = [{'name': 'echo', 'args': {'text': t}} for t in ('one', 'two', 'three')]\n"
        "    return {'content': '', 'tool_calls': calls}\n\n"
        "@agent(provider=FunctionProvider(model), prompt='p', tools=[echo])\n"
        "class A:\n"
        "    pass\n\n"
        "@workflow(steps=[A])\n"
        "class W:\n"
        "    pass\n")
    journal = tmp_path / "j.jsonl"
    cli = [sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", str(flow)]
    first = subprocess.run([*cli, "--input", "hi", "--watch", "history ~ /echo: one/", "--journal", str(journal)],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert first.returncode == 4, first.stderr
    assert "Tool call echo was not run: the run stopped." in journal.read_text()
    again = subprocess.run([*cli, "--resume-from", str(journal), "--no-journal", "--json"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    # stopped where the recorded run stopped, as it did: no divergence; and said so, exit 0 (no watchpoint of its
    # own fired: exit 4 and the recorded words alone said one had)
    assert again.returncode == 0, again.stderr
    end = json.loads(again.stdout.splitlines()[-1])
    assert end["type"] == "run.end" and end["reason"].startswith(
        f"stopped again where the run of {journal} was stopped (watchpoint history ~ /echo: one/ fired")


def test_a_pattern_that_backtracks_on_a_text_stops_the_run_there_saying_so_instead_of_hanging_it():
    """``/(a|aa)+$/`` on 40 a's then "!" backtracks for years: the run hung in the search (a text the
    model writes can do that to an ordinary-looking pattern). The search is cut after 0.1 s, the
    watchpoint taken off, and the run stops there saying why (in the app it pauses there)."""
    res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                          str(ROOT / "flows/revisao.py"), "--input", "a" * 40 + "!", "--no-journal",
                          "--watch", "history ~ /(a|aa)+$/"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert res.returncode == 4, res.stderr
    (line,) = [line for line in res.stderr.splitlines() if line.startswith("◆")]
    assert line.startswith("◆ watchpoint history ~ /(a|aa)+$/ fired at event #2 in RevisaoWorkflow (its pattern "
                           f"took over 0.1 s on '{'a' * 40}!' (it backtracks"), line
    assert line.endswith("this watchpoint is off now)"), line


CHILD = '''
from pydantic import BaseModel
from flowtui import FunctionProvider, State, agent, workflow

class ChildState(BaseModel):
    found: int = 0

@agent(provider=FunctionProvider(lambda m, t: "achei"), prompt="You search.")
class Searcher:
    def __init__(self, s: ChildState = State()):
        self.s = s

    def after_response(self, response, ctx):
        self.s.found += 1

@workflow(state=ChildState, steps=[Searcher, Searcher])
class Child:
    pass
'''

PARENT = '''
from pydantic import BaseModel
from flowtui import FunctionProvider, Input, WorkflowRuntime, agent, tool, until_answered, loop, workflow
from child import Child

class Ask(BaseModel):
    q: str

@tool(name="delegate", description="Asks the child.", schema=Ask)
class Delegate:
    def __init__(self, runtime: WorkflowRuntime):
        self.runtime = runtime

    async def execute(self, args: Ask = Input()):
        return await self.runtime.run(Child, input=args.q)

def model(messages, tools):
    if any(m.role == "tool" for m in messages):
        return "pronto"
    return {"content": "", "tool_calls": [{"name": "delegate", "args": {"q": "x"}}]}

@agent(provider=FunctionProvider(model), prompt="You delegate.", tools=[Delegate])
class Boss:
    pass

@workflow(steps=[loop([Boss], until=until_answered, max_iterations=3)])
class Parent:
    pass
'''


@pytest.mark.parametrize("expr,said,hint", [
    ("Child: state.fuond >= 2", "unknown state field 'fuond' at column 14", "ChildState (the state of Child) has the "
     "fields found"),
    ("Child: len(state.found) > 1", "len() of state.found, which is int: it has no length at column 18", None),
    ("Child: state.found == 'a'", "state.found is int: it never equals 'a' at column 14", None),
    ("state.zzz >= 2", "no workflow of this flow has a state field 'zzz' at column 7", "Parent has no state; Child's "
     "has found"),
    ("Parent: state.asked >= 1", "Parent has no state: it has no field 'asked' at column 15", None),
])
def test_a_watchpoint_on_a_child_workflow_or_a_parent_with_no_state_is_checked_as_the_runs_own(tmp_path, expr, said,
                                                                                               hint):
    # they were taken and never fired (a misspelled field of a child, a field no state has); run as a user runs
    # it, so the workflows the process defines are the flow's
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "parent.py").write_text(PARENT)
    res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", "parent.py",
                          "--input", "go", "--no-journal", "--watch", expr], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    lines = res.stderr.splitlines()
    assert res.returncode == 2 and lines[0] == f"--watch: {said}: {expr}", res.stderr
    column = int(said.rsplit(" ", 1)[1])
    assert lines[1] == " " * (len(lines[0]) - len(expr) + column - 1) + "^"
    assert hint is None or lines[2] == hint
    kept = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", "parent.py",
                           "--input", "go", "--no-journal", "--watch", "Child: state.found >= 2"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert kept.returncode == 4 and "◆ watchpoint Child: state.found >= 2 fired" in kept.stderr, kept.stderr


def test_the_caret_stands_under_the_fault_after_a_credential_the_expression_holds(tmp_path):
    """The expression is shown with the key redacted: the caret stood as many columns right of the fault as
    [redacted] is shorter than the key."""
    import os

    key = "sk-test-1234567890abcdef1234"
    expr = f"memory ~ /{key}/q"
    res = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", FLOW, "--input",
                          "go", "--watch", expr], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={**os.environ, "OPENAI_API_KEY": key})
    assert res.returncode == 2 and key not in res.stderr, res.stderr
    line, caret = res.stderr.splitlines()[:2]
    shown = "memory ~ /[redacted]/q"
    assert line.endswith(": " + shown), line
    assert caret == " " * (len(line) - 1) + "^", (line, caret)  # under the q
