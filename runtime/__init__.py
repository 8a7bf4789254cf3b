"""flowtui's runtime: agents, tools, loops and a typed workflow state, with an event per change.

Names load on first use (``from runtime import agent`` imports only what
``agent`` needs), so ``import runtime`` is instant and imports nothing heavy:
no textual, no rich, no litellm (loaded on the first real model call). That
keeps ``flowtui``'s first paint and ``flowtui run`` fast.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "runtime.app": ("App", "bootstrap", "run_workflow"),
    "runtime.budget": ("Budget", "BudgetUsage"),
    "runtime.context": ("AgentContext", "LoopInfo", "TurnInfo"),
    "runtime.control": ("Controller",),
    "runtime.decorators": ("agent", "tool", "workflow"),
    "runtime.errors": ("BudgetExceededError", "CassetteMissError", "ConfigError", "FatalToolError",
                       "FlowLoadError", "FlowtuiError", "InjectionError", "PromptNotFoundError",
                       "ProviderError", "ScriptExhaustedError"),
    "runtime.markers": ("Context", "Input", "State"),
    "runtime.messages": ("Message", "ToolCall", "ToolOutput", "ToolResult"),
    "runtime.providers.base": ("ChatReply", "ChatRequest", "Provider", "Usage"),
    "runtime.providers.function": ("FunctionProvider",),
    "runtime.providers.litellm": ("LiteLLMProvider",),
    "runtime.providers.scripted": ("ScriptedProvider",),
    "runtime.steps": ("called_tool", "loop", "parallel", "turn_of", "until_answered", "was_exhausted"),
    "runtime.workflow_runtime": ("WorkflowRuntime",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
