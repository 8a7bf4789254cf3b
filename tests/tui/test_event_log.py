"""The event log's rows: one a line, in columns that stay aligned whatever the run's length."""

from __future__ import annotations

import json

from textual.app import App, ComposeResult

from flowtui.tui.widgets.event_log import EventLog


def line(seq: int) -> bytes:
    return json.dumps({"seq": seq, "ts": 0.0, "run_id": "r", "node_id": None, "parent_id": None,
                       "origin": "tool:flood", "type": "ctx.set", "name": "counter", "value": seq},
                      separators=(",", ":")).encode()


class Log(App):
    def compose(self) -> ComposeResult:
        yield EventLog()


async def test_the_columns_stay_aligned_past_a_million_events():
    """From 1,000,000 on, a seq took a seventh digit and pushed its row's columns one cell right."""
    app = Log()
    async with app.run_test(size=(100, 10)) as pilot:
        log = app.query_one(EventLog)
        log.set_events([line(seq) for seq in range(999_996, 1_000_004)])
        log.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        rows = [log.render_line(y).text for y in range(8)]
        assert rows[0].split()[0] == "999996" and rows[-1].split()[0] == "1000003", rows
        assert len({row.index("ctx.set") for row in rows}) == 1, rows
        assert len({row.index("counter") for row in rows}) == 1, rows
