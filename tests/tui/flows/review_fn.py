"""A write/review loop like flows/revisao.py, with FunctionProvider models that record each request."""

import time

from pydantic import BaseModel, Field

import flowcapture
from flowtui import AgentContext, Context, FunctionProvider, Input, State, agent, loop, tool, workflow


if flowcapture.knob("fake_clock"):
    flowcapture.fake_clock()


class ReviewState(BaseModel):
    approved: bool = False
    rounds: int = 0
    problems: list[str] = []


def writer(messages, tools):
    flowcapture.record("Writer", messages)
    n = flowcapture.count("Writer")
    return f"Draft {n}: **ctx.state** holds history, memory and tasks."


def reviewer(messages, tools):
    flowcapture.record("Reviewer", messages)
    n = flowcapture.count("Reviewer")
    if n == 1:
        return {"content": "REJECTED: needs an example.",
                "tool_calls": [{"name": "record_problem", "args": {"text": "No example."}},
                               {"name": "record_problem", "args": {"text": "No closing rule."}}]}
    return "APPROVED: it has everything."


class ProblemArgs(BaseModel):
    text: str = Field(description="the problem, in one sentence")


@tool(name="record_problem", description="Records a problem in the draft.", schema=ProblemArgs)
class RecordProblem:
    def execute(self, args: ProblemArgs = Input(), ctx: AgentContext = Context(), s: ReviewState = State()):
        delay = flowcapture.knob("tool_delay")
        if delay:
            time.sleep(delay)  # a slow sync tool: the run's process waits, the app does not
        flowcapture.held_at_gate("tool")  # (one held until the test lets it go)
        s.problems.append(args.text)
        ctx.last_problem = args.text
        return f"Recorded ({len(s.problems)} so far): {args.text}"


@agent(provider=FunctionProvider(writer), prompt="You write a short paragraph.")
class Writer:
    pass


@agent(provider=FunctionProvider(reviewer), prompt="You review the draft.", tools=[RecordProblem])
class Reviewer:
    def __init__(self, s: ReviewState = State()):
        self.s = s

    def after_response(self, response: str, ctx: AgentContext):
        self.s.rounds += 1
        self.s.approved = "APPROVED" in response
        if flowcapture.knob("hook_raises"):
            raise RuntimeError("the after_response hook broke")


@workflow(state=ReviewState, steps=[loop(steps=[Writer, Reviewer], until=lambda ctx, s: s.approved,
                                         max_iterations=4)])
class ReviewWorkflow:
    """Write, then review until approved."""
