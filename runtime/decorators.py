"""``@agent``, ``@tool`` and ``@workflow``: class decorators that attach a spec.

They check what can be checked at import (the prompt file exists, the schema is
a pydantic model, ``execute`` exists) and leave the rest (injection plans) to
``bootstrap``, which sees the whole workflow.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flowtui.runtime.errors import ConfigError, PromptNotFoundError
from flowtui.runtime.markers import where
from flowtui.runtime.providers.base import Provider

HOOKS = ("before_prompt", "before_tool", "after_tool", "after_response", "on_error")
SPEC_ATTR = "__flowtui__"


@dataclass(frozen=True)
class AgentSpec:
    cls: type
    name: str
    provider: Any  # a Provider subclass or instance
    prompt: str
    tools: tuple[type, ...]
    sampling: dict[str, Any]
    hooks: frozenset[str]
    takes_over: bool  # defines run(self, input, ctx)


@dataclass(frozen=True)
class ToolSpec:
    cls: type
    name: str
    description: str
    schema: type[BaseModel] | None

    def function_schema(self) -> dict[str, Any]:
        """The OpenAI-style function schema the model sees (from the pydantic model)."""
        params = (self.schema.model_json_schema() if self.schema is not None
                  else {"type": "object", "properties": {}})
        params.pop("title", None)
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": params}}


@dataclass(frozen=True)
class WorkflowSpec:
    cls: type
    name: str
    state: type | None
    steps: tuple[Any, ...]
    file: str | None = field(default=None)


def _caller_file(depth: int = 2) -> str | None:
    return sys._getframe(depth).f_code.co_filename


def _looks_like_path(prompt: str) -> bool:
    return "\n" not in prompt and (prompt.startswith(("./", "../", "/")) or prompt.endswith((".md", ".txt")))


def agent(*, provider: Any, prompt: str = "", tools: list[type] | tuple[type, ...] = (),
          sampling: dict[str, Any] | None = None, name: str | None = None):
    """Declare an agent: one model call per step, plus the tool calls it asks for.

    ``prompt`` is a path relative to the file that defines the agent (read now),
    or the prompt text itself. ``provider`` is a provider class (built with no
    arguments, once per run) or an instance.
    """
    defining_file = _caller_file()

    def wrap(cls: type) -> type:
        if not (isinstance(provider, Provider) or (isinstance(provider, type) and issubclass(provider, Provider))):
            raise ConfigError(
                f"{cls.__name__}: @agent(provider=...) must be a Provider class or instance "
                f"(e.g. ScriptedProvider, FunctionProvider, LiteLLMProvider), got {provider!r}")
        text, path = prompt, None
        if prompt and _looks_like_path(prompt):
            base = Path(defining_file).parent if defining_file else Path.cwd()
            path = (base / prompt).resolve()
            if not path.is_file():
                file, line = where(cls)
                raise PromptNotFoundError(
                    f"prompt file not found: {path} (prompt={prompt!r} is relative to the file "
                    "that defines the agent); create it or fix the path",
                    file=file or defining_file, line=line, cls=cls.__name__)
            text = path.read_text(encoding="utf-8").strip()
        for t in tools:
            if not hasattr(t, SPEC_ATTR) or not isinstance(getattr(t, SPEC_ATTR), ToolSpec):
                raise ConfigError(f"{cls.__name__}: tools=[...] holds {t!r}, which is not a @tool class")
        spec = AgentSpec(
            cls=cls, name=name or cls.__name__, provider=provider, prompt=text,
            tools=tuple(tools), sampling=dict(sampling or {}),
            hooks=frozenset(h for h in HOOKS if callable(getattr(cls, h, None))),
            takes_over=callable(getattr(cls, "run", None)),
        )
        setattr(cls, SPEC_ATTR, spec)
        return cls

    return wrap


def tool(*, name: str | None = None, description: str = "", schema: type[BaseModel] | None = None):
    """Declare a tool: a class with ``execute`` (sync or async) and a pydantic ``schema``."""

    def wrap(cls: type) -> type:
        if not callable(getattr(cls, "execute", None)):
            raise ConfigError(f"@tool class {cls.__name__} has no execute() method")
        if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise ConfigError(f"@tool {cls.__name__}: schema= must be a pydantic BaseModel subclass, got {schema!r}")
        setattr(cls, SPEC_ATTR, ToolSpec(cls=cls, name=name or cls.__name__, description=description or (cls.__doc__ or "").strip(), schema=schema))
        return cls

    return wrap


def workflow(*, steps: list[Any], state: type | None = None, name: str | None = None):
    """Declare a workflow: its ``steps`` and the class of its typed ``state``."""
    defining_file = _caller_file()

    def wrap(cls: type) -> type:
        if not steps:
            raise ConfigError(f"@workflow {cls.__name__}: steps=[...] is empty")
        setattr(cls, SPEC_ATTR, WorkflowSpec(cls=cls, name=name or cls.__name__, state=state,
                                             steps=tuple(steps), file=defining_file))
        return cls

    return wrap


def spec_of(obj: Any) -> Any:
    return getattr(obj, SPEC_ATTR, None) if isinstance(obj, type) else None
