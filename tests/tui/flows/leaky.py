"""A flow that leaks a credential everywhere it can: the model's reply and reasoning, a tool's
arguments and result, ctx, the workflow state (which the next prompt holds), memory and the run's
output."""

import os

from pydantic import BaseModel, Field

import flowcapture
from flowtui import AgentContext, Context, FunctionProvider, Input, State, agent, tool, workflow

KEY = os.environ.get("LEAKY_API_KEY", "")


class LeakyState(BaseModel):
    note: str = ""


def model(messages, tools):
    flowcapture.record("Leaker", messages)
    if not any(m.role == "tool" for m in messages):
        return {"content": f"<think>the key is {KEY}</think>Calling with {KEY}.",
                "tool_calls": [{"name": "echo", "args": {"text": KEY}}]}
    return f"Done; the key was {KEY}."


class EchoArgs(BaseModel):
    text: str = Field(description="what to echo")


@tool(name="echo", description="Echoes its text.", schema=EchoArgs)
class Echo:
    def execute(self, args: EchoArgs = Input(), ctx: AgentContext = Context(), s: LeakyState = State()):
        ctx.leaked = args.text
        s.note = args.text
        ctx.state.append("memory", f"remember {args.text}")
        return f"echo: {args.text}"


@agent(provider=FunctionProvider(model), prompt="You leak.", tools=[Echo])
class Leaker:
    def __init__(self, s: LeakyState = State()):
        self.s = s

    def before_prompt(self, prompt):
        return f"{prompt} Note: {self.s.note}" if self.s.note else None


@workflow(steps=[Leaker, Leaker], state=LeakyState)
class LeakyWorkflow:
    pass
