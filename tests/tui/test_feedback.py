"""Feedback on slow actions: what a quit waits for, keys typed during a reload, notifications that
belong to a run and never cover the status line."""

from __future__ import annotations

import asyncio
import os
import textwrap
from pathlib import Path

import pytest
from conftest import REVIEW, ended, make, paused, status, wait_until

from flowtui.tui.screens.dialogs import ConfirmDialog

MISBEHAVE = "tests/tui/flows/misbehave.py"


def toasts(app) -> list[str]:
    return [str(toast.render()) for toast in app.screen.query("Toast")]


def status_line(app) -> str:
    return str(app.main.query_one("#status").render())


async def test_quitting_while_a_tool_runs_says_what_it_waits_for():
    app = make(f"{MISBEHAVE}:SyncLoop", input="x")
    async with app.run_test(notifications=True) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: any(n.kind == "tool" and n.status == "running"
                                            for n in app.client.view.nodes.values()), what="the stuck tool")
        app.simulate_key("q")  # as a terminal sends it: the quit takes a while, the test watches it
        while not app.quitting:
            await asyncio.sleep(0.005)
        assert status_line(app) == "● quitting: waiting for tool t to stop…"  # said at once
        while "Quitting: waiting for tool t to stop…" not in toasts(app):  # (shown as the app draws next)
            assert app.is_running, "the app quit without saying what it waited for"
            await asyncio.sleep(0.005)
        await wait_until(pilot, lambda: not app.is_running, timeout=15, what="the app to quit")
    assert app.return_code == 0


def held_flow(tmp_path: Path) -> tuple[Path, Path]:
    """The review flow, whose import waits while the file ``hold`` exists (a slow reload)."""
    hold = tmp_path / "hold"
    flow = tmp_path / "held.py"
    flow.write_text(textwrap.dedent(f"""
        import time
        from pathlib import Path
        while Path({str(hold)!r}).exists():
            time.sleep(0.01)
    """) + Path(REVIEW).read_text())
    return flow, hold


async def test_x_typed_behind_c_while_the_flow_loads_stops_the_run(tmp_path, monkeypatch):
    """c then x while the flow loads: c sets the run going and x stops it at once (x waited for a
    pause c never reaches, so it was dropped when the run finished)."""
    monkeypatch.setenv("FLOWCAPTURE_TOOL_DELAY", "30")  # the run's tool takes its time
    flow, hold = held_flow(tmp_path)
    hold.touch()
    app = make(str(flow), input="go")
    async with app.run_test(notifications=True) as pilot:
        await pilot.press("c", "x")  # typed while the flow is still loading
        assert list(app.queued) == ["resume", "stop"]
        os.unlink(hold)
        await wait_until(pilot, lambda: status(app) in ("finished", "failed", "stopped"), timeout=20,
                         what="the run to end")
        assert status(app) == "stopped"
        assert not app.queued


async def test_keys_typed_while_a_reload_runs_are_applied_to_the_new_run(tmp_path):
    flow, hold = held_flow(tmp_path)
    app = make(str(flow), input="go")
    async with app.run_test(notifications=True) as pilot:
        await paused(pilot)
        first = app.client.view.run_id
        hold.touch()
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="confirm")
        await pilot.press("y")
        await pilot.press("s", "s")  # typed while the flow is still loading
        assert list(app.queued) == ["step", "step"]  # not sent: there is no run to take them yet
        assert any("queued" in t for t in toasts(app))
        os.unlink(hold)
        await wait_until(pilot, lambda: app.client.view is not None and app.client.view.run_id not in (None, first)
                         and not app.queued and status(app) == "paused"
                         and app.client.view.pause.reason == "step" and app.client.view.pause.point == "agent",
                         what="both steps applied")
        view = app.client.view
        # start → (s) the model call of Writer → (s) before Reviewer: each step after the previous pause
        pauses = [(ev.point, ev.name, ev.reason) for ev in app.client.events if ev.type == "run.pause"]
        assert pauses == [("agent", "Writer", "start"), ("chat", "Writer", "step"), ("agent", "Reviewer", "step")]
        assert view.status_line() == "paused before Reviewer"


async def test_a_notification_about_a_finished_run_goes_when_a_new_run_starts():
    app = make(input="go")
    async with app.run_test(notifications=True) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)
        first = app.client.view.run_id
        await pilot.press("s")
        await pilot.pause()
        assert any("The run has finished; r starts a new one." in t for t in toasts(app))
        await pilot.press("r")
        await wait_until(pilot, lambda: app.client.view is not None and app.client.view.run_id not in (None, first)
                         and status(app) == "paused", what="the new run")
        await pilot.pause()
        assert not any("has finished" in t for t in toasts(app))


@pytest.mark.parametrize("watch", [[], ["state.approved"]])
async def test_notifications_never_cover_the_status_line(watch):
    """Nor a button: with a watchpoint set, its line made the control pane a row taller, and a notification at
    80x24 hid the p, x and r buttons."""
    app = make(input="go", watch=watch)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await paused(pilot)
        for i in range(4):
            app.notify(f"notice {i}\nwith a second line", timeout=30)
        await pilot.pause()
        shown = list(app.screen.query("Toast"))
        assert len(shown) == 4
        control = app.main.query_one("#control").region
        keys = app.main.query_one("KeyBar").region
        for toast in shown:
            assert not toast.region.overlaps(control) and not toast.region.overlaps(keys)


async def test_the_model_option_says_which_agents_it_does_not_apply_to(tmp_path):
    flow = tmp_path / "mixed.py"
    flow.write_text(textwrap.dedent("""
        from flowtui import FunctionProvider, LiteLLMProvider, ScriptedProvider, agent, workflow

        @agent(provider=ScriptedProvider(["hi"]), prompt="p")
        class Scripted:
            pass

        @agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
        class Function:
            pass

        @agent(provider=LiteLLMProvider("openai/gpt-4o-mini"), prompt="p")
        class Real:
            pass

        @workflow(steps=[Scripted, Function, Real])
        class Mixed:
            pass
    """))
    app = make(str(flow), input="go", model="openai/x")
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await paused(pilot)
        await wait_until(pilot, lambda: any("--model" in t for t in toasts(app)), what="the note")
        notes = " ".join(t for t in toasts(app) if "--model" in t).replace("\n", " ")
        assert "does not apply to Scripted" in notes and "ScriptedProvider, which plays scripted replies" in notes
        assert "does not apply to Function" in notes and "FunctionProvider, whose replies come from a function" in notes
        assert "Real" not in notes
    assert app.client.hello.notes == [
        "--model openai/x does not apply to Scripted: its provider is ScriptedProvider, which plays scripted replies",
        "--model openai/x does not apply to Function: its provider is FunctionProvider, whose replies come from a "
        "function",
    ]


async def test_ctrl_c_says_which_key_quits_in_plain_words():
    app = make(REVIEW, input="x")
    async with app.run_test(notifications=True) as pilot:
        await paused(pilot)
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: toasts(app), what="the toast")
        assert toasts(app) == ["Do you want to quit?\nPress ctrl+q or q to quit the app"]  # no [b]markup[/b]


def test_a_failed_model_call_says_what_failed_below_a_status_too_narrow_for_it():
    from flowtui.runtime.events import RunEnd, RunStart
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.control import status_text, where_text

    error = ("ProviderError: agent 'Calc' (turn 1, model 'openai/gpt-4o-mini'): the model's server could not be "
             "reached, or it dropped the connection after 3 attempts in 1.3s. Provider said: Connection error.")
    view = RunView()
    view.apply(RunStart(seq=1, ts=0.0, run_id="r1", workflow="CalcWorkflow"))
    view.apply(RunEnd(seq=2, ts=1.0, run_id="r1", status="failed", error=error))
    assert "could not be reached" not in status_text(view, width=80).plain  # 80 columns hold who failed only
    where = where_text(view, breakpoints=set(), width=80).plain
    assert where.startswith("the model's server could not be reached, or it dropped the connection")


def test_a_stopped_run_shows_its_output_so_far_like_a_finished_one():
    """A run stopped by x or ctx.stop() ends with its output so far; the control pane showed only "—"."""
    from flowtui.runtime.events import RunEnd, RunStart
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.control import where_text

    view = RunView()
    view.apply(RunStart(seq=1, ts=0.0, run_id="r1", workflow="W"))
    view.apply(RunEnd(seq=2, ts=1.0, run_id="r1", status="stopped", output="the draft so far", reason="stopped by user"))
    assert where_text(view, breakpoints=set(), width=80).plain.startswith("output: the draft so far")


def test_a_step_name_holding_a_line_break_keeps_where_the_run_is_on_one_line():
    """A loop named "my\nloop" (or a peer's "A\nB"): the line said only "W › my", its counters gone."""
    from flowtui.runtime.events import NodeStart, RunStart
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.control import where_text

    view = RunView()
    view.apply(RunStart(seq=1, ts=0.0, run_id="r1", workflow="W"))
    view.apply(NodeStart(seq=2, ts=0.0, run_id="r1", node_id="n1", kind="workflow", name="W"))
    view.apply(NodeStart(seq=3, ts=0.0, run_id="r1", node_id="n2", parent_id="n1", kind="loop", name="my\nloop"))
    shown = where_text(view, breakpoints={"A"}, width=120).plain
    assert "\n" not in shown and "my ⏎ loop" in shown and "breakpoints: A" in shown, shown


async def test_s_pressed_three_times_quickly_steps_three_times():
    """The second and third went while the first step ran, and did nothing: one step, no word why."""
    app = make(input="go")
    async with app.run_test(notifications=True) as pilot:
        await paused(pilot)
        for _ in range(3):  # in one burst, as a terminal delivers keys typed fast (before the run moves)
            app.action_step()
        assert list(app.queued) == ["step", "step"]
        await wait_until(pilot, lambda: any("queued, sent when the run pauses" in t for t in toasts(app)),
                         what="the word that they are queued")
        assert sum("queued" in t for t in toasts(app)) == 1  # once, not once a key
        await wait_until(pilot, lambda: not app.queued and status(app) == "paused"
                         and len([ev for ev in app.client.events if ev.type == "run.pause"]) == 4,
                         what="three steps")
        pauses = [(ev.point, ev.name, ev.reason) for ev in app.client.events if ev.type == "run.pause"]
        assert pauses == [("agent", "Writer", "start"), ("chat", "Writer", "step"), ("agent", "Reviewer", "step"),
                          ("chat", "Reviewer", "step")]
        await pilot.pause(0.3)
        assert len([ev for ev in app.client.events if ev.type == "run.pause"]) == 4  # and no more


async def test_x_behind_queued_steps_stops_the_run_at_once(monkeypatch):
    """x is never queued behind a move: a tool that takes 30 s is stopped now, the steps dropped."""
    monkeypatch.setenv("FLOWCAPTURE_TOOL_DELAY", "30")
    app = make(input="go")
    async with app.run_test(notifications=True) as pilot:
        await paused(pilot)
        app.action_resume()
        app.action_step()  # behind c: queued
        assert list(app.queued) == ["step"]
        await wait_until(pilot, lambda: any(n.kind == "tool" and n.status == "running"
                                            for n in app.client.view.nodes.values()), timeout=20,
                         what="the slow tool to run")
        await pilot.press("x")
        assert not app.queued
        await wait_until(pilot, lambda: status(app) == "stopped", timeout=20, what="the run to stop")


async def test_a_model_call_waiting_to_retry_counts_its_wait_down(tmp_path):
    """A Retry-After of 30 s: the status line said "in 30 s" for the whole 30 s."""
    flow = tmp_path / "retries.py"
    flow.write_text(textwrap.dedent("""
        import asyncio
        from flowtui import AttemptInfo, ChatReply, Provider, agent, workflow

        class Overloaded(Provider):
            async def complete(self, request):
                request.on_attempt(AttemptInfo(attempt=1, error="overloaded", status=503, retry_in_s=30.0))
                await asyncio.sleep(30)
                return ChatReply(content="ok")

        @agent(provider=Overloaded(), prompt="p")
        class Writer:
            pass

        @workflow(steps=[Writer])
        class W:
            pass
    """))
    app = make(str(flow), input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("c")
        said = "● running: retrying the model call of Writer in {} s (attempt 2; it failed: o"  # then cut

        def left() -> str:
            return status_line(app)[:len(said)]

        await wait_until(pilot, lambda: status_line(app).startswith("● running: retrying"), what="the retry")
        assert left() in (said.format(30), said.format(29)), status_line(app)
        await wait_until(pilot, lambda: left() in (said.format(27), said.format(26)), timeout=15,
                         what="the wait to count down")
        await pilot.press("p")  # it said "pausing: waiting for the model call of Writer to return…", the wait unsaid
        pausing = "● pausing; retrying the model call of Writer in {} s"
        await wait_until(pilot, lambda: any(status_line(app).startswith(pausing.format(n)) for n in range(27)),
                         what=f"the countdown while pausing ({status_line(app)})")
        await pilot.press("x")
        await wait_until(pilot, lambda: status(app) == "stopped", timeout=15, what="the run to stop")
        assert "retrying" not in status_line(app)


def test_the_status_counts_one_edit_as_one_edit():
    """At 80 columns one denial read "29 ev · 1 edits"."""
    from flowtui.runtime.events import NodeStart, RunStart, StateAppend
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.control import where_text

    view = RunView()
    view.apply(RunStart(seq=1, ts=0.0, run_id="r1", workflow="W"))
    view.apply(NodeStart(seq=2, ts=0.0, run_id="r1", node_id="n1", kind="workflow", name="AVeryLongWorkflowName" * 2))
    for seq in (3, 4):
        view.apply(StateAppend(seq=seq, ts=0.0, run_id="r1", origin="user", bucket="tasks", item=f"t{seq}"))
        narrow = where_text(view, breakpoints=set(), width=80).plain
        assert narrow.endswith(f" ev · {seq - 2} edit{'s' * (seq == 4)}  bp: none"), narrow
        wide = where_text(view, breakpoints=set(), width=200).plain  # the same words, however wide ("edits 2" was)
        assert wide.endswith(f"events {seq} · {seq - 2} edit{'s' * (seq == 4)}   breakpoints: none"), wide
