"""A flow whose every source of text carries terminal escape sequences and Rich markup:
the model's reply and reasoning, a tool's name (chosen by the model), arguments, output and
error, memory, tasks, a workflow-state field, a ctx field, the run's output."""

from pydantic import BaseModel

from flowtui import AgentContext, Context, FunctionProvider, Input, State, agent, tool, workflow

# window title, clipboard (OSC 52), leave the alternate screen, ask the cursor position,
# CSI as one C1 byte, a right-to-left override, and Rich markup
PAYLOAD = "\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07\x1b[?1049l\x1b[6n\x9b31m\u202eevil [bold red]markup[/] \x1b]8;;x\x1b\\"


class HostileState(BaseModel):
    note: str = ""


class EchoArgs(BaseModel):
    text: str = ""


@tool(name="echo", description="Echoes its text.", schema=EchoArgs)
class Echo:
    def execute(self, args: EchoArgs = Input(), ctx: AgentContext = Context(), s: HostileState = State()):
        ctx.hostile = args.text
        s.note = args.text
        ctx.state.append("memory", f"memory {args.text}")
        ctx.state.append("tasks", f"task {args.text}")
        return f"echo {args.text}"


@tool(name="fail", description="Always fails.", schema=EchoArgs)
class Fail:
    def execute(self, args: EchoArgs = Input()):
        raise ValueError(f"failed {args.text}")


def model(messages, tools):
    if not any(m.role == "tool" for m in messages):
        return {"content": f"<think>think {PAYLOAD}</think>reply {PAYLOAD}",
                "tool_calls": [{"name": "echo", "args": {"text": PAYLOAD}},
                               {"name": "fail", "args": {"text": PAYLOAD}},
                               {"name": f"tool{PAYLOAD}", "args": {}}]}
    return f"final {PAYLOAD}"


@agent(provider=FunctionProvider(model), prompt="You are hostile.", tools=[Echo, Fail])
class Hostile:
    pass


@workflow(steps=[Hostile, Hostile], state=HostileState)
class HostileWorkflow:
    pass
