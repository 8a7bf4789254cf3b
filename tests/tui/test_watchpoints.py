"""Watchpoints in the app: each kind, set with --watch, pauses the run after the event that made it
true, and the status line says which and where; w on a state field sets one (refused ones say where
they are wrong, the dialog stays); the control pane lists them, W removes one; the palette does both."""

from __future__ import annotations

import pytest
from conftest import make, paused, wait_until

from flowtui.tui.screens.dialogs import TextDialog
from flowtui.tui.screens.watches import WatchListDialog
from flowtui.tui.widgets.control import ControlPane

WATCHED = "tests/tui/flows/watched.py"  # Planner, then Writer (look) / Reviewer rounds; see its docstring


def _line(app, name: str) -> str:
    return str(app.main.query_one(ControlPane).query_one(f"#{name}").render())


def _event(app, seq: int):
    return next(ev for ev in app.client.events if ev.seq == seq)


async def _continue_to_watchpoint(pilot):
    app = pilot.app
    await paused(pilot)
    seq = app.client.view.pause.seq
    await pilot.press("c")
    await paused(pilot, after=seq)
    pause = app.client.view.pause
    assert pause.reason == "watchpoint", pause
    return pause


@pytest.mark.parametrize("expr,fired_by", [
    ("state.rounds", lambda ev: (ev.type, ev.path, ev.new) == ("workflow_state.change", "rounds", 1)),
    ("state.approved == true", lambda ev: (ev.type, ev.path, ev.new) == ("workflow_state.change", "approved", True)),
    ("memory ~ /plano/i", lambda ev: (ev.type, ev.bucket, ev.item) == ("state.append", "memory", "Plano: escrever bem")),
    ("tasks ~ /revis/", lambda ev: (ev.type, ev.bucket, ev.item) == ("state.append", "tasks", "revisar o texto")),
    ("prompt.tokens > 1500", lambda ev: ev.type == "state.append" and ev.item.role == "tool"),  # the 2nd look's result
    ("cost > 0.60", lambda ev: (ev.type, ev.kind, ev.data["cost_usd"]) == ("node.end", "chat", 0.25)),
    ("repeat(look) >= 3", lambda ev: ev.type == "state.append" and ev.item.tool_calls[0].name == "look"),
])
async def test_each_kind_given_with_watch_pauses_at_the_event_that_made_it_true(expr, fired_by):
    app = make(WATCHED, input="go", watch=[expr])
    async with app.run_test(size=(140, 40)) as pilot:
        pause = await _continue_to_watchpoint(pilot)
        (hit,) = pause.watch
        assert hit.expr == expr and fired_by(_event(app, hit.seq))
        assert not [ev for ev in app.client.events if hit.seq < ev.seq < pause.seq and ev.type == "run.pause"]
        assert app.client.view.status_line().endswith(f"(watchpoint {expr}, at #{hit.seq})")
        assert _line(app, "watches").startswith(f"watch: ◆ {expr}")
        await wait_until(pilot, lambda: any(expr in str(n.message) for n in app._notifications),
                         what="the notification saying what made it true")
        said = [str(n.message) for n in app._notifications if expr in str(n.message)]
        assert not any(f"{expr}: {expr}:" in line for line in said), said  # the subject said once


async def test_w_on_a_state_field_sets_a_watchpoint_from_its_change_and_the_run_pauses_there():
    app = make(WATCHED, input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await pilot.press("s", "s", "s")  # the Planner's turn has run: memory and tasks have an item
        await paused(pilot)
        app.main.sidebar.focus()
        assert app.main.sidebar.select_id("field:rounds")
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the watch dialog")
        field = app.screen.query_one("#dialog-input")
        assert field.value == "state.rounds"  # prefilled: the field's change
        hint = str(app.screen.query_one("#dialog-hint").render())  # examples on this flow's own fields
        assert "state.rounds >= 1, state.approved == true" in hint and "rodadas" not in hint, hint
        await pilot.press(*" >>= 2")  # typed after it (it was selected: typing replaced it)
        assert field.value == "state.rounds >>= 2"
        await pilot.press("ctrl+s")
        await pilot.pause()
        error = str(app.screen.query_one("#dialog-error").render())
        assert isinstance(app.screen, TextDialog)  # refused: the dialog stays and says where
        assert error.splitlines() == ["✗ expected a value: a number, 'text', true, false or null (column 15)",
                                      "  state.rounds >>= 2",
                                      "                ^"]  # under the second >
        field.value = "state.rounds >= 2"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen is app.main, what="the dialog to close")
        assert app.client.watches == ["state.rounds >= 2"]
        assert any("Watchpoint state.rounds >= 2 set: the run pauses when it becomes true." in str(n.message)
                   for n in app._notifications)
        await wait_until(pilot, lambda: _line(app, "watches").startswith("watch: state.rounds >= 2"),
                         what="the control pane's list")
        pause = await _continue_to_watchpoint(pilot)
        changed = _event(app, pause.watch[0].seq)
        assert (changed.type, changed.path, changed.new) == ("workflow_state.change", "rounds", 2)


async def test_a_field_watched_alone_is_said_to_pause_at_each_change_of_it():
    """`w` on a field, saved as it came (state.rounds): the notice said it pauses "when it becomes true"."""
    app = make(WATCHED, input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        app.main.sidebar.focus()
        assert app.main.sidebar.select_id("field:rounds")
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the watch dialog")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.client.watches == ["state.rounds"], what="the watchpoint")
        await wait_until(pilot, lambda: any("Watchpoint state.rounds set: the run pauses at each change of it."
                                            in str(n.message) for n in app._notifications), what="the notice")


async def test_w_on_a_memory_item_types_the_pattern_between_its_slashes():
    """The prefill `memory ~ //i` put the cursor after its flags: `plano` typed made `//iplano`, refused
    as an unknown flag."""
    app = make(WATCHED, input="go")
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await pilot.press("s", "s", "s")  # the Planner's turn has run: memory has an item
        await paused(pilot)
        app.main.sidebar.focus()
        assert app.main.sidebar.select_id("memory:0")
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the watch dialog")
        await pilot.press(*"plano")
        assert app.screen.query_one("#dialog-input").value == "memory ~ /plano/i"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen is app.main, what="the dialog to close")
        assert app.client.watches == ["memory ~ /plano/i"]


async def test_big_w_lists_the_watchpoints_and_d_removes_one():
    app = make(WATCHED, input="go", watch=["state.rounds >= 2", "memory ~ /plano/i"])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        await pilot.press("W")
        await wait_until(pilot, lambda: isinstance(app.screen, WatchListDialog), what="the list")
        await pilot.press("down", "d")
        await wait_until(pilot, lambda: app.client.watches == ["state.rounds >= 2"], what="the removal")
        assert app.screen.watches == ["state.rounds >= 2"]  # the list shows what is left
        await pilot.press("escape")
        pause = await _continue_to_watchpoint(pilot)
        assert [h.expr for h in pause.watch] == ["state.rounds >= 2"]  # memory ~ /plano/i never fired


async def test_the_palette_watches_a_fields_change_and_removes_a_watchpoint():
    app = make(WATCHED, input="go", watch=["cost > 100"])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        assert {"run: watch", "run: watchpoints", "watch: remove cost > 100",
                "watch: when state.approved changes"} <= set(commands)
        commands["watch: remove cost > 100"].callback()
        await wait_until(pilot, lambda: app.client.watches == [], what="the removal")
        await wait_until(pilot, lambda: not app.main.query_one("#watches").display, what="the list line to go")
        commands["watch: when state.approved changes"].callback()
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the watch dialog")
        assert app.screen.query_one("#dialog-input").value == "state.approved"
        await pilot.press("ctrl+s")
        pause = await _continue_to_watchpoint(pilot)
        assert pause.watch[0].detail == "state.approved: false → true"


async def test_a_watchpoint_the_flow_refuses_is_dropped_with_why_and_the_run_starts():
    app = make(WATCHED, input="go", watch=["state.rodadas >= 3", "state.rounds >= 3"])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        assert app.client.watches == ["state.rounds >= 3"]
        await wait_until(pilot, lambda: any("unknown state field 'rodadas'" in str(n.message)
                                            for n in app._notifications), what="the notice")


async def test_a_watchpoint_the_flow_refuses_is_said_before_the_first_message_with_the_caret_under_it():
    """With no --input, a --watch naming a field the flow lacks showed as set while the first message was
    asked for, and was said dropped only once the run had started; the notice's caret, under the end
    of a wrapped line, stood under no part of the expression."""
    from flowtui.tui.screens.dialogs import FirstMessageDialog

    app = make(WATCHED, watch=["state.rodadas >= 3", "state.rounds >= 3"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: any("unknown state field 'rodadas'" in str(n.message)
                                            for n in app._notifications), what="the notice")
        assert isinstance(app.screen, FirstMessageDialog) and app.client.view.status == "idle"  # nothing ran
        assert app.client.watches == ["state.rounds >= 3"]
        lines = next(str(n.message) for n in app._notifications if "rodadas" in str(n.message)).splitlines()
        shown = next(line for line in lines if line.strip().startswith("state.rodadas"))
        caret = lines[lines.index(shown) + 1]
        assert caret.strip() == "^" and shown[caret.index("^"):].startswith("rodadas"), lines


async def test_a_refused_watchpoint_is_said_whole_at_80_by_24_with_the_buttons_on_screen():
    """The refusal was cut to its first 4 lines under the examples: the list of the state's fields, what
    to write, was not shown."""
    app = make(WATCHED, input="go")
    async with app.run_test(size=(80, 24)) as pilot:
        await paused(pilot)
        await pilot.press("W")
        await wait_until(pilot, lambda: isinstance(app.screen, WatchListDialog), what="the list")
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the watch dialog")
        app.screen.query_one("#dialog-input").value = "state.roudns > 3"
        await pilot.press("ctrl+s")
        error = app.screen.query_one("#dialog-error")
        await wait_until(pilot, lambda: "roudns" in str(error.render()), what="the refusal")
        await pilot.pause()
        said = str(error.render())
        assert "WatchedState (the state of WatchedWorkflow) has the fields rounds, approved, notes" in said, said
        needed = error.get_content_height(app.size, app.size, error.content_region.width)  # its lines, wrapped
        assert needed >= 5 and error.content_region.height >= needed, (error.content_region, needed, said)
        for button in ("#dialog-save", "#dialog-cancel"):
            region = app.screen.query_one(button).region
            assert region.height == 3 and region.bottom <= 24, (button, region)


def test_a_long_refused_watchpoint_is_shown_around_its_fault_so_the_caret_stays_under_it():
    """Wrapped by the dialog, the expression's second line came above the caret, under another part."""
    from types import SimpleNamespace

    from flowtui.tui.watchpoints import EXPR_SHOWN, refusal_text

    expr = ("len(state.problemas) >= 2 and memory ~ /plano/i and state.rodadas >>= 3 and tasks ~ /revisar/ "
            "and history ~ /APROVADO/")
    column = expr.index(">>=") + 2  # the second '>' (1-based)
    text = refusal_text(SimpleNamespace(value={"message": "expected a value", "column": column, "expr": expr,
                                               "hint": None}, error=None))
    first, shown, caret = text.splitlines()
    assert first == f"expected a value (column {column})"
    assert len(shown) <= EXPR_SHOWN + 4 and shown.startswith("  …") and shown.endswith("…")
    assert shown[caret.index("^")] == ">" and shown[caret.index("^") - 1] == ">"  # under the fault


def test_the_dialogs_caret_counts_the_cells_a_wide_character_takes():
    from types import SimpleNamespace

    from rich.cells import cell_len

    from flowtui.tui.watchpoints import refusal_text

    expr = "memory ~ /日本語/q"
    text = refusal_text(SimpleNamespace(value={"message": "unknown pattern flag 'q'", "column": expr.index("q") + 1,
                                               "expr": expr, "hint": None}, error=None))
    _, shown, caret = text.splitlines()
    assert cell_len(caret) - 1 == cell_len(shown[:shown.index("q")])  # under the q, as a terminal draws them


async def test_a_watchpoint_taken_off_for_its_slow_pattern_leaves_the_list():
    """Its pattern backtracked on a text past the search's limit: the run took it off and paused there;
    the control pane, W and the palette no longer list it (they did, as if it still watched)."""
    slow = "history ~ /(a|aa)+$/"
    app = make("flows/revisao.py", input="a" * 40 + "!", watch=[slow, "memory ~ /nunca/"])
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        pause = app.client.view.pause
        assert pause.reason == "watchpoint" and "this watchpoint is off now" in pause.watch[0].detail, pause
        await wait_until(pilot, lambda: app.client.watches == ["memory ~ /nunca/"], what="the list without it")
        assert slow not in _line(app, "watches")
        await pilot.press("W")
        await wait_until(pilot, lambda: isinstance(app.screen, WatchListDialog), what="the list")
        assert app.screen.watches == ["memory ~ /nunca/"]


LAST_STEP = "tests/tui/flows/last_step.py"


async def test_a_watchpoint_the_last_step_made_true_pauses_at_the_end_and_says_no_call_follows():
    """No pause point followed the change: the run finished with the watchpoint unsaid. What the model sees
    there drew the prompt as the next call's, with none to come."""
    app = make(LAST_STEP, input="go", watch=["state.nome"], journal=None)
    async with app.run_test(size=(140, 40)) as pilot:
        pause = await _continue_to_watchpoint(pilot)
        assert (pause.point, pause.name) == ("end", "StWorkflow")
        assert app.client.view.status_line() == f"paused at the end of StWorkflow (watchpoint state.nome, at " \
                                                f"#{pause.watch[0].seq})"
        await pilot.press("2")
        await pilot.pause()
        sees = app.main.query_one("#model-sees")
        assert "system · the last call's agent prompt (the run's steps are done: no call follows)" in \
            [str(label) for label in sees.labels.values()]
        seq = pause.seq
        await pilot.press("c")
        await wait_until(pilot, lambda: app.client.view.status == "finished", what="the run's end")
        assert not [ev for ev in app.client.events if ev.type == "run.pause" and ev.seq > seq]
