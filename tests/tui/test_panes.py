"""One place per pane and per action: the registry drives the live app and the replay alike, the
buttons are the run actions, every event type is folded (or deliberately not) and summarized."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from conftest import REVIEW, make, paused, press_and_pause, wait_until

from flowtui.runtime import fold
from flowtui.runtime.events import EVENT_CLASSES, EVENT_TYPES
from flowtui.tui.actions import ACTIONS, app_help_groups, key_name
from flowtui.tui.panes import PANES
from flowtui.tui.replay import KEYS, make_replay, replay_help_groups
from flowtui.tui.widgets.event_log import SUMMARIES, summarize

# Event types the fold leaves alone on purpose, and why.
NOT_FOLDED = {
    "dispose.error": "a cleanup broke after the run ended; the event log shows it",
}


def sample(cls: type) -> typing.Any:
    """An event of ``cls`` with plausible values in its required fields."""
    values: dict[str, typing.Any] = dict(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime")
    for name, info in cls.model_fields.items():
        if name in values or name == "type" or not info.is_required():
            continue
        annotation = info.annotation
        args = typing.get_args(annotation)
        if typing.get_origin(annotation) is typing.Literal:
            values[name] = args[-1]
        elif annotation is int:
            values[name] = 1
        elif annotation is float:
            values[name] = 1.0
        elif annotation is str or str in args:
            values[name] = "x"
        elif typing.get_origin(annotation) is list or any(typing.get_origin(a) is list for a in args):
            values[name] = []
        else:
            raise AssertionError(f"{cls.__name__}.{name}: give this test a sample value for it")
    return cls(**values)


def test_every_event_type_is_folded_or_deliberately_ignored():
    folded = set(fold._HANDLERS)
    assert folded | set(NOT_FOLDED) == EVENT_TYPES, "a new event type needs a fold handler (or a reason here)"
    assert not folded & set(NOT_FOLDED)


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__name__)
def test_every_event_type_has_an_event_log_summary(cls):
    ev = sample(cls)
    assert ev.type in SUMMARIES
    assert summarize(ev).strip(), f"{ev.type} is described by nothing in the event log"
    fold.RunView().apply(ev)  # and the fold takes it


def test_the_view_keys_come_from_the_registry_in_the_app_and_the_replay():
    for specs, groups in ((ACTIONS, app_help_groups()), (KEYS, replay_help_groups())):
        views = [(s.key, s.action) for s in specs if s.action.startswith("view(")]
        assert views == [(p.key, f"view('{p.name}')") for p in PANES]
        helped = {key for _, rows in groups for key, _ in rows}
        assert {key_name(s.key) for s in specs} <= helped  # every key is on the help screen


async def test_each_pane_switches_the_same_way_live_and_in_a_replay(tmp_path: Path):
    from flowtui.runtime.loader import load_flow

    journal = tmp_path / "j.jsonl"
    await load_flow(REVIEW).run("Write about ctx.state", journal=journal)
    app = make(input="Write about ctx.state")
    async with app.run_test(size=(120, 36)) as pilot:
        await paused(pilot)
        await press_and_pause(pilot, "n")
        live = await _visit_panes(pilot)
    replay = make_replay(journal)
    async with replay.run_test(size=(120, 36)) as pilot:
        replayed = await _visit_panes(pilot)
    assert [(name, title, kind) for name, title, kind, _ in live] == \
        [(name, title, kind) for name, title, kind, _ in replayed] == \
        [(p.name, p.title, type(p.make()).__name__) for p in PANES]
    assert all(focused for *_, focused in live + replayed)


async def _visit_panes(pilot) -> list[tuple[str, str, str, bool]]:
    screen = pilot.app.main
    seen = []
    for p in [*PANES[1:], PANES[0]]:
        await pilot.press(p.key)
        await pilot.pause()
        widget = screen.pane_widget(p.name)
        seen.append((screen.current_view, screen.query_one("#views").border_title.split(" (")[0],
                     type(widget).__name__, pilot.app.focused is widget))
    return [seen[-1], *seen[:-1]]


async def test_the_buttons_are_the_run_actions_and_do_what_their_key_does():
    app = make(input="go")
    async with app.run_test(size=(120, 36)) as pilot:
        await paused(pilot)
        await pilot.pause(0.1)
        buttons = list(app.main.query("#buttons Button"))
        assert [b.id for b in buttons] == [f"btn-{a.action}" for a in ACTIONS if a.button]
        assert [a.action for a in ACTIONS if a.button] == ["step", "next_turn", "loop_once", "resume", "pause",
                                                             "stop", "reload"]
        seq = app.client.view.pause.seq
        await pilot.click("#btn-next_turn")
        await paused(pilot, after=seq)
        assert (app.client.view.pause.point, app.client.view.pause.name) == ("agent", "Reviewer")


async def test_tab_goes_from_pane_to_pane_never_onto_a_button():
    """On a focused button `enter` stepped the run and the arrows did nothing; tab is "next pane"."""
    app = make(input="go")
    async with app.run_test(size=(120, 36)) as pilot:
        await paused(pilot)
        await pilot.pause(0.1)
        seq = app.client.view.pause.seq
        focused = []
        for _ in range(6):
            await pilot.press("tab")
            focused.append(app.focused.id if app.focused is not None else None)
        assert set(focused) == {"conversation", "sidebar"}, focused
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.client.view.pause.seq == seq  # the run did not move



def test_a_failed_model_call_says_when_it_is_retried():
    from flowtui.runtime.events import ChatAttempt

    base = dict(seq=3, ts=0.0, run_id="r1", node_id="n2", parent_id="n1")
    retried = ChatAttempt(**base, attempt=1, error="rate limited", status=429, retry_in_s=42.0)
    last = ChatAttempt(**base, attempt=3, error="rate limited", status=429, retry_in_s=None)
    assert summarize(retried) == "attempt 1: rate limited; retrying in 42.0 s"
    assert summarize(last) == "attempt 3: rate limited"


def test_the_budget_says_what_the_run_spent_in_words():
    """It said ``duration_s 4.268842, chat_calls 4, tokens 1234, cost_usd 0.00123``."""
    from flowtui.tui.widgets.sidebar import budget_used

    spent = {"duration_s": 4.268842, "chat_calls": 4, "tool_calls": 1, "tokens": 1234, "cost_usd": 0.00123}
    assert budget_used(spent) == "4 chat calls · 1 tool call · 1,234 tokens · $0.0012 · 4.3 s"
    assert budget_used({"duration_s": 0.0, "chat_calls": 0, "tool_calls": 0, "tokens": 0, "cost_usd": 0.0}) == "0.0 s"
    # against the limits the run's start said, and before anything was spent (no ctx.budget yet)
    limits = {"max_chat_calls": 20, "max_tokens": 10_000, "max_duration_s": 60, "mode": "stop"}
    assert budget_used(spent, limits) == ("4 of 20 chat calls · 1 tool call · 1,234 of 10,000 tokens · $0.0012 · "
                                          "4.3 of 60.0 s")
    assert budget_used({}, limits) == "0 of 20 chat calls · 0 of 10,000 tokens · at most 60.0 s"
    assert budget_used({"chat_calls": 1}, {"max_chat_calls": 1, "mode": "raise"}) == ("1 of 1 chat call · raises "
                                                                                      "when reached")
    assert budget_used({}, {"max_chat_calls": 2, "max_duration_s": None}) == "0 of 2 chat calls"  # (a null limit)
    assert budget_used({"chat_calls": "3", "odd": 1}) == "chat_calls 3 · odd 1"  # a journal from elsewhere


def test_a_state_field_of_fifty_thousand_items_takes_a_few_rows_of_the_sidebar():
    """A row per item, at every redraw, made each key take seconds; and ctx was 50,000 rows down."""
    from flowtui.runtime.events import RunStart
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.sidebar import sidebar_rows

    view = RunView()
    view.apply(RunStart(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime", workflow="W",
                        state={"big": list(range(50_000)), "table": {f"k{i}": i for i in range(30)}, "n": 1}))
    rows = [(row_id, text.plain) for row_id, text in sidebar_rows(view, width=60)]
    big = [text for row_id, text in rows if row_id == "field:big"]
    assert big[0] == "  big [50000]" and big[1:3] == ["    0 0", "    1 1"]
    assert big[-1] == "    … 49,980 more (o opens the field whole)" and len(big) == 22
    table = [text for row_id, text in rows if row_id == "field:table"]
    assert table[-1] == "    … 10 more (o opens the field whole)" and len(table) == 22
    assert ("field:n", "  n = 1") in rows and len(rows) < 60


def test_a_hundred_thousand_names_on_ctx_take_a_few_rows_of_the_sidebar():
    """A run (or a peer, attached to) setting 100,000 names on ctx drew a row each at every redraw: each key
    took 2 to 6 seconds. The turn and the output are still said, after the names."""
    from flowtui.runtime.events import CtxSet, RunStart
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.sidebar import sidebar_rows

    view = RunView()
    view.apply(RunStart(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime", workflow="W"))
    head = dict(run_id="r1", node_id=None, parent_id=None, origin="agent:A", ts=0.0)
    view.apply(CtxSet(seq=2, name="output", value="done", **head))
    for i in range(100_000):
        view.apply(CtxSet(seq=3 + i, name=f"k{i}", value=i, **head))
    rows = [text.plain for _, text in sidebar_rows(view, width=60)]
    assert "  k0 = 0" in rows and "  k19 = 19" in rows and "  k20 = 20" not in rows
    assert "  … 99,980 more on ctx (the event log has each ctx.set)" in rows
    assert "  output = done" in rows and len(rows) < 40


def test_a_tab_or_line_break_in_a_sidebar_value_stays_on_its_row():
    """A tab in a memory item, a task or a state value reached the terminal raw: the rest of the row
    moved, the border went, and text of other rows showed in the gap."""
    from flowtui.runtime.events import RunStart
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.sidebar import sidebar_rows

    view = RunView()
    view.apply(RunStart(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime", workflow="W",
                        memory=["c1\tc2\t\tc3|"], state={"f": "a\tb\nc", "d": {"k\tey": "v\tw"}}))
    rows = [text.plain for _, text in sidebar_rows(view, width=60)]
    assert not any("\t" in row or "\n" in row for row in rows), rows
    assert " 1 c1⇥c2⇥⇥c3|" in rows and "  f = a⇥b ⏎ c" in rows and "    k⇥ey: v⇥w" in rows, rows


def test_a_text_value_that_reads_as_another_type_is_quoted_in_the_sidebar():
    """The field "null" and the field None both read "null", "123" and 123 both "123", and "" or spaces were
    blank: the event log said `a: null → "null"` while the sidebar still said null."""
    from flowtui.runtime.events import CtxSet, RunStart
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.sidebar import sidebar_rows

    view = RunView()
    view.apply(RunStart(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime", workflow="W",
                        state={"s_null": "null", "none": None, "s_num": "123", "num": 123, "s_true": "true",
                               "yes": True, "empty": "", "spaces": "  ", "text": "olá, mundo",
                               "items": ["null", None, "x"], "table": {"": "1", "k": 1, "2": 2},
                               "long": "1" * 45}))
    view.apply(CtxSet(seq=2, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="agent:A", name="price",
                      value="3.30"))
    rows = [text.plain for _, text in sidebar_rows(view, width=60)]
    for row in ('  s_null = "null"', "  none = null", '  s_num = "123"', "  num = 123", '  s_true = "true"',
                "  yes = true", '  empty = ""', '  spaces = "  "', "  text = olá, mundo", '    0 "null"', "    1 null",
                "    2 x", '    "": "1"', "    k: 1", "    2: 2", '  price = "3.30"', f'  long = "{"1" * 45}"'):
        assert row in rows, (row, rows)


@pytest.mark.parametrize("output, said", [("", '""'), ("   ", '"   "'), ("null", '"null"'), ("done", "done"),
                                          ([1, 2], "[1, 2]")])
def test_an_output_that_reads_as_nothing_or_as_another_type_is_quoted_as_ctx_fields_are(output, said):
    """A reply of "" or of spaces left `output =` blank in the sidebar and `output:` in the status, where a
    field of yours holding it said `""`."""
    from flowtui.runtime.events import CtxSet, RunEnd, RunStart
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.control import where_text
    from flowtui.tui.widgets.sidebar import sidebar_rows

    view = RunView()
    view.apply(RunStart(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime", workflow="W"))
    view.apply(CtxSet(seq=2, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="agent:A", name="output",
                      value=output))
    rows = [text.plain for _, text in sidebar_rows(view, width=60)]
    assert f"  output = {said}" in rows, rows
    if isinstance(output, str):
        view.apply(RunEnd(seq=3, ts=1.0, run_id="r1", status="finished", output=output))
        assert where_text(view, breakpoints=set(), width=80).plain.startswith(
            f"output: {said if not output.strip() else output} "), where_text(view, breakpoints=set(), width=80)


def test_the_sidebar_shows_ctx_data():
    """run.start carried ctx.data for the sidebar (so the README said), which never showed it."""
    from flowtui.runtime.events import RunStart
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.sidebar import sidebar_rows

    view = RunView()
    view.apply(RunStart(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime", workflow="W",
                        data={"tenant": "acme", "role\t": "a\x1b[2Jb"}))
    rows = [text.plain for _, text in sidebar_rows(view, width=60)]
    assert '  data["tenant"] = acme' in rows, rows
    assert '  data["role\\t"] = a␛[2Jb' in rows, rows  # inert, on its row
    assert "  nothing set yet" not in rows


def test_on_a_narrow_sidebar_the_turn_loop_and_budget_take_more_rows_not_cut():
    """At 80 columns they read "loop 4 of 50 iteration…" and "budget 4 of 4 chat cal…"."""
    from flowtui.runtime.events import CtxSet, RunStart
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.sidebar import sidebar_rows

    base = dict(ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime")
    view = RunView()
    view.apply(RunStart(seq=1, **base, workflow="W", budget={"max_chat_calls": 4, "mode": "stop"}))
    view.apply(CtxSet(seq=2, **base, name="loop", value={"iterations": 4, "max_iterations": 50,
                                                          "exhausted": False, "stopped_by": "budget"}))
    view.apply(CtxSet(seq=3, **base, name="budget", value={"chat_calls": 4, "tool_calls": 4, "tokens": 114,
                                                            "duration_s": 3.2}))
    rows = [text.plain for _, text in sidebar_rows(view, width=26)]
    assert all(len(row) <= 26 and "…" not in row for row in rows), rows
    at = rows.index("  loop 4 of 50 iterations")
    assert rows[at:at + 6] == ["  loop 4 of 50 iterations", "    done · stopped by", "    budget",
                               "  budget 4 of 4 chat calls", "    · 4 tool calls · 114", "    tokens · 3.2 s"], rows
    wide = [text.plain for _, text in sidebar_rows(view, width=80)]  # one row each where they fit
    assert "  loop 4 of 50 iterations done · stopped by budget" in wide, wide
    # a long name broken inside (not split by a space), and the rest cut with "…" past four rows
    view.apply(CtxSet(seq=4, **base, name="turn", value={"agent": "ResearchCoordinatorAgent", "called_tool": True,
                                                          "tool_name": "lookup_customer_order_history_records",
                                                          "tool_error": True, "response": "x"}))
    rows = [text.plain for _, text in sidebar_rows(view, width=30)]
    at = rows.index("  turn")
    assert rows[at:at + 4] == ["  turn", "    ResearchCoordinatorAgent ·", "    tool lookup_customer_order",
                               "    _history_records ✗"], rows
    rows = [text.plain for _, text in sidebar_rows(view, width=20)]
    assert rows[rows.index("  turn ResearchCoord") + 3] == "    …", rows


def test_a_bucket_set_whole_says_its_count_in_words():
    from flowtui.runtime.events import StateSet

    base = dict(seq=3, ts=0.0, run_id="r1", node_id="n2", parent_id="n1", origin="hook:A.after_response")
    assert summarize(StateSet(**base, bucket="history", items=[])) == "history = [0 items]"
    assert summarize(StateSet(**base, bucket="tasks", items=["a"])) == "tasks = [1 item]"  # was "[1 items]"
    assert summarize(StateSet(**base, bucket="memory", items=["a", "b"])) == "memory = [2 items]"


def test_an_invalid_line_of_a_journal_opens_whole_with_what_it_holds():
    """enter on an 'invalid' or unknown event showed only why it was refused: what it held could not be
    looked at (a forged event's payload among it)."""
    from flowtui.runtime.journal import Invalid, Unknown
    from flowtui.tui.widgets.event_log import whole

    bad = Invalid(7, "ctx.set: name: Input should be a valid string", {"seq": 7, "type": "ctx.set", "name": 3})
    assert whole(bad, None) == ("event #7 invalid: ctx.set: name: Input should be a valid string",
                                {"seq": 7, "type": "ctx.set", "name": 3})
    odd = Unknown(9, "an event type this flowtui does not know: x.y", {"seq": 9, "type": "x.y", "p": "\x1b[2J"})
    assert whole(odd, None)[1] == {"seq": 9, "type": "x.y", "p": "\x1b[2J"}  # (the screen shows it inert)


def test_a_streamed_piece_the_run_held_back_says_so_in_the_event_log():
    """A piece that may begin a credential reaches the app empty (the run holds it back until the next
    pieces say): the event log showed '+0 characters streamed', as if nothing came."""
    from flowtui.runtime.events import ChatDelta

    base = dict(seq=9, ts=0.0, run_id="r1", node_id="n4", parent_id="n3", origin="runtime")
    assert summarize(ChatDelta(**base, text="Hello")) == "+5 characters streamed"
    assert summarize(ChatDelta(**base, text="")).startswith("a piece streamed, held back by the run")


async def test_the_sidebar_says_a_loop_without_a_ceiling_as_infinite():
    """A loop of max_iterations=math.inf (journaled as null: JSON has no infinity) said "2 of None
    iterations done"; the path and the node tree say `loop 2/∞`."""
    import math

    from flowtui import FunctionProvider, agent, bootstrap, loop, workflow
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.sidebar import sidebar_rows

    @agent(provider=FunctionProvider(lambda m, t: "x"))
    class A:
        pass

    @workflow(steps=[loop([A], until=lambda ctx: ctx.loop.iterations == 2, max_iterations=math.inf)])
    class W:
        pass

    view = RunView()
    app = bootstrap(W)
    app.subscribe(view.apply)
    await app.run("go")
    rows = [text.plain for _, text in sidebar_rows(view, width=60)]
    assert "  loop 2 of ∞ iterations done · stopped by until" in rows, rows


@pytest.mark.parametrize("by, said", [("stopped", "the stop command"), ("stop", "ctx.stop()"), ("fails", "fails")])
def test_the_sidebar_says_what_stopped_a_loop_in_words(by, said):
    """A loop stopped by x read "stopped by stopped"."""
    from flowtui.runtime.events import CtxSet, RunStart
    from flowtui.runtime.fold import RunView
    from flowtui.tui.widgets.sidebar import sidebar_rows

    view = RunView()
    view.apply(RunStart(seq=1, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime", workflow="W"))
    view.apply(CtxSet(seq=2, ts=0.0, run_id="r1", node_id=None, parent_id=None, origin="runtime", name="loop",
                      value={"iterations": 2, "exhausted": False, "max_iterations": 5, "stopped_by": by}))
    rows = [text.plain for _, text in sidebar_rows(view, width=80)]
    assert f"  loop 2 of 5 iterations done · stopped by {said}" in rows, rows


async def test_a_list_filled_while_hidden_shows_from_its_first_block_when_every_block_fits():
    """View 2 at 80×24, filled while view 1 was shown (n, s, then 2): the agent prompt stayed above the top with
    blank rows under the last block. Its blocks' heights, guessed at no width, placed the end; the blocks there,
    drawn first at the real width, moved it; the first block, drawn last, shrank with the view already
    scrolled."""
    from textual.app import App

    from flowtui.runtime.messages import Message
    from flowtui.tui.widgets.message_list import MessageList

    prompt = ("Você é o escritor. Siga o plano que está na memória e escreva o texto pedido.\n"
              "Se o revisor apontou problemas, corrija todos na nova versão.\nResponda só com o texto.")
    note = ("Plano a seguir:\n1. Explicar o que é ctx.state e seus três compartimentos.\n2. Dar um exemplo de append "
            "em memory.\n3. Fechar com a regra prática: o que o modelo precisa ler vai em ctx.state.")

    class Holder(App):
        CSS = "MessageList { width: 48; height: 18; display: none; }"  # view 2's size at 80×24

        def compose(self):
            yield MessageList(markdown=False)

    app = Holder()
    async with app.run_test(size=(80, 24)) as pilot:
        listed = app.query_one(MessageList)
        listed.set_messages([Message(role="system", content=prompt), Message(role="system", content=note),
                             Message(role="user", content="tema")], reset=True)
        await pilot.pause()
        listed.display = True
        await pilot.pause()
        await pilot.pause()
        assert listed.virtual_size.height <= listed.size.height  # every block fits: the test's premise
        assert listed.scroll_offset.y == 0


async def test_view_2_opened_with_the_conversation_at_its_end_shows_every_block_that_fits():
    """Opened with the conversation's cursor at its end, what the model sees scrolled as far down as its
    blocks' guessed heights reached; drawn, they were shorter: blank rows under the last block, and the
    agent prompt and memory above the top although there was room for them (as if not sent)."""
    app = make(str(Path(__file__).parents[2] / "flows" / "revisao.py"), input="x")
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        for _ in range(5):
            await press_and_pause(pilot, "n")
        await pilot.press("end")
        await pilot.press("2")
        await wait_until(pilot, lambda: app.main.current_view == "model-sees"
                         and app.main.pane_widget("model-sees").size.height > 0, what="view 2 drawn")
        await pilot.pause()
        sees = app.main.pane_widget("model-sees")
        shown = sees.scrollable_content_region.height
        assert sees.labels[0] == "system · agent prompt"
        assert sees.virtual_size.height <= shown  # every block fits: the test's premise
        assert sees.scroll_offset.y == 0  # from the agent prompt, no blank rows under the last block
