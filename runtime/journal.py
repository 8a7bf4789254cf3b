"""The run journal: every event as one JSON line, written as it happens.

A crash loses nothing already emitted (each line is flushed). Credentials are
redacted before a line is written (:mod:`runtime.secrets`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flowtui.runtime.events import event_json, parse_event
from flowtui.runtime.secrets import redact, secret_values

class JournalWriter:
    """A sink that appends each event to ``path`` as a JSON line."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        self._secrets = secret_values()

    def __call__(self, event: Any) -> None:
        if self._file.closed:
            return
        self._file.write(redact(event_json(event), self._secrets) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_journal(path: str | Path) -> Iterator[Any]:
    """The events of a journal file, validated, in order."""
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield parse_event(line)
                except ValueError as exc:
                    raise ValueError(f"{path}:{n}: not a flowtui event: {exc}") from None
