"""The run journal: every event as one JSON line, written as it happens.

A crash loses nothing already emitted (each line is flushed). Secrets are
redacted: the value of every environment variable whose name looks like a
credential (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*``) is
replaced by ``[redacted]`` before a line is written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runtime.events import event_json, parse_event

_SECRET_NAME = re.compile(r"(API_KEY|_KEY$|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)


def secret_values() -> list[str]:
    """Credential values from the environment, longest first (min. 8 characters)."""
    values = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8}
    return sorted(values, key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    for value in secrets:
        if value in text:
            text = text.replace(value, "[redacted]")
    return text


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
