"""What the model sees says where each block came from: the event, its origin and its size, and
`enter` on a block shows that event in the event log. Edits keep the provenance of what they
did not touch."""

from __future__ import annotations

from conftest import ended, make, paused, press_and_pause, wait_until
from loopback_openai import LoopbackOpenAI, reply

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


def test_an_undone_edit_gives_back_the_provenance_of_what_it_brings_back():
    """A call edited then undone: the assistant message back as the agent wrote it was said to be the
    person's (#40 · user)."""
    from flowtui.tui.widgets.event_log import summarize

    said = {"role": "assistant", "content": "", "agent": "A",
            "tool_calls": [{"id": "c1", "name": "note", "args": {"text": "as the model asked"}}]}
    edited = {**said, "tool_calls": [{"id": "c1", "name": "note", "args": {"text": "EDITED"}}]}
    view = RunView()
    view.apply(_ev(1, "run.start", "runtime", workflow="W", input="x"))
    view.apply(_ev(2, "state.append", "agent:A", bucket="history", item=said))
    view.apply(_ev(3, "state.set", "user", bucket="history", items=[edited], note="edited the call"))
    view.apply(decision := _ev(4, "tool.decision", "user", tool="note", decision="edited",
                               args={"text": "EDITED"}, before={"text": "as the model asked"}))
    assert view.shown.history_from == [(3, "user")]
    view.apply(_ev(5, "state.set", "user", bucket="history", items=[said], note="undone: edited the call"))
    view.apply(undo := _ev(6, "tool.decision", "user", tool="note", decision="edited", reason="undone",
                           args={"text": "as the model asked"}, before={"text": "EDITED"}))
    assert view.shown.history_from == [(2, "agent:A")]
    # the latest copy taken out comes back: added again by the person, deleted, then the delete undone
    view.apply(_ev(7, "state.append", "tool:t", bucket="memory", item="x"))
    view.apply(_ev(8, "state.set", "user", bucket="memory", items=[], note="deleted memory[0]"))
    view.apply(_ev(9, "state.append", "user", bucket="memory", item="x"))
    view.apply(_ev(10, "state.set", "user", bucket="memory", items=[], note="deleted memory[0]"))
    view.apply(_ev(11, "state.set", "user", bucket="memory", items=["x"], note="undone: deleted memory[0]"))
    assert view.shown.memory_from == [(9, "user")]
    # the log says which is which, by what changed (the old arguments first, cut at the line's end, read alike)
    assert summarize(decision) == 'edited the call of note: text "as the model asked" → "EDITED"'
    assert summarize(undo) == 'undid the edit of the call of note: text "EDITED" → "as the model asked"'


async def test_enter_on_a_memory_item_in_the_sidebar_shows_the_event_that_put_it_there():
    app = make(input="go")
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        await pilot.press("A")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "TextDialog", what="the add dialog")
        app.screen.query_one("Input").value = "a fact"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.client.view.memory == ["a fact"], what="memory +1")
        added = next(ev for ev in app.client.events if ev.type == "state.append" and ev.bucket == "memory")
        sidebar = app.main.sidebar
        sidebar.focus()
        await pilot.pause()
        assert sidebar.select_id("memory:0")
        await pilot.press("enter")
        log = app.main.pane_widget("events")
        await wait_until(pilot, lambda: log is not None and app.main.current_view == "events"
                         and b'"seq":%d,' % added.seq in log.events[log.cursor_row], what="its event in the log")


async def test_left_looks_back_at_earlier_events_while_the_run_goes_on_and_esc_returns():
    app = make(input="go")
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n", "n")
        live = [m.role for m in app.client.view.history]
        n = len(app.client.lines)
        draft = next(ev for ev in app.client.events if ev.type == "state.append" and ev.origin == "agent:Writer")
        for _ in range(n - draft.seq):  # back to just after the writer's draft
            await pilot.press("left")
        await pilot.pause()
        assert app.main.looking[1] == draft.seq
        assert [m.role for m in app.main.conversation.messages] == ["user", "assistant"]
        await pilot.press("u")  # edits apply to the live run only
        await pilot.pause()
        assert app.client.view.user_edits == 0
        await press_and_pause(pilot, "s")  # the run goes on meanwhile
        assert app.main.looking is not None
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.main.looking is None
                         and len(app.main.conversation.messages) >= len(live), what="the live run again")


async def test_looking_back_far_into_a_long_run_shows_the_event_log_as_it_was(tmp_path):
    """The app keeps a run's lines packed a thousand at a time: looking back into an early pack, and
    opening its events, gives the lines the run sent."""
    flow = tmp_path / "chatty.py"
    flow.write_text("from flowtui import FunctionProvider, agent, workflow\n"
                    "class A:\n"
                    "    def after_response(self, response, ctx):\n"
                    "        for i in range(3000):\n"
                    "            ctx.counter = i\n"
                    "A = agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')(A)\n"
                    "@workflow(steps=[A])\nclass W:\n    pass\n")
    app = make(str(flow), input="go", journal=None)
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)
        n = len(app.client.lines)
        assert n > 3000
        values = [ev.value for ev in app.client.events if ev.type == "ctx.set" and ev.name == "counter"]
        assert values == list(range(3000))  # every line, in order, through the packs
        app.action_view("events")
        app.action_look(-(n - 700))  # into the first pack
        await pilot.pause()
        log = app.main.pane_widget("events")
        assert app.main.looking[1] == 700 and len(log.events) == 700
        assert b'"seq":700,' in log.events[699] and b'"seq":699,' in log.events[698]


def _sizes(widget) -> list[str]:
    """Each block's size as view 2 shows it (the tag's last part)."""
    return [widget.tags[i].rsplit(" · ", 1)[-1] for i in range(len(widget.messages))]


async def _asked(pilot) -> None:
    """The run was asked to count what the model sees, and has answered."""
    app = pilot.app
    await wait_until(pilot, lambda: app.client.tokens.asked(app.client.view)
                     and not any(w.group == "tokens" and not w.is_finished for w in app.workers),
                     timeout=60, what="the run's answer to count")


async def test_a_litellm_model_shows_exact_sizes_by_its_tokenizer(monkeypatch):
    """An OpenAI model through litellm: every block's size and the call's total are the run's own
    count with the model's tokenizer, unmarked; the title names the tokenizer."""
    from flowtui import LiteLLMProvider

    with LoopbackOpenAI() as server:
        server.script(reply("", tool_calls=[{"name": "somar", "args": {"a": 2, "b": 3}}]), reply("2 + 3 = 5"))
        monkeypatch.setenv("FLOWCAPTURE_API_BASE", server.base_url)
        app = make("tests/tui/flows/litellm_calc.py", input="quanto é 2+3?", memory=["responda em português"])
        async with app.run_test(size=(160, 48)) as pilot:
            await paused(pilot)
            await press_and_pause(pilot, "n")  # one turn: the tool call and its result
            await pilot.press("2")
            await _asked(pilot)
            sees = app.main.pane_widget("model-sees")
            seen = app.client.view.model_sees()
            assert [m.role for m in seen] == ["system", "system", "user", "assistant", "tool"]
            counted = app.client.tokens.of(app.client.view)
            assert counted is not None and counted.tokenizer == "o200k_base"
            assert _sizes(sees) == [f"{n} tok" for n in counted.messages]  # no ~: exact
            assert counted.messages == LiteLLMProvider("openai/gpt-4o-mini").count_tokens(seen, []).messages
            title = str(app.main.query_one("#views").border_title)
            assert f"(5 messages, {counted.total:,} tokens, gpt-4o-mini tokenizer)" in title and "~" not in title
            await press_and_pause(pilot, "s")  # the next pause: asked again, exact again
            await _asked(pilot)
            assert app.client.tokens.of(app.client.view) is not None
            assert not any("~" in size for size in _sizes(sees))


async def test_a_model_without_a_tokenizer_shows_estimates_marked_as_such():
    app = make(input="go")  # FunctionProvider models: nothing to count with
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n")
        await pilot.press("2")
        await _asked(pilot)
        sees = app.main.pane_widget("model-sees")
        assert app.client.tokens.of(app.client.view) is None
        assert len(sees.messages) == 3 and all(size.startswith("~") and size.endswith(" tok") for size in _sizes(sees))
        title = str(app.main.query_one("#views").border_title)
        assert "(3 messages, ~" in title and "tokens, estimate)" in title


def test_the_call_size_in_the_pane_title_is_kept_whole_where_the_pane_is_narrow():
    from flowtui.runtime.providers.base import TokenCount
    from flowtui.tui.screens.panes import count_title

    view = RunView()
    view.apply(_ev(1, "run.start", "runtime", workflow="W", input="x", memory=["a fact"]))
    view.apply(_ev(2, "state.append", "input", bucket="history",
                   item={"role": "user", "content": "word " * 3000}))
    counted = TokenCount(model="openai/gpt-4o-mini", tokenizer="o200k_base", messages=[9, 3001], total=3012)
    assert count_title(view, "model-sees", counted) == " (2 messages, 3,012 tokens, gpt-4o-mini tokenizer)"
    assert count_title(view, "model-sees", counted, room=46) == " (2 msgs, 3,012 tok)"  # no ~: counted
    estimated = count_title(view, "model-sees", None, room=46)
    assert estimated.startswith(" (2 msgs, ~") and estimated.endswith(" tok)")  # ~: an estimate
    assert count_title(view, "model-sees", None, room=200).endswith(" tokens, estimate)")


def test_a_text_cut_on_the_way_to_the_app_is_estimated_whole():
    """The model gets a 50 MB tool output whole: its size is estimated from the length the cut note
    gives, not from the 64 KiB the app holds."""
    from flowtui.tui.screens.panes import count_title

    view = RunView()
    view.apply(_ev(1, "run.start", "runtime", workflow="W", input="x", memory=[]))
    cut = ("x" * 65_536 + "\n… [cut on the way to the app: 50,000,000 characters in all (event 2, item.content); "
           "o opens the whole text]")
    view.apply(_ev(2, "state.append", "input", bucket="history", item={"role": "user", "content": cut}))
    title = count_title(view, "model-sees", None, room=200)
    tokens = int(title.split("~")[1].split(" ")[0].replace(",", ""))
    assert 12_400_000 <= tokens <= 12_600_000, title
