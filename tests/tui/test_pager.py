"""The pager (`o`, `P`): the app hands the terminal over and gets it back, whatever the pager does."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import REVIEW, make, paused, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from terminal import Terminal  # noqa: E402


def test_ctrl_c_in_the_pager_is_the_pagers_not_the_apps(tmp_path):
    # a "pager" that does what ctrl-C in less does to the process group, then returns, saying so
    done = tmp_path / "pager-done"
    pager = f"sh -c 'trap \"\" INT; kill -INT 0; sleep 0.2; touch {done}'"  # (it outlives its own ctrl-C)
    with Terminal.flowtui("flows/revisao.py", "--input", "x", "--no-journal", env={"PAGER": pager}) as term:
        term.wait_for("paused before PlannerAgent")
        term.send("o")  # the user message under the cursor, in the pager
        # (a key typed before the terminal is handed over is dropped, as Textual does: wait for the pager's end)
        term.wait_for(lambda: term.proc.poll() is not None or done.exists(), timeout=10)
        term.send("s")
        term.wait_for("paused before the model call of PlannerAgent")  # still here, still driving the run
        term.send("q")
        assert term.wait_exit() == 0


async def test_p_opens_what_the_flow_printed(tmp_path):
    flow = tmp_path / "prints.py"
    flow.write_text(Path(REVIEW).read_text().replace("class ", "print('hello from the flow')\nclass ", 1))
    app = make(str(flow), input="x")
    async with app.run_test(notifications=True) as pilot:
        await paused(pilot)
        await wait_until(pilot, lambda: "hello from the flow" in app.client.logs, what="the printed line")
        await pilot.press("P")  # no terminal to hand over here: the notice names the file
        await wait_until(pilot, lambda: any("the text is in" in str(t.render()) for t in app.screen.query("Toast")),
                         what="the notice")
        said = next(str(t.render()) for t in app.screen.query("Toast") if "the text is in" in str(t.render()))
        assert "hello from the flow" in Path(said.split("the text is in ")[1].strip()).read_text()


async def _pager_notice(monkeypatch, pager: str) -> str:
    """The notice `o` gives with ``PAGER=pager``."""
    monkeypatch.setenv("PAGER", pager)
    app = make(REVIEW, input="x")
    async with app.run_test(notifications=True) as pilot:
        await paused(pilot)
        await pilot.press("o")
        await wait_until(pilot, lambda: any("PAGER=" in str(t.render()) for t in app.screen.query("Toast")),
                         what="the notice")
        return next(str(t.render()) for t in app.screen.query("Toast") if "PAGER=" in str(t.render()))


async def test_a_pager_variable_that_is_no_command_is_named(tmp_path, monkeypatch):
    """PAGER='"less' (a quote left open): the toast said 'ValueError: No closing quotation'."""
    said = await _pager_notice(monkeypatch, '"less')
    assert "cannot be read as a command" in said and "The text is in" in said


async def test_a_pager_variable_naming_no_command_is_said_as_set(tmp_path, monkeypatch):
    """PAGER=/nonexistent/pager was told "No pager found (set PAGER)": it was set."""
    said = await _pager_notice(monkeypatch, "/nonexistent/pager -R")
    assert "PAGER='/nonexistent/pager -R': no such command; fix it, or unset it for less" in said, said
    assert "The text is in" in said


def test_a_pager_that_fails_at_once_is_said_not_silent(tmp_path):
    """PAGER=false: the screen blinked and nothing said why the text never showed."""
    with Terminal.flowtui("flows/revisao.py", "--input", "x", "--no-journal", env={"PAGER": "false"}) as term:
        term.wait_for("paused before PlannerAgent")
        term.send("o")
        term.wait_for("The pager false ended with code 1; the text is in")
        term.send("q")
        assert term.wait_exit() == 0
