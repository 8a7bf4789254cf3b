"""Injection errors fail before the run starts and name the class and the parameter."""

from typing import Annotated

import pytest
from pydantic import BaseModel

from flowtui import (
    Context, FunctionProvider, InjectionError, Input, State, agent, bootstrap, loop, tool, workflow,
)

P = FunctionProvider(lambda m, t: "ok")


class S(BaseModel):
    x: int = 0


def test_state_marker_without_workflow_state():
    @agent(provider=P, prompt="p")
    class Revisor:
        def __init__(self, s: S = State()):
            self.s = s

    @workflow(steps=[Revisor])
    class W:
        pass

    with pytest.raises(InjectionError, match=r"Revisor: State\(\) in __init__ parameter 's'.*W declares no state"):
        bootstrap(W)


def test_two_parameter_until_without_state():
    @agent(provider=P, prompt="p")
    class A:
        pass

    @workflow(steps=[loop(steps=[A], until=lambda ctx, s: True)])
    class W:
        pass

    with pytest.raises(InjectionError, match=r"until=.*takes \(ctx, s\).*W declares no state"):
        bootstrap(W)


def test_context_marker_in_a_constructor():
    @agent(provider=P, prompt="p")
    class A:
        def __init__(self, ctx=Context()):
            self.ctx = ctx

    @workflow(steps=[A])
    class W:
        pass

    with pytest.raises(InjectionError, match=r"A: Context\(\) in __init__ parameter 'ctx'.*before its ctx exists"):
        bootstrap(W)


def test_state_in_tool_execute_without_state_and_annotated_markers():
    class Args(BaseModel):
        q: str

    @tool(name="t", schema=Args)
    class T:
        def execute(self, args: Annotated[Args, Input()], s: Annotated[S, State()]):
            return "x"

    @agent(provider=P, prompt="p", tools=[T])
    class A:
        pass

    @workflow(steps=[A])
    class W:
        pass

    with pytest.raises(InjectionError, match=r"T: State\(\) in execute\(\) parameter 's'"):
        bootstrap(W)

    @workflow(state=S, steps=[A])
    class W2:
        pass

    bootstrap(W2)  # Annotated markers are understood


def test_error_carries_file_and_line_of_the_class():
    @agent(provider=P, prompt="p")
    class Lost:
        def __init__(self, s: S = State()):
            pass

    @workflow(steps=[Lost])
    class W:
        pass

    with pytest.raises(InjectionError) as info:
        bootstrap(W)
    assert info.value.file.endswith("test_injection.py") and info.value.line > 0
    assert str(info.value).startswith(f"{info.value.file}:{info.value.line}: Lost: ")
