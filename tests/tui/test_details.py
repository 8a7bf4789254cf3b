"""The smaller promises: one loop counter everywhere, `loop` drawn once, a missing flow file exits 2,
a load error said once, a replay that offers no edits."""

from __future__ import annotations

import textwrap

import pytest
from conftest import make, paused, press_and_pause, wait_until

from flowtui.runtime.journal import read_journal
from flowtui.tui.replay import make_replay
from flowtui.tui.screens.error import LoadErrorScreen


def tree_labels(tree) -> list[str]:
    out, todo = [], list(tree.root.children)
    while todo:
        node = todo.pop(0)
        out.append(str(node.label))
        todo[0:0] = node.children
    return out


def loop_label(labels: list[str]) -> str:
    return next(label for label in labels if " loop " in f" {label} ").split("  ")[0]


async def test_the_loop_counter_agrees_in_the_status_line_the_node_tree_and_the_replay(tmp_path):
    journal = tmp_path / "j.jsonl"
    app = make(input="go", journal=str(journal))
    seen = []
    async with app.run_test(size=(120, 36)) as pilot:
        await paused(pilot)
        await pilot.press("4")
        tree = app.main.query_one("#nodes")
        for key in ("l", "s", "l"):  # iteration 1 ends; iteration 2 starts; iteration 2 ends
            await press_and_pause(pilot, key)
            await pilot.pause()
            where = str(app.main.query_one("#where").render())
            seen.append((app.client.view.status_line(), where.split("   ")[0], loop_label(tree_labels(tree)),
                         app.client.view.pause.seq))
    assert [s[:3] for s in seen] == [
        ("paused after an iteration of loop", "ReviewWorkflow › loop 1/4", "● loop 1/4"),
        ("paused before Writer", "ReviewWorkflow › loop 2/4 › Writer", "● loop 2/4"),
        ("paused after an iteration of loop", "ReviewWorkflow › loop 2/4", "● loop 2/4"),
    ]
    replay = make_replay(journal)
    async with replay.run_test(size=(120, 36)) as pilot:
        await pilot.press("4")
        tree = replay.main.query_one("#nodes")
        for _, path, label, k in seen:  # at the same events, the replay says what the live app said
            replay.go(k)
            await pilot.pause()
            assert loop_label(tree_labels(tree)) == label
            assert str(replay.main.query_one("#where").render()).startswith(path)
        for k in range(len(replay.timeline) + 1):  # and at every event, its tree and its path agree
            replay.go(k)
            await pilot.pause()
            where = str(replay.main.query_one("#where").render()).split("   ")[0]
            loops = [part for part in where.split(" › ") if part.startswith("loop ")]
            if loops and replay.view.status in ("running", "paused"):
                assert loop_label(tree_labels(tree)) == f"● {loops[0]}", k


def test_the_loop_label_is_the_iteration_in_progress_at_every_event(tmp_path):
    """Folded from a journal with pauses: at each pause the node tree's loop says what the pause's
    path says; between pauses, the number moves on only when the next iteration starts."""
    import asyncio

    from flowtui.runtime.fold import RunView
    from flowtui.runtime.loader import load_flow

    journal = tmp_path / "j.jsonl"
    asyncio.run(load_flow("tests/tui/flows/review_fn.py").run("go", journal=journal))
    view = RunView()
    labels = []
    for ev in read_journal(journal):
        view.apply(ev)
        loop = next((n for n in view.nodes.values() if n.kind == "loop"), None)
        if loop is not None:
            labels.append((ev.type, getattr(ev, "kind", None), getattr(ev, "name", None), loop.label))
    starts = [label for type, kind, _, label in labels if (type, kind) == ("node.start", "agent")]
    assert starts == ["loop 1/4", "loop 1/4", "loop 2/4", "loop 2/4"]
    # the loop's start (ctx.loop set, 0 iterations) is its first; an iteration's end keeps its number: the
    # next starts with its first step
    assert [label for type, _, name, label in labels if (type, name) == ("ctx.set", "loop")] == \
        ["loop 1/4", "loop 1/4", "loop 2/4", "loop 2/4"]
    assert labels[-1][3] == "loop 2/4"  # ended after two iterations


def test_a_missing_flow_file_exits_2_from_the_app_too(capsys):
    from flowtui.tui.cli import main

    with pytest.raises(SystemExit) as exit:
        main(["nope.py", "--input", "x"])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert "flowtui: cannot load nope.py: no such flow file" in err and "Traceback" not in err


async def test_a_missing_prompt_file_is_said_once_on_the_error_screen(tmp_path):
    flow = tmp_path / "flow.py"
    flow.write_text(textwrap.dedent("""
        from flowtui import FunctionProvider, agent, workflow

        @agent(provider=FunctionProvider(lambda m, t: "x"), prompt="./missing.agent.md")
        class A:
            pass

        @workflow(steps=[A])
        class W:
            pass
    """))
    app = make(str(flow), input="x")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), what="the error screen")
        text = "\n".join(str(w.render()) for w in app.screen.query("Static"))
        assert text.count("prompt file not found") == 1
        assert f"{tmp_path / 'missing.agent.md'}" in text and str(flow) in text


async def test_the_replay_sidebar_offers_no_edits(tmp_path):
    from flowtui.runtime.loader import load_flow

    journal = tmp_path / "j.jsonl"
    await load_flow("tests/tui/flows/review_fn.py").run("go", journal=journal)
    app = make(input="go")
    async with app.run_test(size=(120, 36)) as pilot:
        await paused(pilot)
        await pilot.pause()
        live = [line.text for line in map(app.main.sidebar.render_line, range(12))]
    replay = make_replay(journal)
    async with replay.run_test(size=(120, 36)) as pilot:
        replay.go(3)
        await pilot.pause()
        replayed = [line.text for line in map(replay.main.sidebar.render_line, range(12))]
    assert any("a adds one" in line for line in live)
    assert any(line.strip() == "none" for line in replayed)  # the tasks: none, and nothing about keys
    assert not any("adds" in line or "press" in line for line in replayed)


async def test_a_line_break_in_the_flow_file_s_name_stays_on_the_error_screen_s_file_line(tmp_path):
    """Other control characters were shown as pictures; a line break in the name broke the file's line."""
    from flowtui.tui.screens.error import LoadErrorScreen

    flow = tmp_path / "bad\nname.py"
    flow.write_text("this is ( not python\n")
    app = make(str(flow), input="x")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), what="the error screen")
        where = str(app.screen.query_one("#error-where").render())
        assert where.splitlines()[0] == f"file  {tmp_path}/bad ⏎ name.py", where


# A file of two workflows: W1 runs agent A ("from A"), W2 agent B ("from B").
TWO_WORKFLOWS = textwrap.dedent("""
    from flowtui import ScriptedProvider, agent, workflow

    script = ScriptedProvider({"A": ["from A"], "B": ["from B"]})

    @agent(provider=script, prompt="p")
    class A:
        pass

    @agent(provider=script, prompt="p")
    class B:
        pass

    @workflow(steps=[A])
    class W1:
        pass

    @workflow(steps=[B])
    class W2:
        pass
""")


@pytest.mark.parametrize("suffix", ["", ":W3"])
async def test_a_file_of_several_workflows_offers_them_on_the_error_screen_and_runs_the_one_picked(tmp_path, suffix):
    """It said to fix the file and press r; the fix was on the command line (FILE:NAME), and r failed again."""
    flow = tmp_path / "two.py"
    flow.write_text(TWO_WORKFLOWS)
    app = make(str(flow) + suffix, input="x")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), what="the error screen")
        hint = str(app.screen.query_one("#error-hint").render())
        assert hint.startswith("Pick the workflow to run (↑ ↓ then enter), or fix the file and press r"), hint
        await pilot.press("down", "enter")
        await paused(pilot)
        assert app.client.workflow_name == "W2" and app.config.target == f"{flow}:W2"
        await pilot.press("c")
        await wait_until(pilot, lambda: app.client.view.status == "finished", what="the run's end")
        assert app.client.view.output == "from B"


async def test_a_workflow_picked_on_the_error_screen_is_re_executed_when_that_was_asked(tmp_path):
    """Picked with --resume-from given, the run started from the beginning: the re-execution asked for was
    dropped."""
    from flowtui.runtime.loader import load_flow

    flow = tmp_path / "two.py"
    flow.write_text(TWO_WORKFLOWS)
    journal = tmp_path / "j.jsonl"
    await load_flow(f"{flow}:W2").run("x", journal=journal)
    app = make(str(flow), resume_from=f"{journal}@4")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), what="the error screen")
        await pilot.press("down", "enter")
        await paused(pilot)
        assert "re-executed up to event #4 of its journal" in app.client.view.status_line(), \
            app.client.view.status_line()


async def test_a_bad_replies_file_is_said_as_the_options_fault_on_the_error_screen(tmp_path):
    """It was shown as "Could not load the flow", the flow's file named and "Fix the file" said, though
    the flow was never read: the fault was in the file --replies named."""
    bad = tmp_path / "bad.replies.toml"
    bad.write_text("{not toml\n")
    app = make(input="x", replies=str(bad))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, LoadErrorScreen), what="the error screen")
        text = "\n".join(str(w.render()) for w in app.screen.query("Static"))
        assert str(app.screen.query_one("#error-title").render()) == "Could not use --replies"
        assert str(app.screen.query_one("#error-where").render()) == f"file  {bad}"
        assert f"--replies {bad}: not valid TOML" in text and "Fix the file or the --replies option" in text
        assert "revisao.py" not in text


def test_the_sidebar_loop_is_the_paused_branchs_own_in_a_parallel_step(tmp_path):
    """Each branch reads its own ctx.loop; the sidebar showed the run's last one, often the other
    branch's (paused before A in loop la, it said lb's 0 of 3)."""
    import asyncio

    from flowtui import Controller, FunctionProvider, agent, bootstrap, loop, parallel, workflow
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.sidebar import sidebar_rows

    @agent(provider=FunctionProvider(lambda m, t: "a"), prompt="a")
    class A:
        pass

    @agent(provider=FunctionProvider(lambda m, t: "b"), prompt="b")
    class B:
        pass

    @workflow(steps=[parallel([loop([A], max_iterations=4, name="la"), loop([B], max_iterations=3, name="lb")])])
    class W:
        pass

    async def run() -> None:
        ctl = Controller(breakpoints=["A"])
        journal = tmp_path / "j.jsonl"
        run = bootstrap(W).prepare("go", controller=ctl, journal=journal)
        task = asyncio.ensure_future(run.execute())
        while not task.done():
            if ctl.paused:
                ctl.resume()
            await asyncio.sleep(0.002)
        await task

    asyncio.run(run())
    view, seen = RunView(), []
    for ev in read_journal(tmp_path / "j.jsonl"):
        view.apply(ev)
        if ev.type == "run.pause" and ev.name == "A":
            rows = "\n".join(text.plain for _, text in sidebar_rows(view, 60))
            seen.append((view.ctx["loop"]["max_iterations"], view.loop_shown()["max_iterations"],
                         "of 4 iterations done" in rows))
    assert seen[0] == (3, 4, True)  # lb wrote last; the sidebar says la's, where the run is paused
    assert all(shown == 4 and said for _, shown, said in seen), seen
