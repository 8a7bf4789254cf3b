"""Pilot tests: a child workflow's run is its own run in the app: paused inside it, the panes show
its history and memory, edits go to it, and the node tree's cursor on the parent shows the parent."""

from __future__ import annotations

import flowcapture
from conftest import make, paused, press_and_pause, wait_until

from flowtui.tui.screens.dialogs import TextDialog

CHILD = "tests/tui/flows/child_fn.py:CoordinatorWorkflow"


async def inside_the_child(pilot) -> None:
    """Paused before the researcher's model call, inside ResearchWorkflow."""
    await paused(pilot)
    view = pilot.app.client.view
    while not (view.pause.point == "chat" and view.pause.name == "Researcher"):
        await press_and_pause(pilot, "s")
        view = pilot.app.client.view


async def test_paused_inside_a_child_the_panes_show_the_child_and_edits_go_to_it():
    app = make(CHILD, input="What is ctx.state, in short?")
    async with app.run_test(size=(140, 40)) as pilot:
        await inside_the_child(pilot)
        view = app.client.view
        assert [m.content for m in view.history] == ["What is ctx.state?"]
        assert view.memory == ["asked_by: coordinator"]
        assert " › ".join(view.path()).startswith("ResearchWorkflow (child of CoordinatorWorkflow)")
        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the add dialog")
        app.screen.query_one("Input").value = "answer in one line"
        await pilot.press("enter")
        await wait_until(pilot, lambda: "answer in one line" in app.client.view.memory, what="child memory +1")
        top = view.runs[view.run_id]
        assert top.memory == []  # the parent run is untouched
        await press_and_pause(pilot, "s")  # the child's model call
        agent, messages = flowcapture.requests()[-1]
        assert agent == "Researcher"
        assert "answer in one line" in messages[1].content and messages[-1].content == "What is ctx.state?"


async def test_the_watch_dialogs_examples_inside_a_child_are_the_childs():
    # (every flow was offered state.rodadas >= 3; in a child, an example the parent's watchpoints would read)
    app = make(CHILD, input="What is ctx.state, in short?")
    async with app.run_test(size=(140, 40)) as pilot:
        await inside_the_child(pilot)
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog), what="the watch dialog")
        hint = str(app.screen.query_one("#dialog-hint").render())
        assert "a condition: ResearchWorkflow: len(history) > 10, memory" in " ".join(hint.split()), hint


async def test_the_node_tree_cursor_on_the_parent_shows_the_parents_panes_until_the_run_moves():
    app = make(CHILD, input="What is ctx.state, in short?")
    async with app.run_test(size=(140, 40)) as pilot:
        await inside_the_child(pilot)
        await pilot.press("4")
        tree = app.main.pane_widget("nodes")
        await wait_until(pilot, lambda: tree.has_focus, what="the node tree focused")
        await pilot.press("home")  # the top-level workflow's node
        await wait_until(pilot, lambda: app.client.view.history[0].content == "What is ctx.state, in short?",
                         what="the parent's history")
        assert app.client.view.memory == []
        await pilot.press("end")  # the deepest node: inside the child
        await wait_until(pilot, lambda: app.client.view.history[0].content == "What is ctx.state?",
                         what="the child's history")
        await pilot.press("home")
        await wait_until(pilot, lambda: app.client.view.memory == [], what="the parent again")
        await pilot.press("1")  # the conversation's title names the run shown, not the one paused in
        views = app.main.query_one("#views")
        await wait_until(pilot, lambda: str(views.border_title).endswith(" · CoordinatorWorkflow"),
                         what="the parent named in the title")
        await press_and_pause(pilot, "s")  # the run moves: the panes follow it (into the child's reply)
        assert app.client.view.focus is None
        await wait_until(pilot, lambda: "·" not in str(views.border_title), what="the title without a run")


async def test_the_palette_offers_a_breakpoint_on_a_child_workflows_agent_once_it_has_run():
    """The palette offered the top-level workflow's agents and tools only: a child's agent could be
    broken on from the node tree (b) but not from the palette, nor its breakpoint removed there."""
    app = make(CHILD, input="What is ctx.state, in short?")
    async with app.run_test(size=(140, 40)) as pilot:
        await inside_the_child(pilot)
        assert "Researcher" not in app.client.hello.agents  # a child's: known only once it runs

        def commands() -> dict:
            return {str(c.title): c for c in app.get_system_commands(app.screen)}

        assert "breakpoint: set on Researcher" in commands()
        commands()["breakpoint: set on Researcher"].callback()
        await wait_until(pilot, lambda: "Researcher" in app.client.breakpoints, what="the breakpoint set")
        assert "breakpoint: remove on Researcher" in commands()


async def test_a_breakpoint_set_on_a_name_the_run_has_not_met_yet_can_be_removed_from_the_palette():
    app = make(CHILD, input="What is ctx.state, in short?", breakpoints={"Researcher"})
    async with app.run_test(size=(140, 40)) as pilot:
        await paused(pilot)
        titles = {str(c.title) for c in app.get_system_commands(app.screen)}
        assert "breakpoint: remove on Researcher" in titles, sorted(t for t in titles if "breakpoint" in t)
