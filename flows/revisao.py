"""The seed's review loop: plan, then write and review until the reviewer approves.

    flowtui flows/revisao.py --input "Escreva um parágrafo sobre ctx.state"

The planner's output is context, not speech, so its ``after_response``
promotes it: out of the history, into memory. Then a writer and a reviewer
take turns until ``s.aprovado`` (at most 5 rounds). The reviewer records each
problem with a tool that asks for the workflow state and ``ctx``.

Offline by default: the replies come from ``revisao.replies.toml`` and the
reviewer approves on the third round.
"""

import re

from pydantic import BaseModel, Field

from flowtui import (
    AgentContext, Context, Input, ScriptedProvider, State, agent, loop, tool, workflow,
)


class RevisaoState(BaseModel):
    aprovado: bool = False
    rodadas: int = 0
    problemas: list[str] = []


class RevisaoScript(ScriptedProvider):
    """Scripted replies, one list per agent (swap for a LiteLLMProvider to use a real model)."""

    replies = "revisao.replies.toml"


class ProblemaArgs(BaseModel):
    descricao: str = Field(description="the problem found in the draft, in one sentence")


@tool(name="registrar_problema", description="Records a problem found in the draft. Use once per problem.",
      schema=ProblemaArgs)
class RegistrarProblemaTool:
    async def execute(self, args: ProblemaArgs = Input(), ctx: AgentContext = Context(),
                      s: RevisaoState = State()):
        s.problemas.append(args.descricao)
        ctx.ultimo_problema = args.descricao
        return f"Problema registrado ({len(s.problemas)} no total): {args.descricao}"


@agent(provider=RevisaoScript, prompt="./planner.agent.md")
class PlannerAgent:
    def after_response(self, plano: str, ctx: AgentContext):
        ctx.state.set("history", ctx.state.history[:-1])          # out of the transcript
        ctx.state.append("memory", f"Plano a seguir:\n{plano}")   # system at the top
        ctx.plan = plano


@agent(provider=RevisaoScript, prompt="./escritor.agent.md")
class EscritorAgent:
    pass


@agent(provider=RevisaoScript, prompt="./revisor.agent.md", tools=[RegistrarProblemaTool])
class RevisorAgent:
    def __init__(self, s: RevisaoState = State()):
        self.s = s

    async def after_response(self, resposta: str, ctx: AgentContext):
        self.s.rodadas += 1
        self.s.aprovado = bool(re.search(r"\bAPROVADO\b", resposta))


@workflow(
    state=RevisaoState,
    steps=[
        PlannerAgent,
        loop(steps=[EscritorAgent, RevisorAgent], until=lambda ctx, s: s.aprovado, max_iterations=5),
    ],
)
class RevisaoWorkflow:
    """Plan, then write and review until approved."""
