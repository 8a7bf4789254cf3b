"""Comparing a re-executed event with the recorded one.

Both sides are compared as the journal writes them (JSON, credentials
redacted), with what may differ between two runs of the same code left out:
ids (node ids, run ids: a child run is compared by its place, ``.1``), ``seq``,
timestamps, durations, elapsed times, a retry's jittered wait, the flow's file
path, a loop's ceiling (see "_CEILING" below). Pauses and resumes are not
compared (a re-execution does not stop where a person stopped the recorded run;
their edits are re-applied instead, see :mod:`flowtui.runtime.resume`), nor
streamed fragments, which the journal does not keep.

What is compared: the event's type, its node path (:class:`Paths`:
``RevisaoWorkflow › loop 2 › RevisorAgent › chat``), its origin, and its
values: the messages appended, the state fields set, the request sent to the
model (messages as sent, tools, sampling and model; a cassette's
``replaying``/``recording`` label stands for no model), a model's reply, a
tool's result.
"""

from __future__ import annotations

import re
from typing import Any

# Never compared: pause points (re-applied instead), fragments, the app's subscribers, the report itself, and
# a cleanup's failure: a served tool is not run, so neither is a cleanup it registered (one that raised
# diverged every re-execution at the end), and one a stop from outside cut short runs whole (it is a report).
IGNORED = frozenset({"run.pause", "run.resume", "chat.delta", "subscriber.error", "run.diverged", "dispose.error"})
_VOLATILE = frozenset({"seq", "ts", "run_id", "node_id", "parent_id", "duration_ms", "elided"})
# _CEILING: a loop's max_iterations, which its events repeat, is not compared: raising a ceiling the
# recorded loop never reached (5 to 10, for a loop its until ended after 3) diverged at the loop's start,
# so edit-and-continue refused the commonest tweak. A ceiling that changes what the loop did shows in
# the events that follow (another iteration started, or not; `exhausted`, `stopped_by`).
RUN, PATH = "(run)", "(path)"  # added to a compared event: its run (relative: "", ".1") and node path
MISSING = object()


def budget_use(ev: Any) -> bool:
    """``ctx.set budget``: what a run has spent, said after each call, never compared (nor whether a run has a
    budget, or how often it is said: a budget added, or a child's calls said on its parent, as a flowtui before
    did not, diverged at the first call). What a limit reached did shows in the events that follow."""
    return ev.get("type") == "ctx.set" and ev.get("name") == "budget"


class Paths:
    """The node path of each event of one stream, fed in order.

    A node's path is its parent's and its own name; under a loop, the loop's
    segment says the iteration (``loop 2``), counted by the ``ctx.set loop``
    the loop emits at the end of each iteration.
    """

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[tuple[str, ...], str]] = {}
        self._up: dict[str, str | None] = {}  # node -> its parent
        self._iterations: dict[str, int] = {}

    def of(self, ev: dict[str, Any]) -> tuple[str, ...]:
        t, node = ev.get("type"), ev.get("node_id")
        if t == "node.start":
            path = self.inside(ev.get("parent_id")) + (_label(ev),)
            if node is not None:
                self._nodes[node] = (path, str(ev.get("kind")))
                self._up[node] = ev.get("parent_id")
            return path
        if t == "node.end":
            found = self._nodes.get(node) if node is not None else None
            return found[0] if found else self.inside(ev.get("parent_id")) + (_label(ev),)
        if node is None:  # run.start and run.end: where a child run was started
            return self.inside(ev.get("parent_id"))
        path = self.inside(node)
        if t == "ctx.set" and ev.get("name") == "loop" and self._nodes.get(node, ((), ""))[1] == "loop":
            done = ev["value"].get("iterations") if isinstance(ev.get("value"), dict) else None
            # the iteration that comes next (0 as the loop starts: an older flowtui said only ends, one each)
            self._iterations[node] = done + 1 if type(done) is int else self._iterations.get(node, 1) + 1
        return path

    def kind_of(self, node: str | None) -> str | None:
        found = self._nodes.get(node) if node is not None else None
        return found[1] if found else None

    def chain(self, node: str | None) -> list[str]:
        """The ids of ``node`` and the nodes around it, the outermost first."""
        out: list[str] = []
        while node is not None and node in self._nodes and node not in out:  # (a forged journal's cycle)
            out.append(node)
            node = self._up.get(node)
        return out[::-1]

    def inside(self, node: str | None) -> tuple[str, ...]:
        """The path of what runs inside ``node`` (a loop's current iteration included)."""
        found = self._nodes.get(node) if node is not None else None
        if found is None:
            return ()
        path, kind = found
        if kind == "loop":
            return path[:-1] + (f"{path[-1]} {self._iterations.get(node, 1)}",)
        return path


def _label(ev: dict[str, Any]) -> str:
    """A node's segment of a path: its name; a model call is ``chat`` (its agent is the segment before)."""
    return "chat" if ev.get("kind") == "chat" else str(ev.get("name", "?"))


def show_path(path: tuple[str, ...] | list[str]) -> str:
    """``RevisaoWorkflow › loop 1 › RevisorAgent``, each step's name on one line and cut short (a journal's
    name of 50,000 lines made a report of as many)."""
    return " › ".join(one_line(str(part), NAME_SHOWN) for part in path)


NAME_SHOWN = 80  # characters of a step's name a path says


def items_said(n: int) -> str:
    """``1 item``, ``3 items``."""
    return f"{n} item{'' if n == 1 else 's'}"


def one_line(text: str, width: int | None = None) -> str:
    """``text`` on one line (its line breaks as ⏎), cut to ``width`` characters."""
    text = _BREAKS.sub("⏎", text)
    return text if width is None or len(text) <= width else f"{text[:width - 1]}…"


_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\x85\u2028\u2029]")


def comparable(ev: dict[str, Any], run: str, path: tuple[str, ...]) -> dict[str, Any]:
    """``ev`` (as journaled) with what may differ between runs left out, and its run and path added."""
    out = {k: v for k, v in ev.items() if k not in _VOLATILE}
    out[RUN], out[PATH] = run, path
    if str(out.get("origin", "")).startswith("thread:"):  # a flow's thread: its name is no stable fact (a
        out["origin"] = "runtime"  # default one counts threads), and an older flowtui said runtime
    t = out.get("type")
    if t == "run.start":
        out.pop("resumed_from", None)
        out.pop("file", None)
        out.pop("budget", None)  # a limit raised is no divergence; one reached shows in what follows
    elif t == "run.end":
        out["totals"] = _without(out.get("totals"), "elapsed_s")
    elif t in ("node.start", "node.end") and isinstance(out.get("data"), dict):
        data = dict(out["data"])
        if out.get("kind") == "loop":  # (see _CEILING; whether it has an until shows in what follows too)
            data.pop("max_iterations", None)
            data.pop("until", None)
        if "totals" in data:
            data["totals"] = _without(data["totals"], "elapsed_s")
        # how many cleanups the run has to run: a tool that registered one (ctx.on_dispose(conn.close), as
        # the README writes it) and is served in a re-execution never ran, so neither does its cleanup; the
        # count differed, and every re-execution of such a run diverged at its end
        data.pop("cleanups", None)
        data.pop("raised", None)  # (what a tool raised, for people: where moves with any line added above it)
        for key in ("request", "sent_request"):
            if isinstance(data.get(key), dict) and "model" in data[key]:
                data[key] = {**data[key], "model": model_key(data[key]["model"])}
        out["data"] = data
    elif t == "ctx.set" and out.get("name") == "loop":  # (see _CEILING)
        out["value"] = _without(out.get("value"), "max_iterations")
    elif t == "chat.attempt":
        out.pop("retry_in_s", None)
    elif t == "tool.decision":  # a person's, made in a dialog (no node) or by a run key (in the turn's): the
        out[PATH] = ()  # same decision (a re-execution makes it as a dialog's, and diverged on a run key's)
    return out


_AGAIN = "stopped again where the run of "


def stopped_again(journal: str, reason: str | None) -> str:
    """The end's reason of a re-execution that stopped again where the recorded run was stopped (by a
    person, a watchpoint): it says so, with the recorded words (which alone named a watchpoint that never
    fired in this run, at the recorded run's event, and made flowtui run exit 4)."""
    return f"{_AGAIN}{journal}{_was_stopped(reason)}"


_WAS = " was stopped ("


def _was_stopped(reason: str | None) -> str:
    """`` was stopped (why)``: why the first run of a line of re-executions was stopped (a re-execution of
    a re-execution said each journal, nested)."""
    while reason and reason.startswith(_AGAIN) and reason.endswith(")") and _WAS in reason:
        reason = reason[reason.index(_WAS) + len(_WAS):-1]
    return f"{_WAS}{reason or 'stopped by user'})"


def align(rec: dict[str, Any], new: dict[str, Any]) -> None:
    """A request that names no model (a replayed cassette's) leaves the other side's model uncompared;
    one with no ``provider_sampling`` or ``tools_digest`` (a journal from before it was recorded), the other's; a tool's end
    with no ``ran`` (likewise), the other's. A stop made again (:func:`stopped_again`) ends as the recorded one."""
    if rec.get("type") == "run.end" and isinstance(new.get("reason"), str) \
            and new["reason"].startswith(_AGAIN) and new["reason"].endswith(_was_stopped(rec.get("reason"))):
        new["reason"] = rec.get("reason")
    if rec.get("type") == "run.start" and "snapshot" not in rec:  # a journal from before it was recorded: the
        new.pop("snapshot", None)  # state the run starts with says what differs
    a, b = rec.get("data"), new.get("data")
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return
    if rec.get("type") == "node.end" and rec.get("kind") == "tool" and "ran" not in a:
        b.pop("ran", None)  # a journal from before it was recorded: the results that follow say the same
    for key in ("request", "sent_request"):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict) and (x.get("model") is None) != (y.get("model") is None):
            a[key], b[key] = x, y = {**x, "model": None}, {**y, "model": None}
        for recorded_since in ("provider_sampling", "tools_digest"):  # (one side's journal from before it)
            x, y = a.get(key), b.get(key)
            if isinstance(x, dict) and isinstance(y, dict) and (recorded_since in x) != (recorded_since in y):
                a[key] = {k: v for k, v in x.items() if k != recorded_since}
                b[key] = {k: v for k, v in y.items() if k != recorded_since}


def model_key(described: Any) -> Any:
    """A provider's description as compared: a cassette's wrapper says which cassette, not which
    model (``replaying x.jsonl``: none; ``recording M to x.jsonl``: ``M``)."""
    if not isinstance(described, str):
        return described
    if described.startswith("replaying "):
        return None
    if described.startswith("recording ") and " to " in described:
        return described[len("recording "):].rpartition(" to ")[0]
    return described


def _without(value: Any, key: str) -> Any:
    if isinstance(value, dict) and key in value:
        return {k: v for k, v in value.items() if k != key}
    return value


def diff(a: Any, b: Any, path: str = "", *, limit: int = 8) -> list[tuple[str, Any, Any]]:
    """Where two JSON values differ: ``(path, a's value, b's value)``, first ones first.

    Lists are compared item by item; a list that is longer or shorter says so once
    (``path[…]``, with both lengths) after the items both have."""
    out: list[tuple[str, Any, Any]] = []
    _diff(a, b, path, out, limit)
    return out


def _diff(a: Any, b: Any, path: str, out: list, limit: int) -> None:
    if len(out) >= limit or a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            _diff(a.get(key, MISSING), b.get(key, MISSING), f"{path}.{key}" if path else str(key), out, limit)
        return
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        for i in range(min(len(a), len(b))):
            _diff(a[i], b[i], f"{path}[{i}]", out, limit)
        if len(a) != len(b) and len(out) < limit:
            out.append((f"{path}[…]", items_said(len(a)), items_said(len(b))))
        return
    out.append((path, a, b))
