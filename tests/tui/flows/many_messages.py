"""A flow whose only agent appends 10,000 messages to the history, one event each."""

from flowtui import Message, ScriptedProvider, agent, workflow

COUNT = 10_000


@agent(provider=ScriptedProvider([]))
class Flood:
    async def run(self, input, ctx):
        for i in range(COUNT):
            role = "user" if i % 2 == 0 else "assistant"
            ctx.state.append("history", Message(role=role, content=f"message {i}: " + "lorem ipsum " * (i % 7)))
        return "done"


@workflow(steps=[Flood])
class FloodWorkflow:
    pass
