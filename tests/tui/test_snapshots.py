"""Snapshots of the app (pytest-textual-snapshot, textual pinned to 8.2.8).

Each docstring says what you should see; `pytest --snapshot-update` rewrites them.
"""

from __future__ import annotations

from conftest import make, paused, press_and_pause, wait_until

from flowtui.tui.screens.dialogs import TextDialog
from flowtui.tui.screens.error import LoadErrorScreen

SIZE = (130, 36)


def test_paused_at_start(snap_compare):
    """The review flow just opened: the conversation holds the user's input (#0), the
    sidebar shows one seeded memory item, no tasks, the state fields approved/rounds/problems
    at their defaults; the control pane says `paused before Writer`, the path
    `ReviewWorkflow › loop 1/4`, 5 events, no breakpoints."""

    async def run_before(pilot):
        await paused(pilot)

    app = make(input="Write about ctx.state", memory={"user": "Castro"})
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_mid_loop_with_tools(snap_compare):
    """After the first review: the reviewer's reply with two `record_problem` tool calls and
    the two tool results (collapsed, marked ▸) are in the conversation; the sidebar lists
    both problems under State and ctx.last_problem; the run is paused after an iteration
    of `loop`."""

    async def run_before(pilot):
        await paused(pilot)
        await press_and_pause(pilot, "n", "l")

    assert snap_compare(make(input="Write about ctx.state"), terminal_size=SIZE, run_before=run_before)


def test_after_a_promotion(snap_compare):
    """The writer's draft was promoted by hand: the conversation is back to the user's
    message only, memory item 1 is the draft's text, the status line counts 2 user edits,
    and a notification confirms the promotion."""

    async def run_before(pilot):
        await paused(pilot)
        await press_and_pause(pilot, "n")
        pilot.app.main.conversation.select(1)
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, TextDialog), what="dialog")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: len(pilot.app.client.view.memory) == 1, what="promotion")

    assert snap_compare(make(input="Write about ctx.state"), terminal_size=SIZE, run_before=run_before)


def test_error_screen(snap_compare):
    """A flow file with a syntax error: a red-bordered box says `Could not load the flow`,
    names the file tests/tui/flows/broken_flow.py and line 6, the reason
    `syntax error: '(' was never closed`, and tells you to fix it and press r (or q)."""

    async def run_before(pilot):
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, LoadErrorScreen), what="error screen")

    assert snap_compare(make("tests/tui/flows/broken_flow.py", input="x"), terminal_size=SIZE,
                        run_before=run_before)


def test_edit_dialog_refuses_a_bad_value(snap_compare):
    """The `Edit state field rounds` dialog over the main screen, holding `abc`, with the
    red reason below it: `ReviewState.rounds is int: 'abc' refused (...)`; Save and Cancel."""

    async def run_before(pilot):
        app = pilot.app
        await paused(pilot)
        sidebar = app.main.sidebar
        sidebar.focus()
        sidebar.select_id("field:rounds")
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="dialog")
        app.screen.query_one("Input").value = "abc"
        await pilot.press("enter")
        await pilot.pause(0.05)

    assert snap_compare(make(input="Write about ctx.state"), terminal_size=SIZE, run_before=run_before)
