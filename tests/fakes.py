"""Fakes shared by the runtime tests: scripted models and a run that records its events."""

from flowtui import ChatRequest, FunctionProvider, Message, agent, bootstrap, workflow

_RAISE = object()


def counting(prefix: str = "reply"):
    """A FunctionProvider answering "<prefix> 1", "<prefix> 2", ... and the list of what it was sent."""
    calls: list = []

    def handler(messages, tools):
        calls.append(messages)
        return f"{prefix} {len(calls)}"

    return FunctionProvider(handler), calls


def scripted(*replies, when_done=_RAISE):
    """A FunctionProvider answering ``replies`` in order (then ``when_done``, or IndexError)
    and the list of what it was sent."""
    queue = list(replies)
    calls: list = []

    def handler(messages, tools):
        calls.append(messages)
        if not queue and when_done is not _RAISE:
            return when_done
        return queue.pop(0)

    return FunctionProvider(handler), calls


def call(name, **args):
    """A reply that calls tool ``name`` with ``args``."""
    return {"content": "", "tool_calls": [{"name": name, "args": args}]}


async def run_collect(wf, input="go", **kw):
    """Run ``wf`` once; returns (output, its events, the run)."""
    events: list = []
    run = bootstrap(wf).prepare(input, on_event=events.append, **kw)
    out = await run.execute()
    return out, events, run


def streaming_workflow():
    """A workflow of two turns whose model streams ``Hello!`` in three fragments: a journal of its run
    leaves their numbers out (fragments are not journaled)."""
    from flowtui import ChatReply, agent, workflow

    class Streaming(FunctionProvider):
        async def complete(self, request):
            for piece in ("He", "llo", "!"):
                request.on_delta(piece)
            return ChatReply(content="Hello!")

    @agent(provider=Streaming(lambda m, t: ""), prompt="p")
    class A:
        pass

    @workflow(steps=[A, A])
    class W:
        pass

    return W


def checking_twice(model):
    """A workflow of one agent that takes its turn over with run() and asks ``model`` twice
    ("first look", then "second look"), returning the second reply."""

    @agent(provider=FunctionProvider(model), prompt="Check twice.")
    class Checker:
        async def run(self, input, ctx):
            for text in ("first look", "second look"):
                reply = await self.provider.complete(ChatRequest(messages=[
                    Message(role="system", content=self.prompt), Message(role="user", content=text)]))
            return reply.content

    @workflow(steps=[Checker])
    class W:
        pass

    return W
