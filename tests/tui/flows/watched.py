"""A flow for watchpoints: every kind has an event that makes it true, at a known place.

Planner (memory gains "Plano: escrever bem", tasks "revisar o texto"), then loop([Writer, Reviewer])
until approved. The Writer calls look(q="a") on each of its three turns (the same call three
times in a row), each result 4,000 characters (about 1,000 tokens of prompt each); the Reviewer
counts rounds and approves on the third. Every model call costs $0.25 and 110 tokens.
"""

from pydantic import BaseModel

from flowtui import ChatReply, FunctionProvider, Input, State, ToolCall, Usage, agent, loop, tool, workflow

LOOKS = 3


class Q(BaseModel):
    q: str


class WatchedState(BaseModel):
    rounds: int = 0
    approved: bool = False
    notes: list[str] = []


@tool(name="look", description="Looks something up.", schema=Q)
class Look:
    async def execute(self, args: Q = Input()):
        return ("seen " + args.q + " ").ljust(4000, ".")


def reply(content="", call=None):
    return ChatReply(content=content, tool_calls=[call] if call else [], cost_usd=0.25,
                     usage=Usage(prompt_tokens=100, completion_tokens=10))


def planner(messages, tools):
    return reply("the plan")


def writer(messages, tools):
    looked = sum(1 for m in messages if m.role == "tool")
    if looked < LOOKS:
        return reply(call=ToolCall(name="look", args={"q": "a"}))
    return reply(f"draft after {looked} looks")


def reviewer(messages, tools):
    return reply("noted")


@agent(provider=FunctionProvider(planner), prompt="You plan.")
class Planner:
    def after_response(self, response, ctx):
        ctx.state.append("memory", "Plano: escrever bem")
        ctx.state.append("tasks", "revisar o texto")


@agent(provider=FunctionProvider(writer), prompt="You write.", tools=[Look])
class Writer:
    pass


@agent(provider=FunctionProvider(reviewer), prompt="You review.")
class Reviewer:
    def __init__(self, s: WatchedState = State()):
        self.s = s

    def after_response(self, response, ctx):
        self.s.rounds += 1
        self.s.approved = self.s.rounds >= 3
        self.s.notes.append(f"note {self.s.rounds}")


@workflow(state=WatchedState, steps=[Planner, loop([Writer, Reviewer], until=lambda ctx, s: s.approved,
                                                   max_iterations=5)])
class WatchedWorkflow:
    """Plan, then write and review three rounds."""
