"""What keeps redraws short while a run pours events in: the sidebar repaints only the
rows that changed, and the message list paints from its cached lines exactly what
Textual's own path paints."""

from __future__ import annotations

from types import SimpleNamespace

from textual.app import App
from textual.geometry import Region
from textual.widget import Widget

from flowtui import Message
from flowtui.tui.widgets.message_list import MessageList
from flowtui.tui.widgets.sidebar import Sidebar


def _view(**ctx):
    return SimpleNamespace(memory=["first note"], tasks=["cite the docs"], state={"rounds": 1, "approved": False},
                           workflow="ReviewWorkflow", last_changed="rounds", ctx=ctx, data={})


class _Pane(App):
    def __init__(self, widget: Widget) -> None:
        super().__init__()
        self.widget = widget

    def compose(self):
        yield self.widget


async def test_sidebar_repaints_only_the_row_whose_value_changed():
    sidebar = Sidebar(id="sidebar")
    app = _Pane(sidebar)
    async with app.run_test(size=(60, 20)) as pilot:
        sidebar.sync(_view(counter=1))
        await pilot.pause()
        before = dict(sidebar._strips)
        assert len(before) == len(sidebar.ids)  # every row painted once
        row = next(i for i, (_, text) in enumerate(sidebar._rows) if "counter" in text.plain)
        repainted: list[Region] = []
        original = sidebar.refresh
        sidebar.refresh = lambda *regions, **kw: (repainted.extend(regions), original(*regions, **kw))[1]
        sidebar.sync(_view(counter=2))
        assert repainted == [Region(0, row, sidebar.size.width, 1)]
        await pilot.pause()
        assert "counter = 2" in sidebar._strips[row].text
        assert all(sidebar._strips[i] is strip for i, strip in before.items() if i != row)


async def test_sidebar_cursor_skips_headers_and_names_the_row():
    sidebar = Sidebar(id="sidebar")
    app = _Pane(sidebar)
    async with app.run_test(size=(60, 20)) as pilot:
        sidebar.sync(_view())
        sidebar.focus()
        await pilot.pause()
        assert sidebar.highlighted_id == "memory:0"
        await pilot.press("down")
        assert sidebar.highlighted_id == "tasks:0"  # the "Tasks" header is skipped
        await pilot.press("down", "down")
        assert sidebar.highlighted_id == "field:approved"
        await pilot.press("end")
        assert sidebar.highlighted_id == "field:approved"  # ctx rows cannot be picked
        assert sidebar.select_id("field:rounds") and sidebar.highlighted_id == "field:rounds"
        assert not sidebar.select_id("field:nope")


def _messages(n: int) -> list[Message]:
    return [Message(role="assistant" if i % 2 else "user", content=f"message {i}\nsecond line") for i in range(n)]


async def test_message_list_paints_the_same_lines_as_textuals_own_path():
    pane = MessageList(id="c")
    app = _Pane(pane)
    async with app.run_test(size=(80, 24)) as pilot:
        pane.set_messages(_messages(40), reset=True)
        pane.select(30)
        await pilot.pause()
        crop = Region(0, 0, pane.region.width, pane.region.height)
        ours = pane.render_lines(crop)
        pane._styles_cache.clear()
        textuals = Widget.render_lines(pane, crop)
        assert [s.text for s in ours] == [s.text for s in textuals]
        assert [list(s) for s in ours] == [list(s) for s in textuals]  # the same segments and styles
        part = Region(3, 2, 20, 5)
        assert [list(s) for s in pane.render_lines(part)] == [list(s) for s in Widget.render_lines(pane, part)]


class _Cycle:
    def __init__(self) -> None:
        self.me = self


async def test_a_full_block_cache_drops_its_oldest_blocks_not_all_of_them():
    from flowtui.tui.widgets import message_list

    pane = MessageList(id="c")
    app = _Pane(pane)
    async with app.run_test(size=(80, 24)) as pilot:
        pane.set_messages(_messages(message_list._CACHE_LIMIT + 200), reset=True)
        await pilot.pause()
        for i in range(message_list._CACHE_LIMIT + 200):
            pane._block(i)
        cached = len(pane._cache)
        assert message_list._CACHE_LIMIT - message_list._EVICT_BATCH <= cached <= message_list._CACHE_LIMIT
        assert message_list._CACHE_LIMIT + 199 in pane._cache and 0 not in pane._cache  # oldest went first


async def test_a_click_on_a_sidebar_row_picks_that_row():
    from conftest import make, paused

    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        sidebar = app.main.sidebar
        row = sidebar.ids.index("field:rounds")
        await pilot.click("#sidebar", offset=(5, row))  # the border is the box's: row 0 is the first line
        await pilot.pause()
        assert sidebar.highlighted_id == "field:rounds"


