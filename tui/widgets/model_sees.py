"""What the model sees (view 2): the run's next request drawn in a :class:`MessageList`, each block
tagged with the event that put it there, its origin and its size in tokens."""

from __future__ import annotations

from typing import Any

from flowtui.tui.shown import shown
from flowtui.tui.widgets.message_list import MessageList


def show_model_sees(widget: MessageList, view: Any, counted: Any = None) -> None:
    """Fill ``widget`` with exactly what the next model call sends, its system parts labelled, each
    block tagged with the event that put it there, its origin and its size in tokens: ``counted``,
    the run's own count by the model's tokenizer, else an estimate marked ``~`` (:mod:`flowtui.tui.tokens`)."""
    from flowtui.tui.tokens import block_sizes

    seen = view.model_sees()
    origins = _provenance(view)
    labels = {}
    if view.prompt:
        labels[0] = "system · agent prompt"
    note = 1 if view.prompt else 0
    has_note = len(seen) > len(view.history) + note
    if has_note:
        labels[note] = f"system · memory and tasks ({shown(origins[note][1])})"
    tags, short, sources = {}, {}, {}
    for i, (size, (seq, origin)) in enumerate(zip(block_sizes(seen, counted), origins)):
        if i == note and i in labels:
            tags[i] = size
        else:
            tags[i] = " · ".join(part for part in (f"#{seq}" if seq else "", shown(origin), size) if part)
            short[i] = f"#{seq} · {size}" if seq else size
        if seq:
            sources[i] = seq
    widget.labels, widget.tags, widget.short_tags, widget.sources = labels, tags, short, sources
    widget.opens_own = True
    widget.note = (note, tuple(view.memory), tuple(view.tasks)) if has_note else None
    widget.set_messages(seen, reset=True)


NOTE_ITEMS = 12  # the note's label lists this many of its items' events (one line shows fewer)


def _provenance(view: Any) -> list[tuple[int | None, str]]:
    """``view.provenance()`` with the note's items listed up to :data:`NOTE_ITEMS` of them, then
    counted (``#3 input, #9 tool:t, … 59,990 more``): a label of 60,000 items' events would be
    built at every redraw for one line to show the first few."""
    run = view.shown
    if len(run.memory_from) + len(run.tasks_from) <= NOTE_ITEMS:
        return view.provenance()
    out: list[tuple[int | None, str]] = []
    if run.prompt:
        out.append(run.prompt_from or (None, "agent prompt"))
    if run.memory or run.tasks:
        froms = [f for f in (run.memory_from, run.tasks_from) if f]
        listed = (run.memory_from[:NOTE_ITEMS] + run.tasks_from[:NOTE_ITEMS])[:NOTE_ITEMS]
        more = len(run.memory_from) + len(run.tasks_from) - len(listed)
        first = min(min(seq for seq, _ in f) for f in froms) if froms else None
        out.append((first, ", ".join([*(f"#{seq} {origin}" for seq, origin in listed), f"… {more:,} more"])))
    out.extend(run.history_from[:len(run.history)])
    out.extend((None, "") for _ in range(len(run.history) - len(run.history_from)))
    return out
