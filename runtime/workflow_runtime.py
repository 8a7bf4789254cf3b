"""``WorkflowRuntime``: what a tool asks for to run an isolated child workflow.

    @tool(name="pesquisar", description="...", schema=PesquisaArgs)
    class PesquisarTool:
        def __init__(self, runtime: WorkflowRuntime):
            self.runtime = runtime

        async def execute(self, args: PesquisaArgs = Input()):
            return await self.runtime.run(PesquisaWorkflow, input=args.pergunta)

The child has its own ``ctx``, state and history; its events go into the
parent's stream, its workflow node under the calling tool's node; it counts
toward the parent's budget, obeys the parent's controller (pause, stop: a
stop inside the child ends the parent too) and inherits ``ctx.data``, the
parent's middlewares (outside its own), ``--model``, ``--replies`` and the
``--record``/``--replay`` cassette. The child's own plugins are disposed when
the parent run ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from flowtui.runtime.budget import Budget, BudgetTracker, check_budget_arg
from flowtui.runtime.bus import Emitter
from flowtui.runtime.context import check_data_arg, output_text
from flowtui.runtime.conversation import memory_items
from flowtui.runtime.errors import FatalToolError
from flowtui.runtime.nodes import fail_counter

if TYPE_CHECKING:
    from flowtui.runtime.engine import Run

MAX_DEPTH = 32  # child workflows inside one another


class WorkflowRuntime:
    """Runs child workflows inside the run that built this tool."""

    def __init__(self, parent: "Run") -> None:
        self._parent = parent

    async def run(self, workflow_cls: type, input: Any = None, *,
                  memory: str | Iterable[str] | Mapping[str, Any] | None = None,
                  data: Mapping[str, Any] | None = None, budget: Budget | None = None) -> str:
        """Run ``workflow_cls`` to the end and return its output as one string.

        The child reads the parent's ``ctx.data`` unless ``data=`` gives it its own."""
        from flowtui.runtime.app import bootstrap
        from flowtui.runtime.engine import Run

        parent = self._parent
        if parent.depth >= MAX_DEPTH:  # (Python's own limit came first, as a RecursionError naming nothing)
            raise FatalToolError(f"child workflows nested {MAX_DEPTH} deep, {workflow_cls.__name__} the next: a "
                                 "workflow that runs itself, directly or through another? End the recursion in "
                                 "the tool that calls runtime.run")
        app = parent.child_apps.get(workflow_cls)
        if app is None:
            app = parent.child_apps[workflow_cls] = bootstrap(
                workflow_cls, model=parent.model, replies=parent.replies)
        parent.children += 1
        child = Run(plans=app.plans, emitter=Emitter(parent.emitter.stream, f"{parent.id}.{parent.children}"),
                    input=input, memory=memory_items(memory),
                    data=dict(parent.ctx.data) if data is None else check_data_arg(data),
                    tracker=BudgetTracker(check_budget_arg(budget, app.workflow.budget), parent=parent.tracker),
                    controller=parent.controller, model=parent.model, wrap=parent.wrap,
                    replies=parent.replies, depth=parent.depth + 1,
                    middlewares=(*parent.middlewares, *(m for m in app.middlewares if m not in parent.middlewares)),
                    startup=app.start)
        child.root = parent.root
        child.root.runs[child.id] = child
        outer = fail_counter.set(None)  # its own ctx: its tool calls count in its own loops, not the parent's
        try:
            output = await child.execute()
        finally:
            fail_counter.reset(outer)
            child.root.runs.pop(child.id, None)
        return output_text(output) or ""
