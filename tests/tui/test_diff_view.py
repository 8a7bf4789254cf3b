"""The diff view (5): the run on screen against another journal, the first divergence first; by
default the newest other journal of the workflow in .flowtui/runs/, enter picks another."""

from __future__ import annotations

import os

from conftest import FLOWS

from flowtui.runtime.loader import load_flow
from flowtui.tui.replay import make_replay


async def _record(path, input):
    await load_flow(str(FLOWS / "review_fn.py")).run(input, journal=path)


async def _text(pilot, widget) -> str:
    for _ in range(100):
        text = widget.report.plain
        if text.strip():
            return text
        await pilot.pause(0.02)
    return ""


async def test_the_diff_view_names_the_first_divergence_against_the_newest_other_journal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / ".flowtui" / "runs"
    runs.mkdir(parents=True)
    a, older, newest = tmp_path / "a.jsonl", runs / "ReviewWorkflow-1.jsonl", runs / "ReviewWorkflow-2.jsonl"
    await _record(a, "Write about ctx.state")
    await _record(older, "Write about ctx.state")
    await _record(newest, "Write about memory")
    os.utime(older, (1, 1))  # the other one is the newest
    app = make_replay(a)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        view = app.main.pane_widget("diff")
        text = await _text(pilot, view)
        assert "B: .flowtui/runs/ReviewWorkflow-2.jsonl" in text
        assert "▶ first divergence" in text and "Write about memory" in text
        view.focus()
        await pilot.press("enter")  # pick another: the list, newest first
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause()
        for _ in range(100):
            if "ReviewWorkflow-1.jsonl" in view.report.plain:
                break
            await pilot.pause(0.02)
        assert "B: .flowtui/runs/ReviewWorkflow-1.jsonl" in view.report.plain
        assert "Write about memory" not in view.report.plain  # the same input: other differences only


async def test_a_run_reexecuted_into_its_parents_journal_is_compared_with_its_parent(tmp_path):
    """Edit-and-continue journaled into the same file (--journal FILE): the diff view read the file's last
    run, the re-execution itself, and said "The runs are the same"."""
    import shutil

    from conftest import ended, make, wait_until

    from flowtui.tui.screens.diverged import DivergedScreen

    flow, journal = tmp_path / "review_copy.py", tmp_path / "run.jsonl"
    shutil.copy(FLOWS / "review_fn.py", flow)
    await load_flow(str(flow)).run("go", journal=journal)
    flow.write_text(flow.read_text().replace('prompt="You review the draft."', 'prompt="You review it closely."'))
    app = make(str(flow), resume_from=str(journal), journal=str(journal))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DivergedScreen), what="the divergence screen")
        await pilot.press("c")
        await ended(pilot)
        await pilot.press("5")
        text = await _text(pilot, app.main.pane_widget("diff"))
        a, b = text.split("\nB: ")[0], text.split("\nB: ")[1].split("\nThe runs")[0]
        assert a.startswith(f"A: {journal}") and "run 2 of 2: ReviewWorkflow, finished" in a, text
        assert b.startswith(f"{journal}") and "run 1 of 2: ReviewWorkflow, finished" in b, text
        assert "The runs differ" in text and "You review it closely." in text, text
        parent = app.client.view.run_id
        await pilot.press("f")  # a fork of the re-execution: run 3, whose parent is run 2, not run 1
        await wait_until(pilot, lambda: app.client.view is not None and app.client.view.run_id not in (None, parent)
                         and app.client.view.status in ("paused", "finished"), timeout=20, what="the fork")
        assert app.client.view.resumed_from.run_id == parent
        view = app.main.pane_widget("diff")
        await wait_until(pilot, lambda: "run 3 of 3" in view.report.plain, what="the fork's report")
        text = view.report.plain
        b = text.split("\nB: ")[1].split("\nThe runs")[0]
        assert "run 2 of 3" in b, text  # its own parent (B was chosen once, for the first run on screen)


async def test_the_diff_view_compares_with_no_other_workflows_journal_by_default(tmp_path, monkeypatch):
    from conftest import make, paused

    monkeypatch.chdir(tmp_path)
    runs = tmp_path / ".flowtui" / "runs"
    runs.mkdir(parents=True)
    other = runs / "OtherWorkflow-1.jsonl"
    await _record(other, "Write about ctx.state")
    other.write_text(other.read_text().replace('"ReviewWorkflow"', '"OtherWorkflow"'))
    app = make(str(FLOWS / "review_fn.py"), input="go", journal=None)
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        await pilot.press("5")
        text = await _text(pilot, app.main.pane_widget("diff"))
        assert text.startswith("Nothing to compare with: no other journal of this workflow"), text


async def test_scrubbing_with_the_diff_view_open_compares_once_at_a_time_and_the_last_position_last(
        tmp_path, monkeypatch):
    """Each key started one more comparison in a thread of its own (none can be cancelled): scrubbing a
    replay of a million events, the keys lagged 8 s, and quitting waited 11 s on them."""
    import threading

    from flowtui.tui.widgets.diff_view import DiffView

    monkeypatch.chdir(tmp_path)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    await _record(a, "Write about ctx.state")
    await _record(b, "Write about memory")
    gate, running, calls = threading.Event(), [], []
    report = DiffView._report

    def held(self, events, against, width):
        running.append(1)
        calls.append(len(events))
        assert len(running) == 1, "two comparisons at once"
        gate.wait(30)
        try:
            return report(self, events, against, width)
        finally:
            running.pop()

    monkeypatch.setattr(DiffView, "_report", held)
    app = make_replay(a)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("5")
        view = app.main.pane_widget("diff")
        view.against = str(b)
        for _ in range(100):
            if calls:
                break
            await pilot.pause(0.02)
        await pilot.press(*["left"] * 10)  # while the first comparison is held
        gate.set()
        for _ in range(200):
            if view.report.plain.strip():
                break
            await pilot.pause(0.02)
        assert len(calls) == 2, calls  # the first, then only the last position's
        assert calls[1] == app.position and "B: " in view.report.plain


async def test_a_replay_from_another_folder_finds_the_journal_its_run_was_reexecuted_from(tmp_path, monkeypatch):
    """run.start names the journal as given (a.jsonl, relative to where the run was started): a replay of
    r.jsonl from another folder said "a.jsonl: no such file", and enter offered nothing beside r.jsonl."""
    monkeypatch.chdir(tmp_path)
    await _record(tmp_path / "a.jsonl", "Write about ctx.state")
    await load_flow(str(FLOWS / "review_fn.py")).run(journal=tmp_path / "r.jsonl", resume_from="a.jsonl")
    await _record(tmp_path / "other.jsonl", "Write about memory")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    app = make_replay(tmp_path / "r.jsonl")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        view = app.main.pane_widget("diff")
        text = await _text(pilot, view)
        assert "no such file" not in text and view.against == str(tmp_path / "a.jsonl"), text
        view.focus()
        await pilot.press("enter")  # the journals beside r.jsonl
        await pilot.pause()
        labels = [str(button.label) for button in app.screen.query("Button")]
        assert any("other.jsonl" in label for label in labels), labels


async def test_the_replay_of_an_earlier_run_of_a_journal_says_which_of_its_runs_it_compares(tmp_path, monkeypatch):
    """`flowtui replay J --run 1` of a journal holding two runs: the diff view said A was "its only run"."""
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / ".flowtui" / "runs"
    runs.mkdir(parents=True)
    both, other = tmp_path / "both.jsonl", runs / "ReviewWorkflow-1.jsonl"
    await _record(both, "Write about ctx.state")
    await _record(both, "Write about memory")
    await _record(other, "Write about ctx.state")
    app = make_replay(both, run=1)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        text = await _text(pilot, app.main.pane_widget("diff"))
        assert "run 1 of 2: ReviewWorkflow" in text
        assert "its only run" in text  # B, the other journal, holds one run



async def test_a_live_run_whose_values_reached_the_app_cut_is_compared_as_its_journal_holds_it(tmp_path, monkeypatch):
    """An input of 100,000 characters reached the app cut to 64 KiB: view 5 said the two runs' inputs differed,
    while `flowtui diff` of the same two files did not."""
    from conftest import ended, make, paused

    monkeypatch.chdir(tmp_path)
    runs = tmp_path / ".flowtui" / "runs"
    runs.mkdir(parents=True)
    big = "Write " + "x" * 100_000
    await _record(runs / "ReviewWorkflow-1.jsonl", big)  # B: the workflow's other journal
    app = make(str(FLOWS / "review_fn.py"), input=big, journal=str(tmp_path / "a.jsonl"))
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)
        await pilot.press("5")
        view = app.main.pane_widget("diff")
        for _ in range(300):
            if "The runs" in view.report.plain:
                break
            await pilot.pause(0.02)
        text = view.report.plain
        assert "B: .flowtui/runs/ReviewWorkflow-1.jsonl" in text, text
        # (the script's replies go on from run to run in one process: the turns may differ, never the input)
        assert "The runs" in text and "\n  input\n" not in text and "history appended[0]" not in text, text
