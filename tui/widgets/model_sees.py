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
    origins = view.provenance(listed=NOTE_ITEMS)  # a label of 60,000 items' events would be built at
    # every redraw for one line to show the first few
    labels = {}
    own = view.own_request() is not None  # an agent's own run() made the request: no prompt or note of ours
    if own:
        counted = None  # the run counts the request a turn would build, not this one
        if seen:
            labels[0] = f"{seen[0].role} · the request {shown(view.pause.name)}'s own run() sends"
    elif view.prompt:
        pause = view.pause
        # paused before a tool or after a loop's iteration, the next call is another turn's, perhaps
        # another agent's: the prompt drawn is the last call's, and says so
        labels[0] = ("system · the last call's agent prompt (the run's steps are done: no call follows)"
                     if pause is not None and pause.point == "end" else
                     "system · the last call's agent prompt (the next call's is known when its agent starts)"
                     if pause is not None and pause.point in ("tool", "loop_iteration") else
                     "system · the agent's declared prompt (its before_prompt may replace it: the pause before "
                     "the model call shows what is sent)" if getattr(pause, "prompt_hook", False) else
                     "system · agent prompt")
    # a call the history holds without its result yet (this turn's, before its tool runs; another parallel
    # branch's): the next call goes once it is answered, with its result (an agent's own run() sends what
    # it sends; a run that is over makes no next call)
    at_end = view.pause is not None and view.pause.point == "end"  # (paused at the run's end: no next call)
    for i in unanswered(seen) if not own and view.status in ("running", "paused") and not at_end else ():
        labels[i] = f"assistant ({'its result comes' if len(seen[i].tool_calls) == 1 else 'their results come'} " \
                    "before the next call)"
    changes = middleware_note(view)
    if changes and seen and not own:  # said first on the first block: what follows is what they are given
        role, _, rest = labels.get(0, seen[0].role).partition(" · ")
        labels[0] = " · ".join(part for part in (role, changes, rest) if part)
    note = 1 if view.prompt and not own else 0
    has_note = not own and len(seen) > len(view.history) + note
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


def unanswered(messages: list[Any]) -> list[int]:
    """The indices of the assistant messages with a tool call no tool message answers yet."""
    from flowtui.runtime.wellformed import results_of

    return [i for i, m in enumerate(messages) if m.role == "assistant" and m.tool_calls
            and len(results_of(messages, i)) < len(m.tool_calls)]


def middleware_note(view: Any) -> str | None:
    """What the model sees is what the model middlewares are given: ``ContextWindow may change what is
    sent (the last call sent 3 of 6 messages: 3 left out by ContextWindow)``; None without any."""
    last = view.last_sent()
    names = list(view.model_middlewares) or (last or {}).get("changed_by") or []
    names = names if isinstance(names, list) else [names]  # (a journal from elsewhere)
    if not names:
        return None
    said = f"{', '.join(shown(str(n)) for n in names)} may change what is sent"
    if last is not None and isinstance(last.get("sent"), int) and isinstance(last.get("messages"), int):
        trimmed = last.get("trimmed") if isinstance(last.get("trimmed"), dict) else {}
        left = (f": {trimmed.get('dropped')} left out by {', '.join(shown(str(b)) for b in trimmed.get('by') or [])}"
                if trimmed.get("dropped") else "")
        changed = last.get("changed_by") if isinstance(last.get("changed_by"), list) else []
        if left or not changed:
            # (one that rewrote what was sent, beside one that left messages out, went unsaid)
            others = [n for n in changed if n not in (trimmed.get("by") or [])] if left else []
            also = (f"; changed by {', '.join(shown(str(n)) for n in others)} too, its chat node.end in the event log "
                    "has what was sent") if others else ""
            said += f" (the last call sent {last['sent']} of {last['messages']} messages{left}{also})"
        else:  # (replaced or added to, not left out: "2 of 2" read as nothing changed; the journal has them)
            said += (f" (the last call sent {last['sent']} messages, changed by "
                     f"{', '.join(shown(str(n)) for n in changed)} from the {last['messages']} it was "
                     "given; its chat node.end in the event log has them)")
    return said


NOTE_ITEMS = 12  # the note's label lists this many of its items' events (one line shows fewer)
