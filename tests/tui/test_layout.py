"""The app fits any terminal from 80×24 up: every line fits, the event log keeps its descriptions,
the key bar keeps the most important keys (and `?`), the help scrolls, and conversation text can
be selected and copied."""

from __future__ import annotations

import pytest
from conftest import make, paused, press_and_pause, wait_until

from flowtui.tui.actions import ACTIONS, key_hints
from flowtui.tui.screens.dialogs import HelpScreen

SIZES = [(80, 24), (100, 30), (160, 48)]


def text_of(widget) -> str:
    return str(widget.render())


async def _mid_loop(pilot) -> None:
    await paused(pilot)
    await press_and_pause(pilot, "n", "s", "s")  # before the reviewer's first tool call


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_event_log_description_takes_the_remaining_width(size):
    app = make(input="Write about ctx.state")
    async with app.run_test(size=size) as pilot:
        await _mid_loop(pilot)
        await pilot.press("3")
        await pilot.pause()
        log = app.main.query_one("#events")
        rows = [log.render_line(y).text.rstrip() for y in range(log.size.height)]
        row = next(r for r in rows if "node.start" in r and "agent Rev" in r)
        width = log.size.width
        description = row.split("runtime", 1)[1].strip()
        assert description.startswith("agent Rev"), row
        assert len(description) >= min(len("agent Reviewer"), width // 3), row
        assert all(len(r) <= width for r in rows)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_buttons_and_the_status_lines_fit(size):
    app = make(input="Write about ctx.state")
    async with app.run_test(size=size) as pilot:
        await _mid_loop(pilot)
        await pilot.pause(0.1)
        control = app.main.query_one("#control")
        inner = control.content_region
        buttons = list(app.main.query("#buttons Button"))
        assert len(buttons) == len([a for a in ACTIONS if a.button])
        for button in buttons:  # every button whole, inside the pane
            assert inner.x <= button.region.x and button.region.right <= inner.right, button.id
            assert text_of(button).strip()
        if size[0] >= 160:
            assert text_of(buttons[1]).strip() == "Next turn [n]"
        status, where = (text_of(app.main.query_one(f"#{name}")) for name in ("status", "where"))
        assert len(status) <= inner.width and len(where) <= inner.width
        assert status == "● paused before tool record_problem"
        assert "record_problem" in where  # where it is, however narrow: the innermost step


async def test_after_a_resize_the_buttons_are_laid_out_as_at_a_start_of_that_size():
    """Their labels changed with the width, their widths did not: back at 80 columns from 160, Reload
    was off the pane; back from 60, the one-letter labels stayed."""
    from flowtui.tui.actions import ACTIONS
    from flowtui.tui.widgets.control import button_labels

    app = make(input="go")
    async with app.run_test(size=(80, 24)) as pilot:
        await paused(pilot)
        for size in ((160, 48), (80, 24), (60, 15), (80, 24)):
            await pilot.resize_terminal(*size)
            await pilot.pause(0.3)
            inner = app.main.query_one("#control").content_region
            buttons = list(app.main.query("#buttons Button"))
            fresh = [label.replace("\\[", "[") for label in button_labels([a for a in ACTIONS if a.button], inner.width)]  # (markup escaped)
            assert [text_of(b).strip() for b in buttons] == fresh, size
            for button in buttons:
                assert button.region.width == len(text_of(button).strip()) + 2, (size, button.id)
                assert inner.x <= button.region.x and button.region.right <= inner.right, (size, button.id)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_key_bar_keeps_the_most_important_keys_and_always_the_help(size):
    app = make(input="Write about ctx.state")
    async with app.run_test(size=size) as pilot:
        await paused(pilot)
        bar = text_of(app.main.query_one("KeyBar"))
        assert len(bar) <= size[0]
        assert bar.rstrip().endswith("? keys  ^p palette")
        hints = [h for h in key_hints(ACTIONS) if h[3] != "help"]
        shown = [h for h in hints if f" {h[1]} {h[2]} " in f" {bar} "]
        assert shown == hints[:len(shown)]  # the most important first: a prefix of the ranking
        assert [h[3] for h in shown[:6]] == ["step", "next_turn", "loop_once", "resume", "pause", "stop"]
        if size[0] >= 160:
            assert shown == hints  # every key that matters
            assert "a/A add" in bar


async def test_a_click_on_the_key_bar_runs_the_key():
    app = make(input="go")
    async with app.run_test(size=(100, 30)) as pilot:
        await paused(pilot)
        bar = app.main.query_one("KeyBar")
        x = text_of(bar).index("? keys")
        await pilot.click(bar, offset=(x, 0))
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help")


def _dimmed_labels(bar) -> set[str]:
    """The labels the key bar draws dimmed."""
    drawn = bar.render()
    return {drawn.plain[span.start:span.end].strip() for span in drawn.spans if str(span.style) == "dim"}


async def test_the_run_keys_are_dimmed_on_the_key_bar_once_the_run_has_ended():
    app = make(input="go")
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        bar = app.main.query_one("KeyBar")
        assert _dimmed_labels(bar) == {"p", "pause"}  # paused already: the rest moves the run
        await pilot.press("c")
        await wait_until(pilot, lambda: app.client.view.status == "finished", what="the end of the run")
        await wait_until(pilot, lambda: "step" in _dimmed_labels(bar), what="the run keys dimmed")
        dimmed = _dimmed_labels(bar)
        assert {"s", "step", "n", "turn", "l", "loop", "c", "continue", "x", "stop"} <= dimmed
        assert not {"r", "reload", "q", "quit", "keys"} & dimmed  # what still does something stays a key
        assert "s step" in text_of(bar)  # in its place: the bar does not move under the person


async def test_the_help_scrolls_at_80x24():
    app = make(input="go")
    async with app.run_test(size=(80, 24)) as pilot:
        await paused(pilot)
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help")
        scroller = app.screen.query_one("#help-scroll")
        assert scroller.max_scroll_y > 0  # the keys do not fit: it must scroll
        assert app.focused is scroller
        await pilot.press("pagedown")
        assert scroller.scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        assert scroller.scroll_y == scroller.max_scroll_y
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_conversation_text_can_be_selected_and_copied():
    app = make(input="Write about ctx.state")
    async with app.run_test(size=(80, 24)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n")
        conversation = app.main.conversation
        lines = [conversation.render_line(y).text for y in range(6)]
        assert lines[1].startswith("▌ Write about ctx.state")
        y = next(i for i, line in enumerate(lines) if line.startswith("▌ Draft 1"))
        # press on the gutter of the user's message, drag to the end of "Draft 1"
        await pilot.mouse_down("#conversation", offset=(0, 1))
        await pilot.hover("#conversation", offset=(2 + len("Draft 1") - 1, y))
        await pilot.mouse_up("#conversation", offset=(2 + len("Draft 1") - 1, y))
        await pilot.pause()
        assert app.screen.get_selected_text() == "\n".join(
            ["Write about ctx.state", "", lines[3][2:].rstrip(), "Draft 1"])
        selected = conversation.render_line(1)  # drawn as selected
        assert any(seg.style and seg.style.bgcolor for seg in selected if "Write" in seg.text)
        await pilot.press("ctrl+c")
        assert app.clipboard.endswith("Draft 1")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("key", ["e", "m"])
async def test_an_edit_dialogs_buttons_are_on_the_screen(size, key):
    # at 80x24 the text box took the room of the buttons: Save/Promote/Cancel were off the screen
    from textual.widgets import Button

    app = make(input="Write about ctx.state")
    async with app.run_test(size=size) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n")
        app.main.conversation.focus()
        app.main.conversation.select(1)  # the writer's draft
        await pilot.press(key)
        await wait_until(pilot, lambda: len(app.screen_stack) > 2 or app.screen is not app.main, what="the dialog")
        await pilot.pause()
        for button in app.screen.query(Button):  # what is drawn at its middle is the button, not its clip
            x, y = button.region.center
            assert app.screen.get_widget_at(x, y)[0] is button, button.label


async def test_a_dialog_opens_over_no_notification_said_before_it():
    """At 80x24 the notice of an m pressed on the wrong message stayed over the promote dialog opened
    next, covering its Cancel button."""
    from textual.widgets import Button

    app = make(input="Write about ctx.state")
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n")
        app.main.conversation.focus()
        app.main.conversation.select(0)  # the user's message: m says to pick an assistant's
        await pilot.press("m")
        await wait_until(pilot, lambda: app.main.query("Toast"), what="the notice")
        app.main.conversation.select(1)
        await pilot.press("m")
        await wait_until(pilot, lambda: app.screen is not app.main, what="the dialog")
        await pilot.pause(0.3)
        assert not app.screen.query("Toast")
        for button in app.screen.query(Button):
            x, y = button.region.center
            assert app.screen.get_widget_at(x, y)[0] is button, button.label
