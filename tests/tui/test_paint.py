"""What keeps redraws short while a run pours events in: the sidebar repaints only the
rows that changed, the scrollbar only when its thumb moves, the message list paints from
its cached lines exactly what Textual's own path paints, and the collector runs between
frames, not inside them."""

from __future__ import annotations

import asyncio
import gc
from types import SimpleNamespace

from textual.app import App
from textual.geometry import Region
from textual.widget import Widget

from flowtui import Message
from flowtui.tui.heap import Heap
from flowtui.tui.widgets.message_list import MessageList
from flowtui.tui.widgets.sidebar import Sidebar


def _view(**ctx):
    return SimpleNamespace(memory=["first note"], tasks=["cite the docs"], state={"rounds": 1, "approved": False},
                           workflow="ReviewWorkflow", last_changed="rounds", ctx=ctx)


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


async def test_scrollbar_is_not_redrawn_while_its_thumb_stays_put():
    pane = MessageList(id="c")
    app = _Pane(pane)
    async with app.run_test(size=(80, 24)) as pilot:
        messages = _messages(2000)
        pane.set_messages(messages, reset=True)
        await pilot.pause()
        bar = pane.vertical_scrollbar
        looks = []
        for extra in range(4):  # following the tail of a long history: the thumb stays at the bottom
            messages.append(Message(role="user", content=f"more {extra}"))
            pane.set_messages(messages)
            await pilot.pause()
            looks.append(bar.render_lines(bar.size.region))
        assert all(lines is looks[0] for lines in looks), [bar._look()]
        drawn = looks[0]
        pane.select(0)  # to the top: the thumb moves, the bar is drawn again
        await pilot.pause()
        assert bar.render_lines(bar.size.region) is not drawn


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_heap_collects_between_frames_and_restores_the_collector():
    heap = Heap()
    was = gc.isenabled()
    heap.start()
    try:
        assert not gc.isenabled()
        gc.collect()
        for _ in range(3):
            _Cycle()  # garbage only a collection frees
        alive = lambda: sum(isinstance(o, _Cycle) for o in gc.get_objects(0))  # noqa: E731
        junk = [[] for _ in range(5 * gc.get_threshold()[0])]  # CPython would have collected by now
        assert alive() == 3
        assert heap.tick() == 0  # a tick collects the young generation
        assert alive() == 0
        assert [heap.tick() for _ in range(5)] == [0, 1, 0, 0, 1]  # and every third one the middle one
        del junk
    finally:
        heap.stop()
    assert gc.isenabled() == was


def test_heap_settle_frees_cycles_handed_off_by_an_earlier_run():
    heap = Heap()
    cycle = _Cycle()
    gc.freeze()  # handed off during a run
    try:
        del cycle
        assert any(isinstance(o, _Cycle) for o in gc.get_objects()) or gc.get_freeze_count() > 0
        heap.settle()  # a new run: thaw, collect, freeze again
        gc.unfreeze()
        assert not any(isinstance(o, _Cycle) for o in gc.get_objects())
    finally:
        gc.unfreeze()


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
        await pilot.click("#sidebar", offset=(5, 1 + row))  # 1: the border above the first row
        await pilot.pause()
        assert sidebar.highlighted_id == "field:rounds"


def test_an_idle_heap_collects_only_when_something_allocates():
    heap = Heap()
    heap.start()
    try:
        gc.collect()
        assert heap.idle_tick() is None  # nothing allocated: nothing collected, nothing frozen
        junk = [[] for _ in range(2 * gc.get_threshold()[0])]
        assert heap.idle_tick() == 0
        del junk
    finally:
        heap.stop()


async def test_an_app_idle_after_a_busy_spell_runs_one_full_collection(monkeypatch):
    from flowtui.tui import app as tui_app
    from conftest import make, paused

    monkeypatch.setattr(tui_app, "SETTLE_AFTER_S", 0.3)
    monkeypatch.setattr(tui_app, "STAY_AWAKE_S", 0.1)
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        settles = []
        settle = app.heap.settle
        app.heap.settle = lambda: (settles.append(1), settle())
        app.heap.handed_off = True  # as after a flood of events
        await asyncio.sleep(1.5)
        assert settles == [1] and not app.heap.handed_off
        await asyncio.sleep(0.6)
        assert settles == [1]  # once per busy spell, not over and over while idle
