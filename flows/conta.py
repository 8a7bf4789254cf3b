"""Account support: per-run data, a tool function, a middleware and a cleanup.

    flowtui run flows/conta.py --input "Quero cancelar a fatura de 2025-03" --data conta_id=acme
    flowtui run flows/conta.py --input "..." --data conta_id=acme --data papel=atendente

- ``ctx.data`` holds the account of this run (``--data conta_id=acme``): the
  tool reads it, the model never sees it;
- ``faturas`` and ``cancelar_fatura`` are plain functions with ``@tool``;
- the ``so_atendente`` middleware denies a cancellation unless the run's
  ``papel`` is ``atendente`` (the model reads why), and ``ContextWindow``
  keeps each request within a token budget;
- the tool opens the account's connection once per run and closes it with
  ``ctx.on_dispose``, whatever the run's outcome; it is ``replay="rerun"``: a
  re-execution against a journal runs it again (a journal holds no connection).

Offline: a ``FunctionProvider`` plays a model that looks the invoice up, tries
to cancel it and answers from what the tools said.
"""

import re

from flowtui import (
    AgentContext, Context, ContextWindow, FunctionProvider, Middleware, ToolOutput, agent, loop, tool,
    until_answered, workflow,
)

FATURAS = {"acme": {"2025-03": "R$ 1.200,00", "2025-04": "R$ 980,50"}, "demo": {"2025-03": "R$ 10,00"}}


class Conexao:
    """Stands in for a database client: one per run, closed when the run ends."""

    def __init__(self, conta: str) -> None:
        self.conta, self.aberta = conta, True

    def fatura(self, mes: str) -> str | None:
        assert self.aberta, "connection already closed"
        return FATURAS.get(self.conta, {}).get(mes)

    async def fechar(self) -> None:
        self.aberta = False

    def __repr__(self) -> str:
        return f"<Conexao {self.conta} {'aberta' if self.aberta else 'fechada'}>"


def conexao(ctx: AgentContext) -> Conexao:
    """This run's connection to its account (``ctx.data["conta_id"]``), opened on first use."""
    if ctx.get("conexao") is None:
        ctx.conexao = Conexao(ctx.data.get("conta_id", "demo"))
        ctx.on_dispose(ctx.conexao.fechar)
    return ctx.conexao


@tool(replay="rerun")  # it keeps a live connection in ctx: a re-execution runs it again, to open one
def faturas(mes: str, ctx: AgentContext = Context()) -> str:
    """The customer's invoice for a month. Use before answering about money.

    Args:
        mes: the month as YYYY-MM, e.g. 2025-03
    """
    valor = conexao(ctx).fatura(mes)
    return f"A fatura de {mes} é {valor}." if valor else f"Não há fatura em {mes}."


@tool
def cancelar_fatura(mes: str) -> str:
    """Cancels the invoice of a month. Only a support agent may.

    Args:
        mes: the month as YYYY-MM
    """
    return f"A fatura de {mes} foi cancelada."


def so_atendente(invocation, call_next):
    """Denies cancel_fatura unless this run's papel is atendente; the model reads why."""
    if invocation.name == "cancelar_fatura" and invocation.ctx.data.get("papel") != "atendente":
        return ToolOutput(content="Não permitido: só um atendente pode cancelar faturas.", is_error=True)
    return call_next(invocation)


def modelo(messages, tools):
    """A simulated model: looks the invoice up, tries to cancel it, answers from the results."""
    pergunta = next(m.content for m in reversed(messages) if m.role == "user")
    found = re.search(r"\d{4}-\d{2}", pergunta)
    mes = found.group(0) if found else "2025-03"
    resultados = [m for m in messages if m.role == "tool"]
    if not resultados:
        return {"content": "", "tool_calls": [{"name": "faturas", "args": {"mes": mes}}]}
    if len(resultados) == 1 and "cancel" in pergunta.lower():
        return {"content": "", "tool_calls": [{"name": "cancelar_fatura", "args": {"mes": mes}}]}
    return " ".join(m.content for m in resultados)


@agent(provider=FunctionProvider(modelo), prompt="Você atende clientes sobre as faturas da conta deles.",
       tools=[faturas, cancelar_fatura])
class AtendenteAgent:
    pass


@workflow(steps=[loop(steps=[AtendenteAgent], until=until_answered, max_iterations=5)],
          middlewares=[Middleware(name="so_atendente", tool=so_atendente), ContextWindow(max_tokens=4000)])
class ContaWorkflow:
    """Answer about the account's invoices."""
