"""Edits that keep the history a valid conversation, the pending tool call, approvals, and
the request each chat node records: driven like the app drives a paused run."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel, ConfigDict

from flowtui import (ConfigError, Controller, FunctionProvider, agent, bootstrap, loop, parallel, tool,
                     until_answered, workflow)
from flowtui.runtime.wellformed import problems
from fakes import call, scripted


class Query(BaseModel):
    query: str
    limit: int = 3


class StrictQuery(Query):
    model_config = ConfigDict(extra="forbid")


def build(replies, *, ran: list, schema: type = Query):
    provider, calls = scripted(*replies)

    @tool(name="busca", description="Searches.", schema=schema)
    def busca(args: schema) -> str:
        ran.append(args.model_dump())
        return f"found {args.query}"

    @agent(provider=provider, prompt="You review.", tools=[busca])
    class Revisor:
        pass

    @workflow(steps=[loop(steps=[Revisor], until=until_answered, max_iterations=4)])
    class Flow:
        pass

    return Flow, calls


TWO_CALLS = {"content": "REPROVADO: veja", "tool_calls": [{"name": "busca", "args": {"query": "a"}},
                                                            {"name": "busca", "args": {"query": "b"}}]}


class Driver:
    """A run paused at its first pause point, stepped like the app steps it."""

    def __init__(self, flow, *, approve=(), breakpoints=(), input="go", **options):
        """``options``: the run's own (journal=, resume_from=, on_divergence=)."""
        self.events: list = []
        self.ctl = Controller(start_paused=True, approve=approve, breakpoints=breakpoints)
        self.run = bootstrap(flow).prepare(input, controller=self.ctl, on_event=self.events.append, **options)
        self.task: asyncio.Task | None = None

    async def __aenter__(self):
        self.task = asyncio.ensure_future(self.run.execute())
        await self.paused()
        return self

    async def __aexit__(self, *exc):
        if not self.task.done():
            self.ctl.stop()
        try:
            await asyncio.wait_for(self.task, 10)
        except Exception:
            pass

    async def paused(self, after: int = 0):
        """The next pause point (the ``after``-th pause or a later one), or None when the run ended."""
        for _ in range(5000):
            if (self.ctl.paused and len(self.of("run.pause")) > after) or self.task.done():
                return self.ctl.paused_at
            await asyncio.sleep(0.001)
        raise AssertionError("the run neither paused nor ended")

    async def go(self, command):
        """A command (step, resume...), then the pause it leads to."""
        seen = len(self.of("run.pause"))
        command()
        return await self.paused(seen)

    async def step_to(self, kind, name=None):
        while True:
            at = await self.go(self.ctl.step)
            if at is None:
                raise AssertionError(f"the run ended before a {kind} pause")
            if at.kind == kind and (name is None or at.name == name):
                return at

    def of(self, type_):
        return [e for e in self.events if e.type == type_]


async def test_promoting_a_reply_that_called_tools_takes_its_results_and_says_so():
    ran: list = []
    flow, calls = build([TWO_CALLS, "APROVADO"], ran=ran)
    async with Driver(flow) as d:
        await d.step_to("agent")  # the second turn: the reply and its two results are in history
        history = list(d.run.state.history)
        assert [m.role for m in history] == ["user", "assistant", "tool", "tool"]
        d.run.edits.promote(1)
        assert [m.role for m in d.run.state.history] == ["user"]
        assert list(d.run.state.memory) == ["REPROVADO: veja"]
        assert problems(d.run.state.history) == []
        sets = [e for e in d.of("state.set") if e.bucket == "history"]
        assert sets[-1].note == "promoted #1 → memory[0] (removed #1, #2, #3)" and sets[-1].origin == "user"
        added = [e for e in d.of("state.append") if e.bucket == "memory"]
        assert added[-1].note == "promoted #1 → memory[0] (added)"  # each event its own part (one line twice)
        d.ctl.resume()
        await asyncio.wait_for(d.task, 10)
    # the next request held no orphan: the user message, then the answer's turn
    assert [m.role for m in calls[1]] == ["system", "system", "user"]


async def test_deleting_messages_keeps_calls_and_results_together():
    flow, _ = build([TWO_CALLS, "APROVADO"], ran=[])
    async with Driver(flow) as d:
        await d.step_to("agent")
        assert d.run.edits.delete_message(2) == [2]  # one result: its call leaves the assistant message
        history = d.run.state.history
        assert [c.args["query"] for c in history[1].tool_calls] == ["b"]
        assert problems(history) == []
        assert [e for e in d.of("state.set")][-1].note == "deleted #2 and its call in #1"
        d.run.edits.undo()
        assert len(d.run.state.history) == 4
        assert d.run.edits.delete_message(1) == [1, 2, 3]  # the assistant message takes its results
        assert [m.role for m in d.run.state.history] == ["user"]
        d.run.edits.undo()
        # a result alone, its call left unanswered: refused (it was made, and the next model call failed)
        with pytest.raises(ConfigError, match=r"^the history would no longer be a valid conversation: history\[1\] "
                                              r"makes call_1_1, which no tool message answers at the end; delete"):
            d.run.edits.delete_message(3, with_call=False)
        assert len(d.run.state.history) == 4 and problems(d.run.state.history) == []


async def test_a_history_left_broken_by_an_edit_fails_the_next_call_with_the_reason():
    from flowtui import ConversationError

    flow, calls = build([TWO_CALLS, "APROVADO"], ran=[])
    async with Driver(flow) as d:
        await d.step_to("agent")
        d.run.state.set("history", list(d.run.state.history)[:3])  # as a hook could: call_1_1 left unanswered
        d.ctl.resume()
        with pytest.raises(ConversationError, match=r"history\[1\] makes call_1_1, which no tool message answers"):
            await asyncio.wait_for(d.task, 10)
    assert len(calls) == 1


async def test_a_tool_result_answering_its_call_twice_can_be_deleted_alone():
    """with_call false keeps its meaning where it leaves a valid conversation: a second answer goes."""
    flow, _ = build([TWO_CALLS, "APROVADO"], ran=[])
    async with Driver(flow) as d:
        await d.step_to("agent")
        history = list(d.run.state.history)
        d.run.state.set("history", [*history, history[3]])  # call_1_1 answered twice
        assert d.run.edits.delete_message(4, with_call=False) == [4]
        assert problems(d.run.state.history) == [] and len(d.run.state.history[1].tool_calls) == 2


async def test_the_call_the_run_waits_on_cannot_be_deleted_or_promoted_away():
    flow, _ = build([TWO_CALLS, "APROVADO"], ran=[])
    async with Driver(flow) as d:
        await d.step_to("tool")
        with pytest.raises(ConfigError, match="the call the run is paused before"):
            d.run.edits.promote(1)
        with pytest.raises(ConfigError, match="the call the run is paused before"):
            d.run.edits.delete_message(1)


async def test_a_key_a_strict_schema_forbids_is_said_once():
    """It was said twice: "extra: not an argument of busca; extra: Extra inputs are not permitted"."""
    flow, _ = build([TWO_CALLS, "APROVADO"], ran=[], schema=StrictQuery)
    async with Driver(flow) as d:
        await d.step_to("tool")
        with pytest.raises(ConfigError, match=r"\(StrictQuery: query, limit\): extra: not an argument of busca$"):
            d.run.edits.edit_call('{"query": "x", "extra": 1}')


async def test_a_call_decided_again_by_a_reexecution_that_then_diverged_is_not_asked_about_again(tmp_path):
    # the recorded decision made again, then a divergence at it: the pause after asked for approval of the
    # call already approved, and y recorded a second decision
    journal = tmp_path / "run.jsonl"
    flow, _ = build([TWO_CALLS, "APROVADO"], ran=[])
    async with Driver(flow, approve=["busca"], journal=journal) as d:
        await d.step_to("tool")
        await d.go(lambda: d.run.edits.decide("approve"))  # paused at the second call's approval
    lines = journal.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if '"type":"tool.decision"' in line)
    lines[at] = lines[at].replace('"call_1_0"', '"call_other"')  # a journal the code no longer matches there
    journal.write_text("".join(lines))
    ran: list = []
    again, _ = build([TWO_CALLS, "APROVADO"], ran=ran)
    async with Driver(again, approve=["busca"], input=None, resume_from=str(journal), on_divergence="pause") as d:
        assert len(d.of("run.diverged")) == 1
        assert (d.ctl.paused_at.kind, d.of("run.pause")[-1].reason) == ("tool", "diverged")
        at = await d.go(d.ctl.step)  # the call runs as decided, unasked; the next one is asked about
        assert ran == [{"query": "a", "limit": 3}] and len(d.of("tool.decision")) == 1
        assert (at.kind, d.of("run.pause")[-1].reason) == ("tool", "approval")


async def test_an_edit_inside_a_long_message_is_said_around_what_changed():
    # said by the start and end of each, the two quotes were the same: the note said nothing of the edit
    flow, _ = build([TWO_CALLS, "APROVADO"], ran=[])
    async with Driver(flow) as d:
        await d.step_to("tool")
        long = "Start " + "a" * 200 + " the word " + "b" * 200 + " end"
        d.run.edits.edit_message(1, long)
        d.run.edits.edit_message(1, long.replace("the word", "THE WORD"))
        note = d.of("state.set")[-1].note
        assert note == 'edited #1: "…aaaaaaaaaaa the word bbbbbbbbbbb…" → "…aaaaaaaaaaa THE WORD bbbbbbbbbbb…"'
        d.run.edits.edit_message(1, long.replace("the word", "THE  WORD"))  # a space more: not in a quote
        assert d.of("state.set")[-1].note.endswith('(changed in what a quote does not show: its spacing, or a '
                                                   'credential)')


class Termo(BaseModel):
    termo: str
    k: int = 1


async def test_arguments_that_are_no_json_are_told_an_example_with_the_tools_own_keys():
    # every tool was told e.g. {"query": "..."}, a key most tools do not have
    flow, _ = build([TWO_CALLS, "APROVADO"], ran=[], schema=Termo)
    async with Driver(flow) as d:
        await d.step_to("tool")
        with pytest.raises(ConfigError, match=r'write them as a JSON object, e.g. \{"termo": \.\.\., "k": \.\.\.\}$'):
            d.run.edits.edit_call("{termo: 'x'}")


async def test_an_edit_of_the_pending_call_that_changes_nothing_is_refused_and_nothing_recorded():
    """Saved as it was (typed, then typed back), it was recorded as an edit: a state.set and a
    tool.decision "edited", and the status line counted an edit."""
    flow, _ = build([TWO_CALLS, "APROVADO"], ran=[])
    async with Driver(flow) as d:
        await d.step_to("tool")
        seen = len(d.events)
        for same in ('{"query": "a"}', '{ "query" :  "a" }'):
            with pytest.raises(ConfigError, match="^the arguments of the call of busca are unchanged: nothing recorded"):
                d.run.edits.edit_call(same)
        assert len(d.events) == seen and d.run.edits.undo() is False


async def test_an_edit_of_the_pending_call_from_1_to_true_is_a_change():
    """Compared as Python values, 1 == True: the edit was refused as "unchanged", though the tool and the
    model would get another value (a field of type Any keeps what it is given)."""
    from typing import Any

    class Loose(BaseModel):
        query: Any = None

    ones = {"content": "", "tool_calls": [{"name": "busca", "args": {"query": 1}}]}
    flow, _ = build([ones, "APROVADO"], ran=[], schema=Loose)
    async with Driver(flow) as d:
        await d.step_to("tool")
        with pytest.raises(ConfigError, match="unchanged"):
            d.run.edits.edit_call('{"query": 1}')
        assert d.run.edits.edit_call('{"query": true}') == {"query": True}


async def test_editing_the_pending_call_is_checked_against_the_schema_and_reaches_tool_and_model():
    ran: list = []
    flow, calls = build([TWO_CALLS, "APROVADO"], ran=ran)
    async with Driver(flow) as d:
        at = await d.step_to("tool")
        assert d.of("run.pause")[-1].call == {"id": "call_1_0", "name": "busca", "args": {"query": "a"}}
        with pytest.raises(ConfigError, match="not JSON"):
            d.run.edits.edit_call("{query: x}")
        with pytest.raises(ConfigError, match="^the arguments of busca are nested too deeply to be read as JSON"):
            d.run.edits.edit_call('{"query": ' + "[" * 100_000 + "]" * 100_000 + "}")  # (said as Python's own)
        with pytest.raises(ConfigError, match=r"busca refuses these arguments \(Query: query, limit\): limit"):
            d.run.edits.edit_call('{"query": "x", "limit": "many"}')
        for loose in ('true', '"5"', '2.0'):  # strictly, as a state field's edit: the tool took true as 1
            with pytest.raises(ConfigError, match=r"\(Query: query, limit\): limit: Input should be a valid integer"):
                d.run.edits.edit_call('{"query": "x", "limit": %s}' % loose)
        with pytest.raises(ConfigError, match=r"^__raw_arguments__ is flowtui's own key"):
            d.run.edits.edit_call('{"query": "x", "__raw_arguments__": "y"}')
        with pytest.raises(ConfigError, match=r"\(Query: query, limit\): extra: not an argument of busca$"):
            d.run.edits.edit_call('{"query": "x", "extra": 1}')  # the tool drops it, the model would see it
        with pytest.raises(ConfigError, match="^the arguments of busca give the key 'query' twice; give each key once"):
            d.run.edits.edit_call('{"query": "shown", "query": "run"}')  # (which one counts: JSON does not say)
        # (said "Unterminated string starting at at line 1", and "not NoneType" of null)
        with pytest.raises(ConfigError, match=r"^the arguments of busca are not JSON \(Unterminated string starting "
                                              r"at: line 1, column 11\); write them as a JSON object"):
            d.run.edits.edit_call('{"query": "x}')
        with pytest.raises(ConfigError, match=r"^the arguments of busca must be a JSON object \(\{...\}\), not null$"):
            d.run.edits.edit_call("null")
        with pytest.raises(ConfigError, match="^the arguments of busca: 1e400 is too large a number: it reads as "
                                              "infinity"):
            d.run.edits.edit_call('{"query": "x", "limit": 1e400}')
        assert at.name == "busca"
        d.run.edits.edit_call('{"query": "edited", "limit": 1}')
        made = d.run.state.history[1].tool_calls[0]
        assert made.args == {"query": "edited", "limit": 1}  # the model will see the call as edited
        decision = d.of("tool.decision")[-1]
        assert (decision.decision, decision.origin, decision.args, decision.before) == (
            "edited", "user", {"query": "edited", "limit": 1}, {"query": "a"})
        d.ctl.resume()
        await asyncio.wait_for(d.task, 10)
    assert ran[0] == {"query": "edited", "limit": 1}
    sent_call = calls[1][2].tool_calls[0]
    assert sent_call.args == {"query": "edited", "limit": 1}


async def test_undoing_an_edit_of_the_pending_call_is_an_event_so_a_reexecution_makes_it_too():
    # undone silently, the journal still said the call was edited: --resume-from diverged, or ran the
    # tool with the arguments the person took back
    ran: list = []
    flow, calls = build([TWO_CALLS, "APROVADO"], ran=ran)
    async with Driver(flow) as d:
        await d.step_to("tool")
        d.run.edits.edit_call('{"query": "edited"}')
        assert d.run.edits.undo() is True
        back = d.of("tool.decision")[-1]
        assert (back.decision, back.origin, back.args, back.before) == ("edited", "user", {"query": "a"},
                                                                        {"query": "edited"})
        assert back.reason == "undone"  # an edit back, said as the undo it is
        d.ctl.resume()
        await asyncio.wait_for(d.task, 10)
    assert ran[0]["query"] == "a"  # (the tool fills its defaults in)


async def test_approval_pauses_every_call_of_the_tool_even_when_continuing_and_deny_tells_the_model():
    ran: list = []
    flow, calls = build([TWO_CALLS, "APROVADO"], ran=ran)
    async with Driver(flow, approve=["busca"]) as d:
        at = await d.go(d.ctl.resume)  # continue: only the approvals stop it
        assert (at.kind, at.name, d.of("run.pause")[-1].reason) == ("tool", "busca", "approval")
        at = await d.go(lambda: d.run.edits.decide("deny", "no searching today"))
        assert d.of("run.pause")[-1].reason == "approval" and d.of("run.pause")[-1].call["args"] == {"query": "b"}
        # (it said "Nothing to undo", the status counting the decision among the edits)
        with pytest.raises(ConfigError, match=r"^the last edit was a decision \(denied busca\): it sent the run on, "
                                              r"and a decision cannot be undone; fork \(f\) from before it"):
            d.run.edits.undo()
        d.run.edits.decide("approve")
        await asyncio.wait_for(d.task, 10)
    assert ran == [{"query": "b", "limit": 3}]  # the denied call never ran
    decisions = [(e.decision, e.reason, e.origin) for e in d.of("tool.decision")]
    assert decisions == [("denied", "no searching today", "user"), ("approved", None, "user")]
    denied = calls[1][3]
    assert (denied.role, denied.content, denied.is_error) == ("tool", "denied by the user: no searching today", True)


async def test_moving_on_from_an_approval_pause_approves_the_call_as_the_person():
    ran: list = []
    flow, _ = build([TWO_CALLS, "APROVADO"], ran=ran)
    async with Driver(flow, approve=["all"]) as d:
        await d.step_to("tool")
        await d.go(d.ctl.step)
        assert [(e.decision, e.origin) for e in d.of("tool.decision")] == [("approved", "user")]
        assert len(ran) == 1


async def test_a_decision_moves_a_run_that_was_pausing_past_the_call():
    # p pressed while the run ran (or a re-execution's divergence) and the next pause a call's approval:
    # approving it left the run waiting there for ever, the call decided and never run
    ran: list = []
    flow, _ = build([TWO_CALLS, "APROVADO"], ran=ran)
    async with Driver(flow, approve=["busca"]) as d:
        await d.step_to("chat")
        at = await d.go(lambda: (d.ctl.resume(), d.ctl.pause()))
        assert (at.kind, d.of("run.pause")[-1].reason) == ("tool", "approval")
        at = await d.go(lambda: d.run.edits.decide("approve"))
        assert ran == [{"query": "a", "limit": 3}]
        assert (at.kind, d.of("run.pause")[-1].call["args"]) == ("tool", {"query": "b"})  # the next call's


async def test_a_call_approved_by_moving_on_is_approved_again_by_its_reexecution(tmp_path):
    # the decision a run key made was journaled in the turn's node, the one a re-execution makes again in
    # none: the re-execution of the run (a fork, r's continue from here) diverged at it, and asked again
    journal = tmp_path / "run.jsonl"
    flow, _ = build([TWO_CALLS, "APROVADO"], ran=[])
    async with Driver(flow, approve=["busca"], journal=journal) as d:
        await d.step_to("tool")
        await d.go(d.ctl.step)  # the first call approved by the step; paused at the second's approval
        assert [(e.decision, e.origin) for e in d.of("tool.decision")] == [("approved", "user")]
    again, _ = build([TWO_CALLS, "APROVADO"], ran=[])
    events: list = []
    await bootstrap(again).run(resume_from=str(journal), on_event=events.append)
    assert [e for e in events if e.type == "run.diverged"] == []
    assert [e.decision for e in events if e.type == "tool.decision"] == ["approved"]
    assert events[-1].status == "stopped" and events[-1].reason.startswith("stopped again where the run of")


async def test_each_chat_node_records_the_request_as_sent_and_the_reply_as_received():
    flow, calls = build([TWO_CALLS, "APROVADO"], ran=[])
    events: list = []
    run = bootstrap(flow).prepare("go", on_event=events.append)
    await run.execute()
    from flowtui.runtime.encoding import encode_event
    from flowtui.runtime.secrets import Redactor

    starts = [json.loads(encode_event(e, Redactor.from_environment()))
              for e in events if e.type == "node.start" and e.kind == "chat"]
    ends = [json.loads(encode_event(e, Redactor.from_environment()))
            for e in events if e.type == "node.end" and e.kind == "chat"]
    for start, sent in zip(starts, calls):
        request = start["data"]["request"]
        assert [(m["role"], m["content"]) for m in request["messages"]] == [(m.role, m.content) for m in sent]
        assert request["tools"] == ["busca"] and request["model"] == "FunctionProvider"
    second = starts[1]["data"]["request"]["messages"]
    assert second[2]["tool_calls"] == [{"id": "call_1_0", "name": "busca", "args": {"query": "a"}},
                                       {"id": "call_1_1", "name": "busca", "args": {"query": "b"}}]
    assert second[3] == {"role": "tool", "content": "found a", "tool_call_id": "call_1_0"}
    assert ends[0]["data"]["reply"]["content"] == "REPROVADO: veja"
    assert [c["args"] for c in ends[0]["data"]["reply"]["tool_calls"]] == [{"query": "a"}, {"query": "b"}]
    assert set(ends[0]["data"]["reply"]["usage"]) >= {"prompt_tokens", "completion_tokens"}


async def test_a_call_another_parallel_branch_holds_is_not_decided_nor_edited_at_this_branchs_pause():
    """Branch A's reply asked for a call while the run was paused at branch B's chat point: A's call
    waits for its own pause, and a decision or an edit sent now (a protocol client's) went to it: the
    person, shown B's request, denied a call they never saw."""
    ran: list = []

    @tool(name="busca", description="Searches.")
    def busca(query: str) -> str:
        ran.append(query)
        return "found"

    replies = [call("busca", query="a"), "A done"]

    async def slow(messages, tools):  # (B reaches its chat pause first)
        await asyncio.sleep(0.05)
        return replies.pop(0)

    @agent(provider=FunctionProvider(slow), prompt="a", tools=[busca])
    class A:
        pass

    @agent(provider=scripted("B done")[0], prompt="b")
    class B:
        pass

    @workflow(steps=[parallel([A, B])])
    class Both:
        pass

    async with Driver(Both, approve=["busca"]) as d:
        await d.step_to("chat", "A")
        at = await d.step_to("chat", "B")
        for _ in range(200):  # A's reply, its call waiting to pause
            if d.run.pending is not None:
                break
            await asyncio.sleep(0.01)
        assert d.run.pending is not None and d.ctl.paused_at is at
        with pytest.raises(ConfigError, match="not paused before a tool call"):
            d.run.edits.decide("deny")
        with pytest.raises(ConfigError, match="not paused before a tool call"):
            d.run.edits.edit_call('{"query": "z"}')
        at = await d.go(d.ctl.step)
        assert (at.kind, at.name) == ("tool", "busca")
        d.run.edits.decide("approve")  # at its own pause
        d.ctl.resume()
        await asyncio.wait_for(d.task, 10)
    assert ran == ["a"]
