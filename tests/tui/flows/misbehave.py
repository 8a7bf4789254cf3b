"""Flows that misbehave, one workflow each (pick with misbehave.py:Name): the debugger must survive them."""

import asyncio
import ctypes
import os
import re
import signal
import threading
import time

from pydantic import BaseModel

from flowtui import AgentContext, Context, FunctionProvider, Input, State, agent, loop, tool, workflow


class Args(BaseModel):
    pass


def calls_the_tool(messages, tools):
    if any(m.role == "tool" for m in messages):
        return "done"
    return {"content": "", "tool_calls": [{"name": "t", "args": {}}]}


def make(behaviour, *, hook=None):
    """A workflow of two agent turns whose tool (or hook) does ``behaviour``."""

    @tool(name="t", schema=Args)
    class T:
        execute = behaviour

    attrs = {"after_response": hook} if hook else {}
    A = agent(provider=FunctionProvider(calls_the_tool), prompt="p", tools=[T])(type("Ag", (), attrs))
    return [A, A]


def spin(self, args: Args = Input()):
    while True:
        pass


async def async_spin(self, args: Args = Input()):
    while True:
        pass


async def awaits_forever(self, args: Args = Input()):
    await asyncio.sleep(3600)  # as a model call to a server that never answers


def exits_hard(self, args: Args = Input()):
    os._exit(3)


def segfault(self, args: Args = Input()):
    ctypes.string_at(0)


def big(self, args: Args = Input()):
    return "x" * 50_000_000


def many_lines(self, args: Args = Input()):
    return "\n".join(f"line {i}" for i in range(500))


def system_exit(self, response, ctx):
    raise SystemExit(0)


def keyboard_interrupt(self, response, ctx):
    raise KeyboardInterrupt


def odd_keys(self, response, ctx):
    """Long values under keys a path could misread: a dot, a bracket and a space, a credential."""
    ctx.d = {"a.b": "x" * 100_000, "k) x": "y" * 100_000, "sk-proj-" + "A1b2C3d4" * 6: "z" * 100_000}


def fine(self, args: Args = Input()):
    return "ok"


def never(ctx):
    time.sleep(3600)  # an until that blocks
    return True


@workflow(steps=make(spin))
class SyncLoop:
    pass


@workflow(steps=make(async_spin))
class AsyncLoop:
    pass


@workflow(steps=make(awaits_forever))
class AwaitsForever:
    pass


@workflow(steps=[loop(steps=make(fine)[:1], until=never, max_iterations=3)])
class BlockingUntil:
    pass


def backtracks(ctx):
    return re.match(r"(a+)+$", "a" * 64 + "b") is not None  # C code holding the interpreter for ages


@workflow(steps=[loop(steps=make(fine)[:1], until=backtracks, max_iterations=3)])
class RegexUntil:
    pass


def hook_spins(self, response, ctx):
    while True:
        pass


@workflow(steps=make(fine, hook=hook_spins))
class HookSpins:
    pass


def model_blocks(messages, tools):
    time.sleep(3600)  # a model stand-in of the flow's own that never answers


@workflow(steps=[agent(provider=FunctionProvider(model_blocks), prompt="p")(type("Writer", (), {}))])
class ModelBlocks:
    pass


@workflow(steps=make(fine, hook=system_exit))
class HookSystemExit:
    pass


@workflow(steps=make(fine, hook=keyboard_interrupt))
class HookKeyboardInterrupt:
    pass


@workflow(steps=make(exits_hard))
class ExitsHard:
    pass


@workflow(steps=make(segfault))
class Segfault:
    pass


@workflow(steps=make(many_lines))
class ManyLines:
    pass


@workflow(steps=make(big))
class BigOutput:
    pass


def forks(self, args: Args = Input()):
    """A child that outlives the worker, holding copies of its pipes (and journal)."""
    child = os.fork()
    if child == 0:
        if os.environ.get("FLOWTUI_TEST_SETSID"):
            os.setsid()  # out of the worker's process group too
        time.sleep(120)
        os._exit(0)
    if os.environ.get("FLOWTUI_TEST_PIDS"):  # for the test to end it
        with open(os.environ["FLOWTUI_TEST_PIDS"], "a") as f:
            f.write(f"{child}\n")
    return "forked"


def reads_input(self, args: Args = Input()):
    return f"read {input('Approve? ')!r}"


@workflow(steps=make(forks))
class Forks:
    pass


def floods(self, args: Args = Input(), ctx: AgentContext = Context()):
    """Events faster than the app shows them, for ever: its backlog fills, and its reading waits."""
    i = 0
    while True:
        ctx.state.append("tasks", f"task {i} " + "x" * 200)
        i += 1


@workflow(steps=make(floods))
class Floods:
    pass


@workflow(steps=make(reads_input))
class ReadsInput:
    pass


class _ExitsOnDispose:
    def after_response(self, response, ctx):
        import sys

        ctx.on_dispose(lambda: sys.exit(6))


@workflow(steps=[agent(provider=FunctionProvider(lambda m, t: "ok"), prompt="p")(_ExitsOnDispose)])
class DisposeExits:
    pass


def closes_its_pipes(self, args: Args = Input()):
    """Closes every pipe past stderr (the run's protocol among them), then works on."""
    import stat

    for name in os.listdir("/proc/self/fd"):
        try:
            if int(name) > 2 and stat.S_ISFIFO(os.fstat(int(name)).st_mode):
                os.close(int(name))
        except OSError:
            pass
    time.sleep(30)
    return "tidied"


@workflow(steps=make(closes_its_pipes))
class ClosesItsPipes:
    pass


def closes_everything(self, args: Args = Input()):
    os.closerange(0, 1024)  # its stderr too, then returns at once
    return "closed"


@workflow(steps=make(closes_everything))
class ClosesEverything:
    pass


def prints_after_closing_stdout(self, args: Args = Input()):
    os.close(1)
    print("after")  # fails the tool, and what it printed stays in Python's buffer to the end
    return "closed 1"


@workflow(steps=make(prints_after_closing_stdout))
class PrintsAfterClosingStdout:
    pass


def writes_into_its_pipe(self, args: Args = Input()):
    """Writes half a line into the pipe the run's events go out on (the next event is glued to it)."""
    import fcntl
    import stat

    stderr = os.fstat(2).st_ino
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            info = os.fstat(fd)
            writable = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY
        except OSError:
            continue
        if fd > 2 and stat.S_ISFIFO(info.st_mode) and info.st_ino != stderr and writable:
            os.write(fd, b'{"seq":')
    return "wrote"


@workflow(steps=make(writes_into_its_pipe))
class WritesIntoItsPipe:
    pass


def terminated_while_running(self, args: Args = Input()):
    os.kill(os.getpid(), signal.SIGTERM)  # as a supervisor or `kill` would: not flowtui's stop
    time.sleep(30)


async def terminated_while_awaiting(self, args: Args = Input()):
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
    await asyncio.sleep(30)


@workflow(steps=make(terminated_while_running))
class TerminatedRunning:
    pass


@workflow(steps=make(terminated_while_awaiting))
class TerminatedAwaiting:
    pass


@workflow(steps=make(fine, hook=odd_keys)[:1])
class OddKeys:
    pass


class Notes(BaseModel):
    items: list[str] = []
    title: str = "short"


@agent(provider=FunctionProvider(lambda messages, tools: "noted"), prompt="p")
class Keeper:
    def __init__(self, s: Notes = State()):
        self.s = s

    def after_response(self, response, ctx):
        """A state field and a memory item each longer than what reaches the app whole."""
        self.s.items.append("s" * 100_000)
        ctx.state.append("memory", "m" * 100_000)


@workflow(state=Notes, steps=[Keeper, Keeper])
class LongValues:
    pass


class Text(BaseModel):
    text: str


def calls_with_long_arguments(messages, tools):
    if any(m.role == "tool" for m in messages):
        return "done"
    return {"content": "", "tool_calls": [{"name": "echo", "args": {"text": "a" * 100_000}}]}


@tool(name="echo", schema=Text)
class Echo:
    def execute(self, args: Text = Input()):
        return str(len(args.text))


@workflow(steps=[agent(provider=FunctionProvider(calls_with_long_arguments), prompt="p", tools=[Echo])(
    type("Caller", (), {}))])
class LongArguments:
    pass


@workflow(steps=[agent(provider=FunctionProvider(lambda messages, tools: "r" * 100_000), prompt="p")(
    type("Wordy", (), {})), agent(provider=FunctionProvider(lambda messages, tools: "ok"), prompt="p")(
    type("After", (), {}))])
class LongReply:
    pass
