"""A coordinator whose tool runs a child workflow (like flows/subagente.py), with FunctionProvider
models that record each request: for the app's child-run panes and tool approvals."""

from pydantic import BaseModel

import flowcapture
from flowtui import FunctionProvider, Input, WorkflowRuntime, agent, loop, tool, until_answered, workflow

if flowcapture.knob("fake_clock"):
    flowcapture.fake_clock()


class Question(BaseModel):
    question: str


def researcher(messages, tools):
    flowcapture.record("Researcher", messages)
    return "ctx.state is the conversation the model sees."


@agent(provider=FunctionProvider(researcher), prompt="You research one question, briefly.")
class Researcher:
    pass


@workflow(steps=[Researcher])
class ResearchWorkflow:
    """Answer one question."""


@tool(name="research", description="Delegates a question to an isolated researcher.", schema=Question)
class Research:
    def __init__(self, runtime: WorkflowRuntime):
        self.runtime = runtime

    async def execute(self, args: Question = Input()):
        return await self.runtime.run(ResearchWorkflow, input=args.question, memory={"asked_by": "coordinator"})


def coordinator(messages, tools):
    flowcapture.record("Coordinator", messages)
    if flowcapture.count("Coordinator") == 1:
        return {"content": "", "tool_calls": [{"name": "research", "args": {"question": "What is ctx.state?"}}]}
    return "ctx.state is what the model sees."


@agent(provider=FunctionProvider(coordinator), prompt="You answer using the research tool.", tools=[Research])
class Coordinator:
    pass


@workflow(steps=[loop(steps=[Coordinator], until=until_answered, max_iterations=3)])
class CoordinatorWorkflow:
    """Delegate, then answer."""
