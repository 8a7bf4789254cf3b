"""The three forms of a tool, each described by one :class:`ToolSpec`.

- a ``@tool`` class with ``execute`` (and a pydantic ``schema``);
- a ``@tool`` function: its schema is built from its signature and docstring
  (parameters with ``Context()``/``State()`` are injected, not in the schema)::

      @tool
      def saldo(conta: str, ctx: AgentContext = Context()) -> str:
          \"\"\"The balance of an account.

          Args:
              conta: the account id, e.g. "acme"
          \"\"\"

- any object with ``name``, ``description``, ``schema`` (a pydantic model
  class or a JSON schema dict) and ``execute``: a tool made at run time.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    BaseModel, ConfigDict, Field, PydanticSchemaGenerationError, TypeAdapter, ValidationError, create_model,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError, to_jsonable_python

from flowtui.runtime.errors import ConfigError
from flowtui.runtime.markers import marker_of, type_hints, where

SPEC_ATTR = "__flowtui__"
OBJECT_TOOL_ATTRS = ("name", "description", "schema", "execute")

Form = Literal["class", "function", "object"]
REPLAY_MODES = ("serve", "rerun")  # what a re-execution against a journal does with a tool's calls
# The names providers take for a tool (OpenAI's rule; the others take these too): a request naming
# another, in its tools or in a call the history holds, is refused with a 400.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def sendable_name(name: str) -> str:
    """``name`` as a provider takes it: each other character made ``_`` (``functions.echo``, a name a
    model made up, is ``functions_echo``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "unnamed_tool"


def check_tool_name(name: str, who: str, how: str = "with @tool(name=...)") -> None:
    if not TOOL_NAME.fullmatch(name):
        raise ConfigError(f"{who}: the tool name {name!r} would be refused by the model's provider (a name holds "
                          f"1 to 64 ASCII letters, digits, _ and -): name it {sendable_name(name)!r}, {how}")


@dataclass(frozen=True, eq=False)
class ToolSpec:
    """What the runtime knows of one tool, whatever its form (compared by identity)."""

    target: Any  # the @tool class, the @tool function, or the tool object
    form: Form
    name: str
    description: str
    schema: type[BaseModel] | None
    json_schema: dict[str, Any] | None = None  # an object tool's schema given as JSON schema
    # A function tool with a schema built from its signature: its parameters are the fields.
    fields_from_signature: bool = False
    injected: dict[str, str] = field(default_factory=dict)  # param -> "ctx" | "state" (function tools)
    # --resume-from: "serve" the recorded result (the tool is not run) or "rerun" it and compare.
    replay: str = "serve"

    def function_schema(self) -> dict[str, Any]:
        """The OpenAI-style function schema the model sees (from the pydantic model)."""
        if self.json_schema is not None:
            params = dict(self.json_schema)
        elif self.schema is not None:
            params = self.schema.model_json_schema()
        else:
            params = {"type": "object", "properties": {}}
        params.pop("title", None)
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": params}}


def function_tool(fn: Any, *, name: str | None, description: str, schema: type[BaseModel] | None,
                  replay: str = "serve") -> ToolSpec:
    """The spec of a ``@tool`` function. With ``schema=`` it takes arguments like a class's
    ``execute``; without, its own parameters are the schema."""
    doc_text, doc_params = parse_docstring(inspect.getdoc(fn) or "")
    tool_name = name or fn.__name__
    if schema is not None:
        return ToolSpec(target=fn, form="function", name=tool_name, description=description or doc_text,
                        schema=schema, replay=replay)
    model, injected = signature_schema(fn, tool_name, doc_params)
    return ToolSpec(target=fn, form="function", name=tool_name, description=description or doc_text,
                    schema=model, fields_from_signature=True, injected=injected, replay=replay)


def signature_schema(fn: Any, tool_name: str, doc_params: dict[str, str]) -> tuple[type[BaseModel], dict[str, str]]:
    """A pydantic model of ``fn``'s parameters (descriptions from the docstring), and the
    parameters to inject instead (``Context()``/``State()``)."""
    file, line = where(fn)
    hints = type_hints(fn)
    fields: dict[str, Any] = {}
    injected: dict[str, str] = {}
    params = list(inspect.signature(fn).parameters.values())
    owner = fn.__qualname__.rpartition(".")[0]
    if params and params[0].name in ("self", "cls") and owner and not owner.endswith("<locals>"):
        raise ConfigError(f"{_at(file, line)}@tool {fn.__name__} is a method of {owner} (its first parameter is "
                          f"{params[0].name}, which the model would be asked for): a tool is a function, or a "
                          f"class with execute(self, ...); move {fn.__name__} out of {owner}, or make it a @tool "
                          "class")
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            stars = "*" if p.kind == p.VAR_POSITIONAL else "**"
            raise ConfigError(f"{_at(file, line)}@tool {fn.__name__}: {stars}{p.name} cannot be a tool argument; "
                              "name each argument the model fills")
        hint = hints.get(p.name, Any)
        kind = marker_of(p, hint)
        if kind in ("ctx", "state"):
            injected[p.name] = kind
            continue
        if kind is None and _is_ctx_type(hint):
            raise ConfigError(f"{_at(file, line)}@tool {fn.__name__}: parameter {p.name!r} is annotated "
                              f"AgentContext but not marked, so the model would be asked to fill it; to receive "
                              f"the run's ctx, write {p.name}: AgentContext = Context()")
        if kind is not None:
            raise ConfigError(f"{_at(file, line)}@tool {fn.__name__}: parameter {p.name!r} is marked "
                              f"{kind.title()}(); a tool function's own parameters are its arguments "
                              "(give schema= to receive them as one model with Input())")
        default = p.default if p.default is not inspect.Parameter.empty else ...
        # The docstring describes a parameter unless Field(description=...) already does;
        # description=None is never passed: it would erase an Annotated[..., Field(...)] one.
        doc = {} if _described_in(hint) or p.name not in doc_params else {"description": doc_params[p.name]}
        if default is not ... and default is not None and not isinstance(default, FieldInfo):
            _check_default(fn, p.name, hint, default, _at(file, line))
            _check_json_default(fn, p.name, default, _at(file, line))
        if isinstance(default, FieldInfo):  # `x: int = Field(3, ge=0)`
            info = default if default.description else FieldInfo.merge_field_infos(default, **doc)
        else:
            info = Field(default, **doc)
        fields[p.name] = (hint, info)
    try:
        model = create_model(f"{_camel(tool_name)}Args", __config__=ConfigDict(extra="forbid"), **fields)
        model.model_json_schema()
    except (PydanticSchemaGenerationError, TypeError) as exc:
        raise ConfigError(f"{_at(file, line)}@tool {fn.__name__}: {_unschemable(fields, exc)}") from None
    return model, injected


def _check_default(fn: Any, name: str, hint: Any, default: Any, at: str) -> None:
    """A default the parameter's own type refuses (``x: int = "abc"``) would be put in the schema the
    model reads, and handed to the tool as it is: refused now. None is let through (``x: int = None``
    is how many write an optional argument)."""
    try:
        TypeAdapter(hint).validate_python(default)
    except ValidationError as exc:
        why = exc.errors()[0].get("msg", "refused")
        raise ConfigError(f"{at}@tool {fn.__name__}: parameter {name!r} defaults to {default!r:.60}, which its "
                          f"type refuses ({why}); give a default of its type, or change the annotation") from None
    except Exception:  # noqa: BLE001 - a type with no schema: said below, with the others
        return


def _check_json_default(fn: Any, name: str, default: Any, at: str) -> None:
    """A default with no JSON form (``cb=print``, ``when=object()``) is left out of the schema the model reads,
    with pydantic's warning naming neither the tool nor the parameter; and the model may still fill it."""
    try:
        to_jsonable_python(default)
    except PydanticSerializationError:
        raise ConfigError(f"{at}@tool {fn.__name__}: parameter {name!r} defaults to {default!r:.60}, which has no "
                          "JSON form: a tool's parameters are what the model fills, as JSON; give it a JSON "
                          "default (text, a number, true/false, None, a list or a dict), or keep the value "
                          "out of the tool's parameters (a module variable, or ctx)") from None


def _is_ctx_type(hint: Any) -> bool:
    from flowtui.runtime.context import AgentContext

    return hint is AgentContext


def _unschemable(fields: dict[str, Any], exc: Exception) -> str:
    """Which parameter has no JSON schema (pydantic's message names a type, and says to allow arbitrary
    types, which would give the model nothing to fill)."""
    for name, spec in fields.items():
        try:
            create_model("Probe", **{name: spec}).model_json_schema()
        except (PydanticSchemaGenerationError, TypeError):
            hint = spec[0]
            shown = getattr(hint, "__qualname__", None) if isinstance(hint, type) else None
            if shown == "WorkflowRuntime":  # (the model would be asked for it: a class tool is given one)
                return (f"parameter {name!r} is annotated WorkflowRuntime, which a function tool is not given: "
                        "write the tool as a @tool class whose __init__ takes runtime: WorkflowRuntime, and run "
                        "the child in its execute (await self.runtime.run(Child, input=...))")
            return (f"parameter {name!r} is annotated {shown or hint}, which has no JSON form; annotate it with a "
                    "type the model can fill as JSON (str, int, float, bool, a list or dict of them, a pydantic "
                    "model)")
    return (f"its parameters have no JSON form ({str(exc).splitlines()[0]}); annotate them with types the model "
            "can fill as JSON (str, int, float, bool, a list or dict of them, a pydantic model)")


def object_tool(obj: Any, *, agent: str) -> ToolSpec:
    """The spec of a tool object (``name``, ``description``, ``schema``, ``execute``)."""
    missing = [a for a in OBJECT_TOOL_ATTRS if not hasattr(obj, a)]
    if missing:
        # (named by its class: its repr said the module flowtui imported the flow as, and a memory address)
        raise ConfigError(f"{agent}: tools=[...] holds a {type(obj).__name__} object, which is not a @tool class or "
                          f"function, and as a tool object it lacks {', '.join(missing)} (a tool object has "
                          f"{', '.join(OBJECT_TOOL_ATTRS)})")
    if not callable(obj.execute):
        raise ConfigError(f"{agent}: tool object {obj.name!r}: execute must be a method or function")
    schema, json_schema = obj.schema, None
    if isinstance(schema, dict):
        schema, json_schema = None, schema
    elif schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise ConfigError(f"{agent}: tool object {obj.name!r}: schema must be a pydantic BaseModel subclass "
                          f"or a JSON schema dict, got {schema!r}")
    replay = getattr(obj, "replay", "serve")
    if replay not in REPLAY_MODES:
        raise ConfigError(f"{agent}: tool object {obj.name!r}: replay is 'serve' or 'rerun', not {replay!r}")
    return ToolSpec(target=obj, form="object", name=str(obj.name), description=str(obj.description or ""),
                    schema=schema, json_schema=json_schema, replay=replay)


def as_tool(obj: Any, *, agent: str) -> ToolSpec:
    """An entry of ``@agent(tools=[...])`` as a spec; a clear error when it is none of the forms."""
    spec = getattr(obj, SPEC_ATTR, None) if (isinstance(obj, type) or inspect.isroutine(obj)) else None
    if isinstance(spec, ToolSpec):
        return spec
    if isinstance(obj, type):
        kind = {"AgentSpec": "an @agent class", "WorkflowSpec": "a @workflow class"}.get(type(spec).__name__)
        if kind is not None:  # (decorated with @tool as well, it is told it has no execute())
            raise ConfigError(f"{agent}: tools=[...] holds {obj.__name__}, {kind}, which is not a tool: to have "
                              f"{agent} call on it, write a @tool whose __init__ takes runtime: WorkflowRuntime and "
                              "whose execute runs it as a child workflow (await self.runtime.run(Workflow, "
                              "input=...)); an agent runs in a workflow's steps=[...]")
        raise ConfigError(f"{agent}: tools=[...] holds the class {obj.__name__}, which is not a tool; decorate it "
                          "with @tool(name=..., description=..., schema=...)")
    if inspect.isroutine(obj):
        raise ConfigError(f"{agent}: tools=[...] holds the function {obj.__name__}, which is not a tool; "
                          "decorate it with @tool")
    made_of = type(obj).__name__
    made_by_hand = isinstance(getattr(type(obj), SPEC_ATTR, None), ToolSpec)  # (an instance of a @tool class)
    if made_by_hand and not all(hasattr(obj, a) for a in OBJECT_TOOL_ATTRS):
        raise ConfigError(f"{agent}: tools=[...] holds an instance of {made_of}; flowtui makes the @tool class's "
                          f"instance for each run: write {made_of}, not {made_of}()")
    spec = object_tool(obj, agent=agent)
    check_tool_name(spec.name, f"{agent}: the tool object {type(obj).__name__}", "with its name attribute")
    return spec


_SECTION_RE = re.compile(r"^(Args|Arguments|Parameters|Params)\s*:\s*$", re.IGNORECASE)
_OTHER_SECTION_RE = re.compile(r"^(Returns?|Raises|Yields|Examples?|Notes?)\s*:\s*$", re.IGNORECASE)
_ARG_RE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_RE = re.compile(r"^:param\s+(?:\S+\s+)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(the description, {param: its description}) from a Google-style ``Args:`` section or
    Sphinx ``:param x:`` lines. The description is the text before any section."""
    description: list[str] = []
    params: dict[str, str] = {}
    section, current, arg_indent = "text", None, None
    for raw in doc.splitlines():
        line, indent = raw.strip(), len(raw) - len(raw.lstrip())
        if _SECTION_RE.match(line):
            section, current = "args", None
        elif _OTHER_SECTION_RE.match(line) or (line.startswith(":") and not _SPHINX_RE.match(line)):
            section, current = "other", None
        elif m := _SPHINX_RE.match(line):
            section, current = "params", m.group(1)
            params[current] = m.group(2).strip()
        elif section == "text":
            description.append(line)
        elif section == "args" and (m := _ARG_RE.match(line)) and (arg_indent is None or indent <= arg_indent):
            arg_indent, current = indent, m.group(1).lstrip("*")  # deeper lines continue this argument
            params[current] = m.group(2).strip()
        elif section in ("args", "params") and line and current is not None:
            params[current] = f"{params[current]} {line}".strip()
    return "\n".join(description).strip(), params


def _described_in(hint: Any) -> bool:
    """``Annotated[int, Field(description=...)]`` keeps its own description."""
    if get_origin(hint) is not Annotated:
        return False
    return any(isinstance(m, FieldInfo) and m.description for m in get_args(hint)[1:])


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9a-zA-Z]+", name) if part) or "Tool"


def _at(file: str | None, line: int | None) -> str:
    return f"{file}:{line}: " if file and line else ""
