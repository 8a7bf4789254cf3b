"""Tools without a class: a @tool function (schema from its signature and docstring, Context()/State()
injected) and any object with name, description, schema and execute."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from flowtui import (
    AgentContext, ConfigError, Context, FunctionProvider, InjectionError, State, ToolOutput, agent, bootstrap,
    loop, tool, until_answered, workflow,
)
from fakes import scripted


class Conta(BaseModel):
    consultas: list[str] = []


@tool
def saldo(conta: str, moeda: Annotated[str, Field(description="ISO code")] = "BRL", *,
          ctx: AgentContext = Context(), s: Conta = State()) -> str:
    """The balance of an account. Use before answering about money.

    Args:
        conta: the account id,
            e.g. "acme"
        moeda: ignored here: Field's own description wins
    """
    s.consultas.append(conta)
    return f"{conta}: 10 {moeda} ({ctx.data.get('plano', 'free')})"


@tool(name="dobro", description="Doubles n.")
async def dobrar(n: int) -> int:
    return n * 2


def test_a_tool_functions_schema_comes_from_its_signature_and_docstring():
    schema = saldo.__flowtui__.function_schema()
    assert schema["function"]["name"] == "saldo"
    assert schema["function"]["description"] == "The balance of an account. Use before answering about money."
    params = schema["function"]["parameters"]
    assert params["required"] == ["conta"]
    assert params["properties"]["conta"] == {"description": 'the account id, e.g. "acme"', "title": "Conta",
                                             "type": "string"}
    assert params["properties"]["moeda"]["description"] == "ISO code"
    assert set(params["properties"]) == {"conta", "moeda"}  # ctx and s are injected, never the model's
    assert params["additionalProperties"] is False
    assert dobrar.__flowtui__.function_schema()["function"]["description"] == "Doubles n."


async def test_tool_functions_run_sync_and_async_with_ctx_and_state_injected():
    provider, seen = scripted(
        {"content": "", "tool_calls": [{"name": "saldo", "args": {"conta": "acme"}},
                                       {"name": "dobro", "args": {"n": "21"}}]},
        {"content": "", "tool_calls": [{"name": "dobro", "args": {"n": "muitos"}}]},
        "pronto")

    @agent(provider=provider, tools=[saldo, dobrar])
    class A:
        pass

    @workflow(state=Conta, steps=[loop([A], until=until_answered, max_iterations=5)])
    class W:
        pass

    app = bootstrap(W)
    events = []
    app.subscribe(events.append)
    assert await app.run("oi", data={"plano": "pro"}) == "pronto"
    results = [(e.item.tool_name, e.item.content, e.item.is_error) for e in events
               if e.type == "state.append" and e.item.role == "tool"]
    assert results[0] == ("saldo", "acme: 10 BRL (pro)", False)
    assert results[1] == ("dobro", "42", False)  # validated: "21" became 21
    assert results[2][0] == "dobro" and results[2][2] is True
    assert results[2][1].startswith("Invalid arguments for tool dobro: n: Input should be a valid integer")
    changes = [(e.path, e.new, e.origin) for e in events if e.type == "workflow_state.change"]
    assert changes == [("consultas", ["acme"], "tool:saldo")]


async def test_a_tool_function_stays_an_ordinary_function():
    assert await dobrar(4) == 8


class Busca(BaseModel):
    termo: str


class Catalogo:
    """A tool made at run time: any object with name, description, schema and execute."""

    def __init__(self, itens):
        self.name, self.description, self.schema = "catalogo", "Searches the catalog.", Busca
        self.itens = itens

    async def execute(self, args: Busca):
        found = [i for i in self.itens if args.termo in i]
        return ", ".join(found) if found else ToolOutput(content=f"nada para {args.termo}", is_error=True)


class Relogio:
    name = "relogio"
    description = "What time it is."
    schema = {"type": "object", "properties": {"fuso": {"type": "string"}}, "required": ["fuso"]}

    def execute(self, args):
        return f"12:00 em {args['fuso']}"  # a JSON-schema tool gets the arguments as a dict


async def test_any_object_with_name_description_schema_and_execute_is_a_tool():
    tools_seen = []
    replies = [{"content": "", "tool_calls": [{"name": "catalogo", "args": {"termo": "azul"}},
                                              {"name": "catalogo", "args": {"termo": "roxo"}},
                                              {"name": "relogio", "args": {"fuso": "UTC"}}]}, "fim"]

    def handler(messages, tools):
        tools_seen.append(tools)
        return replies.pop(0)

    @agent(provider=FunctionProvider(handler), tools=[Catalogo(["carro azul", "bola"]), Relogio()])
    class A:
        pass

    @workflow(steps=[loop([A], until=until_answered, max_iterations=3)])
    class W:
        pass

    app = bootstrap(W)
    events = []
    app.subscribe(events.append)
    assert await app.run("oi") == "fim"
    assert [t["function"]["name"] for t in tools_seen[0]] == ["catalogo", "relogio"]
    assert tools_seen[0][1]["function"]["parameters"]["required"] == ["fuso"]
    assert [(e.item.content, e.item.is_error) for e in events if e.type == "state.append" and e.item.role == "tool"] \
        == [("carro azul", False), ("nada para roxo", True), ("12:00 em UTC", False)]


def test_mistakes_with_tools_name_what_is_wrong():
    def plain(x: int):
        return x

    with pytest.raises(ConfigError, match="the function plain, which is not a tool; decorate it with @tool"):
        @agent(provider=FunctionProvider(lambda m, t: "x"), tools=[plain])
        class A:
            pass

    class Half:
        name = "half"

        def execute(self, args):
            return ""

    # (named by its class: its repr said "<test_tool_forms....Half object at 0x7f…>")
    with pytest.raises(ConfigError, match=r"B: tools=\[...\] holds a Half object, which is not a @tool class or "
                                          r"function, and as a tool object it lacks description, schema \("):
        @agent(provider=FunctionProvider(lambda m, t: "x"), tools=[Half()])
        class B:
            pass

    with pytest.raises(ConfigError, match=r"B: tools=\[...\] holds the class Half, which is not a tool; decorate it "
                                          r"with @tool\(name=..., description=..., schema=...\)$"):
        @agent(provider=FunctionProvider(lambda m, t: "x"), tools=[Half])
        class B:
            pass

    @agent(provider=FunctionProvider(lambda m, t: "x"))
    class Helper:
        pass

    # (told to decorate it with @tool, it was then told it has no execute())
    with pytest.raises(ConfigError, match=r"B: tools=\[...\] holds Helper, an @agent class, which is not a tool: to "
                                          r"have B call on it, write a @tool whose __init__ takes runtime: "
                                          r"WorkflowRuntime and whose execute runs it as a child workflow"):
        @agent(provider=FunctionProvider(lambda m, t: "x"), tools=[Helper])
        class B:
            pass

    with pytest.raises(ConfigError, match=r"@tool varia: \*nums cannot be a tool argument"):
        @tool
        def varia(*nums: int):
            return sum(nums)

    with pytest.raises(ConfigError, match="of C lists the tool 'dobro' twice; list it once"):
        @agent(provider=FunctionProvider(lambda m, t: "x"), tools=[dobrar, dobrar])
        class C:
            pass

    @tool(name="dobro")
    def outro(x: int) -> str:
        return str(x)

    # named as a person reads them (no memory address), with where each is defined
    with pytest.raises(ConfigError, match=r"two tools are named 'dobro' \(function .*dobrar \(test_tool_forms.py:\d+\) "
                                          r"and function .*outro \(test_tool_forms.py:\d+\)\)"):
        @agent(provider=FunctionProvider(lambda m, t: "x"), tools=[dobrar, outro])
        class C2:
            pass

    @agent(provider=FunctionProvider(lambda m, t: "x"), tools=[saldo])
    class D:
        pass

    @workflow(steps=[D])
    class NoState:
        pass

    with pytest.raises(InjectionError, match="State\\(\\) in tool function parameter 's', but workflow NoState"):
        bootstrap(NoState)
