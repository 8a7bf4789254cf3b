"""Rendering one history message as a block of strips (used by the virtual message list).

A block is a role-coloured gutter, a header line (role, the agent that produced
it, tool name, error mark, index) and the body: the model's reasoning collapsed
to one line until expanded, assistant text as Markdown, tool calls with their
arguments, tool results collapsed to a few lines until expanded. A block draws at most
the first ``BLOCK_LINES`` lines of its text and counts the rest (``o`` opens it whole). A streamed
reply still arriving is a provisional block (plain text, marked ``streaming…``).
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from flowtui.tui.client import lost_on_the_way, split_cut
from flowtui.tui.shown import shown, shown_head, shown_streaming, shown_tail

ROLE_STYLES = {
    "user": Style(color="#5fafff", bold=True),
    "assistant": Style(color="#87d787", bold=True),
    "tool": Style(color="#d7af5f", bold=True),
    "system": Style(color="#af87d7", bold=True),
}
ERROR_STYLE = Style(color="#ff5f5f", bold=True)
DIM = Style(dim=True)
COLLAPSED_LINES = 3
BLOCK_LINES = 100  # a block draws at most this many lines of its text, the rest counted (``o`` opens it whole)
BLOCK_CHARS = 16_000  # ... and about this many characters of them
LINE_CHARS = 2_000  # a longer line is cut before it is wrapped (a 50 MB line would take minutes)
MARKDOWN_CHARS = 16_000  # past this, assistant text is drawn plain: parsing it would hold a key up
# A reply streaming in is drawn from its end: this many of its last characters reach the block
# (the BLOCK_CHARS it draws, and room before them to hide a credential the cut falls inside).
STREAMING_CHARS = 2 * BLOCK_CHARS


def cut_long_lines(text: str, limit: int = LINE_CHARS) -> str:
    """``text`` with every line longer than ``limit`` cut, saying how much of it is not drawn."""
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    if all(len(line) <= limit for line in lines):
        return text
    return "\n".join(line if len(line) <= limit else f"{line[:limit]}… (+{len(line) - limit:,} characters on this line)"
                     for line in lines)


def head_lines(text: str, lines: int = BLOCK_LINES, chars: int = BLOCK_CHARS) -> tuple[str, int]:
    """The first lines of ``text`` a block draws (at most ``lines`` of them, about ``chars`` characters,
    the first one always) and how many lines are left out. A 200,000-line memory note costs what its
    first hundred lines do, whatever its size. A line counts for what is drawn of it (at most
    :data:`LINE_CHARS`, see :func:`drawn_lines`), so a long one is drawn cut, not left out with
    the lines after it."""
    if len(text) <= chars and text.count("\n") < lines:
        return text, 0
    head = text.split("\n", lines)[:lines]
    kept, used = 0, 0
    for line in head:
        if kept and used + min(len(line), LINE_CHARS) > chars:
            break
        kept += 1
        used += min(len(line), LINE_CHARS) + 1
    if kept == len(head) and len(head) < lines:  # every line fits (a few long ones)
        return text, 0
    return "\n".join(head[:kept]), text.count("\n") + 1 - kept


_CUT_LINE = "… [cut on the way to the app:"  # how a note of client.mark_cuts starts its line


def drawn_lines(text: str, *, open_end: bool = False, last_counted: bool = True) -> str:
    """``text`` as a block draws it: :func:`shown`, each line longer than :data:`LINE_CHARS` cut and
    saying how much of it is not drawn, paying for what is drawn only (a 50 MB line costs its head).

    ``open_end``: the text goes on after its end (the rest is counted, or was cut on the way to
    the app), so a credential its end falls inside is hidden too. ``last_counted``: the last line
    is whole; when it is a piece, as before a note of a cut on the way, its length says nothing
    and is not given."""
    lines = text.split("\n") if len(text) > LINE_CHARS else [text]
    if all(len(line) <= LINE_CHARS for line in lines):
        return shown_streaming(text) if open_end else shown(text)
    out: list[str] = []
    run: list[str] = []  # lines drawn whole, made safe together (a credential may span them)
    for i, line in enumerate(lines):
        if len(line) <= LINE_CHARS:
            run.append(line)
            continue
        if run:
            out.append(shown("\n".join(run)))
            run = []
        after = lines[i + 1] if i + 1 < len(lines) else None
        piece = after.startswith(_CUT_LINE) if after is not None else not last_counted
        more = "" if piece else f" (+{len(line) - LINE_CHARS:,} characters on this line)"
        out.append(shown_head(line, LINE_CHARS)[:LINE_CHARS] + "…" + more)
    if run:
        out.append(shown_streaming("\n".join(run)) if open_end else shown("\n".join(run)))
    return "\n".join(out)


def more_lines(n: int, lost: int = 0) -> str:
    """What a block says of the ``n`` lines it leaves out; ``lost``: about how many characters more the app
    does not hold (cut on the way to it), whose lines it cannot count."""
    if lost:
        return f"… at least {n:,} more lines, and about {lost:,} characters the app does not hold (o opens it whole)"
    return f"… {n:,} more line{'s' if n != 1 else ''} (o opens it whole)"


def args_text(args: dict[str, Any], *, indent: int | None = None) -> str:
    """A call's arguments as JSON; arguments the model wrote that were no JSON object, as it wrote them
    (they are sent back so), said to be no JSON."""
    from flowtui.runtime.providers.base import RAW_ARGUMENTS_KEY

    raw = args.get(RAW_ARGUMENTS_KEY) if len(args) == 1 else None
    if isinstance(raw, str):
        return cut_long_lines(shown(raw)) + " ‹not JSON, as the model wrote it›"
    return cut_long_lines(shown(json.dumps(args, ensure_ascii=False, indent=indent, default=repr)))


AGENT_STYLE = Style(color="#87afaf")
REASONING_STYLE = Style(dim=True, italic=True)


class Provisional(NamedTuple):
    """A reply still streaming in, shaped like a message (no runtime import before the first paint):
    ``content`` is its end, at most :data:`STREAMING_CHARS`; ``length`` counts all of it; ``cut``: how
    the call ended before the reply did ("stopped", "failed"), None while it streams."""

    content: str
    agent: str | None = None
    length: int = 0
    cut: str | None = None
    role: str = "assistant"
    tool_calls: tuple = ()
    tool_name: str | None = None
    is_error: bool = False
    reasoning: str | None = None


def is_collapsible(msg: Any) -> bool:
    return msg.role == "tool" or bool(msg.tool_calls) or bool(msg.reasoning)


def estimate_heights(messages: Any, width: int) -> list[int]:
    """A cheap guess of each block's height (replaced by the real one once it is rendered)."""
    inner = max(width - 2, 10)
    out = []
    append = out.append
    for msg in messages:
        text = msg.content
        lines = text.count("\n") + 1 + len(text) // inner if text else 0
        if lines > COLLAPSED_LINES + 1 and msg.role == "tool":
            lines = COLLAPSED_LINES + 1
        elif lines > BLOCK_LINES + 1:
            lines = BLOCK_LINES + 1
        append(2 + lines + len(msg.tool_calls) + (1 if msg.reasoning else 0))
    return out


_MARKUP = re.compile(r"[*_`#>|\[]|^\s*(?:[-+]|\d+\.)\s", re.MULTILINE)
# What Markdown would draw as less than the model got: HTML (a comment, a tag: dropped), a link's or
# an image's address and a reference definition (hidden), a backslash escape or an entity (eaten).
# A text holding any is drawn as it is: "Sure. <!-- SYSTEM: ... --> [docs](http://evil)" showed "Sure. docs".
_LOSSY = re.compile(r"<[A-Za-z!/?]|\]\(|\]\s?\[|^ {0,3}\[[^\]\n]+\]:|\\[!-/:-@\[-`{-~]|&#?\w+;",
                    re.MULTILINE)


_INDENTED = re.compile(r"^[ \t]+\S", re.MULTILINE)
_FENCE = re.compile(r" {0,3}(?:```|~~~)")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


def _hides_indent(text: str) -> bool:
    """Whether Markdown would draw a line's leading spaces as nothing: outside a fenced code block and a
    list item, " X" drew as "X" (a line indented under a paragraph joined it, its indent gone)."""
    if not _INDENTED.search(text):
        return False
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and line[:1] in (" ", "\t") and line.strip() and not _LIST_ITEM.match(line):
            return True
    return False


# Emphasis the model did not mean, outside code: an asterisk between two ASCII letters or digits ("5*3*2"
# drew "5", "3" slanted, "2"; CJK bold, "这是**重要**的", is written with no spaces and meant) and a dunder
# name ("__init__" drew a bold "init"; "_x_" and "__x__" with spaces around are emphasis as meant).
_STRAY_EMPHASIS = re.compile(r"(?<=[0-9A-Za-z])\*+(?=[0-9A-Za-z])|(?<![\w\\])__[A-Za-z0-9]\w*?__(?!\w)")
_CODE_SPAN = re.compile(r"(`+)[^`\n].*?(?<!`)\1(?!`)")
_ORDERED = re.compile(r"( {0,3})(\d{1,9})[.)](?:[ \t]|$)")
_QUOTED = re.compile(r"^(?: {0,3}> ?)+")
# What ends every list at the margin: a heading, a thematic break, a fence (a fenced block is kept as its fence)
_ENDS_LISTS = re.compile(r" {0,3}(?:#{1,6}(?:[ \t]|$)|([-*_])(?:[ \t]*\1){2,}[ \t]*$|```|~~~)")


def _outside_code(lines: list[str]) -> list[str]:
    """The lines outside fenced code blocks (each block as its opening fence), their code spans taken out,
    a blockquote's marks too."""
    out, fenced = [], False
    for line in lines:
        line = _QUOTED.sub("", line)
        if _FENCE.match(line):
            if not fenced:
                out.append(line)
            fenced = not fenced
        elif not fenced:
            out.append(_CODE_SPAN.sub("", line))
    return out


def _renumbers(lines: list[str]) -> bool:
    """Whether Markdown would number an ordered list other than its text does: it counts on from the first
    item ("1. 1. 1." drew 1 2 3, "3. 3. 7." drew 3 4 5)."""
    following: dict[int, int] = {}  # an open list's indent -> the number its next item must have
    blank = False
    for line in lines:
        item = _ORDERED.match(line)
        if item:
            indent, number = len(item.group(1)), int(item.group(2))
            if following.get(indent, number) != number:
                return True
            following = {at: n for at, n in following.items() if at < indent}
            following[indent] = number + 1
        elif _LIST_ITEM.match(line):  # a bullet ends the ordered lists as deep as it, or deeper
            following = {at: n for at, n in following.items() if at < len(line) - len(line.lstrip())}
        elif _ENDS_LISTS.match(line) or (line.strip() and blank and line[:1] not in (" ", "\t")):
            following.clear()  # (a paragraph at the margin ends every list after a blank line)
        blank = not line.strip()
    return False


def _hides_markup(text: str) -> bool:
    """Whether Markdown would draw characters of ``text`` that are not its markup as something else."""
    lines = _outside_code(text.split("\n"))
    return any(_STRAY_EMPHASIS.search(line) for line in lines) or _renumbers(lines)


# A line break inside a paragraph: Markdown draws it as a space ("S1 com [colchete\nS2" was one line,
# the model got two). Two spaces before it make it a break drawn as one (in code, they draw as nothing).
_SOFT_BREAK = re.compile(r"(?<![\n\\])\n(?!\n)")  # (after a backslash: a break already, Markdown's own)


def _markdown(text: str) -> RenderableType:
    from rich.markdown import Markdown  # markdown-it is imported on the first assistant block

    return Markdown(_SOFT_BREAK.sub("  \n", text))


def render_block(console: Console, msg: Any, index: int, width: int, *, expanded: bool,
                 label: str | None = None, tag: str | None = None, short_tag: str | None = None,
                 provisional: bool = False, expand_key: str = "enter", composed: bool = False,
                 markdown: bool = True) -> list[Strip]:
    """The strips of message ``index`` at ``width`` cells (a trailing blank line separates blocks).

    The header ends in ``tag`` (default ``#index``), or ``short_tag`` where it does not fit; where
    neither fits, the header's label is cut short instead (``…``).

    ``provisional``: a reply still streaming in; its text is shown plain (a
    half-written Markdown table would jump around) and it has no index.
    ``expand_key``: the key the block's hints name for expanding it.
    ``composed``: the text is made of several (the note of memory and tasks), so what one of them
    lost on the way to the app is said where it was cut, not as the whole block's length.
    ``markdown``: an assistant's text may be drawn as Markdown (where that hides nothing of it);
    False draws every text as it is (what the model sees), and says a reply's reasoning is not sent
    (the history keeps it; a request leaves it out).
    """
    inner = max(width - 2, 10)
    role_style = ERROR_STYLE if msg.is_error else ROLE_STYLES.get(msg.role, DIM)
    gutter = Segment("▌ ", role_style)
    blank_gutter = Segment("  ")

    header = Text(no_wrap=True, overflow="ellipsis")
    if is_collapsible(msg):
        header.append("▾ " if expanded else "▸ ", DIM)
    header.append(label or shown(msg.role), role_style)
    if msg.role == "tool" and msg.tool_name:
        header.append(f" {shown(msg.tool_name)}", Style(bold=True))
    if msg.agent and msg.role in ("assistant", "tool"):
        header.append(f" · {shown(msg.agent)}", AGENT_STYLE)
    if msg.is_error:
        header.append("  ✗ error", ERROR_STYLE)
    if msg.tool_calls:
        n = len(msg.tool_calls)
        header.append(f"  {n} tool call{'s' if n > 1 else ''}", DIM)
    tag = (f"{msg.cut} mid-reply" if msg.cut else "streaming…") if provisional else tag or f"#{index}"
    forms = [tag] if provisional or not short_tag or short_tag == tag else [tag, short_tag]
    form = next((f for f in forms if header.cell_len + 1 + cell_len(f) <= inner), None)
    if form is None:  # the label gives way, not the tag: a block always says its event and size
        form = forms[-1]
        header.truncate(max(inner - cell_len(form) - 1, 1), overflow="ellipsis")
    header.append(" " * max(inner - header.cell_len - cell_len(form), 1))
    header.append(form, DIM)

    parts: list[RenderableType] = [header]
    if msg.reasoning:
        said = "reasoning" if markdown else "reasoning, not sent to the model"
        if expanded:
            parts.append(Text(said, Style(dim=True, bold=True)))
            parts.append(Text(cut_long_lines(shown(msg.reasoning)), REASONING_STYLE, overflow="fold"))
        else:
            n = msg.reasoning.count("\n") + 1
            parts.append(Text(f"▸ {said} ({n} line{'s' if n > 1 else ''}, {expand_key} expands)", REASONING_STYLE,
                              no_wrap=True, overflow="ellipsis"))
    # A text cut on the way to the app: what it holds is drawn, and the last line says how long it is
    # (its cut line's own count would be the piece's).
    wire = None if provisional or composed else split_cut(msg.content)
    text, total = wire or (msg.content, 0)
    if provisional:  # the end of the reply, where it is arriving: what came before is counted, not drawn
        content, hidden, lost = cut_long_lines(shown_tail(text, BLOCK_CHARS)), 0, 0
        length = max(msg.length, len(text))
        if length > BLOCK_CHARS:
            content = "\n".join(content.split("\n")[-BLOCK_LINES:])
            parts.append(Text(f"… {length:,} characters so far, the last ones below", DIM,
                              no_wrap=True, overflow="ellipsis"))
    else:  # a cut text may end inside a credential: its first characters are hidden too
        content, hidden = head_lines(text)
        # (a note of memory whose item was cut on the way to the app: the lines left out are those the app holds;
        # "2,572 more lines" were 9,900)
        lost = lost_on_the_way(text) if composed and hidden and _CUT_LINE in text[len(content):] else 0
        content = drawn_lines(content, open_end=bool(hidden or wire), last_counted=not (wire and not hidden))
    end_note = f"… {total:,} characters in all (o opens the whole text)" if wire \
        else more_lines(hidden, lost) if hidden else None
    if not (provisional or wire or msg.tool_calls or text.strip()):  # (both drew their header alone, alike)
        parts.append(Text("(no text)" if not text else f"(white space only: {len(text):,} characters)", DIM))
    elif content:
        if provisional:
            parts.append(Text(content, overflow="fold"))
        elif msg.role == "assistant":
            drawn = markdown and len(content) <= MARKDOWN_CHARS and _MARKUP.search(content) \
                and not _LOSSY.search(content) and not _hides_indent(content) and not _hides_markup(content)
            parts.append(_markdown(content) if drawn else Text(content, overflow="fold"))
        elif msg.role == "tool" and not expanded:
            lines = content.splitlines()
            # a collapsed result is a few rows: each line of the preview at most one row wide
            preview = Text("\n".join(line if len(line) <= inner else line[:inner - 1] + "…"
                                     for line in lines[:COLLAPSED_LINES]), overflow="fold")
            more = len(lines) - COLLAPSED_LINES + hidden
            if wire:
                preview.append(f"\n… {total:,} characters in all ({expand_key} expands, o opens the whole text)", DIM)
            elif more > 0:
                preview.append(f"\n… {more:,} more lines ({expand_key} expands)", DIM)
            parts.append(preview)
            end_note = None  # said already
        else:
            style = Style(italic=True) if msg.role == "system" else Style()
            parts.append(Text(content, style=style, overflow="fold"))
        if end_note:
            parts.append(Text(end_note, DIM, no_wrap=True, overflow="ellipsis"))
    for call in msg.tool_calls:
        line = Text("→ ", DIM)
        line.append(shown(call.name), Style(bold=True, color="#d7af5f"))
        if expanded:
            line.append("\n" + args_text(call.args, indent=2))
        else:
            line.append("(" + args_text(call.args) + ")")
            line.no_wrap, line.overflow = True, "ellipsis"
        parts.append(line)

    options = console.options.update(width=inner, highlight=False)
    strips: list[Strip] = []
    if isinstance(parts[-1], Text) and not msg.tool_calls and len(parts) == 2 and not parts[-1].spans \
            and not parts[-1].style:
        # Fast path for short plain text (most messages): no wrapping needed, no Rich layout.
        lines = parts[-1].plain.split("\n")
        if all(len(line) <= inner and line.isprintable() and cell_len(line) <= inner for line in lines):
            for part in console.render_lines(header, options, pad=True):
                strips.append(Strip([gutter, *part], inner + 2))
            for line in lines:
                strips.append(Strip([gutter, Segment(line), Segment(" " * (inner - cell_len(line)))], inner + 2))
            strips.append(Strip([blank_gutter, Segment(" " * inner)], inner + 2))
            return strips
    for part in parts:
        for line in console.render_lines(part, options, pad=True):
            strips.append(Strip([gutter, *line], inner + 2))
    strips.append(Strip([blank_gutter, Segment(" " * inner)], inner + 2))
    return strips
