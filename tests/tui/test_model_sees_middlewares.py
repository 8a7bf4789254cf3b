"""What the model sees is what the model middlewares are given: view 2 says so, and how the last call
went (a ContextWindow left messages out), instead of passing the history off as what was sent."""

from __future__ import annotations

import flowcapture
from conftest import FLOWS, make, paused, press_and_pause, wait_until


async def test_view_2_says_a_middleware_may_change_what_is_sent_and_what_the_last_call_sent():
    app = make(str(FLOWS / "windowed.py"), input="hello")
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        await pilot.press("2")
        sees = app.main.pane_widget("model-sees")
        await wait_until(pilot, lambda: sees is not None and 0 in sees.labels, what="view 2 drawn")
        assert sees.labels[0].startswith("system · ContextWindow may change what is sent")  # before any call
        before = len(flowcapture.requests())
        while len(flowcapture.requests()) < before + 3:  # three calls: the window leaves the oldest out
            await press_and_pause(pilot, "s")
        while app.client.view.pause.point != "chat":
            await press_and_pause(pilot, "s")
        await wait_until(pilot, lambda: "the last call sent" in sees.labels.get(0, ""), what="the last call said")
        sent = flowcapture.requests()[-1][1]
        seen = app.client.view.last_sent()
        assert seen["sent"] == len(sent) < seen["messages"]
        assert (f"(the last call sent {len(sent)} of {seen['messages']} messages: "
                f"{seen['messages'] - len(sent)} left out by ContextWindow)") in sees.labels[0]
        title = str(app.screen.query_one("#views").border_title)
        assert "before middlewares" in title, title


async def test_view_2_at_an_agents_pause_says_its_before_prompt_may_replace_the_prompt_shown(tmp_path):
    """At an agent's pause, view 2 showed its declared prompt as `agent prompt`, though its before_prompt
    made the prompt the call sent; the pause before the model call shows that one."""
    flow = tmp_path / "dynamic.py"
    flow.write_text("from flowtui import FunctionProvider, agent, workflow\n"
                    "@agent(provider=FunctionProvider(lambda m, t: 'ok'), prompt='STATIC PROMPT.')\nclass A:\n"
                    "    def before_prompt(self, prompt, ctx):\n        return 'DYNAMIC PROMPT.'\n"
                    "@workflow(steps=[A])\nclass W:\n    pass\n")
    app = make(str(flow), input="hello")
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        assert app.client.view.pause.point == "agent"
        await pilot.press("2")
        sees = app.main.pane_widget("model-sees")
        await wait_until(pilot, lambda: sees is not None and 0 in sees.labels, what="view 2 drawn")
        assert sees.labels[0] == ("system · the agent's declared prompt (its before_prompt may replace it: the pause "
                                  "before the model call shows what is sent)")
        await press_and_pause(pilot, "s")  # before the model call: the prompt it sends
        assert app.client.view.pause.point == "chat"
        await wait_until(pilot, lambda: sees.labels.get(0) == "system · agent prompt", what="view 2 again")
        assert app.client.view.model_sees()[0].content == "DYNAMIC PROMPT."


PARALLEL_CALL = """
from flowtui import FunctionProvider, agent, loop, parallel, tool, until_answered, workflow

@tool
async def somar(a: int, b: int) -> int:
    '''Adds.

    Args:
        a: first
        b: second
    '''
    return a + b

@agent(provider=FunctionProvider(lambda m, t: '5' if any(x.role == 'tool' for x in m)
                                 else {'content': '', 'tool_calls': [{'name': 'somar', 'args': {'a': 2, 'b': 3}}]}),
       tools=[somar], prompt='You add.')
class Calc:
    pass

@agent(provider=FunctionProvider(lambda m, t: 'x'), prompt='You wait.')
class Espera:
    async def run(self, input, ctx):
        return 'ready'

@agent(provider=FunctionProvider(lambda m, t: 'a verse'), prompt='You write verses.')
class Poeta:
    pass

@workflow(steps=[parallel([loop([Calc], until=until_answered, max_iterations=2), loop([Espera, Poeta], max_iterations=1)])])
class W:
    pass
"""


async def test_view_2_says_a_call_shown_without_its_result_gets_it_before_the_next_call(tmp_path):
    """Paused before a parallel branch's agent while the other branch's tool call waited for its result,
    view 2 showed that call unanswered, as if sent so (a provider refuses it); the model call waits for the
    result and sends it."""
    flow = tmp_path / "branches.py"
    flow.write_text(PARALLEL_CALL)
    app = make(str(flow), input="go")
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        await pilot.press("2")
        sees = app.main.pane_widget("model-sees")
        view = app.client.view
        for _ in range(20):  # (a bound: a pause that never comes fails the test)
            if view.pause.point == "agent" and view.pause.name == "Poeta":
                break
            await press_and_pause(pilot, "s")
        calling = next(i for i, m in enumerate(view.model_sees()) if m.tool_calls)
        await wait_until(pilot, lambda: calling in sees.labels, what="view 2 drawn")
        assert sees.labels[calling] == "assistant (its result comes before the next call)"
        for _ in range(20):
            if view.pause.point == "chat" and view.pause.name == "Poeta":
                break
            await press_and_pause(pilot, "s")
        await wait_until(pilot, lambda: calling not in sees.labels, what="view 2 again")
        assert [m.role for m in view.model_sees()][calling:calling + 2] == ["assistant", "tool"]


def test_a_call_a_middleware_changed_without_leaving_any_out_is_not_said_as_sent_whole():
    """A middleware that replaced the prompt by a message of its own sent as many messages as view 2 shows:
    "(the last call sent 2 of 2 messages)" read as nothing changed."""
    from types import SimpleNamespace

    from flowtui.tui.widgets.model_sees import middleware_note

    def note(**last):
        return middleware_note(SimpleNamespace(model_middlewares=("odd",), last_sent=lambda: last))

    assert note(changed_by=["odd"], messages=2, sent=2) == (
        "odd may change what is sent (the last call sent 2 messages, changed by odd from the 2 it was given; its "
        "chat node.end in the event log has them)")
    assert note(changed_by=["ContextWindow"], messages=6, sent=3, trimmed={"dropped": 3, "by": ["ContextWindow"]}) \
        == "odd may change what is sent (the last call sent 3 of 6 messages: 3 left out by ContextWindow)"
    assert note(changed_by=["ContextWindow", "odd"], messages=6, sent=3,
                trimmed={"dropped": 3, "by": ["ContextWindow"]}) == (
        "odd may change what is sent (the last call sent 3 of 6 messages: 3 left out by ContextWindow; changed by "
        "odd too, its chat node.end in the event log has what was sent)")


async def test_a_providers_count_tokens_that_fails_is_said_once_and_the_estimates_stay(tmp_path):
    """A count_tokens that raised, or returned a number, was taken for "no tokenizer": the estimates stayed and
    nothing said why."""
    flow = tmp_path / "counted.py"
    flow.write_text("from flowtui import ChatReply, Provider, agent, workflow\n"
                    "class Counting(Provider):\n"
                    "    async def complete(self, request):\n        return ChatReply(content='ok')\n"
                    "    def count_tokens(self, messages, tools):\n        return 42\n"
                    "@agent(provider=Counting, prompt='p')\nclass A:\n    pass\n"
                    "@workflow(steps=[A, A])\nclass W:\n    pass\n")
    app = make(str(flow), input="hello")
    async with app.run_test(size=(160, 48)) as pilot:
        await paused(pilot)
        await pilot.press("2")
        said = "What the model sees shows estimates: counting its tokens failed (TypeError: Counting.count_tokens " \
               "returned int 42, not a TokenCount (from flowtui import TokenCount) or None)"
        await wait_until(pilot, lambda: any(str(n.message) == said for n in app._notifications), what="the notice")
        await press_and_pause(pilot, "s")  # the next pause counts again: not said twice
        await press_and_pause(pilot, "s")
        assert [str(n.message) for n in app._notifications].count(said) == 1
        assert "estimate" in str(app.screen.query_one("#views").border_title)
