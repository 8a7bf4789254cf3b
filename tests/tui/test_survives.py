"""The debugger survives the flow, in the app: whatever the flow does, x stops the run, q quits, a
crash is a run result with its cause, r starts a fresh process, and the panes answer keys. Time
bounds are generous (they catch a hang); bench/ measures the real times."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REVIEW, ended, make, paged, paused, press_and_pause, wait_until

from flowtui.runtime.protocol import Fetch
from flowtui.tui.client import MAX_BUFFERED
from flowtui.tui.screens.error import LoadErrorScreen

MISBEHAVE = "tests/tui/flows/misbehave.py"


@contextlib.contextmanager
def continued_in_a_terminal(flow: str, journal: Path) -> Iterator[Any]:
    """The app on misbehave.py's ``flow`` in a real terminal, its run continued (`c`) and running; the
    journal at ``journal``; yields the terminal."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from terminal import Terminal

    with Terminal.flowtui(f"{MISBEHAVE}:{flow}", "--input", "x", "--journal", str(journal), cols=100,
                          rows=30) as term:
        term.wait_for("paused before")
        term.send("c")
        term.wait_for("running")
        yield term


def last_event(journal: Path) -> dict:
    return json.loads(journal.read_text().splitlines()[-1])


def tool_started(app) -> bool:
    return any(ev.type == "node.start" and ev.kind == "tool" for ev in app.client.events)


@pytest.mark.parametrize("flow", ["SyncLoop", "AsyncLoop"])
async def test_x_stops_a_run_stuck_in_a_tool(flow):
    app = make(f"{MISBEHAVE}:{flow}", input="x")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: tool_started(app), what="the stuck tool")
        t0 = time.monotonic()
        await pilot.press("x")
        # said at once, with what it waits for (a loaded machine may already be past the 1 s grace);
        # then how long the stop waited, as the run's process measured it (about the grace)
        killed = r"stopped \(killed after \d+\.\d s: tool t did not return \(at .*misbehave\.py:\d+ in \w+\)\)"
        status = str(app.main.query_one("#status").content)
        assert status == "● stopping: waiting for tool t to stop…" or re.fullmatch("● " + killed, status)
        await ended(pilot, timeout=15)
        assert time.monotonic() - t0 < 10
        assert re.fullmatch(killed, app.client.view.status_line())
        await pilot.press("question_mark")  # the app is all there
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "HelpScreen", what="the help")


async def test_x_pressed_again_while_stopping_does_not_put_the_end_off():
    """Each x started the stop afresh, waiting the whole grace again: pressed every 0.4 s, a run whose
    tool never returned went on stopping for as long as x was pressed."""
    app = make(f"{MISBEHAVE}:SyncLoop", input="x")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: tool_started(app), what="the stuck tool")
        for _ in range(15):  # 6 s of x, against a grace of 1 s
            await pilot.press("x")
            await pilot.pause(0.4)
            if app.client.view.status == "stopped":
                break
        assert app.client.view.status == "stopped", app.client.view.status_line()
        assert re.fullmatch(r"stopped \(killed after \d+\.\d s: tool t did not return \(at .*\)\)",
                            app.client.view.status_line())
        assert any(str(n.message).startswith("Already stopping: code of the run that does not return is "
                                             "unwound 1.0 s after the first x") for n in app._notifications)


async def test_x_during_a_flood_of_events_stops_in_the_grace_and_says_what_is_left_to_show(monkeypatch):
    """x while the app is behind on a flood: the run ends itself in the grace, as the app reads on while
    it stops (a worker blocked writing was killed, its end said by the app), and once its process has
    ended the status says how many events are left to show, not that it waits for the tool, now over."""
    app = make(f"{MISBEHAVE}:Floods", input="x", journal=None)
    async with app.run_test() as pilot:
        await paused(pilot)
        # Behind as a slower machine is, for as long as the stop takes: the folding held. (Left to the
        # two processes' speeds, a 30,000-event backlog took 10-30 s here, and never came in 90 s on
        # another machine, where the app kept up.)
        monkeypatch.setattr(app.client, "drain", lambda *args, **kwargs: 0)
        closed = app.client.channel.closed
        try:
            await pilot.press("c")
            await wait_until(pilot, lambda: app.client.pending > MAX_BUFFERED, timeout=60, what="a backlog")
            app.simulate_key("x")
            with contextlib.suppress(AssertionError):
                await wait_until(pilot, closed.is_set, timeout=30)
            ended_behind = closed.is_set()
        finally:
            monkeypatch.undo()
        if not ended_behind:  # (the app catches up first: its teardown would wait on the stop for ever)
            await wait_until(pilot, closed.is_set, timeout=60, what="the run's process to end at last")
            pytest.fail("the run's process did not end while the app was behind (its reading held it?)")
        said = []

        def stopped() -> bool:
            said.append(str(app.main.query_one("#status").content).split(";")[0])
            return app.client.view.status == "stopped"

        await wait_until(pilot, stopped, timeout=30, what="the stop")
        # the run's own end (it stopped in the grace and its end came through the backlog), or, when its
        # process was killed while blocked writing to the app, the end the app wrote for it (as the
        # docstring says; on a loaded machine, 1 run in 3 of the suite, and without the line it was at); how
        # long it waited: about the grace, more on a loaded machine
        killed = r"stopped \(killed after (\d+\.\d) s: tool t did not return( \(at .*misbehave\.py:\d+ in floods\))?\)"
        found = re.fullmatch(killed, app.client.view.status_line())
        assert found is not None and float(found[1]) >= 1.0, app.client.view.status_line()
        left = "● stopping: the run's process has ended"
        end = "● " + app.client.view.status_line()  # (drawn cut to the status line's width, ending "…")
        odd = [s for s in said if s != left and not re.fullmatch("● " + killed, s)
               and not (s.endswith("…") and end.startswith(s[:-1]))]
        assert said[0] == left and not odd, (said[0], odd)


def test_q_on_a_run_awaiting_what_never_answers_says_so_in_its_end(tmp_path):
    """A model call to a server that never answers (here an async tool awaiting as long), then q: its
    end said "a tool or hook did not return", as for code that runs on."""
    journal = tmp_path / "j.jsonl"
    with continued_in_a_terminal("AwaitsForever", journal) as term:
        deadline = time.monotonic() + 30
        while '"kind":"tool"' not in journal.read_text():  # into the tool's await
            assert time.monotonic() < deadline, "the tool never started"
            time.sleep(0.05)
        term.send("q")
        assert term.wait_exit(15) == 0
    end = last_event(journal)
    assert end["type"] == "run.end" and end["status"] == "stopped", end
    # (then "the model call or async tool it awaited did not return": now which, and where it awaits)
    assert "a tool or hook did not return" not in end["reason"], end["reason"]
    assert re.search(r"tool t did not return \(at \S*misbehave\.py:\d+ in awaits_forever\)", end["reason"]), end["reason"]


async def test_p_while_a_tool_never_returns_says_what_the_pause_waits_for():
    app = make(f"{MISBEHAVE}:SyncLoop", input="x")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: tool_started(app), what="the stuck tool")
        await pilot.press("p")
        assert any(n.message == "Pausing at the next pause point: waiting for tool t to return…"
                   for n in app._notifications)
        # and the status line says so for as long as it waits (it said "running", the notice went in 4 s)
        said = lambda: str(app.main.query_one("#status").content)  # noqa: E731
        await wait_until(pilot, lambda: said() == "● pausing: waiting for tool t to return…", what="the status")
        await pilot.pause(0.3)
        assert said() == "● pausing: waiting for tool t to return…"


async def test_q_quits_while_a_tool_never_returns(tmp_path):
    journal = tmp_path / "j.jsonl"
    app = make(f"{MISBEHAVE}:SyncLoop", input="x", journal=str(journal))
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: tool_started(app), what="the stuck tool")
        t0 = time.monotonic()
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, timeout=15, what="the app to quit")
    assert time.monotonic() - t0 < 10
    assert app.return_code == 0
    assert journal.read_text().splitlines()[-1].count('"type":"run.end"') == 1  # the run's end is written


async def test_q_and_r_do_not_wait_on_a_process_the_flow_forked(tmp_path, monkeypatch):
    import os
    import signal

    pids = tmp_path / "pids"
    monkeypatch.setenv("FLOWTUI_TEST_PIDS", str(pids))
    monkeypatch.setenv("FLOWTUI_TEST_SETSID", "1")  # it leaves the worker's process group: not killed with it
    app = make(f"{MISBEHAVE}:Forks", input="x", journal=None)
    try:
        async with app.run_test() as pilot:
            await paused(pilot)
            await pilot.press("c")
            await ended(pilot)
            first = app.client.hello.pid
            await pilot.press("r", "y")  # a fresh worker, although the fork holds the old one's pipes
            await wait_until(pilot, lambda: app.client.hello is not None and app.client.hello.pid != first,
                             timeout=15, what="the reloaded worker")
            await paused(pilot)
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, timeout=15, what="the app to quit")
        assert app.return_code == 0
    finally:
        for pid in [int(p) for p in pids.read_text().split()] if pids.exists() else []:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


async def test_q_after_a_run_whose_fork_holds_its_output_quits_at_once(tmp_path, monkeypatch):
    """q took 5.7 s: the fork, out of the worker's group, holds its printed output's pipe, and each
    close waited a second on its reader, twice over."""
    import os
    import signal

    pids = tmp_path / "pids"
    monkeypatch.setenv("FLOWTUI_TEST_PIDS", str(pids))
    monkeypatch.setenv("FLOWTUI_TEST_SETSID", "1")
    app = make(f"{MISBEHAVE}:Forks", input="x", journal=None)
    try:
        async with app.run_test() as pilot:
            await paused(pilot)
            await pilot.press("c")
            await ended(pilot)
            t0 = time.monotonic()
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, timeout=15, what="the app to quit")
        quit_s = time.monotonic() - t0  # (with the app's teardown)
        assert app.return_code == 0
        assert quit_s < 4, quit_s  # within about a second (generous: a loaded machine)
    finally:
        for pid in [int(p) for p in pids.read_text().split()] if pids.exists() else []:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def line_of(code: str) -> int:
    """The line of ``code`` in the misbehaving flows (where an error there is said to be)."""
    return Path(MISBEHAVE).read_text().splitlines().index(f"    {code}") + 1


@pytest.mark.parametrize("flow,why", [
    ("ExitsHard", "failed: the flow process exited with code 3"),
    ("Segfault", "failed: the flow process was killed by SIGSEGV (11)"),
    ("HookSystemExit", f"failed: SystemExit: 0 (at {MISBEHAVE}:{line_of('raise SystemExit(0)')} in system_exit)"),
    ("HookKeyboardInterrupt",
     f"failed: KeyboardInterrupt (at {MISBEHAVE}:{line_of('raise KeyboardInterrupt')} in keyboard_interrupt)"),
])
async def test_a_crash_is_a_run_result_and_r_starts_afresh(flow, why):
    app = make(f"{MISBEHAVE}:{flow}", input="x")
    async with app.run_test() as pilot:
        await paused(pilot)
        first = app.client.view.run_id
        await pilot.press("c")
        await ended(pilot, timeout=15)
        assert app.client.view.status_line() == why
        assert app.is_running
        await pilot.press("r")  # a run that has ended: no question asked
        await wait_until(pilot, lambda: app.client.view is not None and app.client.view.run_id not in (None, first)
                         and app.client.view.status == "paused", timeout=15, what="a fresh run")


async def test_sys_exit_at_import_is_a_load_error(tmp_path):
    flow = tmp_path / "exits.py"
    flow.write_text("import sys\nsys.exit(0)\n")
    app = make(str(flow), input="x")
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), what="the error screen")
        assert "called sys.exit(0) while it was being imported" in app.screen.error.message


async def test_an_import_that_never_ends_is_a_load_error_after_the_limit(tmp_path):
    flow = tmp_path / "loops.py"
    flow.write_text("while True:\n    pass\n")
    app = make(str(flow), input="x", load_timeout=1.5)
    async with app.run_test() as pilot:
        assert "loading" in str(app.main.query_one("#status").content)
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), timeout=15, what="the error")
        assert "did not finish loading within 1.5 s" in str(app.screen.error)
        flow.write_text(Path("tests/tui/flows/review_fn.py").read_text())  # fixed: r loads it afresh
        await pilot.press("r")
        await paused(pilot, timeout=15)


FACTORY_NEVER_RETURNS = """from flowtui import agent, workflow
def factory():
    while True:
        pass
@agent(provider=factory, prompt="p")
class A:
    pass
@workflow(steps=[A])
class W:
    pass
"""


async def test_x_stops_a_run_whose_start_never_returns_and_says_where(tmp_path):
    """A provider factory that never returns: the status said idle for good, and x only answered
    "queued until the run is ready"; q alone worked."""
    flow = tmp_path / "factory.py"
    flow.write_text(FACTORY_NEVER_RETURNS)
    app = make(str(flow), input="x")
    async with app.run_test() as pilot:
        shown = lambda: str(app.main.query_one("#status").content)  # noqa: E731
        await wait_until(pilot, lambda: "starting the run…" in shown() and "(x stops it)" in shown(), timeout=15,
                         what="the status to say the run is starting")
        await pilot.press("x")
        assert "stopping the run before it started…" in shown()  # at once, not after the grace
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), timeout=15, what="the error screen")
        said = str(app.screen.error)
        assert "stopped before the run started: making its agents, tools and providers did not return" in said
        assert "factory.py:3 in factory" in said
        flow.write_text(Path("tests/tui/flows/review_fn.py").read_text())  # fixed: r loads it afresh
        await pilot.press("r")
        await paused(pilot, timeout=15)


INIT_RAISES = """from flowtui import FunctionProvider, agent, workflow
@agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")
class A:
    def __init__(self):
        raise ValueError("no agent today")
@workflow(steps=[A])
class W:
    pass
"""


FACTORY_IGNORES_THE_STOP = FACTORY_NEVER_RETURNS.replace("""    while True:""", """    import signal
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # (the stop's signal: its process is killed)
    while True:""")


@pytest.mark.parametrize("flow_text,stop,said", [
    (FACTORY_NEVER_RETURNS, True, "stopped before the run started: making its agents, tools and providers did not "
                                  "return (at "),
    (FACTORY_IGNORES_THE_STOP, True, "stopped before the run started: killed after "),
    (INIT_RAISES, False, "no agent today"),
])
async def test_a_run_that_could_not_start_leaves_no_journal(tmp_path, monkeypatch, flow_text, stop, said):
    """Stopped before its start was answered (x on a provider factory that never returns, unwound or,
    ignoring the signal, killed), or refused (an agent's __init__ raised): the app left an empty
    journal in .flowtui/runs (flowtui run left none); the killed one showed no error, and each stayed
    "stopping…" for good."""
    flow = tmp_path / "flow.py"
    flow.write_text(flow_text)
    monkeypatch.chdir(tmp_path)
    app = make(str(flow), input="x", journal_auto=True)
    async with app.run_test() as pilot:
        if stop:
            shown = lambda: str(app.main.query_one("#status").content)  # noqa: E731
            await wait_until(pilot, lambda: "starting the run…" in shown(), timeout=15, what="the start")
            assert list((tmp_path / ".flowtui" / "runs").iterdir())  # (the journal made for it)
            await pilot.press("x")
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), timeout=15, what="the error screen")
        assert said in str(app.screen.error), str(app.screen.error)
        assert "stopping" not in str(app.main.query_one("#status").content)  # behind it, no stop under way
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flow.py"]  # nor the folders made for it


def test_flowtui_run_stopped_while_its_start_never_returns_says_where(tmp_path):
    import signal
    import subprocess
    import sys

    flow, inside = tmp_path / "factory.py", tmp_path / "inside"
    flow.write_text(FACTORY_NEVER_RETURNS.replace("def factory():\n",
                                                  f"def factory():\n    open({str(inside)!r}, 'w')\n"))
    proc = subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", str(flow),
                             "--input", "x", "--journal", str(tmp_path / "j.jsonl")], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not inside.exists():  # loaded, and inside the factory (a fixed wait: on a loaded machine, still importing)
        assert time.monotonic() < deadline and proc.poll() is None, "the factory was never called"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, err
    assert "stopped before the run started: making its agents, tools and providers did not return (at " in err
    assert "Traceback" not in err and "Exception in callback" not in err


def test_flowtui_run_killed_before_its_start_answered_says_no_run_started_and_leaves_no_journal(tmp_path):
    """ctrl-C twice while a provider factory never returns: the run "stopped" (exit 0, though none had
    started: "the run stopped: killed 0.2 s after the stop: ctrl-C again") and left an empty journal."""
    import signal
    import subprocess
    import sys

    flow, inside = tmp_path / "factory.py", tmp_path / "inside"
    flow.write_text(FACTORY_NEVER_RETURNS.replace("def factory():\n",
                                                  f"def factory():\n    open({str(inside)!r}, 'w')\n"))
    proc = subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", str(flow),
                             "--input", "x"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not inside.exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the factory was never called"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, err
    assert re.search(r"flowtui: stopped before the run started \(killed \d+\.\d s after the stop: ctrl-C again\); "
                     r"nothing of it ran", err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["factory.py", "inside"]  # no journal, nor its folders


async def test_a_fifty_megabyte_output_reaches_the_app_as_a_preview():
    app = make(f"{MISBEHAVE}:BigOutput", input="x")
    async with app.run_test(size=(120, 40)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot, timeout=60)
        tool = app.client.view.history[2]
        assert len(tool.content) < 70_000  # what reached the app: the first 64 KiB and a note
        assert "[cut on the way to the app: 50,000,000 characters in all" in tool.content
        pane = app.main.conversation
        pane.select(2)
        for key in ("enter", "up", "down", "3", "1", "2", "1"):  # each answered, none waits on the text
            t0 = time.monotonic()
            await pilot.press(key)
            assert time.monotonic() - t0 < 5, key
        reply = await app.client.command(Fetch(seq=_cut_seq(tool.content), path="item.content"))
        assert reply.ok and len(reply.value) == 50_000_000  # the whole of it, from the run


async def test_a_value_cut_under_any_key_says_so_and_opens_whole():
    """A long value under a key holding a dot, a bracket and a space, or a credential, arrives cut
    with its note, and the note's place fetches the whole of it; the credential is nowhere in it."""
    from flowtui.tui.client import cut_in

    app = make(f"{MISBEHAVE}:OddKeys", input="x")
    async with app.run_test(size=(120, 40)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot, timeout=60)
        value = app.client.view.runs[app.client.view.run_id].ctx["d"]  # as the panes hold it
        assert "A1b2C3d4" not in str(value)
        assert sorted(len(v) < 70_000 for v in value.values()) == [True] * 3  # all three cut
        for key, letter in (("a.b", "x"), ("k) x", "y")):
            cut = cut_in(value[key])
            assert cut is not None, key
            whole, why = await app.client.fetch(cut[0], cut[1])
            assert why is None and whole == letter * 100_000, key
        (hidden,) = [key for key in value if key not in ("a.b", "k) x")]
        cut = cut_in(value[hidden])
        whole, why = await app.client.fetch(cut[0], cut[1])
        assert why is None and whole == "z" * 100_000


@pytest.mark.parametrize("elided", [
    {"value.nowhere.deeper": 5}, {"value.5": 5}, {"value.0.x": 5}, {"value." + "9" * 5000: 5}, {"value": "many"},
    {"seq": 5}, ["value"], "value", 7,
])
def test_a_forged_cut_marks_nothing_and_breaks_nothing(elided):
    """An attached peer's ``elided`` that names no string of its event leaves the event as it came."""
    import json

    from flowtui.runtime import protocol
    from flowtui.tui.client import mark_cuts

    line = json.dumps(dict(type="ctx.set", seq=3, ts=0.0, run_id="r", node_id=None, parent_id=None,
                           origin="user", name="d", value=["a", "b"], elided=elided)).encode()
    marked = mark_cuts(line, protocol.parse_worker_line(line.decode()))
    assert (marked.type, marked.seq, marked.value) == ("ctx.set", 3, ["a", "b"])


@pytest.mark.parametrize("row, letter", [("field:items", "s"), ("memory:0", "m")])
async def test_a_value_cut_on_its_way_is_not_edited_in_the_app_and_o_opens_it_whole(monkeypatch, row, letter):
    """Saving the piece the app holds would replace the run's whole value with it: e refuses and
    says why; o opens the whole value, fetched from the run."""
    import json

    from flowtui.tui.screens.dialogs import TextDialog

    monkeypatch.setenv("PAGER", "cat")
    app = make(f"{MISBEHAVE}:LongValues", input="x")
    async with app.run_test(size=(120, 40)) as pilot:
        await paused(pilot)
        await pilot.press("n")  # the first turn: the state field and the memory item are 100,000 characters
        await wait_until(pilot, lambda: app.client.view.status == "paused" and app.client.view.memory,
                         timeout=30, what="the first turn")
        sidebar = app.main.sidebar
        sidebar.focus()
        await pilot.pause()
        assert sidebar.select_id(row)
        await pilot.press("e")
        await pilot.pause()
        assert not isinstance(app.screen, TextDialog)
        assert any("holds a text of 100,000 characters: too large to edit here" in n.message
                   for n in app._notifications)
        opened = await paged(pilot)
        assert (json.loads(opened) if row.startswith("field") else [opened]) == [letter * 100_000]


async def test_a_call_whose_arguments_were_cut_is_not_edited_in_the_app():
    from flowtui.tui.screens.dialogs import TextDialog

    app = make(f"{MISBEHAVE}:LongArguments", input="x")
    async with app.run_test(size=(120, 40)) as pilot:
        await paused(pilot)
        while app.client.view.pause.point != "tool":
            await press_and_pause(pilot, "s")
        app.main.conversation.select(1)
        await pilot.press("e")
        await pilot.pause()
        assert not isinstance(app.screen, TextDialog)
        assert any("arguments hold a text of 100,000 characters: too large to edit here" in n.message
                   for n in app._notifications)
        await pilot.press("c")  # the run holds them whole: the tool gets every character
        await ended(pilot)
        assert app.client.view.history[2].content == "100000"


async def test_pagedown_pages_through_a_block_taller_than_the_screen():
    """An expanded 500-line tool result: page down reaches its last drawn line and its count of the
    rest (it used to snap back to the block's top on every key)."""
    app = make(f"{MISBEHAVE}:ManyLines", input="x")
    async with app.run_test(size=(100, 30)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)
        pane = app.main.conversation
        pane.focus()
        pane.select(2)
        await pilot.press("enter")  # expanded: its first 100 lines, then how many more
        await pilot.pause()
        tops = []
        for _ in range(8):
            await pilot.press("pagedown")
            tops.append(pane.scroll_offset.y)
        assert tops == sorted(tops) and tops[-1] == pane.max_scroll_y > 60, tops
        screen = [pane.render_line(y).text for y in range(pane.size.height)]
        assert any("400 more lines (o opens it whole)" in line for line in screen)
        for _ in range(8):
            await pilot.press("pageup")
        assert pane.scroll_offset.y == 0


async def test_what_the_model_sees_names_the_key_that_expands_its_blocks():
    """In view 2 enter shows a block's event, so a collapsed block there says space expands it."""
    app = make(f"{MISBEHAVE}:ManyLines", input="x")
    async with app.run_test(size=(100, 30)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)
        await pilot.press("2")
        sees = app.main.pane_widget("model-sees")
        await wait_until(pilot, lambda: sees is not None and len(sees.tags) >= 4, what="view 2 drawn")
        i = next(i for i, m in enumerate(sees.messages) if m.role == "tool")
        drawn = "\n".join(strip.text for strip in sees._block(i))
        assert "497 more lines (space expands)" in drawn
        sees.focus()
        sees.select(i)
        await pilot.press("space")
        await pilot.pause()
        assert "line 99" in "\n".join(strip.text for strip in sees._block(i))


async def test_a_cut_value_the_run_cannot_send_is_said_not_waited_on(monkeypatch):
    import os
    import signal

    from flowtui.tui import client as client_module

    monkeypatch.setattr(client_module, "FETCH_TIMEOUT_S", 1.0)  # the app's patience, shortened for the test
    app = make(f"{MISBEHAVE}:BigOutput", input="x")
    async with app.run_test(size=(120, 40)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot, timeout=60)
        cut = client_module.cut_in(app.client.view.history[2].content)
        os.kill(app.client.hello.pid, signal.SIGSTOP)  # the run's process answers nothing
        try:
            whole, why = await app.client.fetch(cut[0], cut[1])
        finally:
            os.kill(app.client.hello.pid, signal.SIGCONT)
        assert whole is None and "did not send it within 1 s" in why
        monkeypatch.setattr(client_module, "FETCH_TIMEOUT_S", 30.0)  # 50 MB to send
        whole, why = await app.client.fetch(cut[0], cut[1])  # and once it answers again, it does
        assert why is None and len(whole) == 50_000_000


async def test_a_cut_value_the_run_cannot_send_opens_whole_from_its_journal(monkeypatch, tmp_path):
    """o on a value the run's process did not send (stopped, busy, dead, or it let go of it: a 70 MB tool result
    once did) said the cut text was all there was, though the run's journal held it whole."""
    import os
    import signal

    from flowtui.tui import client as client_module

    monkeypatch.setattr(client_module, "FETCH_TIMEOUT_S", 1.0)
    app = make(f"{MISBEHAVE}:BigOutput", input="x", journal=str(tmp_path / "run.jsonl"))
    async with app.run_test(size=(120, 40)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot, timeout=60)
        cut = client_module.cut_in(app.client.view.history[2].content)
        pid = app.client.hello.pid
        os.kill(pid, signal.SIGSTOP)  # the run's process answers nothing
        try:
            whole, why = await app.client.fetch(cut[0], cut[1])
        finally:
            os.kill(pid, signal.SIGCONT)
        assert why is None and len(whole) == 50_000_000, why
        os.kill(pid, signal.SIGKILL)
        await wait_until(pilot, lambda: app.client.channel.closed.is_set(), what="the process gone")
        whole, why = await app.client.fetch(cut[0], cut[1])
        assert why is None and len(whole) == 50_000_000, why


def _cut_seq(text: str) -> int:
    from flowtui.tui.client import cut_in

    cut = cut_in(text)
    assert cut is not None
    return cut[0]


async def test_what_a_flow_prints_reaches_the_app_as_a_message(tmp_path):
    flow = tmp_path / "noisy.py"
    flow.write_text(
        "from flowtui import FunctionProvider, agent, workflow\n"
        "class A:\n"
        "    def after_response(self, r, ctx):\n"
        "        print('printed by a hook')\n"
        "A = agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')(A)\n"
        "@workflow(steps=[A])\nclass W:\n    pass\n")
    app = make(str(flow), input="x")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)
        await wait_until(pilot, lambda: "printed by a hook" in app.client.logs, what="the printed line")


async def test_a_long_printed_line_is_announced_in_a_few_lines_and_kept_whole_for_p(tmp_path):
    """A 100 KB printed line: its notice shows its start and size (it used to fill the screen with the
    4 KiB that reach the app, at 80x24 the whole sidebar); P still has what arrived of it."""
    flow = tmp_path / "loud.py"
    flow.write_text(
        "from flowtui import FunctionProvider, agent, workflow\n"
        "class A:\n"
        "    def after_response(self, r, ctx):\n"
        "        print('y' * 100_000)\n"
        "A = agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')(A)\n"
        "@workflow(steps=[A])\nclass W:\n    pass\n")
    app = make(str(flow), input="x")
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)
        await wait_until(pilot, lambda: any("yyyy" in str(t.render()) for t in app.screen.query("Toast")),
                         what="the notice")
        notice = next(t for t in app.screen.query("Toast") if "yyyy" in str(t.render()))
        assert notice.region.height <= 10  # (4 KiB wrapped: the height of the screen)
        assert "y…" in str(notice.render()) and "P: all of it" in str(notice.render())
        assert max(len(line) for line in app.client.logs) > 4000  # what P shows: all that reached the app


async def test_attach_drives_a_run_that_lives_elsewhere_to_its_end(tmp_path):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                             "tests/tui/flows/review_fn.py", "--input", "go", "--listen", "127.0.0.1:0",
                             "--no-journal"], stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stderr.readline().rsplit(":", 1)[1])
        token = proc.stderr.readline().split()[1]
        app = make(f"127.0.0.1:{port}", attach=("127.0.0.1", port, token, False), journal=None)
        async with app.run_test() as pilot:
            await paused(pilot)  # where the run waits: before its first step
            assert app.client.view.status_line() == "paused before Writer"
            for _ in range(3):
                seq = app.client.view.pause.seq
                await pilot.press("s")
                await paused(pilot, after=seq)
            await pilot.press("c")
            await ended(pilot)
            assert app.client.view.status == "finished"
        assert proc.wait(timeout=30) == 0 and proc.stdout.read() == "APPROVED: it has everything.\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_the_worker_the_command_line_started_is_the_one_driven_and_a_reload_starts_a_fresh_one():
    from flowtui.tui.client import LaunchConfig

    head_start = LaunchConfig(target=REVIEW).worker_options().start_now()  # what `flowtui FLOW` does first
    app = make(REVIEW, input="x", head_start=head_start)
    async with app.run_test() as pilot:
        await paused(pilot)
        assert app.client.hello.pid == head_start.pid
        before = app.client.view.pause.seq
        await pilot.press("s")
        await paused(pilot, after=before)  # commands reach it, events come back
        await pilot.press("r", "y")  # reload: a fresh process, the first one ends
        await wait_until(pilot, lambda: app.client.hello is not None and app.client.hello.pid != head_start.pid
                         and app.client.view.status == "paused", timeout=15, what="a fresh worker")
        await wait_until(pilot, lambda: head_start.poll() is not None, timeout=15, what="the first worker to end")


def test_a_worker_started_ahead_that_nobody_takes_over_ends_with_its_client():
    from flowtui.tui.client import LaunchConfig

    head_start = LaunchConfig(target=REVIEW).worker_options().start_now()
    head_start.stdin.close()  # the app never started (or died first)
    assert head_start.wait(timeout=30) == 0
    head_start.stdout.close()
    head_start.stderr.close()


def _listen(flow: str):
    """``flowtui run FLOW --listen 127.0.0.1:0``: the process, its port and its token."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run", flow,
                             "--input", "hi", "--listen", "127.0.0.1:0", "--no-journal"],
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    port = int(proc.stderr.readline().rsplit(":", 1)[1])
    token = proc.stderr.readline().split()[1]
    return proc, port, token


async def test_attaching_to_a_paused_run_shows_where_it_waits_without_a_key():
    proc, port, token = _listen("flows/revisao.py")
    try:
        for _ in range(2):  # and again after q (detach): the run waits for the next client
            app = make(f"127.0.0.1:{port}", attach=("127.0.0.1", port, token, False), journal=None)
            async with app.run_test() as pilot:
                shown = lambda: str(app.main.query_one("#status").content)  # noqa: E731
                deadline = time.monotonic() + 15
                while "paused before PlannerAgent" not in shown():  # no flush forced, no key pressed
                    assert time.monotonic() < deadline, f"the status still says {shown()!r}"
                    await pilot.pause(0.05)
                assert "loading" not in shown()
                await pilot.press("q")
                await wait_until(pilot, lambda: not app.is_running, timeout=15, what="the app to detach")
        assert proc.poll() is None  # detached twice, the run still waits
    finally:
        proc.kill()
        proc.wait()


async def test_r_while_attached_says_at_once_that_the_run_reloads_where_it_runs():
    proc, port, token = _listen("flows/revisao.py")
    try:
        app = make(f"127.0.0.1:{port}", attach=("127.0.0.1", port, token, False), journal=None)
        async with app.run_test() as pilot:
            await paused(pilot)
            await pilot.press("r")
            await pilot.pause(0.1)
            assert app.screen is app.main  # no question asked
            said = [n.message for n in app._notifications]
            assert any("reload it where it runs" in m for m in said), said
            assert app.client.active  # still attached to the same run
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGHUP"])
def test_a_signal_to_the_app_while_a_tool_never_returns_is_named_in_the_runs_end(tmp_path, signum):
    """The forced stop's words replaced it: "killed after 0.4 s: tool t did not return"."""
    import signal

    journal = tmp_path / "j.jsonl"
    with continued_in_a_terminal("SyncLoop", journal) as term:
        term.proc.send_signal(getattr(signal, signum))
        term.wait_exit(15)
    end = last_event(journal)
    said = {"SIGTERM": "the app received SIGTERM", "SIGHUP": "the app's terminal went away (SIGHUP)"}[signum]
    assert end["type"] == "run.end" and end["status"] == "stopped"
    assert end["reason"].startswith(f"{said} (killed ") and "tool t did not return, at " in end["reason"], end


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGHUP"])
def test_a_terminate_or_hangup_signal_quits_as_q_does_and_gives_the_terminal_back(tmp_path, signum):
    import json
    import signal
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from terminal import Terminal

    journal = tmp_path / "j.jsonl"
    with Terminal.flowtui(REVIEW, "--input", "x", "--journal", str(journal), cols=100, rows=30) as term:
        term.wait_for("paused before")
        term.proc.send_signal(getattr(signal, signum))
        code = term.wait_exit(15)
        out = bytes(term.output)
    # it exited 0, saying nothing: a flow that signalled the app (os.kill(os.getppid(), SIGTERM)) seemed a quit
    assert code == 128 + getattr(signal, signum) and f"flowtui: ended by {signum}: the run was stopped".encode() in out
    assert out.rfind(b"\x1b[?1049l") > out.rfind(b"\x1b[?1049h")  # the alternate screen left
    assert out.rfind(b"\x1b[?25h") > out.rfind(b"\x1b[?25l")  # the cursor shown again
    end = json.loads(journal.read_text().splitlines()[-1])
    assert end["type"] == "run.end"
    assert end["reason"] == {"SIGTERM": "the app received SIGTERM",  # not "stopped by user": nobody pressed q
                             "SIGHUP": "the app's terminal went away (SIGHUP)"}[signum]


def counted(view, count: int, **end) -> list[bytes]:
    """A flood the run could have sent after its last event: ``count`` ``ctx.set counter`` events, as the
    worker writes them (compact JSON), handed to the channel as it hands what it read; with ``end``, the
    run.end's fields after them."""
    base = {"ts": 0.0, "run_id": view.run_id, "node_id": None, "parent_id": None, "origin": "tool:flood"}
    seq = view.last_seq

    def line(**event) -> bytes:
        return json.dumps({**base, **event}, separators=(",", ":")).encode()

    lines = [line(seq=seq + i, type="ctx.set", name="counter", value=i) for i in range(1, count + 1)]
    if end:
        lines.append(line(seq=seq + count + 1, origin="runtime", type="run.end", **end))
    return lines


async def test_keys_are_answered_while_a_backlog_that_ends_the_run_is_folded():
    """A flood's backlog with the run's end behind it: the end is shown once the backlog is folded,
    a slice a tick, and a key pressed meanwhile is answered before it is (folding all of it in one
    go held every key until the last event)."""
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        app.client.channel.on_lines(counted(app.client.view, 300_000, status="finished", output="done"))
        app.simulate_key("3")
        deadline = time.monotonic() + 30
        while app.main.current_view != "events" and time.monotonic() < deadline:
            await pilot.pause(0.01)
        assert app.main.current_view == "events"
        assert app.client.pending, "the key waited until the whole backlog was folded"
        assert app.client.view.status == "paused"  # the end is not shown before what came ahead of it
        await ended(pilot, timeout=60)
        assert app.client.view.ctx["counter"] == 300_000
        assert app.client.view.status == "finished"


async def test_a_run_process_killed_behind_a_backlog_is_shown_a_slice_at_a_time(tmp_path):
    """The run's process dies while the app is behind on what it sent: that is folded a slice a tick, as
    before it died (folding it at once held every key up: 270 ms for 28,000 events of a flood), the
    status says what is left to show, and the run's end comes after all of it, in the journal too."""
    journal = tmp_path / "j.jsonl"
    app = make(input="go", journal=str(journal))
    async with app.run_test() as pilot:
        await paused(pilot)
        seq = app.client.view.last_seq
        app.client.channel.on_lines(counted(app.client.view, 100_000))
        os.kill(app.client.channel.proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        said = r"● the run's process has ended; showing the [\d,]+ events it sent before…"
        while not re.fullmatch(said, str(app.main.query_one("#status").content)):  # at its next redraw
            assert time.monotonic() < deadline, str(app.main.query_one("#status").content)
            await pilot.pause(0.01)
        assert app.client.pending > 50_000, app.client.pending
        app.simulate_key("3")
        while app.main.current_view != "events" and time.monotonic() < deadline:
            await pilot.pause(0.01)
        assert app.main.current_view == "events" and app.client.pending, "the key waited for the backlog"
        await ended(pilot, timeout=60)
        assert app.client.view.ctx["counter"] == 100_000  # (not one left out as late)
        assert app.client.view.status_line() == "failed: the flow process was killed by SIGKILL (9)"
    end = json.loads(journal.read_text().splitlines()[-1])
    assert (end["type"], end["seq"], end["status"]) == ("run.end", seq + 100_001, "failed"), end


async def test_a_flow_that_closes_the_pipe_of_its_events_is_ended_and_said_so(tmp_path):
    """The run can no longer be followed: its process is ended (the run is not left `running` for
    ever), the run fails saying why, in the status line, a notification and the journal."""
    import json

    journal = tmp_path / "j.jsonl"
    app = make(f"{MISBEHAVE}:ClosesItsPipes", input="x", journal=str(journal))
    async with app.run_test(notifications=True) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot, timeout=20)
        await wait_until(pilot, lambda: any("closed the pipe the run's events go out on" in str(toast.render())
                                            for toast in app.screen.query("Toast")), what="the notification")
        view = app.client.view
        assert view.status == "failed" and "the flow closed the pipe the run's events go out on" in view.error
        assert [ev.type for ev in app.client.events].count("run.end") == 1
    end = json.loads(journal.read_text().splitlines()[-1])
    assert end["type"] == "run.end" and end["status"] == "failed" and "closed the pipe" in end["error"]


@pytest.mark.parametrize("flow", ["ClosesItsPipes", "ClosesEverything"])
def test_headless_a_flow_that_closes_the_pipe_of_its_events_fails_saying_why(tmp_path, flow):
    """ClosesEverything (os.closerange(0, 1024), its stderr too): the run's process failed saying that on
    the stderr the flow had closed, and flowtui run said only "the flow process exited with code 1"."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                           f"{MISBEHAVE}:{flow}",
                           "--input", "x", "--journal", str(tmp_path / "j.jsonl")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "closed the pipe the run's events go out on" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "exited with code" not in done.stderr


def test_what_a_flow_printed_after_closing_stdout_is_dropped_without_a_traceback(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                           f"{MISBEHAVE}:PrintsAfterClosingStdout", "--input", "x", "--no-journal"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # the print failed the tool: said where, and no more (no "Exception ignored" as Python flushed it at exit)
    assert re.search(r"◂ tool t .*✗  OSError: \[Errno 9\] Bad file descriptor \(at .*misbehave.py:\d+ in "
                     r"prints_after_closing_stdout\)\n", done.stderr), done.stderr
    assert "Exception ignored" not in done.stderr and done.stderr.count("OSError") == 1, done.stderr


async def test_a_line_something_else_wrote_into_the_event_pipe_loses_no_event(tmp_path):
    """Half a line written into the pipe glues itself to the next event, which no longer parses: the
    events lost that way are taken from the journal, in order, and the app says what happened."""
    journal = tmp_path / "j.jsonl"
    app = make(f"{MISBEHAVE}:WritesIntoItsPipe", input="x", journal=str(journal))
    async with app.run_test(notifications=True) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot, timeout=20)
        view = app.client.view
        assert view.status == "finished"
        seqs = [ev.seq for ev in app.client.events]
        assert seqs == list(range(1, len(seqs) + 1))  # every event, once, in order
        journaled = [line for line in journal.read_text().splitlines() if line.strip()]
        assert len(seqs) == len(journaled)
        assert all(node.status != "running" for node in view.nodes.values())
        await wait_until(pilot, lambda: any("not an event" in str(toast.render())
                                            for toast in app.screen.query("Toast")), what="the notification")


async def test_an_event_that_goes_back_in_the_run_is_left_out_and_said():
    """A peer (or something writing into the pipe) sends an event whose seq is not past the last
    one: it is not folded over the run, and the app says so."""
    import json

    app = make(input="go")
    async with app.run_test(notifications=True) as pilot:
        await paused(pilot)
        view = app.client.view
        before = dict(view.ctx)
        forged = {"seq": view.last_seq - 1, "ts": 0.0, "run_id": view.run_id, "node_id": None, "parent_id": None,
                  "origin": "runtime", "type": "ctx.set", "name": "forged", "value": 1}
        app.client.channel.on_lines([json.dumps(forged, separators=(",", ":")).encode()])
        await wait_until(pilot, lambda: any("came after event" in str(toast.render())
                                            for toast in app.screen.query("Toast")), what="the notification")
        assert app.client.view.ctx == before
        assert "forged" not in app.client.view.ctx


def test_the_app_stopped_and_brought_back_draws_itself_whole_again():
    """SIGTSTP (a shell's job control), then SIGCONT (fg): the terminal was the shell's meanwhile,
    so every pane, the status and the key bar are drawn again (the key bar stayed blank)."""
    import signal
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from terminal import Terminal

    with Terminal.flowtui(REVIEW, "--input", "x", "--no-journal", cols=100, rows=30) as term:
        term.wait_for("paused before")
        term.proc.send_signal(signal.SIGTSTP)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{term.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
            assert time.monotonic() < deadline, "the app did not stop"
            time.sleep(0.05)
        time.sleep(0.3)
        term.clear()  # the shell drew while the app was stopped: the app's screen is gone
        term.proc.send_signal(signal.SIGCONT)
        term.wait_for(lambda: "paused before" in term.text() and "q quit" in term.text()
                      and "Conversation" in term.text(), timeout=15)
        term.send("q")
        assert term.wait_exit(15) == 0


async def test_an_event_that_skips_far_ahead_is_left_out_and_the_run_goes_on():
    """One stray event whose seq is far ahead of the run's (and that the journal cannot account
    for) must not make the run's own events look late: it is left out, said, and the run's next
    events, its end among them, are folded."""
    import json

    app = make(input="go")
    async with app.run_test(notifications=True) as pilot:
        await paused(pilot)
        view = app.client.view
        base = {"ts": 0.0, "run_id": view.run_id, "node_id": None, "parent_id": None, "origin": "runtime"}

        def line(**event) -> bytes:
            return json.dumps({**base, **event}, separators=(",", ":")).encode()

        seq = view.last_seq
        app.client.channel.on_lines([line(seq=10**9, type="ctx.set", name="forged", value=1),
                                     line(seq=seq + 1, type="ctx.set", name="real", value=2)])
        await wait_until(pilot, lambda: "real" in app.client.view.ctx, what="the run's next event")
        assert "forged" not in app.client.view.ctx
        await wait_until(pilot, lambda: any("skips ahead" in str(toast.render())
                                            for toast in app.screen.query("Toast")), what="the notification")


@pytest.mark.parametrize("state", ["paused", "running"])
def test_the_app_whose_terminal_is_gone_ends_and_its_run_with_it(tmp_path, state):
    """A closed window or a dropped ssh session: writing to the terminal fails for good, and the app
    used to hang in a write for ever (a process left behind at every hang-up). It ends within a
    few seconds, and the run's journal ends with its run.end."""
    import json
    import signal
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from terminal import Terminal

    journal = tmp_path / "j.jsonl"
    target = REVIEW if state == "paused" else f"{MISBEHAVE}:SyncLoop"
    with Terminal.flowtui(target, "--input", "x", "--journal", str(journal), cols=100, rows=30) as term:
        term.wait_for("paused before")
        if state == "running":
            term.send("c")
            term.wait_for("running")
        term.hang_up()
        code = term.wait_exit(15)
    assert code in (0, 128 + signal.SIGHUP)
    deadline = time.monotonic() + 15  # the run's process ends its run itself when the app could not
    while json.loads(journal.read_text().splitlines()[-1])["type"] != "run.end":
        assert time.monotonic() < deadline, "the journal never ended"
        time.sleep(0.1)


def test_headless_json_loses_no_event_to_a_line_written_into_the_pipe(tmp_path):
    """flowtui run --json prints every event of the run, those the pipe lost taken from the journal."""
    import json
    import subprocess
    import sys

    journal = tmp_path / "j.jsonl"
    done = subprocess.run([sys.executable, "-c", "from flowtui.tui.cli import main; main()", "run",
                           f"{MISBEHAVE}:WritesIntoItsPipe", "--input", "x", "--json", "--journal", str(journal)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    printed = [json.loads(line)["seq"] for line in done.stdout.splitlines() if line.startswith("{")]
    journaled = [json.loads(line)["seq"] for line in journal.read_text().splitlines() if line.strip()]
    assert printed == journaled == list(range(1, len(journaled) + 1))
    assert "taken from the journal" in done.stderr


async def test_an_agent_that_cannot_be_made_is_said_on_screen_and_r_runs_the_fixed_file(tmp_path):
    """The run cannot start (an agent's __init__ raises): the app says why and where, as it does a
    load error, instead of sitting idle with the keys pressed queued; r runs the fixed file."""
    flow = tmp_path / "flow.py"
    flow.write_text("from flowtui import ScriptedProvider, agent, workflow\n\n"
                    "@agent(provider=ScriptedProvider(['ok']), prompt='p')\nclass A:\n"
                    "    def __init__(self):\n        raise RuntimeError('no key set')\n\n"
                    "@workflow(steps=[A])\nclass W:\n    pass\n")
    app = make(str(flow), input="x")
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), timeout=15, what="the error screen")
        said = str(app.screen.error)
        assert "A() could not be made for the run: RuntimeError: no key set" in said and "flow.py:6" in said
        flow.write_text(Path("tests/tui/flows/review_fn.py").read_text())
        await pilot.press("r")
        await paused(pilot, timeout=15)


async def test_a_journal_folder_that_cannot_be_made_is_said_on_screen(tmp_path, monkeypatch):
    """The default journal's folder cannot be created (here a file is in its way): the app said a
    bare PermissionError/NotADirectoryError in a toast and sat idle; it now says what to do."""
    flow = str(Path("tests/tui/flows/review_fn.py").resolve())
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".flowtui").write_text("in the way")
    app = make(flow, input="x", journal_auto=True)
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), timeout=15, what="the error screen")
        said = str(app.screen.error)
        assert "cannot write the journal .flowtui/runs" in said and "--no-journal" in said


async def test_an_app_taken_over_says_it_was_detached_and_the_run_goes_on_with_the_other():
    """A client let go (another attached with --take-over) showed the run as failed: 'the connection
    to the run was lost'. The run lives on where it is served."""
    proc, port, token = _listen("flows/revisao.py")
    try:
        first = make(f"127.0.0.1:{port}", attach=("127.0.0.1", port, token, False), journal=None)
        async with first.run_test() as pilot:
            await paused(pilot)
            second = make(f"127.0.0.1:{port}", attach=("127.0.0.1", port, token, True), journal=None)
            async with second.run_test() as other:
                await paused(other)  # attached in its place
                shown = lambda: str(first.main.query_one("#status").content)  # noqa: E731
                await wait_until(pilot, lambda: "detached" in shown(), what="the first app to say so")
                assert shown().startswith("● detached: another client took this run over")
                assert first.client.view.status == "paused"  # not failed: the run goes on
                seq = second.client.view.pause.seq
                await other.press("s")
                await paused(other, after=seq)  # the run is the second app's to drive
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


async def test_m_on_a_reply_too_large_to_edit_asks_before_promoting_it_whole():
    """It promoted at once, with no chance to look (promoting lets the text be edited first)."""
    from flowtui.tui.screens.dialogs import ConfirmDialog

    app = make(f"{MISBEHAVE}:LongReply", input="x")
    async with app.run_test(size=(120, 40)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n")
        history = [m.role for m in app.client.view.history]
        assert history == ["user", "assistant"]
        app.main.conversation.cursor = 1
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the question")
        assert "Message #1 holds 100,000 characters, too many to edit here" in app.screen.question
        await pilot.press("n")
        await pilot.pause()
        assert [m.role for m in app.client.view.history] == history and not app.client.view.memory
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the question")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.client.view.memory, what="the promotion")
        assert [m.role for m in app.client.view.history] == ["user"]
        assert len(app.client.view.memory) == 1
