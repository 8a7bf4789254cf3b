"""A tool loop under ContextWindow: each tool result is long, so the window leaves the oldest turns out
of later calls; what the model sees (the history, before the middleware) is more than what is sent.
The model records what it received (flowcapture)."""

import flowcapture

from flowtui import ContextWindow, FunctionProvider, agent, loop, tool, workflow


@tool
def eco(text: str) -> str:
    """Echoes the text back, padded."""
    return f"eco: {text} " + "x" * 400


def model(messages, tools):
    flowcapture.record("Windowed", messages)
    return {"tool_calls": [{"name": "eco", "args": {"text": "again"}}]}


@agent(provider=FunctionProvider(model), prompt="Window test.", tools=[eco])
class Windowed:
    pass


@workflow(steps=[loop(steps=[Windowed], max_iterations=6)], middlewares=[ContextWindow(max_tokens=200)])
class WindowWorkflow:
    pass
