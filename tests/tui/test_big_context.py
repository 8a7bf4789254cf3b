"""What the model sees with a huge memory-and-tasks note: each block draws its first lines and
counts the rest, so view 2 opens at once; ``o`` opens the block's whole text, exactly what is sent
(items cut on their way to the app fetched whole)."""

from __future__ import annotations

import re

import pytest
from conftest import FLOWS, make, paged, paused, press_and_pause, wait_until

from flowtui.runtime.conversation import system_note
from flowtui.tui.shown import shown
from flowtui.tui.widgets.blocks import BLOCK_LINES


@pytest.fixture
def big(monkeypatch: pytest.MonkeyPatch) -> str:
    """One memory item of 10,000 lines and 5,000 tasks (the worker reads the sizes from its environment)."""
    monkeypatch.setenv("BIG_MEMORY_ITEMS", "1")
    monkeypatch.setenv("BIG_MEMORY_LINES", "10000")
    monkeypatch.setenv("BIG_TASKS", "5000")
    monkeypatch.setenv("PAGER", "cat")
    return str(FLOWS / "big_context.py")


async def test_view_2_draws_the_first_lines_of_a_huge_note_and_o_opens_it_whole(big):
    app = make(big, input="go")
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot, timeout=60)
        await press_and_pause(pilot, "n")  # the first turn filled memory and tasks
        await wait_until(pilot, lambda: len(app.client.view.tasks) == 5000, timeout=60, what="the tasks")
        await pilot.press("2")  # a hang here (every line of the note drawn) times the wait out
        sees = app.main.pane_widget("model-sees")
        await wait_until(pilot, lambda: sees is not None and len(sees.tags) == 4, timeout=60, what="view 2 drawn")
        note = app.client.view.model_sees()[1]  # the memory item reached the app cut (it says so)
        sent = system_note(["\n".join(f"line {i}" for i in range(10_000))], [f"task {i}" for i in range(5000)])
        assert note.role == "system" and "cut on the way to the app" in note.content
        assert re.fullmatch(r"system · memory and tasks \(#\d+ \S+, .*, … 4,989 more\)", sees.labels[1])  # 5,001 items

        drawn = [strip.text.rstrip() for strip in sees._block(1)]
        hidden = len(note.content.split("\n")) - BLOCK_LINES
        assert len(drawn) <= BLOCK_LINES + 3  # header, the first lines, the count of the rest, the gap
        # the lines the app holds are counted, and what it does not hold said (it said "2,572 more lines" of 9,900)
        left = re.search(rf"… at least {hidden:,} more lines, and about ([\d,]+) characters the app does not hold "
                         r"\(o opens it whole\)$", drawn[-2])
        assert left is not None, drawn[-2]
        item = len("\n".join(f"line {i}" for i in range(10_000)))
        assert item - 70_000 < int(left.group(1).replace(",", "")) < item - 60_000, (left.group(1), item)
        assert drawn[0].endswith(sees.tags[1])  # its size stays on the header, the long label cut short

        sees.focus()
        sees.select(1)
        assert await paged(pilot) == shown(sent)  # what the model is sent, every line

        for key in ("down", "end", "home", "1", "2"):  # the keys answer (a hang times the test out)
            await pilot.press(key)
        await wait_until(pilot, lambda: app.main.current_view == "model-sees", timeout=30, what="view 2 again")


async def test_a_memory_item_cut_on_the_way_is_drawn_where_it_is_and_the_note_goes_on(monkeypatch, big):
    """One item of the note reached the app cut: view 2 draws its start and says, where it was cut, how
    long it is; the items and tasks after it are drawn too, and the note's size counts it whole."""
    monkeypatch.setenv("BIG_LONG_ITEM", "100000")
    monkeypatch.setenv("BIG_MEMORY_LINES", "3")
    monkeypatch.setenv("BIG_TASKS", "3")
    app = make(big, input="go")
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot, timeout=60)
        await press_and_pause(pilot, "n")
        await wait_until(pilot, lambda: len(app.client.view.tasks) == 3, timeout=60, what="the tasks")
        await pilot.press("2")
        sees = app.main.pane_widget("model-sees")
        await wait_until(pilot, lambda: sees is not None and len(sees.tags) == 4, timeout=60, what="view 2 drawn")
        drawn = "\n".join(strip.text.rstrip() for strip in sees._block(1))
        assert "START-yyy" in drawn
        assert "100,000 characters in all" in drawn and drawn.index("START-") < drawn.index("100,000 characters")
        for after in ("line 2", "Tasks:", "- task 2"):  # what follows the cut item is drawn too
            assert after in drawn and drawn.index("100,000 characters") < drawn.index(after), after
        assert "more line" not in drawn
        tokens = int(re.search(r"~([\d,]+) tok", sees.tags[1]).group(1).replace(",", ""))
        assert 24_000 < tokens < 26_500  # 100,000 characters at about four a token, not the 64 KiB held
