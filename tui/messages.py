"""Messages the app posts: tests and the bench hook on them (``message_hook``)."""

from __future__ import annotations

from textual.message import Message


class RunFlushed(Message):
    """Buffered run events were folded into the view and the panes redrawn."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count

    def can_replace(self, message: Message) -> bool:  # only the latest matters
        return isinstance(message, RunFlushed)
