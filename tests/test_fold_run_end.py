"""A run that ends with nodes still open (its process crashed, was killed, or was stopped) closes
them in the fold: they show the run's status and say they did not finish, instead of running on."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from flowtui.runtime.events import NodeEnd, NodeStart, RunEnd, RunStart
from flowtui.runtime.fold import RunView
from flowtui.runtime.journal import read_journal

BASE = dict(ts=0.0, origin="runtime")


def started(run_id: str = "r1", *nodes: tuple[str, str, str, str | None]) -> tuple[RunView, int]:
    view = RunView()
    seq = 1
    view.apply(RunStart(seq=seq, run_id=run_id, workflow="W", input="hi", memory=[], state={}, file="f.py",
                        data={}, **BASE))
    for node_id, kind, name, parent in nodes:
        seq += 1
        view.apply(NodeStart(seq=seq, run_id=run_id, node_id=node_id, parent_id=parent, kind=kind, name=name,
                             data={}, **BASE))
    return view, seq


def test_a_failed_run_closes_the_nodes_it_left_open_as_failed_and_unfinished():
    view, seq = started("r1", ("n1", "workflow", "W", None), ("n2", "agent", "A", "n1"),
                        ("n3", "chat", "A", "n2"))
    view.apply(NodeEnd(seq=seq + 1, run_id="r1", node_id="n3", parent_id="n2", kind="chat", name="A",
                       status="ok", duration_ms=1.0, data={}, **BASE))
    view.apply(RunEnd(seq=seq + 2, run_id="r1", status="failed", error="the flow process exited with code 3",
                      **{**BASE, "origin": "flowtui"}))
    assert view.nodes["n3"].status == "ok" and not view.nodes["n3"].unfinished  # it had ended: untouched
    for node_id in ("n1", "n2"):
        node = view.nodes[node_id]
        assert node.status == "error" and node.unfinished
        assert node.error == "unfinished: the run failed"
    assert view.path() == []
    assert view.status_line() == "failed: the flow process exited with code 3"


def test_a_stopped_run_closes_its_open_nodes_as_stopped_and_a_child_run_with_it():
    view, seq = started("r1", ("n1", "workflow", "W", None), ("n2", "tool", "t", "n1"))
    seq += 1
    view.apply(RunStart(seq=seq, run_id="c1", parent_id="n2", workflow="C", input="x", memory=[], state={},
                        file="f.py", data={}, **BASE))
    seq += 1
    view.apply(NodeStart(seq=seq, run_id="c1", node_id="n3", parent_id="n2", kind="workflow", name="C",
                         data={}, **BASE))
    view.apply(RunEnd(seq=seq + 1, run_id="r1", status="stopped", reason="killed after 1.0 s", **BASE))
    assert {view.nodes[n].status for n in ("n1", "n2", "n3")} == {"stopped"}
    assert all(view.nodes[n].unfinished for n in ("n1", "n2", "n3"))
    assert view.nodes["n3"].error == "unfinished: the run was stopped"
    assert view.runs["c1"].status == "stopped"


def test_a_child_runs_end_closes_only_its_own_nodes():
    view, seq = started("r1", ("n1", "workflow", "W", None), ("n2", "tool", "t", "n1"))
    seq += 1
    view.apply(RunStart(seq=seq, run_id="c1", parent_id="n2", workflow="C", input="x", memory=[], state={},
                        file="f.py", data={}, **BASE))
    seq += 1
    view.apply(NodeStart(seq=seq, run_id="c1", node_id="n3", parent_id="n2", kind="workflow", name="C",
                         data={}, **BASE))
    view.apply(RunEnd(seq=seq + 1, run_id="c1", status="failed", error="boom", **BASE))
    assert view.nodes["n3"].status == "error" and view.nodes["n3"].unfinished
    assert view.nodes["n1"].status == "running" and view.nodes["n2"].status == "running"
    assert view.status == "running"


def test_a_clone_taken_before_the_end_still_shows_the_nodes_running():
    """Scrubbing a replay back before run.end shows them running again."""
    view, seq = started("r1", ("n1", "workflow", "W", None))
    before = view.clone()
    view.apply(RunEnd(seq=seq + 1, run_id="r1", status="failed", error="x", **BASE))
    assert before.nodes["n1"].status == "running" and not before.nodes["n1"].unfinished
    assert view.nodes["n1"].status == "error"


def test_the_tree_draws_an_unfinished_node_with_its_status_and_why():
    from flowtui.tui.widgets.node_tree import node_label

    view, seq = started("r1", ("n1", "workflow", "W", None), ("n2", "agent", "A", "n1"))
    view.apply(RunEnd(seq=seq + 1, run_id="r1", status="failed", error="x", **BASE))
    labels = [node_label(view.nodes[n]).plain for n in ("n1", "n2")]
    assert labels == ["✗ workflow W  unfinished: the run failed", "✗ agent A  unfinished: the run failed"]


CRASHING = '''
import os
from pydantic import BaseModel
from flowtui import AgentContext, ScriptedProvider, agent, workflow

class S(BaseModel):
    x: int = 0

class P(ScriptedProvider):
    replies = {"A": ["hello"]}

@agent(provider=P, prompt="You are A.")
class A:
    def before_prompt(self, prompt, ctx: AgentContext):
        os._exit(3)

@workflow(state=S, steps=[A])
class W:
    pass
'''


def test_a_flow_process_that_exits_leaves_a_journal_whose_nodes_fold_as_failed(tmp_path: Path):
    flow, journal = tmp_path / "crash.py", tmp_path / "crash.jsonl"
    flow.write_text(textwrap.dedent(CRASHING))
    done = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", str(flow), "--input", "hi",
                           "--journal", str(journal)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "exited with code 3" in done.stderr
    view = RunView()
    view.apply_many(read_journal(journal))
    assert view.status == "failed"
    kinds = {node.kind: node for node in view.nodes.values()}
    assert kinds["workflow"].status == "error" and kinds["workflow"].unfinished
    assert kinds["agent"].status == "error" and kinds["agent"].unfinished
    assert not any(node.status == "running" for node in view.nodes.values()), json.dumps(
        {n.id: n.status for n in view.nodes.values()})


async def test_a_loop_that_failed_inside_an_iteration_is_labelled_with_that_iteration_as_the_path_was():
    """The status line said `loop 3/4` as the iteration failed, the node tree then `loop 2/4` (the ones done)."""
    import pytest

    from flowtui import FunctionProvider, agent, bootstrap, loop, workflow

    def model(messages, tools):
        if sum(m.role == "assistant" for m in messages) == 2:
            raise RuntimeError("the third call fails")
        return "ok"

    @agent(provider=FunctionProvider(model))
    class A:
        pass

    @workflow(steps=[loop([A], max_iterations=4)])
    class W:
        pass

    paths: list = []
    view = RunView()
    events: list = []
    with pytest.raises(RuntimeError, match="the third call fails"):
        await bootstrap(W).run("go", on_event=events.append)
    for ev in events:
        view.apply(ev)
        if ev.type == "node.start" and ev.kind == "chat":
            paths.append(view.path()[1])
    assert view.status == "failed" and paths == ["loop 1/4", "loop 2/4", "loop 3/4"]
    (loop_node,) = [n for n in view.nodes.values() if n.kind == "loop"]
    assert loop_node.status == "error" and loop_node.label == "loop 3/4"


def test_a_model_call_waiting_to_retry_says_so_on_the_status_line_until_it_goes_on():
    """For a Retry-After of 30 s the status line said only `running` (the wait was in the event log alone)."""
    from flowtui.runtime.events import ChatAttempt, ChatDelta

    view, seq = started("r1", ("n1", "workflow", "W", None), ("n2", "agent", "Writer", "n1"),
                        ("n3", "chat", "Writer", "n2"))
    where = dict(run_id="r1", node_id="n3", parent_id="n2", **BASE)
    view.apply(ChatAttempt(seq=seq + 1, attempt=1, error="overloaded", status=503, retry_in_s=30.0, **where))
    assert view.status_line() == ("running: retrying the model call of Writer in 30 s "
                                  "(attempt 2; it failed: overloaded, HTTP 503)")
    assert view.status_line(waited_s=12.2).startswith("running: retrying the model call of Writer in 18 s ")
    assert view.status_line(waited_s=45).startswith("running: retrying the model call of Writer in 0 s ")  # late
    view.apply(ChatDelta(seq=seq + 2, text="Hel", **where))  # the retry answers
    assert view.status_line() == "running"
    view.apply(ChatAttempt(seq=seq + 3, attempt=2, error="overloaded", status=503, retry_in_s=None, **where))
    assert view.status_line() == "running"  # the last attempt: no wait to say


def test_a_run_whose_run_start_was_left_out_ends_as_its_run_end_says():
    """A journal whose run.start was damaged (left out as no valid event): the replay said "run result: none (no
    run.end: it crashed or is still going)" at its run.end, status finished."""
    view = RunView()
    view.apply(NodeStart(seq=2, run_id="r1", node_id="n1", parent_id=None, kind="workflow", name="W", **BASE))
    view.apply(NodeStart(seq=3, run_id="r1.c1", node_id="c1", parent_id="n1", kind="workflow", name="Child", **BASE))
    view.apply(RunEnd(seq=4, run_id="r1.c1", status="failed", error="child", **BASE))  # a child's end: not the run's
    assert view.status != "failed"
    view.apply(RunEnd(seq=5, run_id="r1", status="finished", output="done", **BASE))
    assert (view.status, view.output) == ("finished", "done")


def test_a_reply_stopped_mid_stream_shows_what_its_journal_keeps_held_back_tail_included():
    """The run holds back a streamed piece that may begin a credential ("... named sk"); stopped there, the
    live pane kept "... named " while the journal's partial, and so the replay, said "... named sk"."""
    from flowtui.runtime.events import ChatDelta

    view, _ = started("r1", ("n1", "workflow", "W", None), ("n2", "agent", "A", "n1"), ("n3", "chat", "A", "n2"))
    view.apply(ChatDelta(seq=10, run_id="r1", node_id="n3", parent_id="n2", text="Use the library named ", **BASE))
    view.apply(NodeEnd(seq=11, run_id="r1", node_id="n3", parent_id="n2", kind="chat", name="A", status="stopped",
                       data={"partial": "Use the library named sk"}, **BASE))
    assert (view.streaming, view.streaming_cut) == ("Use the library named sk", "stopped")
