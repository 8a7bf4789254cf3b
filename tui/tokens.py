"""Sizes in tokens for "what the model sees": exact where the run's process can count, else estimated.

The app never imports litellm, so it cannot tokenize. The run's worker can, for
a model whose tokenizer litellm has at hand (the ``count`` command; see
:mod:`flowtui.runtime.tokens`). The app asks once per pause, while the view is
on screen; the answer comes when it comes and the view is drawn again then.
Until it has come, and for every other model, sizes are estimates of about
four characters a token, always marked ``~``: ``#22 · agent:Writer · ~45 tok``
against ``#22 · agent:Writer · 41 tok``, and the title says which
(``1,234 tokens, gpt-4o-mini tokenizer`` or ``~1,230 tokens, estimate``).

Nothing here imports textual.
"""

from __future__ import annotations

from typing import Any

KEPT = 16  # pauses whose counts are kept (the latest are the ones looked at again)


class ExactTokens:
    """The run's own counts, one per pause (and the edits made there) of the run shown."""

    def __init__(self) -> None:
        self._known: dict[tuple, Any] = {}  # key -> TokenCount, or None (asked, or none to be had)

    @staticmethod
    def key(view: Any) -> tuple | None:
        """What a count holds for: the run shown and the events so far, while paused (else None:
        what the model sees moves on as the run runs, and is estimated)."""
        if view is None or view.status != "paused" or view.shown.run_id is None:
            return None
        return view.shown.run_id, view.last_seq

    def of(self, view: Any) -> Any:
        """The count the run gave for ``view`` as it is now, or None."""
        key = self.key(view)
        return self._known.get(key) if key is not None else None

    def asked(self, view: Any) -> bool:
        """The run was asked for ``view`` as it is now (its answer may not have come yet)."""
        return self.key(view) in self._known

    def wanted(self, view: Any) -> tuple | None:
        """The key to ask the run a count for: once per key (it counts as asked from now on)."""
        key = self.key(view)
        if key is None or key in self._known:
            return None
        while len(self._known) >= KEPT:
            del self._known[next(iter(self._known))]
        self._known[key] = None
        return key

    def put(self, key: tuple, counted: Any) -> None:
        if key in self._known:
            self._known[key] = counted


def _fits(seen: list[Any], counted: Any) -> bool:
    return counted is not None and len(counted.messages) == len(seen)


def block_sizes(seen: list[Any], counted: Any = None) -> list[str]:
    """Each message's size: ``41 tok`` counted by the model's tokenizer, ``~45 tok`` estimated."""
    if _fits(seen, counted):
        return [f"{n:,} tok" for n in counted.messages]
    return [f"~{estimate(m):,} tok" for m in seen]


def total_size(seen: list[Any], counted: Any = None) -> str:
    """The call's size: ``1,234 tokens, gpt-4o-mini tokenizer`` (the whole request, tool schemas
    in) or ``~1,230 tokens, estimate`` (the messages)."""
    if _fits(seen, counted):
        return f"{counted.total:,} tokens, {counted.model.rsplit('/', 1)[-1]} tokenizer"
    return f"~{sum(estimate(m) for m in seen):,} tokens, estimate"


def estimate(message: Any) -> int:
    """A message's estimated size, of the whole of each text cut on the way to the app (the model gets
    it whole: its note says how long it is), not of the piece the app holds."""
    from flowtui.runtime.context_window import estimate_tokens
    from flowtui.tui.client import lost_on_the_way

    n = estimate_tokens(message)
    content = message.content
    return n + lost_on_the_way(content) // 4 if isinstance(content, str) else n
