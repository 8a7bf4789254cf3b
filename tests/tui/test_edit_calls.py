"""Pilot tests: deleting and promoting messages keeps a valid conversation (the dialog names what
leaves), the pending tool call can be edited, approved or denied, and any event opens whole."""

from __future__ import annotations

import flowcapture
import pytest
from conftest import ended, make, paused, press_and_pause, wait_until

from flowtui.tui.screens.decide import DecideDialog, EventScreen
from flowtui.tui.screens.dialogs import ConfirmDialog, TextDialog


async def _after_both_tools(pilot) -> None:
    """Paused after the reviewer's two record_problem calls ran: history is
    [user, draft, reply with 2 calls, result, result]."""
    await paused(pilot)
    while len(pilot.app.client.view.history) < 5 or pilot.app.client.view.pause.point == "tool":
        await press_and_pause(pilot, "s")


async def _next_request(pilot) -> list:
    """Step until the next model call is made; the messages it sent."""
    before = len(flowcapture.requests())
    while len(flowcapture.requests()) == before:
        await press_and_pause(pilot, "s")
    return flowcapture.requests()[-1]


def _user_events(app) -> list:
    return [ev for ev in app.client.events if ev.origin == "user"]


def _question(app) -> str:
    return str(app.screen.query_one(".dialog-title").render())


async def test_d_on_a_reply_that_called_tools_names_its_results_and_takes_them_along():
    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await _after_both_tools(pilot)
        assert [m.role for m in app.client.view.history] == ["user", "assistant", "assistant", "tool", "tool"]
        app.main.conversation.select(2)
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the delete question")
        assert "Delete message #2 (assistant)? Leaving with it: #3, #4." in _question(app)
        await pilot.press("y")
        await wait_until(pilot, lambda: len(app.client.view.history) == 2, what="three messages gone")
        assert _user_events(app)[-1].note == "deleted #2 (removed #2, #3, #4)"
        agent, messages = await _next_request(pilot)
        assert agent == "Writer" and [m.role for m in messages] == ["system", "user", "assistant"]


async def test_d_on_a_tool_result_takes_the_call_it_answers_and_n_keeps_everything():
    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await _after_both_tools(pilot)
        app.main.conversation.select(3)
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the delete question")
        assert "The call it answers leaves too (in #2)" in _question(app)
        assert "#2 stays, without that call." in _question(app)
        await pilot.press("n")
        await pilot.pause()
        assert len(app.client.view.history) == 5 and not _user_events(app)
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the delete question")
        await pilot.press("y")
        await wait_until(pilot, lambda: len(app.client.view.history) == 4, what="the result gone")
        reply = app.client.view.history[2]
        assert [c.args for c in reply.tool_calls] == [{"text": "No closing rule."}]
        assert app.client.view.history[3].content.endswith("No closing rule.")


async def test_promoting_a_reply_that_called_tools_says_its_results_leave_too():
    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await _after_both_tools(pilot)
        app.main.conversation.select(2)
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the promote dialog")
        assert "Its tool results #3, #4 leave the history with it." in str(app.screen.query_one("#dialog-hint").render())
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: len(app.client.view.memory) == 1, what="memory +1")
        assert [m.role for m in app.client.view.history] == ["user", "assistant"]
        assert app.client.view.memory == ["REJECTED: needs an example."]
        agent, messages = await _next_request(pilot)
        assert agent == "Writer"
        assert [m.role for m in messages] == ["system", "system", "user", "assistant"]  # no orphan result


async def _call_editor(pilot, app) -> None:
    """Stepped to the first tool call, its editor open (e on the message asking for it)."""
    await paused(pilot)
    while app.client.view.pause.point != "tool":
        await press_and_pause(pilot, "s")
    app.main.conversation.select(2)
    await pilot.press("e")
    await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the call editor")


async def test_e_before_a_tool_edits_its_call_checked_against_the_schema():
    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await _call_editor(pilot, app)
        area = app.screen.query_one("TextArea")
        assert '"text": "No example."' in area.text
        area.text = '{"text": 5}'
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "✗" in str(app.screen.query_one("#dialog-error").render()), what="refusal")
        assert "text" in str(app.screen.query_one("#dialog-error").render())
        area.text = '{"text": "Edited by hand."}'
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not isinstance(app.screen, TextDialog), what="the dialog to close")
        await wait_until(pilot, lambda: app.client.view.history[2].tool_calls[0].args == {"text": "Edited by hand."},
                         what="the model's call, as edited")
        decision = _user_events(app)[-1]
        assert (decision.type, decision.decision, decision.args) == ("tool.decision", "edited",
                                                                     {"text": "Edited by hand."})
        await press_and_pause(pilot, "s")
        assert app.client.view.state["problems"] == ["Edited by hand."]


async def test_what_was_typed_in_the_call_editor_then_esc_is_there_when_it_opens_again():
    """A refused edit of a call's arguments, then esc: every character typed was lost, and e opened the
    arguments as they were. Now it opens on what was typed, saying so; ctrl+z gives back the arguments,
    and esc on the draft left unchanged forgets it."""
    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await _call_editor(pilot, app)
        app.screen.query_one("TextArea").text = '{"text": "Half typed'
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "✗" in str(app.screen.query_one("#dialog-error").render()), what="refusal")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.main, what="the editor closed")

        async def reopen() -> str:
            await pilot.press("e")
            await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the call editor")
            return app.screen.query_one("TextArea").text

        assert await reopen() == '{"text": "Half typed'
        assert "What you typed before esc is back" in str(app.screen.query_one("#dialog-error").render())
        await pilot.press("ctrl+z")
        assert '"text": "No example."' in app.screen.query_one("TextArea").text
        await pilot.press("escape")  # back to the arguments as they are: nothing kept
        assert '"text": "No example."' in await reopen()
        app.screen.query_one("TextArea").text = '{"text": "Second try'
        await pilot.press("escape")
        assert await reopen() == '{"text": "Second try'
        await pilot.press("escape")  # the draft unchanged: forgotten
        assert '"text": "No example."' in await reopen()
        assert not [ev for ev in _user_events(app) if ev.type == "tool.decision"]  # nothing was sent


async def test_approve_asks_before_each_call_deny_sends_the_reason_and_approve_runs_it():
    app = make(input="go", approve=["record_problem"])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the decision dialog")
        assert app.client.view.pause.call["args"] == {"text": "No example."}
        # typed at once, a button focused: every letter is the reason's, none the app's
        # ("a" approved the call, "b" set a breakpoint, "d" deleted)
        await pilot.press(*["space" if c == " " else c for c in "absolutely not"], "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog)
                         and app.screen.call["args"] == {"text": "No closing rule."}, what="the second call's dialog")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.client.view.state.get("problems") == ["No closing rule."],
                         what="only the approved call to run")
        results = [m.content for m in app.client.view.history if m.role == "tool"]
        assert results[0] == "denied by the user: absolutely not"
        decisions = [(ev.decision, ev.reason) for ev in _user_events(app) if ev.type == "tool.decision"]
        assert decisions == [("denied", "absolutely not"), ("approved", None)]
        assert not app.client.breakpoints and app.client.view.tasks == []


async def test_arguments_edited_from_the_approval_dialog_are_said_in_it_not_over_its_buttons():
    """e in the approval dialog, the arguments edited and saved: the dialog came back asking about the call, and
    the notice "edited: the model sees it as edited" lay over it (at 80x24, over its Deny button). The dialog
    says it, where a refusal would be."""
    app = make(input="go", approve=["record_problem"])
    async with app.run_test(size=(80, 24)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the decision dialog")
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the call editor")
        app.screen.query_one("TextArea").text = '{"text": "Edited by hand."}'
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog)
                         and app.screen.call["args"] == {"text": "Edited by hand."}, what="the dialog, asking again")
        said = str(app.screen.query_one("#dialog-error").render())
        assert said == "The call of record_problem edited: the model sees it as edited."
        assert not [n for n in app._notifications if "edited" in str(n.message)]
        await pilot.press("y")
        await wait_until(pilot, lambda: app.client.view.state.get("problems") == ["Edited by hand."],
                         what="the edited call to run")


async def test_esc_on_the_second_calls_approval_puts_the_cursor_where_e_edits_its_arguments_as_said():
    """After the first call was denied, esc on the second's dialog said "e edits its arguments"; the cursor had
    followed the denial's result, and e opened it: "Edit message #3 (tool)"."""
    app = make(input="go", approve=["record_problem"])
    async with app.run_test(size=(80, 24)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the decision dialog")
        await pilot.press("n", "o", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog)
                         and app.screen.call["args"] == {"text": "No closing rule."}, what="the second call's dialog")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.main, what="the dialog closed")
        history = app.client.view.history
        assert history[app.main.conversation.cursor].role == "assistant"  # the message that made the call
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the call editor")
        assert "No closing rule." in app.screen.query_one("TextArea").text
        assert "denied by the user" not in app.screen.query_one("TextArea").text


async def test_a_move_typed_before_a_call_asked_for_approval_is_never_taken_as_one(monkeypatch):
    """s pressed while the run went on (a tool, the model answering) was queued, and sent at the next
    pause: an approval pause, where a move runs the call. The call ran approved "by the user", unseen,
    and then its dialog came up, dead."""
    monkeypatch.setenv("FLOWCAPTURE_TOOL_DELAY", "1.5")  # the first call's tool takes a while
    app = make(input="go", approve=["record_problem"])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the first call's dialog")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.screen is app.main and app.client.view.status == "running",
                         what="the first call's tool to run")
        await pilot.press("s")  # while it runs: queued
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog)
                         and app.screen.call["args"] == {"text": "No closing rule."}, what="the second call's dialog")
        await wait_until(pilot, lambda: any("waits for your decision: s, typed before it asked, is not taken as one"
                                            in str(n.message) for n in app._notifications), what="the notice")
        assert [ev.decision for ev in _user_events(app) if ev.type == "tool.decision"] == ["approved"]
        assert app.client.view.pause.reason == "approval" and app.client.view.state["problems"] == ["No example."]
        await pilot.press("n", "enter")  # the dialog is the live one: it decides
        await wait_until(pilot, lambda: [ev.decision for ev in _user_events(app) if ev.type == "tool.decision"]
                         == ["approved", "denied"], what="the second call denied")


async def test_enter_at_once_in_the_approval_dialog_denies_as_it_says_never_approves():
    """The reason box says "enter denies", and the Approve button had the focus: enter, before anything
    was typed, approved the call."""
    app = make(input="go", approve=["record_problem"])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the decision dialog")
        await pilot.press("enter")
        await wait_until(pilot, lambda: any(ev.type == "tool.decision" for ev in _user_events(app)),
                         what="the decision")
        decisions = [(ev.decision, ev.reason) for ev in _user_events(app) if ev.type == "tool.decision"]
        assert decisions == [("denied", None)], decisions
        assert [m.content for m in app.client.view.history if m.role == "tool"] == ["denied by the user"]


async def test_the_approval_dialog_asks_about_the_call_as_edited():
    """e in the dialog, then save: the dialog came back showing the arguments from before the edit, while
    y ran the edited ones (a person approved text the dialog no longer matched)."""
    app = make(input="go", approve=["record_problem"])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the decision dialog")
        assert '"text": "No example."' in str(app.screen.query_one("#decide-call").render())
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the call editor")
        app.screen.query_one("TextArea").text = '{"text": "Edited in the dialog."}'
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the decision dialog again")
        shown = str(app.screen.query_one("#decide-call").render())
        assert '"text": "Edited in the dialog."' in shown and "No example." not in shown
        await pilot.press("y")
        await wait_until(pilot, lambda: app.client.view.state.get("problems") == ["Edited in the dialog."],
                         what="the edited call to run")


@pytest.mark.parametrize("typed, reason", [("nyes, but no", "yes, but no"), ("my reason", "my reason"),
                                            ("ne", "e")])
async def test_keys_typed_in_one_burst_into_the_approval_dialog_are_all_the_reasons(typed, reason):
    """Sent before the reason box had the focus, y approved the call, e opened the editor, and the
    letters of the dialog's keys went missing from the reason ("m raso")."""
    from textual import events

    app = make(input="go", approve=["record_problem"])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the decision dialog")
        for ch in typed:  # queued at once, as a terminal delivers a burst
            app.post_message(events.Key("space" if ch == " " else ch, ch))
        app.post_message(events.Key("enter", "\r"))
        await wait_until(pilot, lambda: any(ev.type == "tool.decision" for ev in _user_events(app)),
                         what="the decision")
        decision = [ev for ev in _user_events(app) if ev.type == "tool.decision"][0]
        assert (decision.decision, decision.reason) == ("denied", reason)


async def test_a_reason_typed_then_esc_is_there_when_the_dialog_comes_back():
    """esc closed the dialog and the reason typed went with it: reopened, the box was empty."""
    app = make(input="go", approve=["record_problem"])
    async with app.run_test(size=(80, 24)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the decision dialog")
        await pilot.press("b", "a", "d", "escape")
        await wait_until(pilot, lambda: app.screen is app.main, what="the dialog closed")
        await pilot.press("ctrl+p", *"call: approve", "enter")  # (the palette's "call: approve or deny")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the dialog again")
        await pilot.press("space", "i", "d", "e", "a", "enter")
        await wait_until(pilot, lambda: any(ev.type == "tool.decision" for ev in _user_events(app)),
                         what="the decision")
        decision = [ev for ev in _user_events(app) if ev.type == "tool.decision"][0]
        assert (decision.decision, decision.reason) == ("denied", "bad idea")


async def test_approving_a_tool_the_flow_lacks_is_said_by_flowtui_not_as_the_flows_output():
    """The warning was printed by the run's process, so the app showed it as "The flow printed"."""
    app = make(input="go", approve=["record_problem", "recrod_problem"])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await wait_until(pilot, lambda: any("--approve recrod_problem:" in n.message for n in app._notifications),
                         what="the warning")
        said = [n for n in app._notifications if "--approve recrod_problem:" in n.message]
        assert "have no tool recrod_problem (theirs: record_problem; did you mean record_problem?)" in said[0].message
        assert said[0].title != "The flow printed" and not app.client.logs


async def test_a_call_left_undecided_is_decided_from_the_palette():
    """esc leaves the call waiting: the palette brings its dialog back (it had no entry for it)."""
    app = make(input="go", approve=["record_problem"])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        assert "call: approve or deny" not in {c.title for c in app.get_system_commands(app.screen)}
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the decision dialog")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.main, what="the dialog closed")
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        commands["call: approve or deny"].callback()
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the dialog again")
        await pilot.press("n", *"later", "enter")
        await wait_until(pilot, lambda: any(ev.type == "tool.decision" for ev in _user_events(app)),
                         what="the decision")


async def test_under_a_dialog_the_apps_keys_do_nothing():
    """Its buttons focused, a letter must not reach the app behind it (c would run the run on, b set a
    breakpoint)."""
    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        app.main.conversation.select(0)
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the confirm dialog")
        seq = app.client.view.pause.seq
        await pilot.press("c", "b", "a", "s", "3")
        await pilot.pause(0.3)
        app.flush(everything=True)
        assert isinstance(app.screen, ConfirmDialog)
        assert app.client.view.pause.seq == seq and not app.client.breakpoints
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen is app.main, what="the dialog closed")
        assert len(app.client.view.history) == 1  # nothing deleted


async def test_a_run_started_over_asks_for_approval_again():
    """Its events are numbered from 1 again: the dialog was skipped as if already shown, and the call
    could only be run (s) or edited, never denied."""
    app = make("flows/revisao.py", input="go", approve=["registrar_problema"])
    async with app.run_test(size=(140, 40)) as pilot:
        for run in (1, 2):
            await paused(pilot)
            await pilot.press("c")
            await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what=f"run {run}'s dialog")
            await pilot.press("n", *f"no {run}", "enter")
            await wait_until(pilot, lambda: any(m.content == f"denied by the user: no {run}"
                                                for m in app.client.view.history), what=f"run {run}'s denial")
            while isinstance(app.screen, DecideDialog) or app.client.view.status == "paused":
                await pilot.press("escape" if isinstance(app.screen, DecideDialog) else "c")
                await pilot.pause(0.05)
            await ended(pilot)
            await pilot.press("r")


async def test_enter_on_the_event_log_opens_the_event_whole():
    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await pilot.press("3")
        await pilot.pause()
        log = app.main.pane_widget("events")
        await wait_until(pilot, lambda: log.has_focus, what="the event log focused")
        await pilot.press("home", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, EventScreen), what="the event screen")
        assert app.screen.event["type"] == "run.start" and app.screen.event["seq"] == 1
        assert app.screen.event["input"] == "go"
        await pilot.press("escape")
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, EventScreen), what="the second event")
        assert app.screen.event["seq"] == 2


async def test_an_event_of_megabytes_opens_cut_and_says_by_how_much():
    """A replayed journal's events are whole: one holding 5 MB opens at once, its long string cut
    (made safe first: no end of a credential shows)."""
    from textual.app import App
    from textual.widgets import Static

    key = "sk-proj-" + "Ab3d" * 12
    text = "x" * 15_990 + key + "y" * 5_000_000
    screen = EventScreen("event 7", {"type": "state.append", "seq": 7, "item": {"content": text}})

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(screen)

    async with Host().run_test() as pilot:
        await pilot.pause()
        drawn = screen.query_one("#event-json Static", Static).content.code  # the JSON the Syntax draws
    assert f"(+{len(text) - 16_000:,} characters)" in drawn
    assert len(drawn) < 100_000 and "Ab3d" not in drawn


@pytest.mark.parametrize("key", ["d", "m"])
async def test_d_or_m_on_the_reply_asking_for_the_pending_call_says_why_not_before_asking(key):
    """It asked "Delete message #2 (assistant)?" (m: opened the promotion's editor), and only after y (or
    saving) said the run refused it."""
    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        while app.client.view.pause.point != "tool":
            await press_and_pause(pilot, "s")
        app.main.conversation.select(2)  # the reply asking for it
        await pilot.press(key)
        notes = lambda: " ".join(str(n.message) for n in app._notifications)  # noqa: E731
        await wait_until(pilot, lambda: "the call the run is paused before" in notes(), what="why not")
        assert app.screen is app.main
        assert "Message #2 asks for record_problem, the call the run is paused before" in notes(), notes()
        assert len(app.client.view.history) == 3  # nothing left


async def test_an_approval_the_run_asks_for_keeps_what_was_said_before_it():
    """Dialogs a key opens clear the notices said before them; one the run opens keeps them (a watchpoint's
    notice says why the run is there)."""
    app = make(input="go", approve=["record_problem"])
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        await paused(pilot)
        app.notify("said before the run asked", timeout=60)  # (the default 5 s: a loaded machine takes longer)
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, DecideDialog), what="the decision dialog")
        await pilot.pause(0.2)
        assert any("said before the run asked" in str(t.render()) for t in app.screen.query("Toast"))


@pytest.mark.parametrize("text", ['{"text": 5, "extra": 1}', '{"text": 2025'])
async def test_the_call_editors_buttons_stay_on_the_screen_under_a_long_refusal_at_80x24(text):
    """The refusal of arguments no JSON or no schema takes, and the hint, filled the dialog: Save and
    Cancel went below its edge, and tab moved the focus onto buttons nobody could see."""
    from textual.widgets import Button

    app = make(input="go")
    async with app.run_test(size=(80, 24)) as pilot:
        await _call_editor(pilot, app)
        app.screen.query_one("TextArea").text = text
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "✗" in str(app.screen.query_one("#dialog-error").render()), what="refusal")
        await pilot.pause()
        for button in app.screen.query(Button):  # what is drawn at its middle is the button, not its clip
            x, y = button.region.center
            assert app.screen.get_widget_at(x, y)[0] is button, button.label


@pytest.mark.parametrize("dialog", ["call editor", "watchpoint"])
async def test_a_dialogs_hint_is_shown_whole_at_80x24(dialog):
    """The watch dialog's examples ended at "memory ~" and the call editor's note at "the model sees the":
    the hint had two rows, and nothing could scroll it (it takes no focus)."""
    from textual.widgets import Button

    app = make(input="go")
    async with app.run_test(size=(80, 24)) as pilot:
        if dialog == "call editor":
            await _call_editor(pilot, app)
        else:
            await paused(pilot)
            await pilot.press("w")
            await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the watch dialog")
        await pilot.pause()
        hint = app.screen.query_one("#dialog-hint")
        assert hint.max_scroll_y == 0 and hint.size.height >= 3, str(hint.render())
        for button in app.screen.query(Button):
            x, y = button.region.center
            assert app.screen.get_widget_at(x, y)[0] is button, button.label
