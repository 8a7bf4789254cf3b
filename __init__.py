"""flowtui: agents, tools, loops and a typed workflow state, with an event per change.

Everything a flow uses is imported from here (``from flowtui import agent,
tool, workflow, loop, State, ...``); the implementation lives in
``flowtui.runtime`` (this repository's ``runtime/`` folder) and the terminal
app in ``flowtui.tui`` (``tui/``).

Names load on first use (``from flowtui import agent`` imports only what
``agent`` needs), so ``import flowtui`` is instant and imports nothing heavy:
no textual, no rich, no litellm (loaded on the first real model call). That
keeps the app's first paint and ``flowtui run`` fast.
"""

from importlib import import_module

_EXPORTS = {
    "flowtui.runtime.app": ("App", "bootstrap", "run", "run_workflow"),
    "flowtui.runtime.budget": ("Budget", "BudgetUsage", "RunTotals", "TokenTotals"),
    "flowtui.runtime.context": ("AgentContext", "LoopInfo", "TurnInfo"),
    "flowtui.runtime.context_window": ("ContextWindow",),
    "flowtui.runtime.control": ("Controller",),
    "flowtui.runtime.decorators": ("agent", "tool", "workflow"),
    "flowtui.runtime.errors": ("BudgetExceededError", "CassetteMissError", "ConfigError", "ConversationError",
                       "FatalToolError",
                       "FlowLoadError", "FlowtuiError", "InjectionError", "PromptNotFoundError",
                       "ProviderError", "ScriptExhaustedError"),
    "flowtui.runtime.markers": ("Context", "Input", "State"),
    "flowtui.runtime.messages": ("Message", "ToolCall", "ToolOutput", "ToolResult"),
    "flowtui.runtime.middleware": ("Middleware", "ToolInvocation"),
    "flowtui.runtime.providers.base": ("AttemptInfo", "ChatReply", "ChatRequest", "Provider", "TokenCount", "Usage"),
    "flowtui.runtime.providers.function": ("FunctionProvider",),
    "flowtui.runtime.providers.litellm": ("LiteLLMProvider", "Retry"),
    "flowtui.runtime.providers.scripted": ("ScriptedProvider",),
    "flowtui.runtime.steps": ("FailInfo", "called_tool", "loop", "parallel", "turn_of", "until_answered",
                              "was_exhausted"),
    "flowtui.runtime.workflow_runtime": ("WorkflowRuntime",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> object:  # (typing is not imported: it is not loaded yet)
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'flowtui' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
