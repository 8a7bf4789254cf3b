"""The app re-executes a journal (``flowtui FLOW --resume-from JOURNAL``): an unchanged flow runs
through its prefix without asking for anything; a changed one waits at the divergence screen,
which continues live or cancels."""

from __future__ import annotations

import json

import shutil
from pathlib import Path
from typing import Any

import flowcapture
import pytest
from conftest import FLOWS, ended, make, paused, press_and_pause, wait_until

from flowtui.runtime.loader import load_flow
from flowtui.tui.screens.diverged import DivergedScreen


async def _recorded(tmp_path):
    """A copy of the review flow and the journal of one run of it."""
    flow, journal = tmp_path / "review_copy.py", tmp_path / "run.jsonl"
    shutil.copy(FLOWS / "review_fn.py", flow)
    await load_flow(str(flow)).run("go", journal=journal)
    return flow, journal


async def _forked(pilot, old_run: str) -> None:
    """Until the run forked from ``old_run`` (another run) is paused."""
    app = pilot.app
    await wait_until(pilot, lambda: app.client.view is not None and app.client.view.run_id not in (None, old_run)
                     and app.client.view.status == "paused", timeout=20, what="the forked run, paused")


async def _finished_after_a_turn(pilot) -> tuple[str, str]:
    """The run paused after its first turn, then continued to its end: its id, and where it last paused."""
    app = pilot.app
    await paused(pilot)
    await press_and_pause(pilot, "n")
    old_run, where = app.client.view.run_id, app.client.view.status_line()
    await pilot.press("c")
    await wait_until(pilot, lambda: app.client.view.status == "finished", what="the end")
    return old_run, where


def _changed(flow):
    flow.write_text(flow.read_text().replace('prompt="You review the draft."', 'prompt="You review it closely."'))


async def test_an_unchanged_flow_reexecutes_to_its_end_without_asking(tmp_path):
    flow, journal = await _recorded(tmp_path)
    asked = len(flowcapture.requests())
    app = make(str(flow), resume_from=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        await ended(pilot)
        view = app.client.view
        assert view.status == "finished" and view.divergence is None
        assert view.resumed_from.journal == str(journal)
        assert not isinstance(app.screen, DivergedScreen)
    assert len(flowcapture.requests()) == asked  # every reply served from the journal


async def test_a_changed_prompt_shows_the_divergence_and_continue_goes_on_live(tmp_path):
    flow, journal = await _recorded(tmp_path)
    _changed(flow)
    asked = len(flowcapture.requests())
    app = make(str(flow), resume_from=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await wait_until(pilot, lambda: isinstance(app.screen, DivergedScreen), what="the divergence screen")
        shown = app.screen.diverged
        assert shown.path == "ReviewWorkflow › loop 1 › Reviewer › chat"
        assert [(d.field, d.why) for d in shown.differences] == [
            ("request.messages[0].content", "the prompt of Reviewer changed")]
        assert app.client.view.status_line().endswith("(diverged from its journal)")
        assert app.client.view.path() == ["ReviewWorkflow", "loop 1/4", "Reviewer", "chat"]  # the agent once
        assert len(flowcapture.requests()) == asked  # nothing live while it waits
        await pilot.press("c")
        await ended(pilot)
        assert app.client.view.status == "finished"
    live = flowcapture.requests()[asked:]
    assert live and live[0][0] == "Reviewer"  # from the divergence on, the model is called
    assert live[0][1][0].content == "You review it closely."


async def test_cancel_on_the_divergence_screen_stops_the_run_before_anything_live(tmp_path):
    flow, journal = await _recorded(tmp_path)
    _changed(flow)
    asked = len(flowcapture.requests())
    app = make(str(flow), resume_from=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DivergedScreen), what="the divergence screen")
        await pilot.press("x")
        await ended(pilot)
        assert app.client.view.status == "stopped"
    assert len(flowcapture.requests()) == asked


@pytest.mark.parametrize("key", ["escape", "q"])  # (q did nothing, the key bar below saying "q quit")
async def test_esc_on_the_divergence_screen_leaves_the_run_waiting_there(tmp_path, key):
    flow, journal = await _recorded(tmp_path)
    _changed(flow)
    asked = len(flowcapture.requests())
    app = make(str(flow), resume_from=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DivergedScreen), what="the divergence screen")
        await pilot.press(key)
        await wait_until(pilot, lambda: app.screen is app.main, what="the screen to close")
        assert app.client.view.status == "paused" and len(flowcapture.requests()) == asked
        await pilot.press("c")  # the run key goes on live from there, as the screen's c would
        await ended(pilot)
        assert app.client.view.status == "finished" and len(flowcapture.requests()) > asked


async def test_a_divergence_where_a_call_waits_for_approval_is_shown_then_the_call_asked_about(tmp_path):
    # the pause after the divergence is the call's approval: its reason said approval, and the divergence
    # screen never opened (the decision dialog did, the status said nothing of a divergence)
    from flowtui.tui.screens.decide import DecideDialog

    flow, journal = await _recorded(tmp_path)
    lines = journal.read_text().splitlines(keepends=True)
    said = '"content":"REJECTED: needs an example."'
    at = next(i for i, line in enumerate(lines) if '"type":"state.append"' in line and said in line)
    lines[at] = lines[at].replace(said, '"content":"REJECTED: other."')  # the reviewer's message in history
    journal.write_text("".join(lines))
    asked = len(flowcapture.requests())
    app = make(str(flow), resume_from=str(journal), approve=["record_problem"])
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DivergedScreen), what="the divergence screen")
        assert app.client.view.pause.reason == "approval"
        await pilot.press("c")  # continuing live does not decide the call: it is asked about
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the decision dialog")
        assert app.client.view.status == "paused" and len(flowcapture.requests()) == asked
        await pilot.press("y")  # approved: the run goes on live, as chosen (it waited for ever), until the next
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog)  # call waits for approval
                         and app.screen.call["args"] == {"text": "No closing rule."}, what="the second call's dialog")
        assert app.client.view.state["problems"] == ["No example."]
        await pilot.press("y")
        await ended(pilot)
        assert [e.reason for e in app.client.events if e.type == "run.pause"] == ["approval", "approval"]
        assert app.client.view.status == "finished" and len(flowcapture.requests()) > asked


async def test_resuming_at_k_pauses_after_k_then_goes_on_live(tmp_path):
    flow, journal = await _recorded(tmp_path)
    import json

    chats = [e for e in map(json.loads, journal.read_text().splitlines())
             if e["type"] == "node.end" and e["kind"] == "chat"]
    k = chats[1]["seq"]  # the writer's and the reviewer's first calls served; the rest live
    asked = len(flowcapture.requests())
    app = make(str(flow), resume_from=f"{journal}@{k}")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        view = app.client.view
        assert view.pause.reason == "resumed" and view.pause.seq > k
        assert f"(re-executed up to event #{k} of its journal; live from here)" in view.status_line()
        assert len(flowcapture.requests()) == asked
        await pilot.press("c")
        await ended(pilot)
        assert app.client.view.status == "finished"
    assert len(flowcapture.requests()) > asked


async def test_a_journal_that_stops_before_its_runs_end_says_so_where_the_reexecution_pauses(tmp_path):
    """Its writer killed (lines whole, no run.end): it paused as if K had been asked for, saying nothing of it."""
    flow, journal = await _recorded(tmp_path)
    lines = journal.read_text().splitlines(keepends=True)
    chats = [i for i, line in enumerate(lines) if '"kind":"chat"' in line and '"node.end"' in line]
    journal.write_text("".join(lines[:chats[1] + 1]))  # up to the reviewer's first reply
    k = chats[1] + 1
    app = make(str(flow), resume_from=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        assert (f"(re-executed up to event #{k} of its journal, where it stops before the run's end; live from here)"
                in app.client.view.status_line())


async def test_f_in_the_replay_forks_a_run_paused_where_the_replay_was(tmp_path):
    """Any run of the journal: f on its first of two (--run 1) said only the last could be re-executed."""
    from flowtui.tui.replay import make_replay
    from flowtui.tui.screens.dialogs import ConfirmDialog

    flow, journal = await _recorded(tmp_path)
    await load_flow(str(flow)).run("a second run", journal=journal)
    replay = make_replay(journal, run=1)
    async with replay.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        k = replay.timeline.next_agent(0)  # the first agent turn's start
        replay.go(k + 3)
        await pilot.pause()
        shown_at = replay.timeline.event(replay.position)
        expected_history = [m.content for m in replay.view.history]
        await pilot.press("f")  # the journal names the code the fork runs: asked first, naming it
        for _ in range(200):
            if isinstance(replay.screen, ConfirmDialog):
                break
            await pilot.pause(0.02)
        assert replay.screen.question.startswith("Run the code of the flow file this journal names? Fork runs "
                                                 f"{Path(flow).resolve()} (workflow ReviewWorkflow) here, up to "
                                                 f"event #{shown_at.seq}.")
        await pilot.press("y")
        for _ in range(200):
            if replay.fork is not None:
                break
            await pilot.pause(0.02)
    target, resume_from, run_id = replay.fork
    assert target == f"{flow}:ReviewWorkflow" and resume_from == f"{journal}@{shown_at.seq}"
    assert run_id == replay.timeline.events[0].run_id
    asked = len(flowcapture.requests())
    app = make(target, resume_from=resume_from, resume_run=run_id)
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        view = app.client.view
        assert view.last_seq >= shown_at.seq  # re-executed up to the event the replay showed, then paused
        assert [m.content for m in view.history] == expected_history
    assert len(flowcapture.requests()) == asked  # the prefix called no model


async def test_a_fork_runs_only_the_file_its_question_names_and_enter_does_not_run_it(tmp_path):
    """A journal from elsewhere: workflow "W.py" made the fork run the file "shown.py:W.py" (what its
    question named was shown.py); a path of 40 line breaks pushed the file's name, the question and the
    buttons off the dialog; and enter, Yes focused, ran the code."""
    import json

    from flowtui.tui.replay import make_replay
    from flowtui.tui.screens.dialogs import ConfirmDialog

    flow, journal = await _recorded(tmp_path)
    events = [json.loads(line) for line in Path(journal).read_text().splitlines()]

    def forged(name: str, **start) -> Path:
        path = tmp_path / name
        path.write_text("".join(json.dumps({**e, **start} if e["type"] == "run.start" else e) + "\n" for e in events))
        return path

    async def press_f(path: Path) -> Any:
        replay = make_replay(path)
        async with replay.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            replay.go(5)
            await pilot.press("f")
            for _ in range(50):
                if isinstance(replay.screen, ConfirmDialog):
                    break
                await pilot.pause(0.02)
            screen = replay.screen
            question = screen.question if isinstance(screen, ConfirmDialog) else None
            notes = [n.message for n in replay._notifications]
            await pilot.press("enter")
            await pilot.pause()
            return question, notes, replay.fork

    (tmp_path / f"{Path(flow).name}:W.py").write_text("raise SystemExit('the wrong file ran')")
    question, notes, fork = await press_f(forged("colon.jsonl", file=str(flow), workflow="W.py"))
    assert question is None and fork is None, question
    assert any("not a class a fork can run from that file" in n for n in notes), notes

    odd = tmp_path / ("trusted.py" + "\n" * 40)
    odd.mkdir()
    shutil.copy(flow, odd / "evil.py")
    question, notes, fork = await press_f(forged("lines.jsonl", file=str(odd / "evil.py")))
    assert question is not None and "\n" not in question and "⏎" in question, question
    assert "evil.py (workflow ReviewWorkflow) here, up to event #" in question and fork is None  # enter: no


async def test_r_on_a_paused_run_reloads_the_code_and_continues_from_the_same_place(tmp_path):
    from flowtui.tui.screens.dialogs import ChoiceDialog

    flow = tmp_path / "review_copy.py"
    shutil.copy(FLOWS / "review_fn.py", flow)
    app = make(str(flow), input="go", journal=str(tmp_path / "j.jsonl"))
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        while not (app.client.view.pause.point == "chat" and app.client.view.pause.name == "Reviewer"):
            await press_and_pause(pilot, "s")
        where, history = app.client.view.status_line(), [m.content for m in app.client.view.history]
        asked = len(flowcapture.requests())
        # the code changes where the run has not been yet: the reviewer's tool
        flow.write_text(flow.read_text().replace('return f"Recorded ({len(s.problems)} so far): {args.text}"',
                                                 'return f"Noted: {args.text}"'))
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the reload question")
        await pilot.press("c")
        await wait_until(pilot, lambda: app.client.view is not None and app.client.view.resumed_from is not None
                         and app.client.view.status == "paused", timeout=20, what="the run re-executed, paused")
        assert app.client.view.status_line().startswith(where)
        assert [m.content for m in app.client.view.history] == history
        assert len(flowcapture.requests()) == asked  # re-executed: no model called
        await press_and_pause(pilot, "s", "s")  # the reviewer's call, live, then its first tool: the new code
        await press_and_pause(pilot, "s")
        assert any(m.content == "Noted: No example." for m in app.client.view.history)


async def test_continue_from_here_is_kept_through_a_load_error_and_r_after_the_fix(tmp_path):
    """Continue from here with code that did not load, then r once it was fixed: a new run from the
    beginning, the place it was to continue from dropped, unsaid."""
    from flowtui.tui.screens.dialogs import ChoiceDialog
    from flowtui.tui.screens.error import LoadErrorScreen

    flow = tmp_path / "review_copy.py"
    shutil.copy(FLOWS / "review_fn.py", flow)
    good = flow.read_text()
    app = make(str(flow), input="go", journal=str(tmp_path / "j.jsonl"))
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n", "n")
        where, history = app.client.view.status_line(), [m.content for m in app.client.view.history]
        flow.write_text(good + "\nsyntax error here(\n")
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the reload question")
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), timeout=20, what="the load error")
        assert "the run then goes on from" in " ".join(str(w.render()) for w in app.screen.query("Static"))
        flow.write_text(good)
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the question again")
        await pilot.press("c")  # (r there starts over: a re-execution that itself failed is left that way)
        await wait_until(pilot, lambda: app.client.view is not None and app.client.view.resumed_from is not None
                         and app.client.view.status == "paused", timeout=20, what="the run re-executed, paused")
        assert app.client.view.status_line().startswith(where)
        assert [m.content for m in app.client.view.history] == history


async def test_f_on_an_earlier_event_of_the_log_forks_a_run_paused_there(tmp_path):
    journal = tmp_path / "j.jsonl"
    app = make(str(FLOWS / "review_fn.py"), input="go", journal=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n", "n")  # the writer's draft and the reviewer's reply are in
        old_run, old_history = app.client.view.run_id, len(app.client.view.history)
        draft = next(ev for ev in app.client.events if ev.type == "state.append" and ev.origin == "agent:Writer")
        await pilot.press("3")
        log = app.main.pane_widget("events")
        await wait_until(pilot, lambda: log is not None and log.has_focus, what="the event log")
        assert log.show_seq(draft.seq)
        await pilot.press("f")
        await _forked(pilot, old_run)
        view = app.client.view
        assert view.resumed_from is not None and view.resumed_from.journal == str(journal)
        assert view.last_seq >= draft.seq
        assert [m.role for m in view.history] == ["user", "assistant"] and old_history > 2


async def test_f_while_looking_back_forks_at_the_event_the_panes_show(tmp_path):
    """It forked at the live end, whatever the panes showed."""
    journal = tmp_path / "j.jsonl"
    app = make(str(FLOWS / "review_fn.py"), input="go", journal=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n", "n")
        old_run, n = app.client.view.run_id, len(app.client.lines)
        await pilot.press(*["left"] * 6)
        shown = json.loads(app.client.lines[n - 7])["seq"]
        assert f"looking back: event {n - 6}/{n}" in str(app.main.query_one("#status").content)
        await pilot.press("f")
        assert app.main.looking is None  # (the panes drawn while the fork loads have no run to look back at)
        await _forked(pilot, old_run)
        assert app.client.view.resumed_from.at == shown


async def test_f_at_the_end_of_a_stopped_run_forks_where_it_was_stopped(tmp_path):
    """Re-executed to its end, a run stopped with x only stopped again: f forked a run that was over."""
    journal = tmp_path / "j.jsonl"
    app = make(str(FLOWS / "review_fn.py"), input="go", journal=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n", "n")  # the writer's draft and the reviewer's reply are in
        old_run, where = app.client.view.run_id, app.client.view.status_line()
        history = [m.content for m in app.client.view.history]
        await pilot.press("x")
        await wait_until(pilot, lambda: app.client.view.status == "stopped", what="the stop")
        await pilot.press("f")
        await _forked(pilot, old_run)
        view = app.client.view
        assert view.status_line().startswith(where)  # paused where the old run was when it was stopped
        assert [m.content for m in view.history] == history
        await press_and_pause(pilot, "n")  # and it goes on from there
        assert len(app.client.view.history) > len(history)


async def _stopped_at_a_pause(pilot) -> tuple[str, str, int]:
    """The run paused after two turns, then stopped with x: its id, where it was, its last event."""
    app = pilot.app
    await paused(pilot)
    await press_and_pause(pilot, "n", "n")
    old_run, where = app.client.view.run_id, app.client.view.status_line()
    await pilot.press("x")
    await wait_until(pilot, lambda: app.client.view.status == "stopped", what="the stop")
    return old_run, where, app.client.view.last_seq


async def test_f_on_the_last_event_of_a_stopped_run_in_the_log_forks_where_it_was_stopped(tmp_path):
    """The event log's cursor on the run's end: the fork re-executed to it and stopped again, as recorded."""
    journal = tmp_path / "j.jsonl"
    app = make(str(FLOWS / "review_fn.py"), input="go", journal=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        old_run, where, last = await _stopped_at_a_pause(pilot)
        await pilot.press("3")
        log = app.main.pane_widget("events")
        await wait_until(pilot, lambda: log is not None and log.has_focus, what="the event log")
        assert log.show_seq(last)
        await pilot.press("f")
        await _forked(pilot, old_run)
        assert app.client.view.status_line().startswith(where)


async def test_f_in_the_replay_at_the_end_of_a_stopped_run_forks_where_it_was_stopped(tmp_path):
    """The replay opens at the run's end: f there forked a run that only stopped again."""
    from flowtui.tui.replay import make_replay
    from flowtui.tui.screens.dialogs import ConfirmDialog

    journal = tmp_path / "j.jsonl"
    app = make(str(FLOWS / "review_fn.py"), input="go", journal=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        await _stopped_at_a_pause(pilot)
        paused_at = app.client.view.last_pause_seq
    replay = make_replay(journal)
    async with replay.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await pilot.press("f")
        await wait_until(pilot, lambda: isinstance(replay.screen, ConfirmDialog), what="the question")
        assert replay.screen.question.endswith(f"here, up to event #{paused_at}, where the run last paused.")
        await pilot.press("y")
        await wait_until(pilot, lambda: replay.fork is not None, what="the fork")
    assert replay.fork[1] == f"{journal}@{paused_at}"


async def test_f_on_a_stopped_run_keeps_the_edits_made_where_it_was_stopped(tmp_path):
    """A memory item added at the last pause, then x, then f: the fork re-executed up to the pause, not
    to the edit after it, and the item was gone."""
    journal = tmp_path / "j.jsonl"
    app = make(str(FLOWS / "review_fn.py"), input="go", journal=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n")
        await pilot.press("A", *"kept note", "ctrl+s")
        await wait_until(pilot, lambda: "kept note" in app.client.view.memory, what="the memory item")
        old_run = app.client.view.run_id
        await pilot.press("x")
        await wait_until(pilot, lambda: app.client.view.status == "stopped", what="the stop")
        await pilot.press("f")
        await _forked(pilot, old_run)
        assert "kept note" in app.client.view.memory, app.client.view.memory


async def test_f_at_the_end_of_a_finished_run_forks_where_it_last_paused(tmp_path):
    """f on a finished run forked at its end: a second finished run, with no pause and nothing to edit."""
    journal = tmp_path / "j.jsonl"
    app = make(str(FLOWS / "review_fn.py"), input="go", journal=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        old_run, where = await _finished_after_a_turn(pilot)
        await pilot.press("f")
        await _forked(pilot, old_run)
        assert app.client.view.status_line().startswith(where)


async def test_f_forks_the_run_shown_though_another_was_appended_to_its_journal_since(tmp_path):
    """Another run appended to the journal after this one ended (a flowtui run --journal of the same
    file): f re-executed that one, the journal's last run, and said nothing (or diverged at its input)."""
    journal = tmp_path / "j.jsonl"
    app = make(str(FLOWS / "review_fn.py"), input="go", journal=str(journal))
    async with app.run_test(size=(140, 40)) as pilot:
        old_run, where = await _finished_after_a_turn(pilot)
        await load_flow(str(FLOWS / "review_fn.py")).run("another input", journal=journal)  # appended after it
        await pilot.press("f")
        await _forked(pilot, old_run)
        view = app.client.view
        assert view.resumed_from.run_id == old_run and view.divergence is None
        assert view.history[0].content == "go" and view.status_line().startswith(where)


def test_the_divergence_shows_a_journals_markup_as_written():
    """What a journal from elsewhere recorded is text: a [link] or [reverse] in it is shown, not obeyed."""
    from rich.console import Console

    from flowtui.runtime.events import Difference
    from flowtui.tui.screens.diverged import side_by_side

    class Diverged:  # the fields side_by_side reads of a run.diverged event
        recorded = "run.start [x[reverse]REV[/reverse][link=https://evil.example]CLICK[/link]]"
        current = "run.start [runtime]"
        at = now = 1
        differences = [Difference(field="origin", recorded="[blink]v[/blink]", now="runtime")]

    console = Console(width=200, record=True, force_terminal=True, color_system="truecolor")
    console.print(side_by_side(Diverged()))
    drawn = console.export_text(styles=False)
    raw = console.export_text(styles=True)
    assert "[reverse]REV[/reverse][link=https://evil.example]CLICK[/link]" in drawn
    assert "[blink]v[/blink]" in drawn
    assert "\x1b]8;" not in raw  # no link made of it


def test_the_divergence_shows_values_differing_only_in_line_ends_apart():
    """"um\r\ndois" against "um\ndois": drawn, both were two lines, the same."""
    from rich.console import Console

    from flowtui.runtime.events import Difference
    from flowtui.tui.screens.diverged import side_by_side

    class Diverged:
        recorded = current = "node.end tool anotar"
        at = now = 9
        differences = [Difference(field="result.content", recorded="um\r\ndois", now="um\ndois")]

    console = Console(width=120, record=True)
    console.print(side_by_side(Diverged()))
    drawn = console.export_text(styles=False)
    assert "um\\r\\ndois" in drawn and "dois" in drawn.split("um\\r\\ndois", 1)[1], drawn


async def test_the_status_says_a_journal_is_being_reexecuted_while_it_is(tmp_path):
    """Continue from here (or --resume-from) showed an empty run, `idle` and `events 0`, while the new
    code loaded and re-executed the journal: as if the run had been lost."""
    flow, journal = await _recorded(tmp_path)
    flow.write_text("import time\ntime.sleep(1.5)  # a slow import: the load is seen\n" + flow.read_text())
    app = make(str(flow), resume_from=f"{journal}@9")
    async with app.run_test(size=(140, 40)) as pilot:
        shown = lambda: str(app.main.query_one("#status").content)  # noqa: E731
        await wait_until(pilot, lambda: "run.jsonl" in shown(), what="the status to say it")
        assert f"loading {flow}, then re-executing run.jsonl up to event #9…" in shown(), shown()
        await paused(pilot)
        assert app.client.view.resumed_from.journal == str(journal)
    named = journal.with_name("run.jsonl@3")  # a journal whose name ends in @digits is taken whole
    named.write_bytes(journal.read_bytes())
    app = make(str(flow), resume_from=str(named))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: "run.jsonl@3" in shown(), what="the status to say it")
        assert "then re-executing run.jsonl@3 to its end…" in shown(), shown()
