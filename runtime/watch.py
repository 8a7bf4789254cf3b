"""The watchpoint language: a condition over a run, parsed without ``eval``.

    state.rodadas                     the field changes (each change)
    state.rodadas >= 3                it becomes true (== != < <= > >=; numbers, 'strings', true, false, null)
    memory ~ /plano/i                 memory gains an item matching (also tasks, history, a state field)
    prompt.tokens > 6000              the next model call's prompt, estimated as ContextWindow does
    cost > 0.50   tokens > 20000      the run's totals, child workflows included
    repeat(ler_arquivo) >= 3          the model asked for the same tool with the same arguments 3 times in a row
    len(state.problemas) >= 2         a list's (or a text's) length; len(memory), len(tasks), len(history)
    state.rodadas >= 2 and state.aprovado == false      and / or / parentheses
    PesquisaWorkflow: state.fontes >= 2                 only in runs of that workflow (a child's)

Grammar (``and`` binds tighter than ``or``)::

    watch     := [WORKFLOW ':'] or
    or        := and ('or' and)*
    and       := atom ('and' atom)*
    atom      := '(' or ')' | subject [OP value | '~' /regex/flags]
    subject   := 'state' ('.' NAME | '.' INDEX)+ | 'memory' | 'tasks' | 'history' | 'prompt.tokens'
               | 'cost' | 'tokens' | 'len' '(' subject ')' | 'repeat' '(' TOOL ')'

A subject alone (``state.rodadas``, ``memory``) is a change, and ``~`` is about
what arrives: both are true at the event that does it, and each such event
fires. A comparison fires when it *becomes* true (edge-triggered). A
malformed expression raises :class:`~flowtui.runtime.errors.WatchError` naming
the column. This module parses; what the parts are and how they evaluate is
:mod:`flowtui.runtime.conditions`, the checker that evaluates watchpoints
after every event :mod:`flowtui.runtime.watching`.
"""

from __future__ import annotations

import math
import re
import sys
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any

from flowtui.runtime.conditions import (
    Both, Bucket, Changed, Compare, Len, Matches, PromptTokens, Repeat, StateField, Subject, Total, compare,
    compile_pattern, is_number, literal_text,
)
from flowtui.runtime.errors import WatchError

BUCKETS = ("memory", "tasks", "history")
SUBJECTS = "state.FIELD, memory, tasks, history, prompt.tokens, cost, tokens, len(...) or repeat(TOOL)"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_NUMBERISH = re.compile(r"-?[0-9](?:[eE][-+]|[0-9A-Za-z_.])*")  # what was meant as one number (or a text)
_TOOL = re.compile(r"[^\s()]+")
_INDEX = re.compile(r"-?[0-9]+")
MAX_NUMBER = 100  # characters of a number or an index: a longer one is no value anyone compares with


@dataclass(frozen=True)
class Watch:
    """One parsed watchpoint: ``text`` as written, ``key`` its normal form (two spellings of one
    condition are one watchpoint), ``workflow`` the runs it is limited to."""

    text: str
    condition: Any
    workflow: str | None = None
    source: str = ""  # as given, for the columns of errors

    @property
    def key(self) -> str:
        return (f"{self.workflow}: " if self.workflow else "") + str(self.condition)

    @property
    def fields(self) -> list[StateField]:
        found = []
        for s in self.condition.subjects():
            found.append(s.inner if isinstance(s, Len) else s)
        return [s for s in found if isinstance(s, StateField)]

    @property
    def deps(self) -> frozenset[str]:
        return frozenset(s.dep for s in self.condition.subjects())

    @property
    def local(self) -> bool:
        """Read per run (False: only the run's totals, one truth for the whole run tree)."""
        return self.workflow is not None or any(s.local for s in self.condition.subjects())


# The escapes of a quoted text: Python's, as repr() writes them.
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_ESCAPE = re.compile(r"\\(?:[\\'\"ntr]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})")


def _code_point(escape: str) -> str:
    number = int(escape[2:], 16)
    return chr(number) if number <= sys.maxunicode else escape  # (\U00110000: no character; as written)


def parse(text: str) -> Watch:
    """Parse one watchpoint; raises :class:`WatchError` with the column of the fault."""
    return _Parser(text).watch()


MAX_DEPTH = 32  # parentheses nested deeper than this are refused (parsing and checking recurse)
MAX_TERMS = 64  # conditions joined by and/or in one watchpoint; more are refused (split them)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0
        self.terms = 0

    # scanning
    def fail(self, message: str, at: int | None = None, hint: str | None = None) -> WatchError:
        return WatchError(message, expr=self.text, column=(self.pos if at is None else at) + 1, hint=hint)

    def skip(self) -> int:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        return self.pos

    def peek(self, word: str) -> bool:
        self.skip()
        if not self.text.startswith(word, self.pos):
            return False
        end = self.pos + len(word)
        return not (word[-1].isalnum() and end < len(self.text) and (self.text[end].isalnum() or self.text[end] == "_"))

    def take(self, word: str) -> bool:
        if self.peek(word):
            self.pos += len(word)
            return True
        return False

    def need(self, word: str, what: str) -> None:
        if not self.take(word):
            raise self.fail(f"expected {what}")

    def name(self, what: str, hint: str | None = None) -> tuple[str, int]:
        at = self.skip()
        m = _NAME.match(self.text, at)
        if not m:
            raise self.fail(f"expected {what}", hint=hint)
        self.pos = m.end()
        return m.group(), at

    # grammar
    def watch(self) -> Watch:
        if not self.text.strip():
            raise self.fail("expected a condition, e.g. state.rodadas >= 3")
        workflow = None
        at = self.skip()
        m = _NAME.match(self.text, at)
        if m and self.text[m.end():].lstrip().startswith(":"):
            workflow = m.group()
            self.pos = self.text.index(":", m.end()) + 1
        condition = self.either()
        if self.skip() < len(self.text):
            raise self.fail("expected the end, 'and' or 'or'")
        return Watch(text=self.text.strip(), condition=condition, workflow=workflow, source=self.text)

    def either(self) -> Any:
        node = self.both()
        while self.take("or"):
            node = Both(node, self.both(), "or")
        return node

    def both(self) -> Any:
        node = self.atom()
        while self.take("and"):
            node = Both(node, self.atom(), "and")
        return node

    def atom(self) -> Any:
        self.terms += 1
        if self.terms > MAX_TERMS:
            raise self.fail(at=self.skip(), message=f"more than {MAX_TERMS} conditions in one watchpoint: give them as several --watch "
                            "(any one that holds pauses the run)")
        if self.take("("):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.fail(f"parentheses nested more than {MAX_DEPTH} deep")
            node = self.either()
            self.need(")", "')'")
            self.depth -= 1
            return node
        subject = self.subject()
        at = self.skip()
        for op in ("==", "!=", "<=", ">=", "<", ">"):
            if self.text.startswith(op, at):
                self.pos = at + len(op)
                return Compare(subject, op, self.value(subject, op))
        if self.text.startswith("~", at):
            if not isinstance(subject, (StateField, Bucket)):
                raise self.fail(f"~ matches memory, tasks, history or a state field, not {subject}", at)
            self.pos = at + 1
            return Matches(subject, *self.regex())
        for typed, meant in (("=>", ">="), ("=<", "<=")):  # (told "use == to compare", which was not meant)
            if self.text.startswith(typed, at):
                raise self.fail(f"write {meant}, not {typed}", at)
        if self.text.startswith("=", at):
            raise self.fail("use == to compare", at)
        if isinstance(subject, (StateField, Bucket)):
            return Changed(subject)
        raise self.fail(f"expected a comparison after {subject} (e.g. {subject} > {_example(subject)})", at)

    def subject(self) -> Subject:
        word, at = self.name("a subject", hint=f"a condition starts with {SUBJECTS}")
        if word == "state":
            return self.state_field(at)
        if word in BUCKETS:
            return Bucket(word)
        if word == "prompt":
            self.need(".", "'.tokens' after prompt")
            field, where = self.name("'tokens' after prompt.")
            if field != "tokens":
                raise self.fail(f"prompt has one field, tokens (prompt.tokens), not {field!r}", where)
            return PromptTokens()
        if word in ("cost", "tokens"):
            return Total(word)
        if word == "len":
            self.need("(", "'(' after len")
            if self.peek("len"):  # (refused before reading it: len(len(... 2,000 deep ran out of stack)
                raise self.fail("len() takes memory, tasks, history or a state field, not another len()",
                                self.skip())
            inner = self.subject()
            if not isinstance(inner, (StateField, Bucket)):
                raise self.fail(f"len() takes memory, tasks, history or a state field, not {inner}", at)
            self.need(")", "')'")
            return Len(inner)
        if word == "repeat":
            self.need("(", "'(' after repeat")
            tool = self.tool()
            self.need(")", "')' after the tool name")
            return Repeat(tool)
        raise self.fail(f"unknown subject {word!r}", at, hint=f"a condition starts with {SUBJECTS}")

    def state_field(self, at: int) -> StateField:
        if not self.text.startswith(".", self.pos):
            raise self.fail("expected '.FIELD' after state (state.rodadas)")
        parts: list[str | int] = []
        while self.text.startswith(".", self.pos):
            self.pos += 1
            m = _NAME.match(self.text, self.pos)
            if m:
                parts.append(m.group())
            elif parts and (m := _INDEX.match(self.text, self.pos)) and len(m.group()) <= MAX_NUMBER:
                # (01 is key "01" of a dict, not key "1": a number's own digits are kept as a text)
                parts.append(int(m.group()) if str(int(m.group())) == m.group() else m.group())
            else:
                raise self.fail("expected a field name" if not parts else "expected a key or an index")
            self.pos = m.end()
        return StateField(tuple(parts), column=at + 7)

    def tool(self) -> str:
        at = self.skip()
        if self.text.startswith(("'", '"'), at):
            return self.string()
        m = _TOOL.match(self.text, at)
        if not m:
            raise self.fail("expected a tool name, e.g. repeat(ler_arquivo)")
        self.pos = m.end()
        return m.group()

    def value(self, subject: Subject, op: str) -> Any:
        at = self.skip()
        if at >= len(self.text):
            raise self.fail("expected a value")
        if isinstance(subject, Bucket):
            raise self.fail(f"{subject} is a list: compare len({subject}), or match an item with "
                            f"{subject} ~ /pattern/", at)
        m = _NUMBER.match(self.text, at)
        if m and (bad := _NUMBERISH.match(self.text, at)).end() > m.end():
            # (3. 0x10 1e 1_000: a number written as Python or a language takes it; read as the number
            # before the rest, it was told "expected the end" under the rest)
            raise self.fail(f"{bad.group()} is no number here: write digits, with a '.' and digits or an "
                            f"exponent if need be (3, 3.5, -0.25, 1e3), or quote a text ('{bad.group()}')", at)
        if m:
            text = m.group()
            if len(text) > MAX_NUMBER:
                raise self.fail(f"a number of {len(text):,} characters: at most {MAX_NUMBER} here", at)
            number = float(text) if ("." in text or "e" in text.lower()) else int(text)
            if isinstance(number, float) and math.isinf(number):  # (1e999: what no value ever reaches)
                raise self.fail(f"{text} is too large a number: it reads as infinity", at)
            self.pos = m.end()
            return number
        if subject.numeric:
            raise self.fail(f"expected a number for {subject}")
        if self.text.startswith(("'", '"'), at):
            return self.string()
        for word, lit in (("true", True), ("false", False), ("null", None)):
            if self.take(word):
                if op not in ("==", "!="):
                    raise self.fail(f"{word} can only be compared with == or !=", at)
                return lit
        raise self.fail("expected a value: a number, 'text', true, false or null")

    def string(self) -> str:
        """A quoted text, its escapes Python's (what the normal form writes, ``repr``): ``\\'``, ``\\\\``,
        ``\\n``, ``\\t``, ``\\x1b``, ``\\u00e9``...; a backslash before anything else is itself (``'a\\d'``
        kept its backslash only when doubled, and a text holding a line break read back as ``n``)."""
        quote, start = self.text[self.pos], self.pos
        self.pos += 1
        out = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\" and self.pos + 1 < len(self.text):
                m = _ESCAPE.match(self.text, self.pos)
                if m is None:
                    out.append(ch)
                    self.pos += 1
                    continue
                escape = m.group()
                out.append(_ESCAPES[escape[1]] if len(escape) == 2 else _code_point(escape))
                self.pos = m.end()
                continue
            self.pos += 1
            if ch == quote:
                return "".join(out)
            out.append(ch)
        raise self.fail(f"unterminated text: no closing {quote}", start)

    def regex(self) -> tuple[str, str]:
        start = self.skip()
        if not self.text.startswith("/", start):
            raise self.fail("expected a /pattern/ after ~ (e.g. memory ~ /plano/i)")
        i = start + 1
        chars = []
        while i < len(self.text) and self.text[i] != "/":
            if self.text[i] == "\\" and i + 1 < len(self.text) and self.text[i + 1] == "/":
                chars.append("/")
                i += 2
                continue
            chars.append(self.text[i])
            i += 1
        if i >= len(self.text):
            raise self.fail("unterminated pattern: no closing /", start)
        pattern = "".join(chars)
        m = re.compile(r"[A-Za-z]*").match(self.text, i + 1)
        flags = m.group() if m else ""
        bad = [f for f in flags if f not in "ims"]
        if bad:
            raise self.fail(f"unknown pattern flag {bad[0]!r} (known: i, m, s)", i + 1 + flags.index(bad[0]))
        self.pos = i + 1 + len(flags)
        try:
            compile_pattern(pattern, "".join(sorted(set(flags))))
        except re.error as exc:
            raise self.fail(f"bad pattern: {exc.msg}", start + 1 + (exc.pos or 0)) from None
        except (RecursionError, OverflowError):  # (500 nested groups: re's parser recurses once a group)
            raise self.fail("bad pattern: nested too deep for Python's re; nest fewer groups", start + 1) from None
        return pattern, "".join(sorted(set(flags)))


def _example(subject: Subject) -> str:
    return {"cost": "0.50", "tokens": "20000"}.get(str(subject), "6000" if isinstance(subject, PromptTokens) else "3")


def check_fields(watch: Watch, *, workflow: str, state_class: str | None, fields: list[str] | None) -> None:
    """Refuse a state field that workflow ``workflow``'s state class does not have (when the watch
    applies to that workflow and it has a state class; a child workflow's are not known here)."""
    if state_class is None or fields is None or watch.workflow not in (None, workflow):
        return
    for f in watch.fields:
        if f.parts[0] not in fields:
            raise WatchError(f"unknown state field {f.parts[0]!r}", expr=watch.source or watch.text, column=f.column,
                             hint=f"{state_class} (the state of {workflow}) has the fields "
                                  f"{', '.join(fields) or '(none)'}")


_UNSIZED = (int, float, bool, type(None))  # no len(): a number, a flag, null


def check_known(watch: Watch, *, workflow: str, state_type: type | None, tools: set[str] | None,
                workflows: set[str] | None, all_tools: set[str] | None) -> None:
    """Refuse what can never fire in ``workflow``'s runs, naming the part at fault: a workflow
    prefix no @workflow of the flow has, ``repeat(TOOL)`` of a tool no workflow's agents offer,
    ``len()`` of a field that holds a number or a flag, and a list or text field ordered against a
    number. ``None`` for what is not known (nothing is refused for it). A child workflow counts as
    known when it is defined in the flow (or what it imports): it may run as a child."""
    expr = watch.source or watch.text
    if watch.workflow is not None and workflows is not None and watch.workflow not in workflows:
        at = expr.index(watch.workflow) + 1
        others = sorted(workflows - {workflow})
        raise WatchError(f"no workflow {watch.workflow!r} in this flow", expr=expr, column=at,
                         hint=(f"the flow runs {workflow} and defines {', '.join(others)} (child workflows it may "
                               "run); name one of them before ':'" if others else
                               f"the flow runs {workflow} and defines no other workflow")
                              + f", or drop '{watch.workflow}:'")
    for s in watch.condition.subjects():
        if isinstance(s, Repeat) and tools is not None and all_tools is not None and s.tool not in all_tools:
            found = re.search(r"repeat\s*\(\s*['\"]?" + re.escape(s.tool), expr)
            at = (found.end() - len(s.tool) + 1) if found else 1
            raise WatchError(f"no tool {s.tool!r} in this flow", expr=expr, column=at,
                             hint=f"{workflow}'s agents have the tools {', '.join(sorted(tools)) or '(none)'}")
    if state_type is None or watch.workflow not in (None, workflow):
        return
    for s in watch.condition.subjects():
        inner = s.inner if isinstance(s, Len) else s
        fault = _path_fault(state_type, inner.parts) if isinstance(inner, StateField) else None
        if fault is not None:
            raise WatchError(fault, expr=expr, column=inner.column, hint="name a field the state has, and an item "
                             "of a list by its index (state.notas.0)")
    for node in _conditions(watch.condition):
        if isinstance(node, Compare):
            subject = node.subject
            if isinstance(subject, Len) and isinstance(subject.inner, StateField):
                tp = _field_type(state_type, subject.inner.parts)
                if tp is not None and _only(tp, _UNSIZED):
                    raise WatchError(f"len() of {subject.inner}, which is {_type_name(tp)}: it has no length",
                                     expr=expr, column=subject.inner.column,
                                     hint=f"len() takes a list or a text; compare {subject.inner} itself "
                                          f"(e.g. {subject.inner} > 1)")
            elif (isinstance(subject, StateField) and node.op in ("<", "<=", ">", ">=")
                  and isinstance(node.literal, (int, float)) and not isinstance(node.literal, bool)):
                tp = _field_type(state_type, subject.parts)
                if tp is not None and _only(tp, (bool, type(None))):  # (a flag is no number to compare())
                    raise WatchError(f"{subject} is {_type_name(tp)}: it is never {node.op} a number",
                                     expr=expr, column=subject.column,
                                     hint=f"compare it with true or false: {subject} == true")
                if tp is not None and _only(tp, (list, tuple, dict, set, str, type(None))):
                    raise WatchError(f"{subject} is {_type_name(tp)}: it is never {node.op} a number",
                                     expr=expr, column=subject.column,
                                     hint=f"compare its length: len({subject}) {node.op} {node.literal}")
            elif (isinstance(subject, StateField) and node.op in ("<", "<=", ">", ">=")
                  and isinstance(node.literal, str)):
                tp = _field_type(state_type, subject.parts)
                if tp is not None and _only(tp, (int, float, bool, list, tuple, dict, set, type(None))):
                    raise WatchError(f"{subject} is {_type_name(tp)}: it is never {node.op} a text",
                                     expr=expr, column=subject.column,
                                     hint=f"compare it with a value of its type, e.g. {subject} {node.op} "
                                          f"{_example_of(tp)}")
            elif isinstance(subject, StateField) and node.op in ("==", "!="):
                tp = _field_type(state_type, subject.parts)
                # 'true' is no flag, 3 is no text, 1 no flag, true no count, null no field that is never null:
                # always unequal (JSON-like: compare() takes a flag for no number)
                if tp is not None and not _admits(tp, node.literal):
                    sized = (is_number(node.literal) and _only(tp, (list, tuple, dict, set, str))
                             and not any(isinstance(b, type) and issubclass(b, Enum) for b in _members(tp)))
                    raise WatchError(f"{subject} is {_type_name(tp)}: it never equals {literal_text(node.literal)}",
                                     expr=expr, column=subject.column,
                                     hint=f"compare its length: len({subject}) {node.op} {node.literal}" if sized
                                     else f"compare it with a value of its type, e.g. {subject} {node.op} "
                                          f"{_example_of(tp)}")
        elif isinstance(node, Matches) and isinstance(node.subject, StateField):
            # a pattern reads the texts a field gains: its text, or the texts a list of them gains
            tp = _field_type(state_type, node.subject.parts)
            items = typing.get_args(tp) if typing.get_origin(tp) in (list, tuple) else ()
            if tp is not None and (_only(tp, _UNSIZED) or (items and all(_only(i, _UNSIZED) for i in items
                                                                            if i is not Ellipsis))):
                example = f"{node.subject}.0 == {_example_of(items[0])}" if items else \
                    f"{node.subject} == {_example_of(tp)}"
                raise WatchError(f"{node.subject} is {_type_name(tp)}: a pattern matches only texts",
                                 expr=expr, column=node.subject.column, hint=f"compare it instead, e.g. {example}")


def _conditions(node: Any) -> list[Any]:
    if isinstance(node, Both):
        return [*_conditions(node.left), *_conditions(node.right)]
    return [node]


def _field_type(state_type: type, parts: tuple[str | int, ...]) -> Any:
    """The declared type at ``parts`` of ``state_type`` (None when it cannot be told)."""
    import typing

    from flowtui.runtime.observe import field_type

    tp: Any = field_type(state_type, str(parts[0]))
    for part in parts[1:]:
        origin = typing.get_origin(tp)
        if isinstance(part, int) and origin in (list, tuple):
            args = typing.get_args(tp)
            tp = args[0] if args else None
        elif isinstance(part, str) and isinstance(tp, type) and hasattr(tp, "model_fields"):
            info = tp.model_fields.get(part)
            tp = info.annotation if info is not None else None
        elif isinstance(part, str) and origin is dict:
            args = typing.get_args(tp)
            tp = args[1] if len(args) == 2 else None
        else:
            return None
        if tp is None:
            return None
    return None if tp is typing.Any else tp


def _path_fault(state_type: type, parts: tuple[str | int, ...]) -> str | None:
    """Why a state path can hold nothing (a part inside a number, a name inside a list, a field its
    model lacks); None when it can, or when the types cannot tell."""
    import typing

    for n in range(1, len(parts)):
        tp = _field_type(state_type, parts[:n])
        if tp is None:
            return None
        part, path = parts[n], "state." + ".".join(map(str, parts[:n]))
        if _only(tp, _UNSIZED + (str,)):
            return f"{path} is {_type_name(tp)}: it has no part {part!r}"
        if isinstance(part, str) and typing.get_origin(tp) in (list, tuple) and _INDEX.fullmatch(part):
            return f"{path} is {_type_name(tp)}: write its index {int(part)}, not {part}"
        if isinstance(part, str) and typing.get_origin(tp) in (list, tuple):
            return f"{path} is {_type_name(tp)}: its items are taken by index, not by a name ({part!r})"
        if isinstance(part, str) and isinstance(tp, type) and hasattr(tp, "model_fields") \
                and part not in tp.model_fields:
            return f"{path} is {_type_name(tp)}: it has no field {part!r} ({', '.join(tp.model_fields)})"
    return None


def _members(tp: Any) -> Iterator[Any]:
    """The types a value of ``tp`` may have: a union's members, an ``Annotated``'s type, a generic's
    class (``list`` for ``list[str]``); what is no class (``Any``, a ``Literal``) as it is."""
    import types
    import typing

    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        for member in typing.get_args(tp):
            yield from _members(member)
    elif origin is typing.Annotated:
        yield from _members(typing.get_args(tp)[0])
    else:
        yield origin if isinstance(origin, type) else tp


def _admits(tp: Any, literal: Any) -> bool:
    """Whether a value of type ``tp`` may equal ``literal`` as :func:`compare` compares (True when the
    type cannot tell: Any, a Literal, an object)."""
    return any(_admitted(base, literal) for base in _members(tp))


def _admitted(base: Any, literal: Any) -> bool:
    if not isinstance(base, type) or base is object:
        return True
    if issubclass(base, Enum):  # journaled as its value: state.color == 'blue'
        return any(compare(member.value, "==", literal) for member in base)
    if issubclass(base, Decimal):  # journaled as a text that is the number, which compares as one
        return is_number(literal) or isinstance(literal, str)
    if literal is None:
        return base is type(None)
    if isinstance(literal, bool):
        return issubclass(base, bool)
    if is_number(literal):
        return issubclass(base, (int, float)) and not issubclass(base, bool)
    if isinstance(literal, str):
        return issubclass(base, str)
    return True


def _only(tp: Any, kinds: tuple[type, ...]) -> bool:
    """Whether every value of type ``tp`` is one of ``kinds`` (a union: each of its members)."""
    return tp is not None and all(isinstance(base, type) and issubclass(base, kinds) for base in _members(tp))


def _example_of(tp: Any) -> str:
    if isinstance(tp, type) and issubclass(tp, Enum) and len(tp):
        value = next(iter(tp)).value
        return literal_text(value) if value is None or isinstance(value, (str, int, float)) else "..."
    for kind, example in ((bool, "true"), (int, "3"), (float, "0.5"), (Decimal, "3"), (str, "'text'")):
        if _only(tp, (kind, type(None))):
            return example
    return "..."


def _type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_])", "", str(tp))
