"""A flow whose agent fills memory and tasks: what the model sees carries one huge system note.

Sizes come from the environment (the worker inherits it): ``BIG_MEMORY_ITEMS`` items of
``BIG_MEMORY_LINES`` short lines each, and ``BIG_TASKS`` tasks; ``BIG_LONG_ITEM``, when set, the
size of one single-line memory item put first."""

import os

from flowtui import ScriptedProvider, agent, workflow

ITEMS = int(os.environ.get("BIG_MEMORY_ITEMS", "1"))
LINES = int(os.environ.get("BIG_MEMORY_LINES", "10000"))
TASKS = int(os.environ.get("BIG_TASKS", "5000"))
LONG = int(os.environ.get("BIG_LONG_ITEM", "0"))


@agent(provider=ScriptedProvider(["ok", "ok2", "ok3"]), prompt="p")
class Filler:
    def after_response(self, reply, ctx):
        if LONG:
            ctx.state.append("memory", "START-" + "y" * (LONG - 6))
        for _ in range(ITEMS):
            ctx.state.append("memory", "\n".join(f"line {i}" for i in range(LINES)))
        for i in range(TASKS):
            ctx.state.append("tasks", f"task {i}")


@workflow(steps=[Filler, Filler])
class BigContextWorkflow:
    pass
