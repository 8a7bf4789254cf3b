"""Executing one run: steps, loops, agent turns, with an event for every change.

A :class:`Run` owns everything of one run (its ``ctx``, its state instance, its
agents, tools and providers) so concurrent runs never meet. Tool execution is
in :mod:`runtime.tools`; bootstrapping and the public ``App`` in
:mod:`runtime.app`.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from typing import TYPE_CHECKING, Any

from runtime.budget import BudgetTracker
from runtime.bus import Emitter, current_node, current_origin
from runtime.context import AgentContext, LoopInfo, TurnInfo
from runtime.control import Controller, PausePoint, RunStopped
from runtime.conversation import ConversationState
from runtime.decorators import AgentSpec, WorkflowSpec
from runtime.edits import Editor
from runtime.errors import BudgetExceededError, ConfigError, FatalToolError, ProviderError
from runtime.events import ChatAttempt, ChatDelta, NodeEnd, NodeStart, RunEnd, RunStart
from runtime.invoke import call_user
from runtime.messages import Message
from runtime.observe import StateObserver
from runtime.providers.base import AttemptInfo, ChatRequest
from runtime.snapshot import apply_state
from runtime.steps import FailInfo, LoopSpec, ParallelSpec
from runtime.tools import run_tool_call

if TYPE_CHECKING:
    from runtime.app import Plans

# Labels of the nodes around the running code, for "where the run is".
_path: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("flowtui_path", default=())
# Node ids of the loops around the running code, outermost first.
_loops: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("flowtui_loops", default=())


class BudgetStop(Exception):
    """A budget in ``stop`` mode was reached: unwind and finish with the output so far."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


class FailCounter:
    """Consecutive tool failures inside the innermost loop (a success resets it)."""

    __slots__ = ("count", "tool", "error")

    def __init__(self) -> None:
        self.count = 0
        self.tool: str | None = None
        self.error = ""


fail_counter: contextvars.ContextVar[FailCounter | None] = contextvars.ContextVar("flowtui_fails", default=None)


class NodeScope:
    """Emits ``node.start``/``node.end`` around a block and makes it the current node."""

    __slots__ = ("run", "kind", "name", "label", "data", "status", "error", "id", "_t0", "_tokens")

    def __init__(self, run: "Run", kind: str, name: str, *, label: str | None = None,
                 data: dict[str, Any] | None = None) -> None:
        self.run, self.kind, self.name = run, kind, name
        self.label = label or name
        self.data = data if data is not None else {}
        self.status = "ok"
        self.error: str | None = None

    def __enter__(self) -> "NodeScope":
        run = self.run
        self.id = run.emitter.stream.next_node_id()
        parent = current_node.get()[0]
        run.emitter.emit(NodeStart, node_id=self.id, parent_id=parent, kind=self.kind, name=self.name,
                         data=dict(self.data))
        self._tokens = (current_node.set((self.id, parent)), _path.set(_path.get() + (self.label,)))
        self._t0 = time.perf_counter()
        return self

    def relabel(self, label: str) -> None:
        _path.set(_path.get()[:-1] + (label,))

    def __exit__(self, exc_type, exc, tb) -> None:
        ms = (time.perf_counter() - self._t0) * 1000
        _path.reset(self._tokens[1])
        current_node.reset(self._tokens[0])
        if exc is not None:
            if isinstance(exc, (RunStopped, BudgetStop, asyncio.CancelledError)):
                self.status = "stopped"
            else:
                self.status = "error"
                self.error = describe_error(exc)
        node_id, parent = self.id, current_node.get()[0]
        self.run.emitter.emit(NodeEnd, node_id=node_id, parent_id=parent, kind=self.kind, name=self.name,
                              status=self.status, duration_ms=round(ms, 3), error=self.error, data=self.data)


def describe_error(exc: BaseException) -> str:
    """A one-line description safe to show and to write (a FatalToolError's cause stays out)."""
    if isinstance(exc, FatalToolError):
        return f"FatalToolError: {exc.message}"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Run:
    """One execution of a workflow. Built by ``App``; ``await run.execute()``."""

    def __init__(self, *, plans: "Plans", emitter: Emitter, input: Any, memory: list[str],
                 tracker: BudgetTracker, controller: Controller | None, offload: bool,
                 model: str | None, wrap: Any = None, depth: int = 0, snapshot: Any = None) -> None:
        from runtime.app import build_instances  # the App module builds what plans describe

        self.plans = plans
        self.spec: WorkflowSpec = plans.spec
        self.emitter = emitter
        self.id = emitter.run_id
        self.input = input
        self.offload = offload
        self.tracker = tracker
        self.controller = controller
        self.depth = depth
        emit = emitter.emit
        self._seed = snapshot
        if snapshot is not None:
            memory = [*snapshot.memory, *memory]
        self.state = ConversationState(emit, memory=memory)
        self.ctx = AgentContext(self.state, emit, run_id=self.id)
        self.workflow_state = plans.new_state()
        if snapshot is not None and snapshot.state:
            if self.workflow_state is None:
                raise ConfigError(f"the snapshot has [state] but workflow {self.spec.name} declares no state")
            apply_state(self.workflow_state, self.spec.state, snapshot.state, source="snapshot")
        self.observer = StateObserver(self.workflow_state, emit) if self.workflow_state is not None else None
        self.agents, self.tools, self.providers = build_instances(self, model=model, wrap=wrap)
        self.edits = Editor(self)
        self.journal: Any = None
        self._turns: dict[str, int] = {}
        self.status: str | None = None
        self.output: str | None = None
        self.error: BaseException | None = None

    # --- the run ---------------------------------------------------------
    async def execute(self) -> str | None:
        """Run the workflow to the end; returns ``ctx.output``. Raises when it fails."""
        t0 = time.perf_counter()
        message = _first_message(self.input)
        self.emitter.emit(
            RunStart, node_id=None, parent_id=current_node.get()[0], workflow=self.spec.name, input=_jsonable_input(self.input), memory=list(self.state.memory),
            state=self.observer.snapshot() if self.observer else {}, file=self.spec.file,
        )
        reason = error = None
        status = "finished"
        try:
            if self._seed is not None:
                for bucket in ("tasks", "history"):
                    if getattr(self._seed, bucket):
                        self.state.set(bucket, getattr(self._seed, bucket), origin="snapshot")
            if message is not None:
                self.state.append("history", Message(role="user", content=message), origin="input")
            with NodeScope(self, "workflow", self.spec.name):
                for step in self.spec.steps:
                    await self.step(step)
        except BudgetStop as stop:
            reason = f"budget: {stop.limit}"
        except RunStopped:
            status, reason = "stopped", "stopped by user"
        except asyncio.CancelledError as exc:  # the host (e.g. the app quitting) cancelled the run
            status, reason = "stopped", "cancelled"
            self.error = exc
        except BaseException as exc:
            status, error = "failed", describe_error(exc)
            self.error = exc
        finally:
            self.check_state()
            if self.observer is not None:
                self.observer.detach()
        self.status = status
        self.output = self.ctx.get("output")
        self.emitter.emit(RunEnd, node_id=None, parent_id=current_node.get()[0], status=status, output=self.output, error=error,
                          reason=reason, duration_ms=round((time.perf_counter() - t0) * 1000, 3))
        if self.error is not None:
            raise self.error
        return self.output

    async def step(self, step: Any) -> None:
        if isinstance(step, LoopSpec):
            await self._loop(step)
        elif isinstance(step, ParallelSpec):
            await self._parallel(step)
        else:
            await self._agent(self.plans.agent_specs[step])
        self.check_state()

    def check_state(self) -> None:
        if self.observer is not None:
            self.observer.check()

    async def pause(self, kind: str, name: str, *, prompt: str | None = None) -> None:
        controller = self.controller
        if controller is None:
            return
        point = PausePoint(kind=kind, name=name, node_id=current_node.get()[0], loops=_loops.get(), path=_path.get())  # type: ignore[arg-type]

        def emit(cls, **fields):
            if prompt is not None:
                fields["prompt"] = prompt
            return self.emitter.emit(cls, origin="runtime", **fields)

        await controller.checkpoint(point, emit)

    def budget_gate(self) -> None:
        """Between units of work: stop or raise when a budget limit is reached."""
        found = self.tracker.exceeded_in()
        if found is None:
            return
        tracker, limit = found  # a child run may hit its parent's budget
        budget = tracker.budget
        assert budget is not None
        usage = tracker.usage()
        if not tracker.reported and budget.on_exceeded is not None:
            tracker.reported = True
            token = current_origin.set("budget")
            try:
                budget.on_exceeded(self.ctx, usage)
            finally:
                current_origin.reset(token)
        if budget.mode == "raise":
            raise BudgetExceededError(f"budget exceeded: {limit}={getattr(budget, limit)} (used: {usage.model_dump()})",
                                      limit=limit, usage=usage)
        raise BudgetStop(limit)

    def publish_budget(self) -> None:
        if self.tracker.budget is not None:
            self.ctx._set("budget", self.tracker.usage(), origin="runtime")

    async def hook(self, fn: Any, agent: str, hook: str, args: tuple) -> Any:
        arity = self.plans.arity(fn)
        return await call_user(fn, args[:arity], origin=f"hook:{agent}.{hook}", offload=self.offload,
                               then=self.check_state)

    # --- loops and parallel ------------------------------------------------
    async def _loop(self, spec: LoopSpec) -> None:
        ctx = self.ctx
        with NodeScope(self, "loop", spec.name, data={"max_iterations": spec.max_iterations}) as scope:
            fails = FailCounter()
            tokens = (fail_counter.set(fails), _loops.set(_loops.get() + (scope.id,)))
            i, stopped_by = 0, None
            try:
                while True:
                    i += 1
                    scope.relabel(f"{spec.name} {i}/{spec.max_iterations}")
                    for step in spec.steps:
                        await self.step(step)
                        if fails.count >= spec.max_fails:
                            break
                    ctx._set("loop", LoopInfo(iterations=i, max_iterations=spec.max_iterations), origin="runtime")
                    await self.pause("loop_iteration", spec.name)
                    if fails.count >= spec.max_fails:
                        stopped_by = "fails"
                        if spec.on_fail is not None:
                            info = FailInfo(fails=fails.count, tool_name=fails.tool, error=fails.error)
                            await self._call(spec.on_fail, (ctx, info), "on_fail")
                        break
                    if spec.until is not None and await self._until(spec):
                        stopped_by = "until"
                        break
                    if i >= spec.max_iterations:
                        stopped_by = "exhausted"
                        ctx._set("loop", LoopInfo(iterations=i, exhausted=True, max_iterations=spec.max_iterations,
                                                  stopped_by="exhausted"), origin="runtime")
                        if spec.on_exhausted is not None:
                            await self._call(spec.on_exhausted, (ctx, i), "on_exhausted")
                        break
                    self.budget_gate()
            except BudgetStop:
                stopped_by = "budget"
                raise
            except RunStopped:
                stopped_by = "stopped"
                raise
            finally:
                fail_counter.reset(tokens[0])
                _loops.reset(tokens[1])
                scope.data.update(iterations=i, stopped_by=stopped_by)
                if stopped_by is not None:
                    ctx._set("loop", LoopInfo(iterations=i, exhausted=stopped_by == "exhausted",
                                              max_iterations=spec.max_iterations, stopped_by=stopped_by),
                             origin="runtime")

    async def _until(self, spec: LoopSpec) -> bool:
        args = (self.ctx, self.workflow_state) if self.plans.until_arity(spec) >= 2 else (self.ctx,)
        return bool(await self._call(spec.until, args, "until"))

    async def _call(self, fn: Any, args: tuple, origin: str) -> Any:
        return await call_user(fn, args, origin=origin, offload=False, then=self.check_state)

    async def _parallel(self, spec: ParallelSpec) -> None:
        with NodeScope(self, "parallel", spec.name):
            tasks = [asyncio.ensure_future(self.step(s)) for s in spec.steps]
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

    # --- agents ------------------------------------------------------------
    async def _agent(self, spec: AgentSpec) -> None:
        await self.pause("agent", spec.name, prompt=spec.prompt)
        self.budget_gate()
        inst = self.agents[spec.cls]
        with NodeScope(self, "agent", spec.name) as scope:
            if spec.takes_over:
                out = await self.hook(inst.run, spec.name, "run", (self.input, self.ctx))
                self.ctx._set("output", None if out is None else str(out), origin="runtime")
                return
            try:
                await self._turn(spec, inst)
            except (RunStopped, BudgetStop, BudgetExceededError, FatalToolError, asyncio.CancelledError):
                raise
            except Exception as exc:
                if "on_error" not in spec.hooks:
                    raise
                recovered = await self.hook(inst.on_error, spec.name, "on_error", (exc, self.ctx))
                if recovered is None:
                    raise
                scope.status, scope.error = "error", describe_error(exc)
                scope.data["recovered"] = True
                self.ctx._set("output", str(recovered), origin="runtime")

    async def _turn(self, spec: AgentSpec, inst: Any) -> None:
        ctx = self.ctx
        prompt = spec.prompt
        if "before_prompt" in spec.hooks:
            new = await self.hook(inst.before_prompt, spec.name, "before_prompt", (prompt, ctx))
            if new is not None:
                prompt = str(new)
        await self.pause("chat", spec.name, prompt=prompt)
        self.budget_gate()
        reply = await self._chat(spec, prompt)
        calls = [c if c.id else c.model_copy(update={"id": f"call_{i}"}) for i, c in enumerate(reply.tool_calls)]
        self.state.append("history", Message(role="assistant", content=reply.content, tool_calls=tuple(calls),
                                             reasoning=reply.reasoning), origin=f"agent:{spec.name}")
        results = []
        for call in calls:
            await self.pause("tool", call.name)
            self.budget_gate()
            results.append(await run_tool_call(self, spec, inst, call))
        last = results[-1] if results else None
        response = last.output if last is not None else reply.content
        if "after_response" in spec.hooks:
            new = await self.hook(inst.after_response, spec.name, "after_response", (response, ctx))
            if new is not None:
                response = str(new)
        ctx._set("turn", TurnInfo(
            agent=spec.name, called_tool=last is not None, tool_name=last.name if last else None,
            tool_error=any(r.is_error for r in results), tool_call_source=reply.tool_call_source if calls else None,
            response=response), origin="runtime")
        ctx._set("output", response, origin="runtime")

    async def _chat(self, spec: AgentSpec, prompt: str):
        n = self._turns[spec.name] = self._turns.get(spec.name, 0) + 1
        messages = [Message(role="system", content=prompt)] if prompt else []
        messages += self.state.to_messages()
        with NodeScope(self, "chat", spec.name, data={"turn": n, "messages": len(messages)}) as scope:
            emit = self.emitter.emit

            def on_delta(text: str) -> None:
                emit(ChatDelta, text=text)

            def on_attempt(info: AttemptInfo) -> None:
                emit(ChatAttempt, attempt=info.attempt, error=info.error, status=info.status,
                     retry_in_s=info.retry_in_s)

            tool_specs = self.plans.tool_specs[spec.cls]
            request = ChatRequest.model_construct(
                agent=spec.name, turn=n, messages=messages, tools=tool_specs.schemas,
                tool_names=tool_specs.names, sampling=spec.sampling, on_delta=on_delta, on_attempt=on_attempt)
            try:
                reply = await self.providers[spec.cls].complete(request)
            except ProviderError as exc:
                exc.agent = exc.agent or spec.name
                scope.data["attempts"] = exc.attempts
                raise
            usage = reply.usage
            self.tracker.add_chat(tokens=usage.prompt_tokens + usage.completion_tokens, cost_usd=reply.cost_usd)
            scope.data.update(
                prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                cost_usd=reply.cost_usd, attempts=reply.attempts, tool_calls=len(reply.tool_calls),
                tool_call_source=reply.tool_call_source, model=reply.model)
            if reply.reasoning:
                scope.data["reasoning"] = reply.reasoning
        self.publish_budget()
        return reply


def _first_message(input: Any) -> str | None:
    if input is None:
        return None
    if isinstance(input, str):
        return input
    if isinstance(input, dict):
        if "message" in input:
            return str(input["message"])
        return json.dumps(input, ensure_ascii=False, default=repr)
    return str(input)


def _jsonable_input(input: Any) -> Any:
    if input is None or isinstance(input, (str, int, float, bool, list, dict)):
        return input
    return repr(input)
