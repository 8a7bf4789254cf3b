"""The divergence screen fits an 80x24 terminal: its report scrolls, its buttons and their keys stay
on screen."""

from __future__ import annotations

from conftest import make, paused, wait_until
from test_resume_app import _recorded
from textual.widgets import Button

from flowtui.tui.screens.diverged import DivergedScreen


async def test_the_divergence_screen_keeps_its_buttons_on_an_80x24_screen(tmp_path):
    flow, journal = await _recorded(tmp_path)
    long = "\\n".join(f"Rule {i}: review the draft closely." for i in range(30))  # a report taller than the screen
    flow.write_text(flow.read_text().replace('prompt="You review the draft."', f'prompt="{long}"'))
    app = make(str(flow), resume_from=str(journal))
    async with app.run_test(size=(80, 24)) as pilot:
        await paused(pilot)
        await wait_until(pilot, lambda: isinstance(app.screen, DivergedScreen), what="the divergence screen")
        await pilot.pause()
        screen = app.screen
        dialog = screen.query_one("#diverged-dialog")
        inside = dialog.content_region  # what the dialog shows of its children (within its border)
        assert screen.region.contains_region(dialog.region)
        for name in ("#diverged-continue", "#diverged-cancel"):
            region = screen.query_one(name, Button).region
            assert region.height == 3 and inside.contains_region(region), (name, region, inside)
        hint = screen.query_one("#diverged-keys").region
        assert hint.height >= 1 and inside.contains_region(hint), (hint, inside)
        report = screen.query_one("#diverged-report")
        assert report.region.height >= 3 and report.max_scroll_y > 0  # the report scrolls instead
        # ... from the keys, the focus on a button (↓ did nothing: the values below its fold were out of reach)
        await wait_until(pilot, lambda: "↑↓ scroll" in str(screen.query_one("#diverged-keys").content),
                         what="the keys line to say the report scrolls")
        assert hint.height == 1 and isinstance(app.focused, Button)
        await pilot.press("down")
        assert report.scroll_y == 1, report.scroll_y
        await pilot.press("pagedown")
        assert report.scroll_y == min(6, report.max_scroll_y) > 1, (report.scroll_y, report.max_scroll_y)
        await pilot.press("up")
        assert report.scroll_y == min(6, report.max_scroll_y) - 1, report.scroll_y
        await pilot.press("x")  # the keys still work
        await wait_until(pilot, lambda: not isinstance(app.screen, DivergedScreen), what="the screen to close")


async def test_one_changed_prompt_is_reported_whole_on_an_80x24_screen(tmp_path):
    """At 80 columns the dialog was 58 wide: the report wrapped to more rows than it had, and the
    changed field's values were scrolled out of sight."""
    flow, journal = await _recorded(tmp_path)
    flow.write_text(flow.read_text().replace('prompt="You review the draft."',
                                             'prompt="You review the draft closely."'))
    app = make(str(flow), resume_from=str(journal))
    async with app.run_test(size=(80, 24)) as pilot:
        await paused(pilot)
        await wait_until(pilot, lambda: isinstance(app.screen, DivergedScreen), what="the divergence screen")
        await pilot.pause()
        report = app.screen.query_one("#diverged-report")
        assert report.max_scroll_y == 0, report.virtual_size  # nothing to scroll to: all of it in view
        assert app.screen.query_one("#diverged-keys").region.height == 1
        assert "↑↓" not in str(app.screen.query_one("#diverged-keys").content)  # (nothing to scroll)
