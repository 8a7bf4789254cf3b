"""One agent whose model streams its reply in fragments, waiting for the test between them."""

import asyncio

import flowcapture
from flowtui import ChatReply, FunctionProvider, agent, workflow

FRAGMENTS = ["Hel", "lo, wor", "ld: ctx.state ", "holds history."]
REASONING = "The user wants a greeting.\nKeep it short."


class StreamingModel(FunctionProvider):
    """Hands each fragment to ``request.on_delta``, then waits at the test's gate before the next."""

    def handler(self, messages, tools):  # complete() below does the work
        raise AssertionError("not called")

    async def complete(self, request):
        megabytes = flowcapture.knob("big_stream")
        if megabytes:  # a reply of megabytes in 64 KiB pieces, each ending in its number, then gate 0
            pieces = int(megabytes * 16)
            for k in range(pieces):
                request.on_delta(("y" * 1023 + "\n") * 63 + "x" * 1010 + f" piece {k:06d}\n")
                await asyncio.sleep(0)
            await flowcapture.gate(0)
            return ChatReply(content=f"{pieces} pieces")
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
