"""``flowtui diff A.jsonl B.jsonl``: what differs between two recorded runs, place by place.

    flowtui diff .flowtui/runs/RevisaoWorkflow-20250101-120000.jsonl .flowtui/runs/RevisaoWorkflow-20250101-120500.jsonl
    flowtui diff runs.jsonl runs.jsonl --run 1 --run-b 2     # two runs of one journal
    flowtui diff a.jsonl b.jsonl --json                      # for tools

Exit codes: 0 the runs are the same (ids, timestamps, durations, sequence
numbers aside), 1 they differ, 2 a file is not a journal (or the command line
is wrong). Everything printed comes from journals that may have been written
elsewhere: it is made inert (and redacted) before it reaches the terminal,
and long values are shortened around where they differ.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import textwrap
import sys
from typing import Any

from flowtui.runtime.cli import Once, Parser
from flowtui.runtime.compare import one_line
from flowtui.runtime.inert import visible
from flowtui.runtime.journal import Mended, ReadWithout
from flowtui.runtime.secrets import environment_secrets, redact
from flowtui.runtime.diff import MISSING, Difference, DiffError, LoadedRun, diff_runs, load_run

NOTICES_SHOWN = 3


def _columns(text: str) -> int:
    """A width of 40 columns or more (argparse names the option when this raises)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of columns") from None
    if value < 40:
        raise argparse.ArgumentTypeError(f"{text!r}: give 40 columns or more, e.g. 100")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="flowtui diff",
        description="Compare two recorded runs (JSONL journals) step by step, aligned by node path. "
                    "Exit 0 when they are the same, 1 when they differ, 2 when a file is not a journal.")
    parser.add_argument("a", metavar="A.jsonl", help="the first journal")
    parser.add_argument("b", metavar="B.jsonl", help="the second journal")
    parser.add_argument("--run", type=int, metavar="N", action=Once,
                        help="which run of each journal, when one holds several (1 is the first; default: the last)")
    parser.add_argument("--run-b", type=int, metavar="N", action=Once, help="which run of B, when it is not the same N as A's")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument("--width", type=_columns, metavar="COLUMNS", action=Once,
                        help="shorten lines to this width, 40 or more (default: the terminal's, at most 120)")
    parser.add_argument("--debug", action="store_true", help="show a traceback if the comparison itself fails")
    return parser


def main_diff(argv: list[str]) -> int:
    """``flowtui diff``: 0 same, 1 different, 2 a file that cannot be compared, 3 the same as far as
    compared but lines of a journal were not (skipped: "the same" must not hide one)."""
    from flowtui.runtime.cli import CLOSED_AT_START, printable, say, stdout_to_null

    args = build_parser().parse_args(argv)
    try:
        a = load_run(args.a, args.run)
        b = load_run(args.b, args.run_b if args.run_b is not None else args.run,
                     option="--run-b" if args.run_b is not None else "--run")
    except DiffError as exc:
        say(f"flowtui diff: {exc}")
        return 2
    try:
        found = diff_runs(a.events, b.events)
    except (RecursionError, MemoryError) as exc:
        if args.debug:
            raise
        say(f"flowtui diff: cannot compare {args.a} and {args.b}: a journal nests too deep or holds too much "
            f"({type(exc).__name__}); --debug shows where")
        return 2
    except Exception as exc:  # a journal shaped in a way this code did not foresee: say so, no traceback
        if args.debug:
            raise
        say(f"flowtui diff: cannot compare {args.a} and {args.b}: {type(exc).__name__}: {exc} "
            f"(a bug in flowtui diff; --debug shows the traceback)")
        return 2
    compared_all = not (_left_out(a) or _left_out(b))
    if args.json:
        out = json.dumps(_standard({"same": not found and compared_all, "compared_all": compared_all,
                                    "a": _about(a), "b": _about(b), "differences": [d.as_json() for d in found]}),
                         ensure_ascii=True, default=repr, allow_nan=False)
    else:
        width = args.width or min(120, shutil.get_terminal_size((100, 24)).columns)
        out = "\n".join(render(a, b, found, width=max(width, 40)))
    verdict = 1 if found else 0 if compared_all else 3
    if "stdout" in CLOSED_AT_START:  # (>&-: the report went to the null device, the verdict said)
        say("flowtui diff: the report could not be written to stdout: it was closed when flowtui started")
        return 2
    try:
        print(printable(out))
        sys.stdout.flush()
    except OSError as exc:  # (a full disk: a traceback, and exit 1 as if the runs differed)
        stdout_to_null()
        if isinstance(exc, BrokenPipeError):  # its reader stopped reading (| head): the verdict stands
            return verdict
        say(f"flowtui diff: the report could not be written to stdout: {exc.strerror or exc}")
        return 2
    return verdict


def _left_out(run: LoadedRun) -> list[Any]:
    """The lines of a journal that were not compared, whole or in part (skipped, or read without fields it
    holds: a run.start's memory that could not be read was said "the same"); a line mended is compared."""
    return [n for n in run.notices if not isinstance(n, Mended) or isinstance(n, ReadWithout)]


def _standard(value: Any) -> Any:
    """``value`` as standard JSON holds it: a NaN or an infinity (which a journal from elsewhere may hold, and
    Python's JSON writes bare, as no other reader takes it) in the words the app shows it in, "NaN", "Infinity"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: _standard(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_standard(v) for v in value]
    return value


def _about(run: LoadedRun) -> dict[str, Any]:
    return {"file": run.path, "run": run.number, "runs": run.total, "workflow": run.workflow,
            "status": run.status, "events": len(run.events),
            "skipped_lines": [n.line for n in run.notices if not isinstance(n, Mended)],
            "notes": [{"line": n.line, "text": n.reason} for n in run.notices if isinstance(n, Mended)]}


# --- text --------------------------------------------------------------------------------------


def render(a: LoadedRun, b: LoadedRun, found: list[Difference], *, width: int = 100) -> list[str]:
    """The report, one line per item, each at most ``width`` columns (values shortened)."""
    # Every text from a journal is made safe whole, before it is wrapped or cut: a credential in a
    # long workflow name was split over two lines, or cut to its end, where no rule knew it again.
    lines = []
    for side, run in (("A", a), ("B", b)):
        where, about = _safe(str(run.path)), _safe(_describe(run))
        one = f"{side}: {where} ({about})"
        lines.extend([_fit(one, width)] if len(one) <= width
                     else [_fit(f"{side}: {where}", width),  # the description wrapped, not cut: all of it counts
                           *(_fit(part, width) for part in textwrap.wrap(about, width, initial_indent="   ",
                                                                         subsequent_indent="   "))])
    for side, run in (("A", a), ("B", b)):
        for n in run.notices[:NOTICES_SHOWN]:
            said = f"line {n.line}: {n.reason}" if isinstance(n, Mended) else f"line {n.line} skipped ({n.reason})"
            # wrapped, not cut in the middle: the field at fault comes first in what a reason says
            lines.extend(_fit(part, width) for part in textwrap.wrap(
                f"   {side}: {_safe(said)}", width, subsequent_indent="      ", max_lines=3, placeholder=" …"))
        if len(run.notices) > NOTICES_SHOWN:
            lines.append(f"   {side}: and {len(run.notices) - NOTICES_SHOWN} more")
    if not found:
        unread = [f"{_count(len(left_out), 'line')} of {side}" for side, run in (("A", a), ("B", b))
                  if (left_out := _left_out(run))]
        same = "The runs are the same" + (" as far as compared" if unread else "")
        lines.extend(textwrap.wrap(f"{same} (ids, timestamps, durations and sequence numbers aside).", width))
        if unread:
            lines.append(_fit(f"Not compared (above): {' and '.join(unread)}.", width))
        return lines
    repeats = sum(d.same_as is not None for d in found)
    places = len({d.path for d in found})
    lines.append(f"The runs differ: {_count(len(found), 'difference')} in {_count(places, 'step')}"
                 + (f" ({repeats} repeat one above)." if repeats else "."))
    if a.workflow != b.workflow:  # (the steps are placed by A's path: B's own said under A's workflow's name)
        lines.extend(_fit(part, width) for part in textwrap.wrap(
            f"They are runs of two workflows, {_safe(str(a.workflow))} and {_safe(str(b.workflow))}: their steps "
            f"are compared by place, each placed where A has it ({_safe(str(a.workflow))} › …).", width))
    compact = False  # the previous step was one line: steps that only repeat follow without a gap
    # in the order they happened: a step's differences together, unless another step's came between
    # (a workflow's input at the start and its output at the end are two groups)
    for path, group in itertools.groupby(found, key=lambda d: d.path):
        path = _safe(path)
        here = list(group)
        fresh = [d for d in here if d.same_as is None]
        again = [d for d in here if d.same_as is not None]
        mark = "▶ first divergence: " if here[0].first else ""
        if not fresh:
            if not compact:
                lines.append("")
            fields = _safe(", ".join(d.field for d in again))
            one = f"{path}: as above, {fields}"
            lines.extend([_fit(one, width)] if len(one) <= width
                         else [*_wrap_path(path, width), *_wrap(f"  as above, {fields}", width)])
            compact = True
            continue
        lines.append("")
        compact = False
        lines.extend(_wrap_path(mark + path, width))
        for d in fresh:
            lines.extend(_show(d, width))
        if again:
            lines.extend(_wrap(f"  and as above, {_safe(', '.join(d.field for d in again))}", width))
    return lines


def _describe(run: LoadedRun) -> str:
    which = f"run {run.number} of {run.total}" if run.total > 1 else "its only run"
    return f"{which}: {run.workflow}, {run.status}, {_count(len(run.events), 'event')}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def _show(d: Difference, width: int) -> list[str]:
    field = _safe(d.field)
    if d.only is not None:
        present = d.a if d.only == "a" else d.b
        return [_fit(f"  only in {d.only.upper()}: {_safe(str(present))}", width)]
    x, y = _value(d.a), _value(d.b)
    one = f"  {field}: {x} → {y}"
    if len(one) <= width and "\n" not in one:
        return [one]
    at = _first_difference(x, y)
    room = width - 7
    return [_fit(f"  {field}", width), "    A: " + shorten(x, room, focus=at), "    B: " + shorten(y, room, focus=at)]


def _value(v: Any) -> str:
    """A value on one line, inert and redacted (before it is shortened: a cut could leave part of a
    credential no rule then recognises): text quoted, its newlines and tabs as ``\\n`` ``\\t`` (a CRLF as
    ``\\r\\n``: a line end's difference is a difference), its control characters as pictures (``␛``);
    structures as JSON."""
    if v is MISSING:
        return "(absent)"
    if isinstance(v, str):
        redacted = redact(v, environment_secrets())  # (before the CRLF is text: "\\r\\nBearer x" is no line start)
        return '"' + visible(redacted.replace("\r\n", "\\r\\n")).replace("\n", "\\n").replace("\t", "\\t") + '"'
    try:
        return _safe(json.dumps(v, ensure_ascii=False, default=repr))
    except (ValueError, RecursionError):
        return _safe(repr(v))


def _safe(text: str) -> str:
    """Text from a journal on the report's line: redacted, inert, its line breaks as ⏎ (a step named by
    50,000 lines, or a file name holding one, took as many lines of the report)."""
    return visible(one_line(redact(text, environment_secrets())))


def _first_difference(x: str, y: str) -> int:
    n = min(len(x), len(y))
    return next((i for i in range(n) if x[i] != y[i]), n)


def shorten(text: str, width: int, *, focus: int | None = None) -> str:
    """``text`` in at most ``width`` characters: cut in the middle (``…(N chars)…``, N the characters
    left out), or, when ``focus`` (where two values start to differ) would be cut away, kept around it."""
    width = max(width, 20)
    if len(text) <= width:
        return text
    left_out = len(text)
    while True:  # (the marker's width depends on the number it says)
        cut = f"…({left_out} chars)…"
        head = (width - len(cut)) // 2
        tail = width - len(cut) - head
        if len(text) - head - tail == left_out:
            break
        left_out = len(text) - head - tail
    if focus is None or focus < head or focus >= len(text) - tail:
        return text[:head] + cut + text[len(text) - tail:]
    # the part around the first difference, with a little of the start for context
    lead = min(12, head)
    room = width - lead - 2
    start = max(lead, focus - room // 3)
    end = min(len(text), start + room)
    return text[:lead] + "…" + text[start:end] + ("…" if end < len(text) else "")


def _wrap_path(path: str, width: int) -> list[str]:
    """A step's path over as many lines as it needs, broken before a ``›``."""
    path = visible(one_line(path))
    if len(path) <= width:
        return [path]
    lines: list[str] = []
    for part in path.split(" › "):
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " › " + part
        else:
            lines.append(("    › " if lines else "") + part)
    return [_fit(line, width) for line in lines]


def _wrap(text: str, width: int) -> list[str]:
    """A list of fields over as many lines as it needs."""
    return [_fit(line, width) for line in textwrap.wrap(visible(text), width, subsequent_indent="    ",
                                                         break_long_words=False, break_on_hyphens=False)]


def _fit(line: str, width: int) -> str:
    """A line of the report: inert (paths and field names come from the journal too), at most ``width``."""
    line = visible(line)
    return shorten(line, width) if len(line) > width else line


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main_diff(sys.argv[1:]))
