"""flowtui's runtime: agents, tools, loops and a typed workflow state, with an event per change.

Imports nothing heavy: no textual, no rich, no litellm (loaded on the first
real model call).
"""

from runtime.app import App, bootstrap, run_workflow
from runtime.budget import Budget, BudgetUsage
from runtime.context import AgentContext, LoopInfo, TurnInfo
from runtime.control import Controller
from runtime.decorators import agent, tool, workflow
from runtime.errors import (
    BudgetExceededError,
    CassetteMissError,
    ConfigError,
    FatalToolError,
    FlowLoadError,
    FlowtuiError,
    InjectionError,
    PromptNotFoundError,
    ProviderError,
    ScriptExhaustedError,
)
from runtime.markers import Context, Input, State
from runtime.messages import Message, ToolCall, ToolOutput, ToolResult
from runtime.providers.base import ChatReply, ChatRequest, Provider, Usage
from runtime.providers.function import FunctionProvider
from runtime.providers.scripted import ScriptedProvider
from runtime.steps import called_tool, loop, parallel, turn_of, until_answered, was_exhausted
from runtime.workflow_runtime import WorkflowRuntime


def __getattr__(name: str):
    # LiteLLMProvider's module is light, but keep the door explicit and lazy.
    if name == "LiteLLMProvider":
        from runtime.providers.litellm import LiteLLMProvider

        return LiteLLMProvider
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")


__all__ = [
    "AgentContext", "App", "Budget", "BudgetExceededError", "BudgetUsage", "CassetteMissError", "ChatReply",
    "ChatRequest", "ConfigError", "Context", "Controller", "FatalToolError", "FlowLoadError", "FlowtuiError",
    "FunctionProvider", "InjectionError", "Input", "LiteLLMProvider", "LoopInfo", "Message", "PromptNotFoundError",
    "Provider", "ProviderError", "ScriptExhaustedError", "ScriptedProvider", "State", "ToolCall", "ToolOutput",
    "ToolResult", "TurnInfo", "Usage", "WorkflowRuntime", "agent", "bootstrap", "called_tool", "loop", "parallel",
    "run_workflow", "tool", "turn_of", "until_answered", "was_exhausted", "workflow",
]
