"""What a message block shows: streamed text as it arrives, reasoning, the agent that spoke."""

from __future__ import annotations


import flowcapture
from conftest import ended, make, paused, press_and_pause, wait_until
from textual.geometry import Region

STREAM = "tests/tui/flows/stream_fn.py"


def pane_text(pane) -> str:
    """The conversation pane's lines as they would be painted now."""
    return "\n".join(strip.text for strip in pane.render_lines(Region(0, 0, pane.size.width, pane.size.height)))


async def test_streamed_text_shows_live_and_is_replaced_by_the_message(monkeypatch):
    monkeypatch.setenv("FLOWCAPTURE_GATES", "1")
    app = make(STREAM, input="hi")
    async with app.run_test(size=(120, 30)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "s")  # before the model call
        pane = app.main.conversation
        await pilot.press("s")
        await wait_until(pilot, lambda: "streaming…" in pane_text(pane), what="the first fragment")
        text = pane_text(pane)
        assert "assistant · Streamer" in text and "Hel" in text and "Hello, wor" not in text
        assert len(pane.messages) == 1 and pane.cursor == 0  # provisional: not a message, not selectable
        flowcapture.open_gate(0)
        await wait_until(pilot, lambda: "Hello, wor" in pane_text(pane), what="the second fragment")
        assert "Hello, world" not in pane_text(pane)
        flowcapture.open_gate(1)
        await wait_until(pilot, lambda: "Hello, world: ctx.state" in pane_text(pane), what="the third fragment")
        assert "holds history" not in pane_text(pane)
        flowcapture.open_gate(2)
        await wait_until(pilot, lambda: "Hello, world: ctx.state holds history." in pane_text(pane),
                         what="the last fragment")
        assert app.client.view.streaming == "Hello, world: ctx.state holds history."
        flowcapture.open_gate(3)  # the reply lands in the history: the provisional block gives way to message #1
        await ended(pilot)
        text = pane_text(pane)
        assert "streaming…" not in text and "#1" in text
        assert text.count("Hello, world: ctx.state holds history.") == 1
        assert [m.role for m in pane.messages] == ["user", "assistant"]


async def test_reasoning_is_collapsed_and_enter_expands_it():
    app = make(STREAM, input="hi")
    async with app.run_test(size=(120, 30)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)
        pane = app.main.conversation
        pane.focus()
        pane.select(1)
        await pilot.pause()
        text = pane_text(pane)
        assert "▸ reasoning (2 lines, enter expands)" in text
        assert "The user wants a greeting." not in text
        await pilot.press("enter")
        text = pane_text(pane)
        assert "The user wants a greeting." in text and "Keep it short." in text
        assert text.index("Keep it short.") < text.index("Hello, world")  # reasoning first, then the reply
        await pilot.press("enter")
        assert "The user wants a greeting." not in pane_text(pane)
        # what the model sees: the reasoning is kept in the history, not sent (it showed as part of it)
        await pilot.press("2")
        await pilot.pause()
        sees = pane_text(app.main.query_one("#model-sees"))
        assert "▸ reasoning, not sent to the model (2 lines" in sees and "Hello, world" in sees, sees


async def test_assistant_header_names_its_agent_and_b_breaks_on_that_agent():
    app = make(input="go")  # the review flow: Writer, then Reviewer with tool calls
    async with app.run_test(size=(120, 36)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n", "n", "s", "s")
        pane = app.main.conversation
        text = pane_text(pane)
        assert "assistant · Writer" in text and "assistant · Reviewer" in text
        assert [m.agent for m in pane.messages[:3]] == [None, "Writer", "Reviewer"]
        pane.select(1)  # the writer's draft
        await pilot.press("b")
        assert app.client.breakpoints == {"Writer"}
        pane.select(2)  # the reviewer's reply (it has tool calls: still its agent)
        await pilot.press("b")
        assert app.client.breakpoints == {"Writer", "Reviewer"}
        await pilot.press("b")
        assert app.client.breakpoints == {"Writer"}


async def test_b_where_the_run_is_paused_sets_a_breakpoint_the_run_obeys():
    app = make(input="go")
    async with app.run_test(size=(120, 36)) as pilot:
        await paused(pilot)  # before Writer
        await pilot.press("b")
        assert app.client.breakpoints == {"Writer"}
        await press_and_pause(pilot, "c")  # the run's process holds it: round 2 stops before Writer
        pause = app.client.view.pause
        assert (pause.point, pause.name, pause.reason) == ("agent", "Writer", "breakpoint")
        assert app.client.view.path() == ["ReviewWorkflow", "loop 2/4", "Writer"]


def test_a_line_of_megabytes_is_drawn_from_its_head_saying_how_long_it_is(monkeypatch):
    """A 5 MB single-line text draws its first characters and the line's real length; what is drawn
    is made safe from the head alone, and a credential the cut falls inside stays hidden."""
    from flowtui.runtime.messages import Message
    from flowtui.tui.shown import shown_head
    from flowtui.tui.widgets.blocks import LINE_CHARS, render_block

    key = "sk-proj-" + "A1b2C3d4" * 6
    text = "x" * (LINE_CHARS - 10) + key + "y" * 5_000_000
    drawn = shown_head(text, LINE_CHARS)
    assert len(drawn) < 10_000 and key[:12] not in drawn and "[redacted]" in drawn
    from rich.console import Console

    strips = render_block(Console(width=100), Message(role="tool", content=text, tool_name="t", tool_call_id="c"),
                          0, 100, expanded=True)
    plain = "".join(strip.text for strip in strips)
    assert f"(+{len(text) - LINE_CHARS:,} characters on this line)" in plain
    assert key[:12] not in plain


def test_arguments_that_were_no_json_are_drawn_as_the_model_wrote_them():
    """They were drawn eco({"__raw_arguments__": "{not json"}): a key of flowtui's, as if the model had
    written it."""
    from rich.console import Console

    from flowtui.runtime.messages import Message, ToolCall
    from flowtui.tui.widgets.blocks import render_block

    call = ToolCall(name="eco", args={"__raw_arguments__": '{"texto": "cut'}, id="c1")
    strips = render_block(Console(width=100), Message(role="assistant", tool_calls=(call,)), 0, 100, expanded=False)
    plain = "".join(strip.text for strip in strips)
    assert '→ eco({"texto": "cut ‹not JSON, as the model wrote it›)' in plain
    assert "__raw_arguments__" not in plain


def test_an_empty_reply_and_a_reply_of_spaces_are_said_and_told_apart():
    """Both drew their header alone, as a block whose text had not been drawn would."""
    from rich.console import Console

    from flowtui.runtime.messages import Message, ToolCall
    from flowtui.tui.widgets.blocks import render_block

    def drawn(msg):
        return "\n".join(strip.text for strip in render_block(Console(width=80), msg, 0, 80, expanded=False))

    assert "(no text)" in drawn(Message(role="assistant", content="", agent="A"))
    assert "(white space only: 3 characters)" in drawn(Message(role="assistant", content="   ", agent="A"))
    assert "(no text)" in drawn(Message(role="tool", content="", tool_name="t", tool_call_id="c"))
    calls = drawn(Message(role="assistant", content="", tool_calls=(ToolCall(name="t", args={}, id="c"),)))
    assert "(no text)" not in calls and "→ t({})" in calls  # a reply of calls alone is no empty reply
    assert "(no text)" not in drawn(Message(role="assistant", content="ok", agent="A"))


def test_a_text_cut_on_the_way_to_the_app_says_its_whole_length_not_the_pieces():
    """What the app holds of a 50 MB output is its first 64 KiB and a note; the block says 50,000,000
    characters (collapsed and expanded), never the held piece's length as the line's."""
    from rich.console import Console

    from flowtui.runtime.messages import Message
    from flowtui.tui.widgets.blocks import render_block

    held = "x" * 65_536 + ("\n… [cut on the way to the app: 50,000,000 characters in all (event 7, item.content); "
                           "o opens the whole text]")
    msg = Message(role="tool", content=held, tool_name="t", tool_call_id="c")
    for expanded in (False, True):
        strips = render_block(Console(width=100), msg, 2, 100, expanded=expanded)
        plain = "\n".join(strip.text for strip in strips)
        assert "50,000,000 characters in all" in plain, expanded
        assert "63,536" not in plain and "more line" not in plain, expanded
        assert len(strips) < 60  # the head, not 64 KiB of it wrapped


async def test_a_reply_of_megabytes_streams_in_without_holding_a_key_up(monkeypatch):
    # 20 MB in 320 pieces: the app copied the whole text at each piece and drew all of it at each
    # frame, so it froze, x and q dead, for minutes at 30 MB; now it draws the reply's end
    monkeypatch.setenv("FLOWCAPTURE_GATES", "1")
    monkeypatch.setenv("FLOWCAPTURE_BIG_STREAM", "20")
    app = make(STREAM, input="hi")
    async with app.run_test(size=(120, 30)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        pane = app.main.conversation
        await wait_until(pilot, lambda: "piece 000319" in pane_text(pane), timeout=60, what="the last piece")
        assert app.client.view.streaming_length == 320 * 65_536
        await pilot.press("3")  # the event log, then back: each drawn while the reply is there
        await wait_until(pilot, lambda: app.main.current_view == "events", timeout=30, what="the event log")
        await pilot.press("1")
        await wait_until(pilot, lambda: "piece 000319" in pane_text(pane), timeout=30, what="the conversation")
        await pilot.press("x")
        await wait_until(pilot, lambda: app.client.view.status == "stopped", timeout=30, what="the stop")


def test_a_streaming_block_draws_the_end_of_the_reply_and_counts_the_rest():
    from rich.console import Console

    from flowtui.tui.widgets.blocks import BLOCK_CHARS, STREAMING_CHARS, Provisional, render_block

    text = "".join(f"line {k:06d}\n" for k in range(200_000))  # 2.4 MB so far
    block = Provisional(text[-STREAMING_CHARS:], "Writer", length=len(text))
    lines = [strip.text for strip in render_block(Console(), block, 0, 80, expanded=False, provisional=True)]
    assert "streaming…" in lines[0]
    assert f"… {len(text):,} characters so far, the last ones below" in lines[1]
    assert "line 199999" in "".join(lines[-3:]) and "line 000000" not in "".join(lines)
    assert len(lines) <= BLOCK_CHARS // 10


async def test_a_reply_cut_short_by_a_stop_stays_shown_as_cut_short(monkeypatch):
    monkeypatch.setenv("FLOWCAPTURE_GATES", "1")
    app = make(STREAM, input="hi")
    async with app.run_test(size=(120, 30)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        pane = app.main.conversation
        await wait_until(pilot, lambda: "streaming…" in pane_text(pane), what="the first fragment")
        await pilot.press("x")  # the model is waiting at gate 0, its reply begun
        await wait_until(pilot, lambda: app.client.view.status == "stopped", timeout=30, what="the stop")
        await wait_until(pilot, lambda: "stopped mid-reply" in pane_text(pane), what="the cut-short block")
        text = pane_text(pane)
        assert "streaming…" not in text and "Hel" in text  # what arrived is still there, for what it is


async def test_a_reply_cut_short_is_journaled_and_replays_as_it_showed_live(monkeypatch, tmp_path):
    """What arrived of a streamed reply that a stop cut short was not journaled (its pieces are not):
    the replay showed nothing of what the person had seen. Its chat node's end now keeps it."""
    from flowtui.runtime.journal import read_journal
    from flowtui.tui.replay import make_replay

    monkeypatch.setenv("FLOWCAPTURE_GATES", "1")
    journal = tmp_path / "j.jsonl"
    app = make(STREAM, input="hi", journal=str(journal))
    async with app.run_test(size=(120, 30)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        pane = app.main.conversation
        await wait_until(pilot, lambda: "streaming…" in pane_text(pane), what="the first fragment")
        flowcapture.open_gate(0)
        await wait_until(pilot, lambda: "Hello, wor" in pane_text(pane), what="the second fragment")
        await pilot.press("x")  # the model is waiting at gate 1, two fragments in
        await wait_until(pilot, lambda: app.client.view.status == "stopped", timeout=30, what="the stop")
    chat = [ev for ev in read_journal(journal) if ev.type == "node.end" and ev.kind == "chat"]
    assert [(ev.status, ev.data.get("partial")) for ev in chat] == [("stopped", "Hello, wor")]
    replay = make_replay(journal)
    async with replay.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        text = pane_text(replay.main.query_one("#conversation"))
        assert "stopped mid-reply" in text and "Hello, wor" in text, text
