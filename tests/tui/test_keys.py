"""Pilot-driven tests: every key, asserting on the runtime's resulting state and events."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import flowcapture
from conftest import FLOWS, REVIEW, ended, make, paused, press_and_pause, status, types, wait_until
from textual.command import CommandList, CommandPalette

from flowtui.tui.screens.dialogs import ConfirmDialog, FirstMessageDialog, HelpScreen, TextDialog
from flowtui.tui.screens.error import LoadErrorScreen


def palette_prompts(app) -> list[str]:
    """The entries the command palette lists now."""
    found = app.screen.query(CommandList)
    return [str(o.prompt) for o in found.first().options] if found else []


async def test_opens_paused_before_the_first_step_with_input_and_memory_seeded():
    app = make(input="Write about ctx.state", memory={"user": "Castro"})
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        view = app.client.view
        assert view.status_line() == "paused before Writer"
        assert [m.content for m in view.history] == ["Write about ctx.state"]
        assert view.memory == ["user: Castro"]
        assert types(app) == ["run.start", "state.append", "node.start", "node.start", "ctx.set", "run.pause"]
        assert flowcapture.requests() == []  # nothing ran


async def test_s_steps_to_each_pause_point_in_order():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        points = []
        for _ in range(7):
            await press_and_pause(pilot, "s")
            p = app.client.view.pause
            points.append((p.point, p.name, p.reason))
        assert points == [
            ("chat", "Writer", "step"), ("agent", "Reviewer", "step"), ("chat", "Reviewer", "step"),
            ("tool", "record_problem", "step"), ("tool", "record_problem", "step"),
            ("loop_iteration", "loop", "step"), ("agent", "Writer", "step"),
        ]
        assert app.client.view.path() == ["ReviewWorkflow", "loop 2/4", "Writer"]  # names the agent about to run


async def test_n_runs_to_the_next_agent_turn_and_l_to_the_end_of_the_iteration():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n")
        assert (app.client.view.pause.point, app.client.view.pause.name) == ("agent", "Reviewer")
        await press_and_pause(pilot, "l")
        pause = app.client.view.pause
        assert (pause.point, pause.reason) == ("loop_iteration", "loop_once")
        assert app.client.view.state["problems"] == ["No example.", "No closing rule."]


async def test_c_continues_to_the_end():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)
        view = app.client.view
        assert view.status == "finished" and view.output == "APPROVED: it has everything."
        assert types(app)[-1] == "run.end"
        assert view.state["approved"] is True and view.state["rounds"] == 2


async def test_p_pauses_at_the_next_point_while_a_slow_sync_tool_keeps_the_app_responsive(monkeypatch):
    monkeypatch.setenv("FLOWCAPTURE_TOOL_GATE", "1")  # the sync tool holds the run's process until let go
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        app.simulate_key("c")
        await wait_until(pilot, lambda: any(ev.type == "node.start" and ev.kind == "tool"
                                            for ev in app.client.events), what="the slow tool")
        # Keys are answered while the tool runs (no stall measured here: a loaded machine makes any
        # threshold flaky). As a terminal sends them: pilot.press would first wait for the busy app to look idle.
        app.simulate_key("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), timeout=30, what="the help")
        assert not any(ev.type == "node.end" and ev.kind == "tool" for ev in app.client.events)
        app.simulate_key("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, HelpScreen), timeout=30, what="help closed")
        app.simulate_key("p")
        await wait_until(pilot, lambda: "pausing" in str(app.main.query_one("#status").content), timeout=30,
                         what="the pause asked")
        flowcapture.open_gate("tool")
        await paused(pilot)
        pause = app.client.view.pause
        assert (pause.point, pause.name, pause.reason) == ("tool", "record_problem", "pause")


async def test_x_stops_the_run_cleanly():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "s")
        await pilot.press("x")
        await ended(pilot)
        end = app.client.events[-1]
        assert (end.type, end.status) == ("run.end", "stopped")
        assert app.client.view.status_line() == "stopped"


async def test_b_sets_a_breakpoint_and_the_run_says_it_stopped_there():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("b")  # on the agent the run is paused before
        assert app.client.breakpoints == {"Writer"}
        assert "breakpoints: Writer" in str(app.main.query_one("#where").render())
        await pilot.press("c")
        await paused(pilot)
        view = app.client.view
        assert (view.pause.name, view.pause.reason) == ("Writer", "breakpoint")
        assert view.status_line() == "paused before Writer (breakpoint)"
        assert flowcapture.count("Writer") == 1  # the second turn has not run
        await pilot.press("b")  # the cursor follows the last message: the tool result
        assert app.client.breakpoints == {"Writer", "record_problem"}
        app.main.conversation.select(0)  # a user message: back to where the run is paused
        await pilot.press("b")
        assert app.client.breakpoints == {"record_problem"}


async def test_b_on_the_node_tree_cursor_and_on_a_tool_message():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n", "n", "s", "s")  # Reviewer ran: tool calls in the history
        conversation = app.main.conversation
        conversation.select(3)  # a result of the reviewer's tool call
        await pilot.press("b")
        assert app.client.breakpoints == {"record_problem"}
        await pilot.press("4")
        tree = app.main.query_one("#nodes")
        await pilot.pause(0.05)
        tree.focus()
        tree.cursor_line = 2  # workflow › loop › agent Writer
        assert tree.selected_name == ("agent", "Writer")
        await pilot.press("b")
        assert app.client.breakpoints == {"record_problem", "Writer"}


async def test_b_paused_before_a_tool_sets_it_on_that_tool_not_on_the_agent_that_asked():
    """Paused before a tool, the cursor follows the last message: the reply that asked for the call."""
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        view = app.client.view
        for _ in range(8):  # step by step to the reviewer's tool call
            if view.pause.point == "tool":
                break
            await press_and_pause(pilot, "s")
        assert (view.pause.point, view.pause.name) == ("tool", "record_problem")
        asked = view.history[app.main.conversation.cursor]
        assert (asked.role, asked.agent) == ("assistant", "Reviewer") and asked.tool_calls
        await pilot.press("b")
        assert app.client.breakpoints == {"record_problem"}
        app.main.conversation.select(1)  # the writer's draft: its agent
        await pilot.press("b")
        assert app.client.breakpoints == {"record_problem", "Writer"}


async def test_r_reloads_after_confirming_and_starts_a_new_run():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        first = app.client.view.run_id
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="confirm")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.client.view is not None and app.client.view.run_id not in (None, first)
                         and status(app) == "paused",
                         what="a new run")
        assert app.client.view.status_line() == "paused before Writer"


async def test_a_new_run_soon_after_c_is_not_said_to_have_left_c_unanswered():
    """c, the run finished at once, r within 3 s: the new run, paused before Writer as it should be,
    was said not to have answered (its pause had the event number c was sent at)."""
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        first = app.client.view.run_id
        await pilot.press("c")
        await ended(pilot)
        await pilot.press("r")
        await pilot.pause(0.2)
        if isinstance(app.screen, ConfirmDialog):
            await pilot.press("y")
        await wait_until(pilot, lambda: app.client.view is not None and app.client.view.run_id not in (None, first)
                         and status(app) == "paused", what="a new run")
        await pilot.pause(4.0)  # (past the 3 s after which a move not answered is said)
        said = " ".join(str(n.message) for n in app._notifications)
        assert "has not answered" not in said, said
        assert app.client.view.status_line() == "paused before Writer"


async def test_q_quits_and_stops_the_run():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    assert app.client.view.status == "stopped" and app.client.channel.closed.is_set()  # its process is gone


async def test_ctrl_p_palette_runs_actions_by_group_name():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await pilot.press(*"run: step")
        # (the palette searches as a worker: enter before it has listed "run: step" first runs another entry)
        await wait_until(pilot, lambda: palette_prompts(app)[:1] and palette_prompts(app)[0].startswith("run: step\n"),
                         timeout=30, what="the entry")
        seq = app.client.view.pause.seq
        await pilot.press("enter")
        await paused(pilot, after=seq)
        assert app.client.view.pause.point == "chat"


async def test_the_palette_lists_flowtuis_quit_and_keys_once_and_no_screenshot_that_fails(tmp_path):
    """Textual's own Quit and Keys sat beside flowtui's, and its Screenshot failed ("Failed to save")."""
    from flowtui.runtime.loader import load_flow
    from flowtui.tui.replay import make_replay

    journal = tmp_path / "run.jsonl"
    await load_flow(REVIEW).run("go", journal=journal)
    for app in (make(input="go"), make_replay(journal)):
        async with app.run_test():
            titles = [command.title for command in app.get_system_commands(app.screen)]
            assert "Screenshot" not in titles and "Quit" not in titles and "Keys" not in titles, titles
            assert "app: quit" in titles and "Theme" in titles, titles


async def test_question_mark_shows_every_key():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        from flowtui.tui.actions import app_help_groups

        assert app.screen.groups == app_help_groups()
        text = " ".join(what for _, keys in app_help_groups() for _, what in keys)
        for key in ("Run to the next pause point", "Move the assistant message under the cursor to memory",
                    "Undo the last edit", "Command palette"):
            assert key in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def _to_reviewer(pilot):
    await paused(pilot)
    await press_and_pause(pilot, "n")  # the writer's draft is in the history; before Reviewer


async def test_m_promotes_the_draft_and_the_next_request_sees_it_in_memory():
    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await _to_reviewer(pilot)
        view = app.client.view
        assert [m.role for m in view.history] == ["user", "assistant"]
        app.main.conversation.select(1)
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the promote dialog")
        app.screen.query_one("TextArea").text = "Draft 1, kept as context."
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: len(app.client.view.memory) == 1, what="memory +1")
        view = app.client.view
        assert view.memory == ["Draft 1, kept as context."]
        assert [m.role for m in view.history] == ["user"]
        user = [(ev.type, ev.bucket) for ev in app.client.events if ev.origin == "user"]
        assert user == [("state.set", "history"), ("state.append", "memory")]
        await press_and_pause(pilot, "s", "s")  # the reviewer's model call runs
        _, messages = flowcapture.requests()[-1]
        assert [m.role for m in messages] == ["system", "system", "user"]
        assert "Draft 1, kept as context." in messages[1].content
        assert all("Draft 1:" not in m.content for m in messages)


async def test_u_undoes_the_promotion():
    app = make(input="go")
    async with app.run_test() as pilot:
        await _to_reviewer(pilot)
        app.main.conversation.select(1)
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="dialog")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: len(app.client.view.memory) == 1, what="memory +1")
        await pilot.press("u")
        await wait_until(pilot, lambda: len(app.client.view.history) == 2, what="history back")
        assert app.client.view.memory == []
        assert app.client.view.history[1].content.startswith("Draft 1")


async def test_m_refuses_a_user_message_and_a_running_run():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        app.main.conversation.select(0)
        await pilot.press("m")
        await pilot.pause()
        assert not isinstance(app.screen, TextDialog)
        assert app.client.view.memory == []


async def _sidebar_to(pilot, row_id: str) -> None:
    app = pilot.app
    sidebar = app.main.sidebar
    sidebar.focus()
    await pilot.pause()
    assert sidebar.select_id(row_id)
    await pilot.pause()
    assert sidebar.highlighted_id == row_id


async def test_e_on_a_state_field_validates_against_its_type():
    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await _sidebar_to(pilot, "field:rounds")
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the edit dialog")
        field = app.screen.query_one("Input")
        field.value = "abc"
        await pilot.press("enter")
        await pilot.pause()
        error = str(app.screen.query_one("#dialog-error").render())
        assert "ReviewState.rounds is int" in error and "'abc' refused" in error
        assert app.client.view.state["rounds"] == 0
        field.value = "3"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.client.view.state["rounds"] == 3, what="rounds = 3")
        ev = app.client.events[-1]
        assert (ev.type, ev.path, ev.old, ev.new, ev.origin) == ("workflow_state.change", "rounds", 0, 3, "user")
        assert app.client.view.last_changed == "rounds"


async def test_a_state_text_of_several_lines_is_edited_in_a_text_area_and_keeps_its_line_ends(tmp_path):
    """Its line breaks went raw to the terminal from a one-line box, over the panes behind it, at every
    cursor blink; saving turned its \r\n into \n."""
    flow = tmp_path / "flow.py"
    flow.write_text("from pydantic import BaseModel\nfrom flowtui import FunctionProvider, agent, workflow\n"
                    "class S(BaseModel):\n    f: str = 'first\\r\\nSECOND\\nTHIRD'\n"
                    "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p')\nclass A:\n    pass\n"
                    "@workflow(state=S, steps=[A])\nclass W:\n    pass\n")
    app = make(str(flow), input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await _sidebar_to(pilot, "field:f")
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the edit dialog")
        assert not app.screen.query("Input")
        area = app.screen.query_one("TextArea")
        assert area.text == "first\nSECOND\nTHIRD"
        area.text = area.text.replace("THIRD", "3rd")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.client.view.state["f"].endswith("3rd"), what="the field set")
        assert app.client.view.state["f"] == "first\r\nSECOND\n3rd"


async def test_e_edits_a_history_message_and_the_model_receives_it():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        app.main.conversation.select(0)
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="dialog")
        app.screen.query_one("TextArea").text = "Write about ctx.state, briefly."
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.client.view.history[0].content.endswith("briefly."), what="edit")
        await press_and_pause(pilot, "s", "s")
        _, messages = flowcapture.requests()[0]
        assert messages[-1].content == "Write about ctx.state, briefly."


async def test_e_d_m_and_o_in_another_view_act_on_nothing_hidden():
    """In what the model sees, the event log and the nodes, e, d, m and o acted on the conversation's
    cursor, which is not on screen there: a message was overwritten with no sight of it."""
    app = make(input="go")
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        await _to_reviewer(pilot)
        app.main.conversation.select(1)  # the draft, under the conversation's cursor
        history = [m.content for m in app.client.view.history]
        for view in "234":
            await pilot.press(view)
            await wait_until(pilot, lambda: app.main.current_view != "conversation", what=f"view {view}")
            for key in "edm" if view == "2" else "edmo":  # (o in what the model sees opens the block there)
                app.clear_notifications()
                await pilot.press(key)
                await pilot.pause(0.1)
                assert app.screen is app.main, (view, key, app.screen)  # no dialog, no pager
                said = [str(toast.render()) for toast in app.screen.query("Toast")]
                assert any("in the conversation (1), on the message under its cursor" in t for t in said), said
        assert [m.content for m in app.client.view.history] == history
        await pilot.press("1")
        await pilot.press("e")  # in the conversation, as before
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the edit dialog")


async def test_a_adds_a_task_then_e_edits_it_and_d_deletes_it():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="dialog")
        app.screen.query_one("Input").value = "cite the docs"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.client.view.tasks == ["cite the docs"], what="task added")
        await _sidebar_to(pilot, "tasks:0")
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="dialog")
        app.screen.query_one("TextArea").text = "cite the docs twice"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.client.view.tasks == ["cite the docs twice"], what="task edited")
        await _sidebar_to(pilot, "tasks:0")
        await pilot.press("d")
        await wait_until(pilot, lambda: app.client.view.tasks == [], what="task deleted")
        assert [ev.origin for ev in app.client.events[-3:]] == ["user", "user", "user"]
        await pilot.press("u")
        await wait_until(pilot, lambda: app.client.view.tasks == ["cite the docs twice"], what="undo")


async def test_every_memory_item_of_a_long_memory_can_be_reached_and_edited():
    """The sidebar lists 60 memory items at a time; the earlier ones could not be picked, so
    not edited, deleted or opened either."""
    app = make(input="go", memory=[f"fact {i + 1}" for i in range(150)])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        sidebar = app.main.sidebar
        sidebar.focus()
        await pilot.pause()
        assert sidebar.highlighted_id == "memory:90"  # the first listed: the latest 60
        await pilot.press("up")
        assert sidebar.highlighted_id == "memory:89"  # one earlier, brought into the list
        await pilot.press("home")
        assert sidebar.highlighted_id == "memory:0"
        assert "memory:59" in sidebar.ids and "memory:60" not in sidebar.ids  # the first 60 listed now
        await pilot.press("down", "e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the edit dialog")
        assert app.screen.query_one("TextArea").text == "fact 2"
        app.screen.query_one("TextArea").text = "fact two"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.client.view.memory[1] == "fact two", what="the edit")
        assert sidebar.highlighted_id == "memory:1"  # the window stays where the person is
        await pilot.press("end")
        assert sidebar.highlighted_id.startswith("field:")
        assert "memory:149" in sidebar.ids and "memory:89" not in sidebar.ids  # the latest again


async def test_view_keys_switch_panes_and_the_model_sees_view_is_exact():
    app = make(input="go", memory=["fact one"])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "s")
        for key, name in (("2", "model-sees"), ("3", "events"), ("4", "nodes"), ("1", "conversation")):
            await pilot.press(key)
            assert app.main.current_view == name
            if name == "model-sees":
                shown = app.main.query_one("#model-sees").messages
                assert shown == app.client.view.model_sees()
                assert [m.role for m in shown] == ["system", "system", "user"]
        await press_and_pause(pilot, "s")
        _, sent = flowcapture.requests()[0]
        assert [(m.role, m.content) for m in sent] == [(m.role, m.content) for m in shown]


async def test_a_hook_that_raises_fails_the_run_not_the_app(monkeypatch):
    monkeypatch.setenv("FLOWCAPTURE_HOOK_RAISES", "1")
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot)
        view = app.client.view
        assert view.status == "failed"
        assert "the after_response hook broke" in view.status_line()
        await pilot.press("3")  # the app still answers
        assert app.main.current_view == "events"


async def test_first_message_dialog_without_input():
    app = make()
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, FirstMessageDialog), what="the dialog")
        # loaded, not loading: the status line says what the app waits for
        await wait_until(pilot, lambda: "ReviewWorkflow loaded: waiting for the first message"
                         in str(app.main.query_one("#status").render()), what="the status")
        app.screen.query_one("Input").value = "Hello flow"
        await pilot.press("enter")
        await paused(pilot)
        assert [m.content for m in app.client.view.history] == ["Hello flow"]
        assert "paused before Writer" in str(app.main.query_one("#status").render())


async def test_esc_in_the_first_message_dialog_starts_the_run_without_input_as_its_button_says():
    app = make()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, FirstMessageDialog), what="the dialog")
        button = app.screen.query_one("#first-none")
        assert "esc" in str(button.label)  # esc was no key any hint named
        await pilot.press("escape")
        await paused(pilot)
        assert app.client.view.history == []
        assert "paused before Writer" in str(app.main.query_one("#status").render())


async def test_load_error_screen_then_r_reloads_after_the_fix(tmp_path):
    flow = tmp_path / "flow.py"
    flow.write_text("from flowtui import workflow\n\n@workflow(steps=[]\nclass W:\n    pass\n")
    app = make(str(flow), input="go")
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), what="the error screen")
        assert app.screen.error.line == 3
        flow.write_text(Path(REVIEW).read_text())  # the fix: a valid flow
        await pilot.press("r")
        await wait_until(pilot, lambda: not isinstance(app.screen, LoadErrorScreen) and status(app) == "paused",
                         what="the reloaded run")
        assert app.client.view.workflow == "ReviewWorkflow"


async def test_run_keys_typed_as_the_error_screen_reloads_are_queued(tmp_path):
    """r on the error screen, then n n: the screen stays while the flow loads, and each n was dropped ("No run
    yet."), not queued as run keys typed while a flow loads are."""
    flow = tmp_path / "flow.py"
    flow.write_text("from flowtui import workflow\n\n@workflow(steps=[]\nclass W:\n    pass\n")
    app = make(str(flow), input="go")
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), what="the error screen")
        flow.write_text(Path(REVIEW).read_text())
        await pilot.press("r", "n", "n")
        await wait_until(pilot, lambda: types(app).count("run.resume") == 2 and status(app) == "paused",
                         what="both turns run")
        assert app.client.view.status_line() == "paused before Writer"  # the second round's


async def test_quitting_at_a_flow_that_could_not_load_exits_2_as_flowtui_run_does():
    """It exited 0: a script starting the app could not tell a flow that never loaded."""
    app = make(str(FLOWS / "broken_flow.py"), input="go")
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), what="the error screen")
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_code is not None, what="the app to quit")
    assert app.return_code == 2
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_code is not None, what="the app to quit")
    assert app.return_code == 0


async def test_ten_thousand_messages_still_answer_a_key():
    app = make("tests/tui/flows/many_messages.py", input="flood")
    async with app.run_test(size=(120, 40)) as pilot:
        await paused(pilot)
        await pilot.press("c")
        await ended(pilot, timeout=30)
        conversation = app.main.conversation
        assert len(conversation.messages) == 10_001
        # Each key moves the cursor within a second of the app's work (CPU time: a loaded machine's wait for
        # a core is not the app's). The key goes in as a terminal's would (simulate_key): pilot.press()
        # first waits for the app to look idle, which a 100 Hz redraw timer never does, so it would time
        # Pilot's wait, not the app.
        for key, want in (("home", 0), ("pagedown", None), ("end", 10_000), ("up", 9_999)):
            before = conversation.cursor
            t0 = time.process_time()
            app.simulate_key(key)
            moved = (lambda: conversation.cursor == want) if want is not None else (lambda: conversation.cursor != before)
            await wait_until(pilot, moved, timeout=30, what=key)
            assert time.process_time() - t0 < 1.0, key


async def test_an_idle_app_stops_ticking_and_a_key_wakes_it():
    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        ticks = []
        flush = app.flush
        app.flush = lambda **kw: (ticks.append(1), flush(**kw))[1]
        await asyncio.sleep(1.6)  # past the second the tick stays awake after the last events
        for _ in range(6):  # (a loaded machine may bring the last events late: then it sleeps later)
            ticks.clear()
            await asyncio.sleep(0.5)
            if len(ticks) <= 2:  # at 100 Hz it would be ~50
                break
        assert len(ticks) <= 2, "the app never stopped ticking"
        seq = app.client.view.pause.seq
        app.simulate_key("s")
        await asyncio.sleep(0.5)
        assert len(ticks) >= 5  # awake again (asleep it would be at most 2)
        await paused(pilot, after=seq)


async def test_a_paste_of_several_lines_into_the_add_dialog_keeps_them_all():
    # the one-line box kept the first line of a paste and dropped the rest without a word
    from textual import events
    from textual.widgets import TextArea

    app = make(input="Write about ctx.state")
    async with app.run_test(size=(120, 36)) as pilot:
        await paused(pilot)
        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the add dialog")
        await pilot.press("N", "B", ":", "space")
        app.screen.query_one("#dialog-input").post_message(events.Paste("line1\nline2\n\nline4"))
        await wait_until(pilot, lambda: bool(app.screen.query(TextArea)), what="the box to grow")
        await pilot.press("enter", "e", "n", "d")  # enter is a new line now
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not isinstance(app.screen, TextDialog), what="the dialog to close")
        await wait_until(pilot, lambda: bool(app.client.view.memory), what="the memory item")
        assert app.client.view.memory[-1] == "NB: line1\nline2\n\nline4\nend"


async def test_lines_pasted_into_the_add_dialog_then_esc_come_back_as_lines():
    """What was typed, then esc, comes back when the dialog opens again: lines pasted into its one-line box
    come back in the text area they made (the box drew their line breaks raw)."""
    from textual import events
    from textual.widgets import Input, TextArea

    app = make(input="Write about ctx.state")
    async with app.run_test(size=(120, 36)) as pilot:
        await paused(pilot)
        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the add dialog")
        app.screen.query_one("#dialog-input").post_message(events.Paste("line1\nline2"))
        await wait_until(pilot, lambda: bool(app.screen.query(TextArea)), what="the box to grow")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.main, what="the dialog closed")
        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog) and bool(app.screen.query(TextArea)),
                         what="the add dialog, with its lines")
        assert app.screen.query_one(TextArea).text == "line1\nline2" and not app.screen.query(Input)
        assert "What you typed before esc is back" in str(app.screen.query_one("#dialog-error").render())
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.client.view.memory and app.client.view.memory[-1] == "line1\nline2",
                         what="the memory item")
        await pilot.press("A")  # saved: the draft is gone
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the add dialog")
        assert app.screen.query_one(Input).value == ""


async def test_keys_typed_in_one_burst_with_the_one_that_opens_a_dialog_reach_neither_the_dialog_nor_the_run():
    """A dialog takes the keys typed once it shows: `a` then `sxq tests` fast never steps, stops or quits
    the run, and leaves no scrambled text in the box (handing the burst to it saved `buy milk` as
    ` milkbuy`); the dialog stays open for what is typed next."""
    from textual import events

    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        seen = app.client.view.events
        for ch in "asxq tests":  # `a` and the rest in one burst, as a terminal hands a fast typist's keys on
            app.post_message(events.Key("space" if ch == " " else ch, ch))
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog) and app.screen.is_mounted,
                         what="the add dialog")
        await pilot.pause(0.2)
        assert app.is_running and isinstance(app.screen, TextDialog)
        assert app.client.view.events == seen and app.client.view.status_line() == "paused before Writer"
        assert "sxq tests".endswith(app.screen.value)  # nothing out of order: at most the burst's end
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.main, what="the dialog closed")
        assert app.client.view.tasks == []


async def test_keys_typed_in_one_burst_in_a_dialog_box_are_applied_in_the_order_typed():
    """Once a dialog shows, a burst typed in its box (keys arriving in one read: ssh, a key macro) had its
    letters overtake its editing keys, which Textual runs only after they bubble up to the app:
    `abc⌫d` saved `abc`, and End ⌫⌫ XYZ on "buy milk" saved `XYZbuy mi`."""
    from textual import events

    def burst(*keys: str) -> None:
        for key in keys:
            app.post_message(events.Key(key, key if len(key) == 1 else None))

    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog) and app.screen.is_mounted,
                         what="the add dialog")
        await pilot.pause(0.1)
        burst("a", "b", "c", "backspace", "d", "left", "x", "home", "y", "end", "z")
        await wait_until(pilot, lambda: len(app.screen.value) >= 6, what="the keys typed")
        await pilot.pause(0.2)
        assert app.screen.value == "yabxdz"
        burst("enter")  # a one-line box: enter saves, in its turn too
        await wait_until(pilot, lambda: app.client.view.tasks != [], what="the task added")
        assert app.client.view.tasks == ["yabxdz"]


async def test_a_question_is_never_answered_by_a_key_typed_with_the_one_that_asked_it():
    """`r` then `y` in one burst: the `y` was typed before "stop the run and reload?" showed; it stops
    nothing."""
    from textual import events

    app = make(input="go")
    async with app.run_test() as pilot:
        await paused(pilot)
        first = app.client.view.run_id
        for key in "ry":
            app.post_message(events.Key(key, key))
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the question")
        await pilot.pause(0.2)
        assert isinstance(app.screen, ConfirmDialog)
        assert app.client.view.run_id == first and status(app) == "paused"
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen is app.main, what="the question gone")
        assert app.client.view.run_id == first


async def test_the_palette_shows_names_from_the_flow_as_written_never_as_markup(tmp_path):
    """An agent named x[/] crashed the palette (MarkupError) once it was searched; one named with
    [@click=app.quit] showed a link that quit the app when clicked; one holding a backslash showed it
    doubled (a\\[b]v as a\\\\[b]v)."""
    names = ["x[/]", "y[@click=app.quit]z", "[link=http://e.x/]w", "a\\[b]v", "q\\"]
    flow = tmp_path / "flow.py"
    flow.write_text(
        "from flowtui import FunctionProvider, agent, workflow\n"
        + "".join(f"@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='p', name={n!r})\nclass A{i}:\n"
                  "    pass\n" for i, n in enumerate(names))
        + "@workflow(steps=[A0, A1, A2, A3, A4])\nclass W:\n    pass\n")
    app = make(str(flow), input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await pilot.press(*"breakpoint set")
        await wait_until(pilot, lambda: len([p for p in palette_prompts(app) if "breakpoint: set on" in p])
                         == len(names),
                         what="the agents' entries")
        shown = "\n".join(palette_prompts(app))
        for name in names:
            assert f"breakpoint: set on {name}" in shown and f"Pause before {name}" in shown, shown
        assert app.is_running


async def test_a_choice_named_by_a_file_is_drawn_as_written(tmp_path):
    """The diff picker's buttons are journal file names: one holding [/] would crash the dialog
    (markup), and a shown escape lost its backslash."""
    from textual.widgets import Button

    from flowtui.tui.screens.dialogs import ChoiceDialog

    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        app.push_screen(ChoiceDialog("Compare this run with…", [("1", "x[/]y\u202e.jsonl", "a")]))
        await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the dialog")
        labels = [str(b.label) for b in app.screen.query(Button)]
        assert "x[/]y\\u202e.jsonl [1]" in labels, labels


async def test_the_reload_question_shows_each_button_whole_at_80x24():
    """Side by side, its three buttons were wider than the dialog: "Cancel [esc" lost its "]"."""
    from textual.widgets import Button

    from flowtui.tui.screens.dialogs import ChoiceDialog

    app = make(input="go")
    async with app.run_test(size=(80, 24)) as pilot:
        await paused(pilot)
        app.push_screen(ChoiceDialog("Reload the flow's code, and then?", [("c", "Continue from there", "continue"),
                                                                           ("r", "Start over", "restart")]))
        await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the dialog")
        await pilot.pause()
        dialog = app.screen.query_one(".dialog").content_region
        for button in app.screen.query(Button):
            assert dialog.contains_region(button.region), (str(button.label), button.region, dialog)


PARALLEL_OWN_RUN = '''
from flowtui import ChatRequest, FunctionProvider, Message, agent, parallel, tool, workflow

@tool
async def somar(a: int, b: int) -> int:
    """Adds.

    Args:
        a: first
        b: second
    """
    return a + b

def calc(messages, tools):
    if any(m.role == "tool" for m in messages):
        return "5"
    return {"content": "", "tool_calls": [{"name": "somar", "args": {"a": 2, "b": 3}}]}

@agent(provider=FunctionProvider(calc), prompt="calc", tools=[somar])
class Calc:
    pass

@agent(provider=FunctionProvider(lambda m, t: "um verso"), prompt="poeta")
class Poeta:
    async def run(self, input, ctx):
        reply = await self.provider.complete(ChatRequest(messages=[Message(role="system", content=self.prompt),
                                                                  Message(role="user", content="um verso")]))
        return reply.content

@workflow(steps=[parallel([Calc, Poeta])])
class W:
    pass
'''


async def test_a_run_agents_own_request_is_not_said_to_fail_for_the_shared_history(tmp_path):
    """Paused before the model call an agent's own run() makes (its own two messages), in a parallel
    step whose other branch had a tool call still to be answered in the shared history: "The history
    is not a valid conversation ... The next model call will fail", and it went through."""
    flow = tmp_path / "flow.py"
    flow.write_text(PARALLEL_OWN_RUN)
    app = make(str(flow), input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        open_call = False
        for _ in range(12):
            pause = app.client.view.pause
            history = app.client.view.history
            if (pause.point, pause.name) == ("chat", "Poeta"):
                open_call = any(m.tool_calls for m in history) and not any(m.role == "tool" for m in history)
                break
            await press_and_pause(pilot, "s")
        assert (pause.point, pause.name) == ("chat", "Poeta") and open_call  # (what the case is)
        await pilot.pause(0.3)
        said = " ".join(str(n.message) + str(n.title) for n in app._notifications)
        assert "not a valid conversation" not in said, said
        await pilot.press("c")
        await ended(pilot)
        assert app.client.view.status == "finished"


async def test_the_palette_says_removing_a_breakpoint_stops_the_pauses():
    """"breakpoint: remove on Writer" was described as "Pause before Writer", what it undoes."""
    app = make(input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await pilot.press("b")  # before Writer
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await pilot.press(*"breakpoint remove")
        await wait_until(pilot, lambda: any("breakpoint: remove on Writer" in p for p in palette_prompts(app)),
                         what="the entry")
        entry = next(p for p in palette_prompts(app) if "breakpoint: remove on Writer" in p)
        assert "No longer pause before Writer" in entry and "\nPause before" not in entry, entry


async def test_the_reload_question_says_each_choice_on_a_line_of_its_own_at_80x24(tmp_path):
    """"…if it does something else before, you see where. Start over: a new run from the first step." ran the two
    choices' words together at 80 columns."""
    from textual.widgets import Static

    from flowtui.tui.screens.dialogs import ChoiceDialog

    app = make(input="go", journal=str(tmp_path / "j.jsonl"))
    async with app.run_test(size=(80, 24)) as pilot:
        await paused(pilot)
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="the reload question")
        hint = next(str(s.render()) for s in app.screen.query(Static) if "Start over:" in str(s.render()))
        assert hint.startswith("Continue from here: ") and "\nStart over: a new run from the first step." in hint, hint
        await pilot.press("escape")
