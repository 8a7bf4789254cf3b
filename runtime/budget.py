"""Budgets: limits on a run's duration, calls, tokens and cost.

Checked between units of work (before each agent turn, before each tool call,
after each loop iteration). ``mode="stop"`` skips the remaining steps and the
run returns the output so far; ``mode="raise"`` raises ``BudgetExceededError``.
A child workflow counts toward its parent's budget (they share one tracker).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from flowtui.runtime.construct import builders
from flowtui.runtime.errors import ConfigError

LIMITS = ("max_duration_s", "max_chat_calls", "max_tool_calls", "max_tokens", "max_cost_usd")


class Budget(BaseModel):
    """What a run may spend. Unset limits are not checked."""

    # (checked when a limit is changed too: budget.max_chat_calls = float("nan") was no limit, -3 taken)
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", validate_assignment=True)

    def __init__(self, *args: Any, **limits: Any) -> None:
        """Every fault said in flowtui's words, naming the parameter: a misspelt limit would
        otherwise leave the run without it."""
        if args:
            raise ConfigError(f"Budget takes its limits by name, e.g. Budget(max_chat_calls={args[0]!r}); "
                              f"the limits: {', '.join(LIMITS)}")
        try:
            super().__init__(**limits)
        except ValidationError as exc:
            raise ConfigError("; ".join(_fault(e) for e in exc.errors())) from None

    def __setattr__(self, name: str, value: Any) -> None:
        kept = dict(self.__dict__)
        try:
            super().__setattr__(name, value)
        except (ValidationError, ConfigError) as exc:
            self.__dict__.update(kept)  # (a refused limit stays as it was: the check after setting it refused it)
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError("; ".join(_fault(e) for e in exc.errors())) from None

    max_duration_s: float | None = None
    max_chat_calls: int | None = None
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    mode: Literal["stop", "raise"] = "stop"
    on_exceeded: Callable[..., Any] | None = None

    @field_validator(*LIMITS, mode="before")
    @classmethod
    def _a_number(cls, value: Any, info: Any) -> Any:
        """True or "1" was taken as a limit of 1 (a flag, or text read from a file, meant otherwise)."""
        if isinstance(value, (bool, str, bytes)):
            raise ConfigError(f"Budget({info.field_name}={value!r}): a limit is a number, such as "
                              f"{info.field_name}=20, not {type(value).__name__}")
        return value

    @model_validator(mode="after")
    def _positive(self) -> "Budget":
        for name in LIMITS:
            value = getattr(self, name)
            if value is not None and value != value:  # NaN: no comparison holds, so it never stopped a run
                raise ConfigError(f"Budget({name}=nan): not a limit (it is never reached); leave it out for none")
            if value is not None and value < 0:
                raise ConfigError(f"Budget({name}={value}): a limit cannot be negative")
        if self.on_exceeded is not None:  # (found when the limit was reached, as a TypeError naming nothing)
            from flowtui.runtime.checks import needs_more, needs_more_said

            passed = ("ctx", "usage", "limit")
            extra = needs_more(self.on_exceeded, passed)
            if extra:
                said = needs_more_said(self.on_exceeded, extra, "on_exceeded", passed)
                raise ConfigError(f"Budget(on_exceeded=...) {said}")
        return self


def _fault(error: Any) -> str:
    """One of pydantic's errors about a Budget, as flowtui says it."""
    name = ".".join(map(str, error["loc"]))
    if error["type"] in ("extra_forbidden", "no_such_attribute"):  # (given to Budget(...), or set on one)
        from difflib import get_close_matches

        close = get_close_matches(name, [*LIMITS, "mode", "on_exceeded"], n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"Budget({name}=...): no such parameter; {hint}(the limits: {', '.join(LIMITS)}; also mode, on_exceeded)"
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):  # our own validator's words
        return str(cause)
    return f"Budget({name}={error.get('input')!r}): {error['msg']}"


class BudgetUsage(BaseModel):
    """What the run has spent so far (``ctx.budget``)."""

    model_config = ConfigDict(frozen=True)

    duration_s: float = 0.0
    chat_calls: int = 0
    tool_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


class TokenTotals(BaseModel):
    """Tokens a run used."""

    model_config = ConfigDict(frozen=True)

    prompt: int = 0
    completion: int = 0
    total: int = 0


class RunTotals(BaseModel):
    """What a run consumed, with or without a budget: ``run.end`` and the
    workflow node's end carry it. ``exceeded`` names the budget limit that
    ended the run (``max_chat_calls``, ...), if one did. A parent's totals
    include its child workflows'."""

    model_config = ConfigDict(frozen=True)

    chat_calls: int = 0
    tool_calls: int = 0
    tokens: TokenTotals = Field(default_factory=TokenTotals)
    cost_usd: float = 0.0
    elapsed_s: float = 0.0
    exceeded: str | None = None


def limits_of(budget: Budget | None) -> dict[str, Any] | None:
    """A budget's limits that are set, and its mode (``run.start`` says them: the sidebar shows the
    run's spending against them from its start); None without a budget."""
    if budget is None:
        return None
    # (math.inf is no limit: JSON has no infinity, and the app said "duration_s None")
    limits = {name: getattr(budget, name) for name in LIMITS}
    return {**{name: value for name, value in limits.items() if value is not None and math.isfinite(value)},
            "mode": budget.mode}


class BudgetTracker:
    """Accumulates usage for a run and its children.

    Its time is the run's, the time it spent paused in the debugger left out (``held()``, the
    controller's paused time until now: a person reading the panes for a minute did not spend the
    flow's ``max_duration_s``); a child's comes from its parent's."""

    def __init__(self, budget: Budget | None, *, parent: "BudgetTracker | None" = None,
                 held: Callable[[], float] | None = None) -> None:
        self.budget = budget
        self.parent = parent
        self._held = held or (parent._held if parent is not None else None)
        self._held0 = self._held() if self._held is not None else 0.0
        self._t0 = time.perf_counter()
        self.chat_calls = 0
        self.tool_calls = 0
        self.tokens = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self.reported = False  # on_exceeded was called (once per budget, children included)

    def add_chat(self, *, prompt_tokens: int, completion_tokens: int, cost_usd: float) -> None:
        self.chat_calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.tokens += prompt_tokens + completion_tokens
        self.cost_usd += cost_usd
        if self.parent is not None:
            self.parent.add_chat(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                                 cost_usd=cost_usd)

    def add_tool(self) -> None:
        self.tool_calls += 1
        if self.parent is not None:
            self.parent.add_tool()

    def elapsed_s(self) -> float:
        """The time since the run started, the time it spent paused left out."""
        held = self._held() - self._held0 if self._held is not None else 0.0
        return time.perf_counter() - self._t0 - held

    def usage(self) -> BudgetUsage:
        return BudgetUsage(duration_s=round(self.elapsed_s(), 6), chat_calls=self.chat_calls,
                           tool_calls=self.tool_calls, tokens=self.tokens, cost_usd=self.cost_usd)

    def totals(self, *, exceeded: str | None = None) -> RunTotals:
        tokens = {"prompt": self.prompt_tokens, "completion": self.completion_tokens, "total": self.tokens}
        fields = {"chat_calls": self.chat_calls, "tool_calls": self.tool_calls, "tokens": tokens,
                  "cost_usd": self.cost_usd, "elapsed_s": round(self.elapsed_s(), 6),
                  "exceeded": exceeded}
        # Counted by the runtime, so of their declared types (then built without validation),
        # unless a provider's reply carried token counts or a cost of other types.
        if (type(self.chat_calls) is int and type(self.tool_calls) is int and type(self.prompt_tokens) is int
                and type(self.completion_tokens) is int and type(self.tokens) is int
                and type(self.cost_usd) is float and (exceeded is None or type(exceeded) is str)):
            fields["tokens"] = builders[TokenTotals](tokens)
            return builders[RunTotals](fields)
        return RunTotals(**fields)

    def exceeded_in(self, before_tool: bool = False, *,
                    elapsed_s: float | None = None) -> "tuple[BudgetTracker, str] | None":
        """(the tracker whose budget was reached, the limit's name), here or in a parent; or None.
        ``before_tool``: what limits a tool call of a reply already had (the limits on model calls,
        tokens and money do not: the reply is paid for, and the next model call is stopped).
        ``elapsed_s``: this run's time, when it is not the clock's (a re-execution goes by its journal's)."""
        limit = self._own_limit(before_tool, elapsed_s)
        if limit is not None:
            return self, limit
        return self.parent.exceeded_in(before_tool) if self.parent is not None else None

    def _own_limit(self, before_tool: bool = False, elapsed_s: float | None = None) -> str | None:
        b = self.budget
        if b is None:
            return None
        if b.max_chat_calls is not None and self.chat_calls >= b.max_chat_calls and not before_tool:
            return "max_chat_calls"
        if b.max_tool_calls is not None and self.tool_calls >= b.max_tool_calls:
            return "max_tool_calls"
        if b.max_tokens is not None and self.tokens >= b.max_tokens and not before_tool:
            return "max_tokens"
        # (a limit of 0 is money not to spend: a free model, which spends none, stopped before its first call)
        if b.max_cost_usd is not None and self.cost_usd >= b.max_cost_usd and self.cost_usd > 0 and not before_tool:
            return "max_cost_usd"
        if b.max_duration_s is not None and \
                (self.elapsed_s() if elapsed_s is None else elapsed_s) >= b.max_duration_s:
            return "max_duration_s"
        return None


def check_budget_arg(budget: Any, declared: Budget | None = None) -> Budget | None:
    """The budget a run has: ``run(budget=...)``, else the one its workflow ``declared``."""
    if budget is None:
        return declared
    if isinstance(budget, Budget):
        return budget
    raise ConfigError(f"run(budget=...) must be a Budget(...), got {type(budget).__name__}")


class BudgetStop(BaseException):  # like RunStopped: not for user code to catch
    """A budget in ``stop`` mode was reached: unwind and finish with the output so far."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit
