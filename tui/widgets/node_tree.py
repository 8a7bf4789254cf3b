"""The run's node tree: workflow › loop › agent › chat › tool, with status and duration."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from flowtui.tui.shown import shown_line

LABEL_CHARS = 200  # a node's label or error is cut here (a 20 MB name took 38 s to measure and draw)
MAX_DEPTH = 60  # deeper nodes are listed at this depth (Textual builds the tree recursively: 1,000 levels
# of a forged journal raised RecursionError, and the replay hung drawing the traceback)

STATUS = {"running": ("●", "#5fafff"), "ok": ("✓", "#87d787"), "error": ("✗", "#ff5f5f"),
          "stopped": ("■", "#d7af5f")}


def node_label(node: Any) -> Text:
    mark, color = STATUS.get(node.status, ("?", "white"))
    text = Text()
    text.append(f"{mark} ", color)
    if node.name != node.kind:  # the default loop is named "loop": "loop 2/5", not "loop loop 2/5"
        text.append(f"{node.kind} ", "dim")
    text.append(shown_line(node.label, LABEL_CHARS), "bold")
    if node.duration_ms is not None:
        text.append(f"  {duration_text(node.duration_ms)}", "dim")
    if node.error:
        # a node the run's end closed (it never ended on its own) says so apart from a real error
        text.append(f"  {shown_line(node.error, LABEL_CHARS)}", "italic #d7af5f" if getattr(node, "unfinished", False) else "#ff5f5f")
    if node.kind == "agent" and node.data.get("recovered") is True:  # the run went on: said, not a bare ✗
        text.append("  (recovered by on_error)", "#d7af5f")
    return text


def duration_text(ms: float) -> str:
    """``12.3 ms``, ``4.27 s``, ``3 m 05 s``, ``2 h 07 m``: as short as the unit lets it (a ten-minute tool's
    ``600123.4 ms`` was cut off in a narrow pane)."""
    if ms < 1000:
        return f"{ms:.1f} ms"
    if ms < 59_995:
        return f"{ms / 1000:.2f} s"
    minutes, seconds = divmod(round(ms / 1000), 60)
    if minutes < 60:
        return f"{minutes} m {seconds:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} m"


class NodeTree(Tree[Any]):
    """Updated incrementally: new nodes are added, changed ones relabelled."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("run", id=id)
        self.show_root = False
        self.guide_depth = 3
        self._items: dict[str, TreeNode[Any]] = {}
        self._depth: dict[str, int] = {}  # how deep each node is drawn (at most MAX_DEPTH)
        self._seen: dict[str, tuple] = {}
        self._broken: dict[str, str] = {}  # node id -> the parent a journal from elsewhere names and has not before it
        self._view: Any = None

    def sync(self, view: Any) -> None:
        if view is not self._view:
            self.clear()
            self._items.clear()
            self._depth.clear()
            self._seen.clear()
            self._broken.clear()
            self._view = view
        if view is None:
            return
        for node_id, node in view.nodes.items():
            key = (node.status, node.duration_ms, node.label, node.error, node.unfinished)
            if self._seen.get(node_id) == key:
                continue
            self._seen[node_id] = key
            item = self._items.get(node_id)
            if item is None:
                parent = self._items.get(node.parent_id) if node.parent_id else None
                if node.parent_id and parent is None:  # (a run's own nodes start after their parent's)
                    self._broken[node_id] = node.parent_id  # drawn at the top, its parent link named
                depth = self._depth.get(node.parent_id, 0) + 1 if parent is not None else 1
                if depth > MAX_DEPTH:  # beside its parent, as deep as the tree goes
                    parent, depth = parent.parent, MAX_DEPTH
                item = (parent or self.root).add(self._label(node), data=node, expand=True)
                self._items[node_id], self._depth[node_id] = item, depth
            else:
                item.set_label(self._label(node))

    def _label(self, node: Any) -> Text:
        label = node_label(node)
        if node.id in self._broken:  # nodes linked in a circle, or to a parent no line holds: a journal from elsewhere
            label.append(f"  (broken link: its parent {shown_line(self._broken[node.id], 40)} does not come before "
                         "it)", "italic #ff5f5f")
        return label

    @property
    def selected_name(self) -> tuple[str, str] | None:
        """(kind, name) of the node under the cursor."""
        node = self.cursor_node
        if node is None or node.data is None:
            return None
        return node.data.kind, node.data.name
