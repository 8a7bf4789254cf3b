"""The sidebar: memory items, tasks, the workflow state's fields, ``ctx``, turn, loop and budget.

An ``OptionList`` so a cursor can pick the memory item, task or state field
to edit (``e``), delete (``d``); section headers are disabled options. Rows
whose text changed are replaced in place; the list is rebuilt only when rows
come or go.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

RUNTIME_CTX = ("turn", "output", "loop", "budget")


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    text = text.replace("\n", " ⏎ ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def sidebar_rows(view: Any, width: int = 42) -> list[tuple[str | None, Text]]:
    """(id, text) per row; id is ``memory:i``, ``tasks:i`` or ``field:name`` for editable rows."""
    rows: list[tuple[str | None, Text]] = []

    def section(title: str, count: int | None = None) -> None:
        text = Text(title, "bold #87afd7")
        if count is not None:
            text.append(f" ({count})", "dim")
        rows.append((None, text))

    def empty(what: str) -> None:
        rows.append((None, Text(f"  {what}", "dim italic")))

    section("Memory", len(view.memory))
    for i, item in enumerate(view.memory):
        rows.append((f"memory:{i}", Text.assemble((f"{i + 1:>2} ", "dim"), _short(item))))
    if not view.memory:
        empty("empty")
    section("Tasks", len(view.tasks))
    for i, item in enumerate(view.tasks):
        rows.append((f"tasks:{i}", Text.assemble((f"{i + 1:>2} ", "dim"), "☐ ", _short(item))))
    if not view.tasks:
        empty("none — a adds one")
    if view.state:
        section(f"State · {view.workflow or ''}".rstrip(" ·"))
        for name, value in view.state.items():
            changed = name == view.last_changed
            mark = ("● ", "bold #ffd75f") if changed else ("  ", "")
            name_style = "bold #ffd75f" if changed else "bold"
            if isinstance(value, list) and value:
                rows.append((f"field:{name}", Text.assemble(mark, (name, name_style), (f" [{len(value)}]", "dim"))))
                for j, item in enumerate(value):
                    rows.append((f"field:{name}", Text.assemble("    ", (f"{j} ", "dim"), _short(item))))
            elif isinstance(value, dict) and value:
                rows.append((f"field:{name}", Text.assemble(mark, (name, name_style))))
                for key, item in value.items():
                    rows.append((f"field:{name}", Text.assemble("    ", (f"{key}: ", "dim"), _short(item))))
            else:
                rows.append((f"field:{name}", Text.assemble(mark, (name, name_style), " = ", _short(value))))
    user = {k: v for k, v in view.ctx.items() if k not in RUNTIME_CTX}
    section("ctx")
    for name, value in user.items():
        rows.append((None, Text.assemble((f"  {name}", "bold"), " = ", _short(value, 120))))
    turn = view.ctx.get("turn")
    if isinstance(turn, dict):
        tool = f" · tool {turn.get('tool_name')}" + (" ✗" if turn.get("tool_error") else "") \
            if turn.get("called_tool") else ""
        rows.append((None, Text.assemble(("  turn", "bold"), f" {turn.get('agent')}{tool}")))
    loop = view.ctx.get("loop")
    if isinstance(loop, dict):
        stopped = f" · stopped by {loop['stopped_by']}" if loop.get("stopped_by") else ""
        rows.append((None, Text.assemble(("  loop", "bold"),
                                         f" {loop.get('iterations', 0)} of {loop.get('max_iterations', '?')} iterations done{stopped}")))
    budget = view.ctx.get("budget")
    if isinstance(budget, dict):
        parts = [f"{k} {v}" for k, v in budget.items() if v not in (None, 0, 0.0)]
        rows.append((None, Text.assemble(("  budget", "bold"), " " + (", ".join(parts) or "nothing used"))))
    if "output" in view.ctx and view.ctx["output"] is not None:
        rows.append((None, Text.assemble(("  output", "bold"), " = ", _short(view.ctx["output"], 120))))
    if not user and not any(k in view.ctx for k in RUNTIME_CTX):
        empty("nothing set yet")
    for _, text in rows:  # one line per row: the full text is one `e` away
        text.truncate(width, overflow="ellipsis")
    return rows


class Sidebar(OptionList):
    """Memory, tasks, state and ctx, with a cursor over the editable rows."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: list[tuple[str | None, str]] = []

    def sync(self, view: Any) -> None:
        width = max((self.scrollable_content_region.width or 44) - 2, 20)
        rows = sidebar_rows(view, width) if view is not None else []
        plain = [(rid, text.plain + str(text.spans)) for rid, text in rows]
        if plain == self._rows:
            return
        old, self._rows = self._rows, plain
        if len(old) == len(plain) == self.option_count and all(a[0] == b[0] for a, b in zip(old, plain)):
            # The same rows with new text (a ctx value, a state field): replace those prompts in
            # place. Rebuilding the list would relayout the screen and repaint all of it.
            for i, (a, b) in enumerate(zip(old, plain)):
                if a != b:
                    self.replace_option_prompt_at_index(i, rows[i][1])
            return
        keep = self.highlighted_id
        self.clear_options()
        self.add_options([Option(text, id=None, disabled=rid is None) for rid, text in rows])
        self._ids = [rid for rid, _ in rows]
        if keep is not None and keep in self._ids:
            self.highlighted = self._ids.index(keep)

    @property
    def highlighted_id(self) -> str | None:
        """``memory:i``, ``tasks:i`` or ``field:name`` under the cursor."""
        ids = getattr(self, "_ids", [])
        i = self.highlighted
        if i is None or not 0 <= i < len(ids):
            return None
        return ids[i]
