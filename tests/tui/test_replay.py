"""flowtui replay: a recorded journal, folded to any event, scrubbed with keys; bad files refused."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
from conftest import REVIEW

from flowtui.runtime.fold import RunView
from flowtui.runtime.journal import read_journal
from flowtui.tui.replay import ReplayApp, main_replay, make_replay
from flowtui.runtime.journal import JournalError, load_runs
from flowtui.tui.timeline import Timeline
from flowtui.tui.widgets.event_log import EventLog

SIZE = (130, 36)


def record(path: Path, input: str = "Write about ctx.state") -> Path:
    """Run the review flow headlessly (FunctionProvider models) with its journal at ``path``."""
    from flowtui.runtime.loader import load_flow

    asyncio.run(load_flow(REVIEW).run(input, journal=path, memory={"user": "Castro"}))
    return path


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return record(tmp_path / "review.jsonl")


def fold(events) -> RunView:
    view = RunView()
    for ev in events:
        view.apply(ev)
    return view


def summary(view: RunView) -> dict:
    """What the panes render, as plain data."""
    return {
        "history": [(m.role, m.content, m.agent) for m in view.history], "memory": list(view.memory),
        "tasks": list(view.tasks), "state": dict(view.state), "ctx": dict(view.ctx), "status": view.status,
        "path": view.path(), "events": view.events, "changed": view.last_changed,
        "nodes": {i: (n.status, n.label, list(n.children), dict(n.data)) for i, n in view.nodes.items()},
    }


# --- the timeline -------------------------------------------------------------------------------------


def test_view_at_any_event_is_the_fold_of_the_events_before_it(journal):
    events = list(read_journal(journal))
    timeline = Timeline(events, every=7)  # small checkpoints, so clones are folded on and on
    order = list(range(len(events) + 1))
    random.Random(4).shuffle(order)
    for k in [*order, *range(len(events) + 1), *reversed(range(len(events) + 1))]:
        assert summary(timeline.view_at(k)) == summary(fold(events[:k])), f"at event {k}"


def test_a_long_journal_copies_its_view_a_bounded_number_of_times(journal, monkeypatch):
    """A checkpoint every 500 events copies the view, whose history grows with the run: 200,000 history
    messages took 6 s and 650 MB to open, a million never opened. Checkpoints now space out."""
    from flowtui.tui.timeline import MAX_CHECKPOINTS

    events = list(read_journal(journal))
    message = next(ev for ev in events if ev.type == "state.append" and ev.bucket == "history")
    many = [events[0], *(message.model_copy(update={"seq": i + 2}) for i in range(60_000))]
    copies = []
    clone = RunView.clone
    monkeypatch.setattr(RunView, "clone", lambda self: copies.append(1) or clone(self))
    timeline = Timeline(many)
    end = timeline.view_at(len(many))
    assert len(end.history) == 60_000
    assert len(copies) <= MAX_CHECKPOINTS + 2, len(copies)  # (60,000 / 500 = 120 before)
    assert [m.content for m in timeline.view_at(30_001).history] == [message.item.content] * 30_000


def test_agent_turns_are_the_node_starts_of_agents(journal):
    timeline = Timeline(read_journal(journal))
    turns, k = [], 0
    while (k := timeline.next_agent(k)) is not None:
        ev = timeline.event(k)
        turns.append((ev.type, ev.kind, ev.name))
    assert turns == [("node.start", "agent", name) for name in ["Writer", "Reviewer", "Writer", "Reviewer"]]
    last = timeline.agent_starts[-1]
    assert timeline.previous_agent(last) == timeline.agent_starts[-2]
    assert timeline.previous_agent(timeline.agent_starts[0]) is None


def test_a_file_written_twice_holds_two_runs(tmp_path):
    path = record(tmp_path / "twice.jsonl", "first")
    record(path, "second")
    runs = load_runs(path)
    assert [(run[0].type, run[0].input, run[-1].type) for run in runs] == [
        ("run.start", "first", "run.end"), ("run.start", "second", "run.end")]
    assert make_replay(path).timeline.events[0].input == "second"
    assert make_replay(path, run=1).timeline.events[0].input == "first"
    with pytest.raises(JournalError, match="holds 2 runs"):
        make_replay(path, run=3)


@pytest.mark.parametrize(("content", "message"), [
    ("", "empty, no events recorded"),
    ('{"type": "run.start"}\n', "not a flowtui journal (line 1: run.start: seq: Field required"),
    ("\x00\xff\xfe binary \x89PNG\n", "not a flowtui journal (line 1: not UTF-8 text"),
    ("a,b,c\n1,2,3\n", "not a flowtui journal (line 1: not JSON)"),
])
def test_a_file_that_is_not_a_journal_names_file_and_line(tmp_path, content, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content.encode("latin-1"))
    with pytest.raises(JournalError) as info:
        load_runs(bad)
    assert str(bad) in str(info.value) and message in str(info.value)


def test_a_bad_line_amid_good_ones_is_skipped_with_its_line_number(tmp_path, journal):
    lines = journal.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], "this is not json", *lines[1:]]) + "\n")
    notices: list = []
    (run,) = load_runs(bad, notices=notices)
    assert [(n.line, n.reason) for n in notices] == [(2, "not JSON")]
    assert len(run) == len(lines)


def test_replay_command_exits_2_without_a_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"nope": 1}\n')
    assert main_replay([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"flowtui replay: {bad}: not a flowtui journal (line 1: not an event (no 'type'))")
    assert "Traceback" not in err
    assert main_replay([str(tmp_path)]) == 2
    assert "is a folder, not a journal file" in capsys.readouterr().err
    assert main_replay([str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl: no such file" in capsys.readouterr().err


@pytest.mark.parametrize("at", ["-1", "99999999"])
def test_an_at_outside_the_run_is_refused_not_clamped_unsaid(journal, capsys, at):
    last = load_runs(journal)[-1][-1].seq
    assert main_replay([str(journal), "--at", at]) == 2
    assert (f"flowtui replay: --at {at}: the run's events are numbered up to #{last:,}; give K from 0 to {last:,}"
            in capsys.readouterr().err)


async def streamed(path: Path) -> Path:
    """A run whose model streams its replies: the fragments' numbers are left out of the journal."""
    from fakes import streaming_workflow
    from flowtui import bootstrap

    await bootstrap(streaming_workflow()).run("hi", journal=path)
    return path


async def test_at_k_opens_after_event_number_k_as_the_event_log_and_resume_from_name_it(tmp_path, monkeypatch):
    """A streamed run's journal leaves numbers out: --at K counted positions, so it opened on another
    event than the #K the event log showed and JOURNAL@K re-executes to."""
    journal = await streamed(tmp_path / "streamed.jsonl")
    events = load_runs(journal)[-1]
    second = [e for e in events if e.type == "node.start" and e.kind == "agent"][1]
    assert events.index(second) + 1 != second.seq  # the numbers left out make position and number differ
    opened: list[ReplayApp] = []
    monkeypatch.setattr(ReplayApp, "run", lambda self: opened.append(self))
    monkeypatch.setattr("flowtui.tui.cli.needs_a_terminal", lambda *said: None)
    assert main_replay([str(journal), "--at", str(second.seq)]) == 0
    (app,) = opened
    async with app.run_test(size=SIZE):
        assert app.timeline.event(app.position).seq == second.seq
        assert position(app) == f"#{second.seq} · {events.index(second) + 1}/{len(events)} · node.start · runtime"
    assert main_replay([str(journal), "--at", str(second.seq + 1)]) == 0  # a number left out: the event before it
    assert opened[-1].timeline.event(opened[-1].position).seq <= second.seq + 1


# --- the app ------------------------------------------------------------------------------------------


def position(app: ReplayApp) -> str:
    return str(app.main.query_one("#position").content).split("   ")[0]


async def test_keys_scrub_through_the_run(journal):
    events = list(read_journal(journal))
    n = len(events)
    app = make_replay(journal)
    async with app.run_test(size=SIZE) as pilot:
        conversation = app.main.query_one("#conversation")
        # it opens at the end: the run finished, the last event is run.end
        assert app.position == n and app.view.status == "finished"
        assert position(app) == f"#{events[-1].seq} · {n}/{n} · run.end · runtime"
        assert "run result: finished" in str(app.main.query_one("#status").content)

        await pilot.press("home")
        assert app.position == 0 and app.view.history == []
        assert position(app) == f"0/{n} · before the first event"
        lengths = []
        for _ in range(n):
            await pilot.press("right")
            lengths.append(len(app.view.history))
            assert len(conversation.messages) == lengths[-1]
        assert app.position == n and app.view.status == "finished"
        assert lengths == sorted(lengths) and lengths[-1] == len(fold(events).history) > 1

        await pilot.press("left", "h")
        assert app.position == n - 2 and summary(app.view) == summary(fold(events[:n - 2]))
        await pilot.press("l")
        assert app.position == n - 1

        # turn by turn: ] stops where each agent's turn starts
        await pilot.press("home", "right_square_bracket", "right_square_bracket")
        ev = events[app.position - 1]
        assert (ev.type, ev.kind, ev.name) == ("node.start", "agent", "Reviewer")
        assert app.view.path() == ["ReviewWorkflow", "loop 1/4", "Reviewer"]
        assert app.view.state == {"approved": False, "rounds": 0, "problems": []}
        assert [m.role for m in app.view.history] == ["user", "assistant"]
        await pilot.press("right_square_bracket")  # the second Writer turn: the first review is recorded
        assert app.view.state["rounds"] == 1 and app.view.state["problems"] == ["No example.", "No closing rule."]
        await pilot.press("left_square_bracket")
        assert events[app.position - 1].name == "Reviewer"

        await pilot.press("end")
        assert app.position == n
        await pilot.press("pageup")
        assert app.position == max(n - 100, 0)
        await pilot.press("shift+right")
        assert app.position == n


async def test_the_panes_follow_the_position(journal):
    events = list(read_journal(journal))
    first_change = next(i for i, ev in enumerate(events, 1) if ev.type == "workflow_state.change")
    app = make_replay(journal)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")  # the event log shows the events up to the position
        app.go(first_change)
        await pilot.pause()
        log = app.main.query_one("#events")
        assert list(log.events) == events[:first_change]
        assert app.view.last_changed == events[first_change - 1].path
        await pilot.press("4")
        tree = app.main.query_one("#nodes")
        assert len(tree._items) == len(app.view.nodes)
        await pilot.press("1", "q")
    assert app.return_code == 0


def test_replay_mid_run(snap_compare, journal):
    """A replay of the review flow at the Reviewer's first turn (two `]` from the start):
    the conversation holds the user's input (#0) and Writer's `Draft 1` (#1); the sidebar
    shows memory item `user: Castro` and the state at its defaults; below, `#12 · 12/51 ·
    node.start · runtime` with a part-filled bar and `replay of review.jsonl`, then
    `● running · run result: finished`, then `ReviewWorkflow › loop 1/4 › Reviewer ← agent
    Reviewer`; the key bar lists `← h back  → l forward  [ prev turn  ] next turn  q quit` and
    more, and `? keys  ^p palette` at its right end."""

    async def run_before(pilot):
        await pilot.press("home", "right_square_bracket", "right_square_bracket")

    assert snap_compare(make_replay(journal), terminal_size=SIZE, run_before=run_before)


def test_the_journal_is_json_lines(journal):
    lines = journal.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "run.start" and json.loads(lines[-1])["type"] == "run.end"


async def test_scrub_keys_leave_the_palette_alone(journal):
    app = make_replay(journal)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("home", "ctrl+p")
        await pilot.pause()
        assert app.screen is not app.main
        await pilot.press("n", "e", "x", "t", "left", "left", "home")
        assert app.position == 0
        await pilot.press("escape", "right")
        assert app.position == 1


async def test_a_run_cut_short_replays_what_was_written(tmp_path, journal):
    lines = journal.read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:20]) + "\n" + lines[20][:30])  # the writer died mid-line
    app = make_replay(cut)
    assert len(app.timeline) == 20
    async with app.run_test(size=SIZE):
        status = str(app.main.query_one("#status").content)
        assert "run result: none (no run.end" in status
    # the same journal appended to after the crash: the torn line is skipped, both sides open
    cut.write_text("\n".join(lines[:20]) + "\n" + lines[20][:30] + "\n" + "\n".join(lines[21:]) + "\n")
    notices: list = []
    (run,) = load_runs(cut, notices=notices)
    assert [n.line for n in notices] == [21] and len(run) == len(lines) - 1


async def test_a_hostile_journal_opens_and_every_key_still_works(tmp_path, journal):
    """Nodes that are each other's parent, invalid events and an unknown type: shown, never a hang."""
    lines = journal.read_text().splitlines()
    start = json.loads(lines[0])
    run_id = start["run_id"]

    def line(seq, **fields):
        return json.dumps({"seq": seq, "ts": 0, "run_id": run_id, "origin": "runtime", **fields})

    hostile = [
        lines[0],
        line(2, type="node.start", node_id="x", parent_id="y", kind="agent", name="Loops"),
        line(3, type="node.start", node_id="y", parent_id="x", kind="loop", name="Back"),
        line(4, type="node.start", node_id="z", parent_id="z", kind="tool", name="Self"),
        line(5, type="state.append", bucket="history", item="a plain string"),
        line(6, type="ctx.set", name="loop", value={"iterations": "three"}),
        line(7, type="state.set", bucket="memory", items=[{"role": "user", "content": "x"}]),
        line(8, type="tool.progress", done=0.5),
        line(9, type="run.pause", point="agent", name="Loops", reason="step", path=["W", "Loops"]),
    ]
    bad = tmp_path / "hostile.jsonl"
    bad.write_text("\n".join(hostile) + "\n")
    app = make_replay(bad)
    async with app.run_test(size=(220, 36)) as pilot:
        for key in ["home", "right", "right", "right", "right", "end", "3", "4", "2", "1", "left", "pageup", "end"]:
            await asyncio.wait_for(pilot.press(key), timeout=10)
        await pilot.press("3")
        await pilot.pause(0.1)
        log = app.main.query_one(EventLog)
        rows = [log.render_line(y).text for y in range(len(hostile))]
        assert any("invalid" in r and "history item 0 is str" in r for r in rows)
        assert any("invalid" in r and "iterations" in r for r in rows)
        assert any("tool.progress" in r for r in rows)
        assert app.view.history == [] and app.view.memory == ["user: Castro"]  # the invalid ones: skipped
        await pilot.press("4")
        await pilot.press("q")


def test_a_large_journal_says_how_far_its_reading_is_then_the_app_shows_it(journal, tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from terminal import Terminal

    from flowtui.tui.replay import Reading

    # the recorded run, its first model reply a few MB of text: a journal past Reading.LARGE
    lines = journal.read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    reply = next(e for e in events if e["type"] == "state.append" and e["item"]["role"] == "assistant")
    reply["item"]["content"] = "palavra " * (Reading.LARGE // 8 + 1000)
    big = tmp_path / "big.jsonl"
    big.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    assert big.stat().st_size > Reading.LARGE
    with Terminal.flowtui("replay", str(big), cols=120, rows=30, cwd=tmp_path) as term:
        term.wait_for(lambda: f"flowtui replay: reading {big}: ".encode() in term.output, timeout=60)
        term.wait_for("Conversation", timeout=120)
        assert "flowtui replay: reading" not in term.text()  # the line made way for the app
        term.send("q")
        assert term.wait_exit(timeout=30) == 0


async def test_a_run_whose_numbering_starts_again_without_a_run_start_is_said(tmp_path, journal):
    """A second run appended whose first line was lost: the replay opens the events after the break as
    the last run; it says they have no run.start, not showing them in silence."""
    lines = journal.read_text().splitlines()
    run_id = json.loads(lines[0])["run_id"]
    moved = tmp_path / "joined.jsonl"
    moved.write_text("\n".join([*lines[:10], *(line.replace(run_id, "r9-000000") for line in lines[1:])]) + "\n")
    app = make_replay(moved)
    assert app.timeline.events[0].type != "run.start"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        said = [(n.title, n.message) for n in app._notifications]
        assert any(title == "No run.start" and "starts again at event" in message for title, message in said), said


async def test_lines_of_one_run_repeated_moved_or_taken_out_by_hand_are_said_and_the_run_kept_whole(tmp_path,
                                                                                                   journal):
    """They split it into several runs (a line repeated: two, the replay opening a fragment without its
    messages), or went unsaid (lines taken out)."""
    lines = journal.read_text().splitlines()
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join([*lines[:10], *lines[5:10], lines[12], lines[11], lines[10], *lines[13:20],
                                 *lines[22:]]) + "\n")
    notices: list = []
    (run,) = load_runs(edited, notices=notices)
    assert [e.seq for e in run] == [*range(1, 21), *range(23, len(lines) + 1)]  # in order, once each
    assert [(n.line, n.reason) for n in notices] == [
        *((n, f"event #{n - 5} again: a line repeated by hand? left out") for n in range(11, 16)),
        (16, "lines 16, 17 out of order (moved by hand?): read by event number"),
        (26, "events #21 to #22 are missing before it (lines taken out by hand?)"),
        (29, "node n8 ends, but no node.start before it begins it (taken out, or its id changed by hand?): what it "
             "ended is unsure")]  # (event #21 was its start)
    app = make_replay(edited)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        said = [(n.title, n.message) for n in app._notifications]
        assert any(title == "This journal was edited by hand, or damaged" and "line 11: event #6 again" in message
                   for title, message in said), said
        assert app.timeline.events[0].type == "run.start"


async def test_scrubbing_through_a_child_workflow_shows_the_childs_panes(tmp_path):
    """A run recorded headless has no pause inside its child to follow: the replay showed the parent's
    conversation and state while the status line said the child's events."""
    from flowtui.runtime.loader import load_flow

    path = tmp_path / "child.jsonl"
    await load_flow("tests/tui/flows/child_fn.py:CoordinatorWorkflow").run("go", journal=path)
    app = make_replay(path)
    events = app.timeline.events
    top = events[0].run_id
    k = next(i for i, e in enumerate(events, 1) if e.type == "state.append" and e.run_id != top
             and e.item.role == "assistant")
    async with app.run_test(size=SIZE) as pilot:
        app.go(k)
        await pilot.pause()
        assert app.view.workflow == "ResearchWorkflow"
        assert [m.content for m in app.view.history] == ["What is ctx.state?",
                                                         "ctx.state is the conversation the model sees."]
        app.go(len(events))  # the child has ended: the parent's panes again
        await pilot.pause()
        assert app.view.workflow == "CoordinatorWorkflow" and app.view.history[-1].content == \
            "ctx.state is what the model sees."


def test_the_position_line_gives_up_its_bar_then_the_start_of_the_journals_name_when_narrow():
    """At 80 columns it ended "replay of", the name cut away behind the bar."""
    from types import SimpleNamespace

    from flowtui.tui.screens.replay import position_text

    ev = SimpleNamespace(seq=57, type="state.append", origin="agent:Writer")
    source = "runs/ReviewWorkflow-20261203-015512.jsonl"
    wide = position_text(41, 82, ev, source, width=160).plain
    assert "━" in wide and wide.endswith(f"replay of {source}")
    narrow = position_text(41, 82, ev, source, width=100).plain
    assert "━" not in narrow and "─" not in narrow and len(narrow) <= 100
    assert narrow.endswith(f"replay of {source}")
    tight = position_text(41, 82, ev, source, width=70).plain
    assert len(tight) <= 70 and tight.endswith("015512.jsonl") and "replay of …" in tight
    # an origin of 100 characters (a journal made elsewhere) left nothing after it on the row, not even its end
    long = position_text(41, 82, SimpleNamespace(seq=57, type="state.append", origin="tool:" + "x" * 95), source,
                         width=100).plain
    assert "tool:xxx" in long and "…" in long and long.endswith("015512.jsonl") and len(long) <= 100, long


async def test_a_forged_journal_of_deep_nodes_and_huge_names_draws_its_node_tree(journal, tmp_path):
    """1,000 nodes each inside the one before raised RecursionError in the tree (the replay hung drawing
    the traceback); a 1 MB node name took seconds to measure at each redraw."""
    lines = journal.read_text().splitlines()
    end = json.loads(lines[-1])
    base = {k: end[k] for k in ("ts", "run_id", "origin")}
    forged = [json.dumps({**base, "seq": end["seq"] + i, "type": "node.start", "node_id": f"x{i}",
                          "parent_id": f"x{i - 1}" if i else "n1", "kind": "tool",
                          "name": ("N" * 1_000_000) if i == 0 else f"t{i}", "data": {}})
              for i in range(1000)]
    end["seq"] += 1000
    path = tmp_path / "forged.jsonl"
    path.write_text("\n".join(lines[:-1] + forged + [json.dumps(end)]) + "\n")
    app = make_replay(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("end", "4")
        await pilot.pause()
        tree = app.main.query_one("#nodes")
        assert len(tree._items) == len(app.view.nodes)
        labels = [str(node.label) for node in tree._items.values()]
        assert max(map(len, labels)) < 300 and any("NNN…" in label for label in labels)
        await pilot.press("down", "down", "1", "q")
    assert app.return_code == 0


async def test_nodes_a_forged_journal_links_in_a_circle_are_drawn_with_the_broken_link_named(journal, tmp_path):
    """The first of them was drawn at the top of the tree as if nothing were wrong, under the workflow's end."""
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    starts = [e for e in events if e["type"] == "node.start"]
    agent, chat = starts[1], starts[2]  # (the workflow's first agent, and its chat node)
    agent["parent_id"], chat["parent_id"] = chat["node_id"], agent["node_id"]
    path = tmp_path / "circle.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    app = make_replay(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("end", "4")
        await pilot.pause()
        tree = app.main.query_one("#nodes")
        labels = {node_id: str(item.label) for node_id, item in tree._items.items()}
        assert labels[agent["node_id"]].endswith(f"(broken link: its parent {chat['node_id']} does not come before it)")
        assert "broken link" not in labels[chat["node_id"]]  # (under the agent, as its own link says)
        assert sum("broken link" in label for label in labels.values()) == 1


def test_a_run_end_reason_of_many_lines_is_one_short_line_of_the_status(journal):
    """A reason of 500,000 line breaks was laid out as 500,000 lines at every key (seconds each)."""
    from flowtui.runtime.events import RunEnd
    from flowtui.tui.screens.replay import final_text
    from flowtui.tui.widgets.control import status_text

    events = list(read_journal(journal))
    end = events[-1].model_copy(update={"status": "stopped", "reason": "why\n" * 100_000})
    view = fold(events[:-1] + [RunEnd.model_validate(end.model_dump())])
    for text in (final_text(view), status_text(view, width=120)):
        assert "\n" not in text.plain and "why ⏎ why" in text.plain and len(text.plain) < 3_000


async def test_o_opens_the_whole_message_the_replay_draws_cut(tmp_path):
    """A block draws its first lines and says "… N more lines (o opens it whole)"; in a replay o did
    nothing (nor in what the model sees, 2), so the rest could not be read there."""
    from conftest import paged

    from flowtui.runtime.loader import load_flow

    long = "\n".join(f"line {i}" for i in range(1, 301))
    journal = tmp_path / "long.jsonl"
    await load_flow(REVIEW).run(long, journal=journal)
    app = make_replay(journal)
    async with app.run_test(size=SIZE) as pilot:
        app.go(3)  # the run's input is in the history
        await pilot.pause()
        app.main.conversation.select(0)
        app.main.conversation.focus()
        assert await paged(pilot) == long
        app.clear_notifications()
        await pilot.press("2")
        await pilot.pause()
        sees = app.main.pane_widget("model-sees")
        sees.select(next(i for i, m in enumerate(sees.messages) if m.content == long))
        sees.focus()
        assert await paged(pilot) == long


async def test_long_durations_in_the_node_tree_are_said_in_minutes_and_fit_a_narrow_pane(journal, tmp_path):
    """A run of twelve minutes read ``754321.0 ms`` in the node tree: deeper in it, at 80 columns, such a
    duration was cut off (``1.0 m``)."""
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    ends = [e for e in events if e["type"] == "node.end"]
    ends[-1]["duration_ms"] = 754_321.0  # the workflow's
    ends[0]["duration_ms"] = 4_268.8
    path = tmp_path / "long.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    app = make_replay(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("end", "4")
        await pilot.pause()
        screen = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
        assert f"workflow {ends[-1]['name']}  12 m 34 s" in screen, screen
        assert f"{ends[0]['kind']} {ends[0]['name']}  4.27 s" in screen, screen
        assert " ms" in screen  # (the short ones as they were)
        await pilot.press("q")
