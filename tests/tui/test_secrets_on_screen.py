"""A credential the model, a tool or the flow echoes never reaches the screen, in any view,
and editing a text that holds one keeps it."""

from __future__ import annotations

from pathlib import Path

import pytest
import flowcapture
from conftest import ended, make, paused, wait_until

from flowtui.runtime.secrets import environment_secrets
from flowtui.tui.screens.dialogs import TextDialog

KEY = "sk-test-FAKEKEY0123456789abcdef"


@pytest.fixture
def leaky_key(monkeypatch):
    monkeypatch.setenv("LEAKY_API_KEY", KEY)
    environment_secrets.cache_clear()  # the app reads the environment once
    yield KEY
    environment_secrets.cache_clear()


def _screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_no_view_draws_the_key(leaky_key):
    app = make("tests/tui/flows/leaky.py", input=f"please use {leaky_key}")
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)
        view = app.client.view
        _, sent = flowcapture.requests()[-1]
        assert leaky_key in sent[1].content and any(leaky_key in m.content for m in sent)  # the run keeps it...
        assert leaky_key not in repr(view.history) + repr(view.memory) + repr(view.ctx)  # ...the app never has it
        for key in ("1", "2", "3", "4"):
            await pilot.press(key)
            await pilot.pause(0.1)
            app.main.conversation.action_toggle()  # expanded blocks too (reasoning, tool arguments)
            await pilot.pause(0.1)
            text = _screen_text(app)
            assert leaky_key not in text, key
            assert "[redacted]" in text, key


async def test_an_edit_keeps_the_key_it_did_not_show(leaky_key):
    app = make("tests/tui/flows/leaky.py", input=f"please use {leaky_key} twice: {leaky_key}")
    async with app.run_test(size=(120, 40)) as pilot:
        await paused(pilot)
        app.main.conversation.select(0)
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the edit dialog")
        area = app.screen.query_one("TextArea")
        assert leaky_key not in area.text and area.text.count("[redacted]") == 2
        area.text = area.text.replace("please use", "now use")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.client.view.history[0].content.startswith("now use"), what="edit")
        assert app.client.view.history[0].content == "now use [redacted] twice: [redacted]"  # what the app sees
        await pilot.press("c")
        await ended(pilot)
        _, sent = flowcapture.requests()[0]
        assert sent[1].content == f"now use {leaky_key} twice: {leaky_key}"  # what the model got


async def test_a_state_field_saved_keeps_the_key_it_did_not_show(leaky_key):
    """Saved unchanged, the field is refused as unchanged; saved with more typed, the key stays and
    the next prompt holds it (it held "[redacted]", what the dialog showed)."""
    from conftest import press_and_pause

    from test_keys import _sidebar_to

    app = make("tests/tui/flows/leaky.py", input="hi")
    async with app.run_test(size=(120, 40)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n")  # the first Leaker's turn: its tool set note to the key
        await _sidebar_to(pilot, "field:note")
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the edit dialog")
        field = app.screen.query_one("Input")
        assert field.value == "[redacted]"
        await pilot.press("enter")
        await pilot.pause()
        error = str(app.screen.query_one("#dialog-error").render())
        assert 'LeakyState.note is already "[redacted]": unchanged' in error
        field.value = "[redacted] twice"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.client.view.state["note"] == "[redacted] twice", what="the field set")
        await pilot.press("c")
        await ended(pilot)
        _, sent = flowcapture.requests()[-1]
        assert sent[0].content == f"You leak. Note: {leaky_key} twice"  # what the model got


def _streaming_flow(tmp_path, fragments: list[str], more: str = "") -> str:
    """tests/tui/flows/stream_fn.py streaming ``fragments``, one per gate (``more``: code appended)."""
    flow = tmp_path / "stream_these.py"
    flow.write_text(Path("tests/tui/flows/stream_fn.py").read_text().replace(
        'FRAGMENTS = ["Hel", "lo, wor", "ld: ctx.state ", "holds history."]', f"FRAGMENTS = {fragments!r}\n{more}"))
    return str(flow)


async def _stream_seen(pilot, count: int) -> tuple[list[str], list[str]]:
    """Step into the model call, then, as each of ``count`` pieces arrives, what the conversation
    pane draws, and the streamed text the app holds (a credential's shape, sk-…, is hidden when
    drawn). A piece that may begin a credential value arrives empty (the run holds it back until
    the next pieces say): the pieces are counted, not their text."""
    from conftest import press_and_pause
    from textual.geometry import Region

    app = pilot.app
    await paused(pilot)
    await press_and_pause(pilot, "s")
    await pilot.press("s")
    pane = app.main.conversation
    drawn, held = [], []
    for i in range(count):
        await wait_until(pilot, lambda: sum(e.type == "chat.delta" for e in app.client.events) > i,
                         what=f"fragment {i}")
        await pilot.pause(0.05)
        app.flush(everything=True, force=True)
        drawn.append("\n".join(s.text for s in pane.render_lines(Region(0, 0, pane.size.width, pane.size.height))))
        held.append(app.client.view.streaming)
        flowcapture.open_gate(i)
    await ended(pilot)
    return drawn, held


async def test_a_key_streamed_in_fragments_is_never_on_screen_even_in_part(monkeypatch, tmp_path):
    """`sk-` `test-` `SECRE` `T123`...: neither the pane nor the event log ever shows a piece that
    would let someone put it back together."""
    monkeypatch.setenv("DB_PASSWORD", "hunter2-correct-horse")
    environment_secrets.cache_clear()
    fragments = ["The key is sk-", "test-", "SECRE", "T1234567 and the password ", "hunt", "er2-cor", "rect-horse",
                 ". Done."]
    monkeypatch.setenv("FLOWCAPTURE_GATES", "1")
    app = make(_streaming_flow(tmp_path, fragments), input="hi")
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            seen, _ = await _stream_seen(pilot, len(fragments))
            await pilot.press("3")
            await pilot.pause(0.1)
            seen.append(_screen_text(app))
        for text in seen:
            for piece in ("sk-test", "test-SECRE", "SECRET1234567", "hunt", "er2-cor", "rect-horse"):
                assert piece not in text, (piece, text)
        assert "[redacted]" in seen[-2]
    finally:
        environment_secrets.cache_clear()


async def test_a_key_only_the_flow_knows_streamed_in_fragments_is_never_on_screen(monkeypatch, tmp_path):
    """A key handed over as api_key= (not in the environment: only the flow's process knows it),
    echoed by a streaming model three characters at a time, was on screen whole while it streamed."""
    key = "vaultQ7x9Lm2Pz4Kw8Rt6Yb3Nc"
    said = f"your key is {key} and again {key}. Done."
    fragments = [said[i:i + 3] for i in range(0, len(said), 3)]
    monkeypatch.setenv("FLOWCAPTURE_GATES", "1")
    flow = _streaming_flow(tmp_path, fragments, "from flowtui.runtime.secrets import credentials_given\n"
                           f"credentials_given({{'api_key': {key!r}}})  # as LiteLLMProvider(api_key=...) does")
    app = make(flow, input="hi")
    async with app.run_test(size=(120, 30)) as pilot:
        drawn, held = await _stream_seen(pilot, len(fragments))
        seen = drawn + held
        assert app.client.view.history[-1].content == said.replace(key, "[redacted]")
    for text in seen:
        for k in range(4, len(key) + 1):
            assert key[:k] not in text, (key[:k], text)
    assert any("your key is [redacted] and again" in text for text in seen)
