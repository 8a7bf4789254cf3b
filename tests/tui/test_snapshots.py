"""Snapshots of the app (pytest-textual-snapshot, textual pinned to 8.2.8).

Each docstring says what you should see; `pytest --snapshot-update` rewrites them.
"""

from __future__ import annotations

import pytest
from conftest import ended, make, paused, press_and_pause, wait_until

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
    message only, memory item 1 is the draft's text, the status line counts 1 user edit (a promote),
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


# --- every view and every status, at the smallest supported terminal and a large one ------------------------

SIZES = {"80x24": (80, 24), "160x48": (160, 48)}
sizes = pytest.mark.parametrize("size", list(SIZES.values()), ids=list(SIZES))


@pytest.fixture
def clocked(monkeypatch):
    """Node durations from a clock that moves 1 ms per reading (the same in every run)."""
    monkeypatch.setenv("FLOWCAPTURE_FAKE_CLOCK", "1")


async def _after_the_first_review(pilot, view_key: str | None = None) -> None:
    await paused(pilot)
    await press_and_pause(pilot, "n", "l")
    if view_key is not None:
        await pilot.press(view_key)
    await pilot.pause()


@sizes
def test_view_conversation(snap_compare, size, clocked):
    """Conversation view after the first review: user #0, Writer's draft #1, Reviewer's reply #2
    with `2 tool calls` (▸ collapsed), the two tool results #3 and #4. The status line says
    `● paused after an iteration of loop`, the path `ReviewWorkflow › loop 1/4`, with the events and
    `breakpoints: none` when there is room. The buttons are whole (`s step`… at 80 columns,
    `Step [s]`… at 160); the key bar ends in `? keys  ^p palette`."""
    assert snap_compare(make(input="Write about ctx.state"), terminal_size=size,
                        run_before=_after_the_first_review)


@sizes
def test_view_model_sees(snap_compare, size, clocked):
    """What the model sees (2) at the same point: `system · the last call's agent prompt (the next
    call's is known when its agent starts)` (paused after an iteration, the Reviewer's prompt drawn
    is the last call's: the next agent is not known yet), then the history as the next call sends it, each block tagged with its event,
    origin and tokens, estimated and marked so (`#… · agent:Writer · ~… tok`, as room allows: the
    flow's models are functions, which have no tokenizer); the pane's title says `What the model
    sees (N messages, ~T tokens, estimate)`."""

    async def run_before(pilot):
        await _after_the_first_review(pilot, "2")

    assert snap_compare(make(input="Write about ctx.state"), terminal_size=size, run_before=run_before)


@sizes
def test_view_event_log(snap_compare, size, clocked):
    """The event log (3), following the tail: seq, type, origin and a description that takes the
    remaining width (`loop_once: loop_iteration loop` on the last row, `run.pause`), at 80 columns
    too; durations read `… ms` from the test clock."""

    async def run_before(pilot):
        await _after_the_first_review(pilot, "3")

    assert snap_compare(make(input="Write about ctx.state"), terminal_size=size, run_before=run_before)


@sizes
def test_view_node_tree(snap_compare, size, clocked):
    """The node tree (4): `workflow ReviewWorkflow` › `loop 1/4` (not `loop loop`, and the same
    number as the status line) › the agents Writer and Reviewer with their chat nodes and the two
    `tool record_problem` nodes, each ✓ with its duration."""

    async def run_before(pilot):
        await _after_the_first_review(pilot, "4")

    assert snap_compare(make(input="Write about ctx.state"), terminal_size=size, run_before=run_before)


@sizes
def test_view_help(snap_compare, size, clocked):
    """The help (?) over the main screen: `flowtui keys`, the groups run, edit, view, app with
    each key and what it does; at 80×24 it is cut at the bottom with a scrollbar (it scrolls)."""

    async def run_before(pilot):
        await paused(pilot)
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: pilot.app.screen.__class__.__name__ == "HelpScreen", what="help")

    assert snap_compare(make(input="Write about ctx.state"), terminal_size=size, run_before=run_before)


@sizes
def test_status_running(snap_compare, size, clocked, monkeypatch):
    """A run busy in a slow tool: `● running`, the path `ReviewWorkflow › loop 1/4 › Reviewer ›
    record_problem`; the Reviewer's reply with its two tool calls is in the conversation, whose
    title counts its 3 messages; the Pause and Stop buttons are enabled, Step… disabled."""
    monkeypatch.setenv("FLOWCAPTURE_TOOL_DELAY", "30")

    async def run_before(pilot):
        app = pilot.app
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: any(n.kind == "tool" and n.status == "running"
                                            for n in app.client.view.nodes.values()), what="the slow tool")

    assert snap_compare(make(input="Write about ctx.state"), terminal_size=size, run_before=run_before)


@sizes
def test_status_finished(snap_compare, size, clocked):
    """A run that finished: `● finished`, and the output `APPROVED: it has everything.` where
    the path was; the run buttons are disabled, Reload is not."""

    async def run_before(pilot):
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)

    assert snap_compare(make(input="Write about ctx.state"), terminal_size=size, run_before=run_before)


@sizes
def test_status_failed(snap_compare, size, clocked, monkeypatch):
    """A hook that raises: `● failed: RuntimeError: the after_response hook broke (at
    tests/tui/flows/review_fn.py:… in after_response)`, cut with … when the line is narrower."""
    monkeypatch.setenv("FLOWCAPTURE_HOOK_RAISES", "1")

    async def run_before(pilot):
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)

    assert snap_compare(make(input="Write about ctx.state"), terminal_size=size, run_before=run_before)


@sizes
def test_status_stopped(snap_compare, size, clocked):
    """A run stopped with x before the model call of Writer: `● stopped`, the run buttons
    disabled; the sidebar's loop has done 0 of its 4 iterations (the first was begun, not ended)."""

    async def run_before(pilot):
        await paused(pilot)
        await press_and_pause(pilot, "s")
        await pilot.press("x")
        await ended(pilot)

    assert snap_compare(make(input="Write about ctx.state"), terminal_size=size, run_before=run_before)


@sizes
def test_status_inside_a_child_run(snap_compare, size, clocked):
    """Paused before the model call of Researcher, inside the child workflow a tool started: the
    path reads `ResearchWorkflow (child of CoordinatorWorkflow) › Researcher`; the conversation is
    the child's (`What is ctx.state?`), the sidebar's memory the child's (`asked_by: coordinator`)."""
    from test_child_run import CHILD, inside_the_child

    assert snap_compare(make(CHILD, input="What is ctx.state, in short?"), terminal_size=size,
                        run_before=inside_the_child)
