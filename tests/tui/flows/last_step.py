"""A watchpoint on ``state.nome`` is made true by the run's last step: no pause point follows it."""

from pydantic import BaseModel
from flowtui import FunctionProvider, State, agent, workflow

class S(BaseModel):
    nome: str = ""

@agent(provider=FunctionProvider(lambda m, t: "a"), prompt="p")
class W:
    def __init__(self, s: S = State()):
        self.s = s

    def after_response(self, r, ctx):
        self.s.nome = "changed"

@workflow(state=S, steps=[W])
class StWorkflow:
    pass
