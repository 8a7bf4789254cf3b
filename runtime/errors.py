"""Every error flowtui raises on purpose, in one tree.

    FlowtuiError
     ├── FlowLoadError            a flow file cannot be loaded (file, line, class)
     │    ├── PromptNotFoundError an @agent prompt file is missing (resolved path)
     │    └── InjectionError      a marker cannot be satisfied (class, parameter)
     ├── ConfigError              a bad argument to a decorator, loop or run()
     │    ├── WatchError          a watchpoint that cannot be parsed, or names an unknown field (column)
     │    └── ResumeError         a bad --resume-from: no such journal, not a journal, K beyond its end
     ├── RunError                 raised out of ``app.run``
     │    ├── BudgetExceededError a budget in ``mode="raise"`` was blown
     │    ├── ConversationError   a model call would send a history no provider accepts
     │    └── ProviderError       a model call failed for good (after retries)
     │         ├── ScriptExhaustedError  a ScriptedProvider ran out of replies
     │         └── CassetteMissError     --replay has no recorded answer
     └── FatalToolError           raised by a tool to end the run

Messages name the file, class, parameter or key at fault and say what to do.
"""

from __future__ import annotations

import functools
import re
from typing import Any


class FlowtuiError(Exception):
    """Base of every error flowtui raises on purpose."""


class FlowLoadError(FlowtuiError):
    """A flow cannot be loaded. ``file``/``line``/``cls`` locate the fault."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 cls: str | None = None, choices: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.cls = cls
        self.choices = choices  # the @workflow classes of the file, when which to run is what is wrong

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        if self.cls:
            where += f"{self.cls}: "
        return where + self.message


class PromptNotFoundError(FlowLoadError):
    """An ``@agent(prompt=...)`` file does not exist."""


class InjectionError(FlowLoadError):
    """A ``State()``/``Context()``/``Input()`` marker cannot be satisfied."""


class ConfigError(FlowtuiError, ValueError):
    """A bad argument given to a decorator, ``loop``, ``Budget`` or ``run``. ``at``: (file, line) of
    the code at fault when it is not where the decorator is applied (a hook's ``def``)."""

    def __init__(self, *args: object, at: tuple[str | None, int | None] | None = None) -> None:
        super().__init__(*args)
        self.at = at


class OptionError(ConfigError):
    """The file a command-line option names (``--replies``, ``--replay``, ``--record``) cannot be used:
    the run's fault is there, not in the flow (which was not imported). The message starts with the option."""

    def __init__(self, message: str, *, option: str, file: str) -> None:
        super().__init__(message)
        self.option, self.file = option, file


class WatchError(ConfigError):
    """A watchpoint expression that does not parse, or names a state field its workflow lacks.
    ``column`` (1-based) is where in ``expr`` the fault is; :meth:`render` puts a caret under it."""

    def __init__(self, message: str, *, expr: str, column: int, hint: str | None = None) -> None:
        self.message, self.expr, self.column, self.hint = message, expr, column, hint
        super().__init__(self.render())

    def render(self, prefix: str = "") -> str:
        """``PREFIXmessage at column N: EXPR``, a caret under column N, then the hint (what is known).
        The caret counts the cells a terminal gives what comes before it (a CJK character takes two), and
        the expression is shown as a terminal may be given it (a tab as ``⇥``: raw, it moved the rest)."""
        from flowtui.runtime.inert import visible

        def shown(text: str) -> str:
            return visible(text).replace("\t", "⇥").replace("\n", "⏎")

        expr, column = self.shown_at()
        head = f"{prefix}{self.message} at column {self.column}: "
        caret = " " * (cells(shown(head)) + cells(shown(expr[:column - 1]))) + "^"
        return f"{head}{shown(expr)}\n{caret}" + (f"\n{self.hint}" if self.hint else "")

    def shown_at(self) -> tuple[str, int]:
        """The expression as it may be shown (a credential in it redacted) and the column of the fault there:
        the caret stood as many columns right of it as ``[redacted]`` is shorter than the key."""
        from flowtui.runtime.secrets import redact, secret_values

        secrets = secret_values()
        whole, head = redact(self.expr, secrets), redact(self.expr[:self.column - 1], secrets)
        return whole, len(head) + 1 if whole.startswith(head) else min(self.column, len(whole) + 1)


def cells(text: str) -> int:
    """The columns a terminal gives ``text``: two for a wide (CJK) character, none for a combining one (one rule
    for the caret under a refused watchpoint, on stderr and in the app)."""
    import unicodedata

    return sum(0 if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me")
               else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


class ResumeError(ConfigError):
    """``--resume-from JOURNAL[@K]`` (``app.run(resume_from=...)``) names no journal that can be
    re-executed: a missing file, a file that is not a journal, a ``K`` beyond the recorded run."""


class RunError(FlowtuiError):
    """A run failed."""


class BudgetExceededError(RunError):
    """A budget with ``mode="raise"`` was exceeded. ``usage`` holds the totals."""

    def __init__(self, message: str, *, limit: str, usage: object) -> None:
        super().__init__(message)
        self.limit = limit
        self.usage = usage


class ConversationError(RunError):
    """A model call was refused before it left: what it would send is not a valid conversation
    (:mod:`~flowtui.runtime.wellformed`). ``problems`` lists each fault, naming the message."""

    def __init__(self, agent: str, problems: list[str], *, where: str = "ctx.state.history",
                 fix: str = "fix the code that wrote the history, or remove the orphan in the app (d)") -> None:
        self.agent, self.problems, self.where = agent, problems, where
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        super().__init__(f"the model call of {agent} was not sent: {where} is not a valid conversation "
                         f"({shown}). Every tool message must answer a call of the assistant message before "
                         f"it; {fix}")


class ProviderError(RunError):
    """A model call failed for good. ``agent`` names the agent that made it."""

    def __init__(self, message: str, *, agent: str | None = None,
                 status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.agent = agent
        self.status = status
        self.attempts = attempts


class ScriptExhaustedError(ProviderError):
    """A ScriptedProvider has no reply left for an agent."""


class CassetteMissError(ProviderError):
    """A replayed cassette holds no recorded exchange for a request."""


class FatalToolError(FlowtuiError):
    """Raised by a tool to end the whole run.

    ``message`` is what the run reports. ``cause`` (the original error) is
    yours to inspect from Python (``err.cause``) but stays private: it never
    reaches the model's context, the events or anything written to disk.
    """

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.cause = cause
        # Keep Python from chaining the cause into tracebacks written anywhere.
        self.__suppress_context__ = True

    def __reduce__(self):  # pickling/logging never carries the cause
        return (FatalToolError, (self.message,))


ERROR_MAX = 4096  # characters of an exception's message that an error says (as of a printed line)


def describe_error(exc: BaseException) -> str:
    """A one-line description safe to show and to write (a FatalToolError's cause stays out), ending
    with where the flow's own code raised it: ``KeyError: 'x' (at flows/f.py:12 in until)``."""
    if isinstance(exc, FatalToolError):
        return f"FatalToolError: {exc.message}"
    exc = as_raised(exc)
    recorded = getattr(exc, "recorded_as", None)
    if isinstance(recorded, str):  # raised again in a re-execution: as the journal says it (where it was raised)
        return recorded
    text = _validation_text(exc) or message_of(exc)
    if len(text) > ERROR_MAX:  # (a 10 MB message was 20 MB on stderr, and 40 MB of journal: one copy per node it ended)
        text = f"{text[:ERROR_MAX]}… ({len(text):,} characters, cut)"
    described = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if type(exc) is EOFError and text == "EOF when reading a line":  # input() in the flow's code
        described += " (a flow's stdin reads as empty: give it what it asks with --input, --memory or --data)"
    where = user_frame(exc)
    return f"{described} (at {where})" if where else described


def as_raised(exc: BaseException) -> BaseException:
    """The StopIteration the flow's code raised, for the RuntimeError Python puts in its place as it leaves a
    coroutine (PEP 479): a sync tool's ``next(it)`` on an empty iterator was said as "coroutine raised
    StopIteration", of the runtime's line, not the tool's."""
    cause = exc.__cause__
    if type(exc) is RuntimeError and isinstance(cause, (StopIteration, StopAsyncIteration)) \
            and str(exc).endswith(f"raised {type(cause).__name__}"):
        return cause
    return exc


def message_of(exc: BaseException) -> str:
    """``str(exc)``, or what stands for it when the exception's own ``__str__`` raises or returns no text:
    the run's error was then the one ``__str__`` raised, of another type, at ``__str__``'s line."""
    try:
        text = str(exc)
    except Exception as failed:
        return f"(its message could not be read: {type(exc).__name__}.__str__ raised {type(failed).__name__})"
    return text


# A memory address in a repr, which differs from run to run (a re-execution or a diff of two runs saw a change
# where there is none): the default repr's <Foo object at 0x7f…>, pydantic's <Recursion on M with id=1396…>.
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+(?=>)| with id=[0-9]+(?=>)")


def safe_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, or ``<Type>`` when the flow's object cannot say itself (its
    ``__repr__`` raises, it holds itself past the recursion limit, an int past Python's 4,300 digits): a message
    about a value never fails in the value's place. No memory address (see ``ADDRESS``)."""
    try:
        text = ADDRESS.sub("", repr(value))
    except Exception:  # noqa: BLE001
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _validation_text(exc: BaseException) -> str | None:
    """A pydantic ``ValidationError`` on one line: the model, then each fault at its field with what it was
    given (``ToolCall: args: Input should be a valid dictionary (given str 'x=1')``), the first three; pydantic's
    own text took a dozen lines, a link to its site for each, and one fault per character of a text given
    for a list."""
    errors = getattr(exc, "errors", None)
    if type(exc).__name__ != "ValidationError" or not callable(errors):
        return None
    try:
        found = errors(include_url=False)
    except Exception:  # noqa: BLE001 (another library's class of that name)
        return None
    parts = []
    for e in found[:3]:
        loc, given = ".".join(map(str, e.get("loc", ()))), e.get("input")
        parts.append((f"{loc}: " if loc else "") + f"{e.get('msg')} (given {type(given).__name__} {given!r:.60})")
    more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
    return f"{getattr(exc, 'title', '')}: {'; '.join(parts)}{more}"


def user_frame(exc: BaseException) -> str | None:
    """``flows/f.py:12 in until``: the deepest line of the traceback in the flow's code (not flowtui's,
    the standard library's or an installed package's), so an error raised in ``until``, ``on_fail``
    or a hook names its file and line without ``--debug``."""
    found = deepest_user_frame(exc)
    if found is None:
        return None
    name, line, func = found
    return f"{shown_path(name)}:{line} in {func}"


def deepest_user_frame(exc: BaseException) -> tuple[str, int, str] | None:
    """(file, line, function) of :func:`user_frame`."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if is_flow_code(code.co_filename):
            found = (code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


def is_flow_code(filename: str) -> bool:
    """Whether a code object's file is the flow's own (not flowtui's, the standard library's or an
    installed package's)."""
    return not filename.startswith(_not_the_flows()) and filename != _OWN_INIT


@functools.cache
def _not_the_flows() -> tuple[str, ...]:
    import os
    import sysconfig

    paths = sysconfig.get_paths()
    return ("<", *(os.path.join(p, "") for p in {paths["stdlib"], paths["platstdlib"], paths["purelib"],
                                                  paths["platlib"]}), *_OWN)


def shown_path(name: str) -> str:
    """A file's path as messages show it: relative to the working folder when inside it."""
    import os

    try:
        shown = os.path.relpath(name)
    except ValueError:  # another drive
        return name
    return shown if not shown.startswith("..") else name


def _own() -> tuple[tuple[str, ...], str]:
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package: runtime/ and tui/
    return (os.path.join(root, "runtime", ""), os.path.join(root, "tui", "")), os.path.join(root, "__init__.py")


_OWN, _OWN_INIT = _own()


def cleanup_failed(exc: BaseException) -> bool:
    """Whether what a cleanup (``ctx.on_dispose``, a middleware's ``dispose``) raised is its own failure,
    reported while the others still run: anything but a stop unwinding it (a cancel, flowtui's own stop, a
    ``SIGTERM``) or a generator closing. ``sys.exit()`` in one left the run unended for ever; a class of the
    flow's own deriving from ``BaseException`` skipped the cleanups after it, unsaid."""
    import asyncio

    from flowtui.runtime.budget import BudgetStop
    from flowtui.runtime.control import RunStopped, Signalled

    return not isinstance(exc, (asyncio.CancelledError, GeneratorExit, RunStopped, BudgetStop, Signalled))
