"""What the model sees says where each block came from: the event, its origin and its size, and
`enter` on a block shows that event in the event log. Edits keep the provenance of what they
did not touch."""

from __future__ import annotations

from conftest import make, paused, press_and_pause, wait_until

from flowtui.runtime.fold import RunView


async def test_each_block_names_its_event_origin_and_tokens_and_enter_shows_the_event():
    app = make(input="go", memory=["fact one"])
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n")  # the writer's draft is in; before the reviewer
        await pilot.press("2")
        sees = app.main.pane_widget("model-sees")
        await wait_until(pilot, lambda: sees is not None and len(sees.tags) == 4, what="view 2 drawn")
        events = {ev.seq: ev for ev in app.client.events}
        draft = next(ev for ev in events.values() if ev.type == "state.append" and ev.bucket == "history"
                     and ev.origin == "agent:Writer")
        assert sees.tags[3].startswith(f"#{draft.seq} · agent:Writer · ") and sees.tags[3].endswith(" tok")
        assert sees.labels[1].startswith("system · memory and tasks (#1 input")  # seeded with --memory
        assert "~" in str(app.main.query_one("#views").border_title)  # the call's total, in tokens
        sees.focus()
        sees.select(3)
        await pilot.press("enter")
        log = app.main.pane_widget("events")
        await wait_until(pilot, lambda: log is not None and app.main.current_view == "events"
                         and log.cursor_row >= 0 and log.events and b'"seq":%d,' % draft.seq in log.events[log.cursor_row],
                         what="the draft's event under the event log's cursor")


def _ev(seq, type, origin, **fields):
    import json

    from flowtui.runtime.events import parse_event

    return parse_event(json.dumps({"seq": seq, "ts": 0.0, "run_id": "r", "node_id": None, "parent_id": None,
                        "origin": origin, "type": type, **fields}))


def test_a_bucket_replaced_whole_keeps_the_provenance_of_the_items_it_kept():
    view = RunView()
    view.apply(_ev(1, "run.start", "runtime", workflow="W", input="x", memory=["a"]))
    view.apply(_ev(2, "state.append", "tool:t", bucket="memory", item="b"))
    view.apply(_ev(3, "state.append", "user", bucket="memory", item="c"))
    view.apply(_ev(4, "state.set", "user", bucket="memory", items=["a", "c", "new"]))  # b deleted, one added
    assert view.shown.memory_from == [(1, "input"), (3, "user"), (4, "user")]
