"""One agent whose model streams its reply in fragments, waiting for the test between them."""

import flowcapture
from flowtui import ChatReply, FunctionProvider, agent, workflow

FRAGMENTS = ["Hel", "lo, wor", "ld: ctx.state ", "holds history."]
REASONING = "The user wants a greeting.\nKeep it short."


class StreamingModel(FunctionProvider):
    """Hands each fragment to ``request.on_delta``, then waits at the test's gate before the next."""

    def handler(self, messages, tools):  # complete() below does the work
        raise AssertionError("not called")

    async def complete(self, request):
        for i, fragment in enumerate(FRAGMENTS):
            request.on_delta(fragment)
            await flowcapture.gate(i)
        return ChatReply(content="".join(FRAGMENTS), reasoning=REASONING)


@agent(provider=StreamingModel(), prompt="You greet.")
class Streamer:
    pass


@workflow(steps=[Streamer])
class StreamWorkflow:
    """One streamed reply."""
