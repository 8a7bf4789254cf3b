"""The tool call a paused run is about to make, and what a person decides about it.

While a run waits before a tool (``run.pause("tool", ...)``), its
:class:`PendingCall` is the call as it will run. A person may

- edit its arguments (:meth:`Editor.edit_call
  <flowtui.runtime.edits.Editor.edit_call>`): checked against the tool's
  schema, and written into the assistant message that made the call, so the
  model sees the call as edited;
- deny it: the tool does not run and the model gets ``denied by the user:
  REASON`` as the call's error result;
- approve it. A tool named in ``--approve`` pauses before every call
  (reason ``approval``); moving the run on without a decision approves it.

Every decision is a ``tool.decision`` event with origin ``user``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from flowtui.runtime.errors import ConfigError
from flowtui.runtime.events import ToolDecision
from flowtui.runtime.messages import Message, ToolCall, ToolResult
from flowtui.runtime.nodes import NodeScope
from flowtui.runtime.providers.base import RAW_ARGUMENTS_KEY

if TYPE_CHECKING:
    from flowtui.runtime.decorators import AgentSpec
    from flowtui.runtime.engine import Run

DENIED = "denied by the user"


@dataclass
class PendingCall:
    spec: "AgentSpec"
    call: ToolCall
    approval: bool  # a person must decide (the tool is in --approve)
    decision: str | None = None  # approved, denied
    reason: str = ""


def maker_of(history: Any, call: ToolCall) -> tuple[int, int] | None:
    """Where in ``history`` the call is made: (message index, place among its calls)."""
    for i in range(len(history) - 1, -1, -1):
        msg = history[i]
        if msg.role == "assistant":
            for k, made in enumerate(msg.tool_calls):
                if made.id == call.id:
                    return i, k
    return None


class KeyGivenTwice(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _each_key_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    made: dict[str, Any] = {}
    for key, value in pairs:
        if key in made:
            raise KeyGivenTwice(key)
        made[key] = value
    return made


class NumberRefused(Exception):
    """A number typed that flowtui could not record as typed (see :func:`strict_json`)."""


def strict_json(text: str) -> Any:
    """``json.loads(text)`` for what a person types, refusing what JSON reads as something else than was typed or
    what a journal cannot hold: a key given twice (``KeyGivenTwice``: JSON keeps the last, in silence), a number
    of more than 4,000 digits (journaled as ``<int of about N digits>``: a fork then failed on it) and one
    too large for a float (``1e400`` read as infinity, unsaid): ``NumberRefused``."""
    return json.loads(text, object_pairs_hook=_each_key_once, parse_int=_bounded_int, parse_float=_finite_float)


def _bounded_int(digits: str) -> int:
    from flowtui.runtime.encoding import MAX_INT_DIGITS

    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise NumberRefused(f"a number of {len(digits.lstrip('-')):,} digits cannot be recorded (a journal holds "
                            f"numbers of up to {MAX_INT_DIGITS:,} digits); type a smaller one, or a text")
    return int(digits)


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        shown = text if len(text) <= 20 else text[:19] + "…"
        word = "-Infinity" if text.startswith("-") else "Infinity"
        raise NumberRefused(f"{shown} is too large a number: it reads as infinity; type \"{word}\" if you mean "
                            "that")
    return number


_JSON_KINDS = {type(None): "null", bool: "true or false", int: "a number", float: "a number", str: "a text",
               list: "an array"}


def parse_arguments(run: "Run", pending: PendingCall, text: str) -> dict[str, Any]:
    """Typed arguments as the call's new ``args``; ``ConfigError`` says what is wrong with them."""
    name = pending.call.name
    tool = run.plans.tool_specs[pending.spec.cls].by_name.get(name)
    fields = [info.alias or field for field, info in tool.schema.model_fields.items()] \
        if tool is not None and tool.schema is not None else []  # (by alias: what a model sends)
    # (the tool's own keys: every tool was told {"query": "..."}, a key most do not have)
    example = "{" + ", ".join(f'"{key}": ...' for key in fields[:2]) + "}" if fields else '{"key": "value"}'
    try:
        args = strict_json(text)
    except KeyGivenTwice as exc:  # (JSON says nothing of which one counts: the model and the tool may differ)
        raise ConfigError(f"the arguments of {name} give the key {exc.key!r} twice; give each key once") from None
    except NumberRefused as exc:
        raise ConfigError(f"the arguments of {name}: {exc}") from None
    except ValueError as exc:  # ("Unterminated string starting at" said "... at at line 1")
        raise ConfigError(f"the arguments of {name} are not JSON ({exc.msg}: line {exc.lineno}, column "
                          f"{exc.colno}); write them as a JSON object, e.g. {example}") from None
    except RecursionError:  # (said as Python's own "maximum recursion depth exceeded while decoding")
        raise ConfigError(f"the arguments of {name} are nested too deeply to be read as JSON; write them as a "
                          f"JSON object, e.g. {example}") from None
    if not isinstance(args, dict):
        raise ConfigError(f"the arguments of {name} must be a JSON object ({{...}}), not "
                          f"{_JSON_KINDS.get(type(args), type(args).__name__)}")
    if RAW_ARGUMENTS_KEY in args:  # (the tool would be told its arguments were no JSON object)
        raise ConfigError(f"{RAW_ARGUMENTS_KEY} is flowtui's own key (what a model sent that was no JSON "
                          "object); leave it out and give the arguments themselves")
    if tool is not None and tool.schema is not None:
        # a key the schema does not know would be dropped by the tool and still sent to the model
        known = {key for field, info in tool.schema.model_fields.items() for key in (field, info.alias) if key}
        unknown = sorted(set(args) - known) if tool.schema.model_config.get("extra") != "allow" else []
        problems = [f"{key}: not an argument of {name}" for key in unknown]
        try:  # strictly, as a state field's edit is: true is no int, "5" no number (the tool would take both)
            tool.schema.model_validate_json(json.dumps(args), strict=True)
        except ValidationError as exc:
            problems += [f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors()
                         if not (e["type"] == "extra_forbidden" and e["loc"][:1] and e["loc"][0] in unknown)]  # (said)
        if problems:
            raise ConfigError(f"{name} refuses these arguments ({tool.schema.__name__}: "
                              f"{', '.join(tool.schema.model_fields) or 'none'}): {'; '.join(problems)}")
    return args


def decide(run: "Run", pending: PendingCall, decision: str, reason: str = "") -> None:
    """Record a person's decision on the pending call (an event with origin ``user``)."""
    pending.decision, pending.reason = decision, reason
    call = pending.call
    run.emitter.emit(ToolDecision, origin="user", tool=call.name, call_id=call.id, decision=decision,
                     reason=reason or None)


def edited(run: "Run", pending: PendingCall, before: ToolCall, reason: str | None = None) -> None:
    """Say the edit of the pending call (``reason``: ``undone``, an edit that undoes the last one)."""
    call = pending.call
    run.emitter.emit(ToolDecision, origin="user", tool=call.name, call_id=call.id, decision="edited",
                     args=dict(call.args), before=dict(before.args), reason=reason)


def deny_call(run: "Run", spec: "AgentSpec", call: ToolCall, reason: str) -> ToolResult:
    """The denied call's result, in place of the tool's: an error the model reads."""
    text = f"{DENIED}: {reason}" if reason else DENIED
    with NodeScope(run, "tool", call.name, data={"args": dict(call.args), "denied": True}) as scope:
        run.state.append("history", Message(role="tool", content=text, tool_name=call.name, tool_call_id=call.id,
                                            is_error=True, agent=spec.name), origin="user")
        scope.status, scope.error = "error", text
    return ToolResult(name=call.name, args=dict(call.args), output=text, is_error=True)
