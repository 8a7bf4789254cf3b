"""What reaches the screen never holds a credential.

The runtime redacts what it writes (the journal, ``flowtui run``'s output,
provider errors); the app draws model text, tool output and values as they
came, and a model or a tool can echo a key. Every text the panes draw goes
through :func:`shown`, with the same rule as the runtime
(:mod:`runtime.secrets`: credential-named environment variables, ``sk-…``
shapes). An edit dialog shows the redacted text too, and :func:`unshown` puts
the credentials back where the user left ``[redacted]`` untouched, so saving
an edit loses nothing.
"""

from __future__ import annotations

import re
from functools import lru_cache

from flowtui.runtime.secrets import found, redact, secret_values

MARK = "[redacted]"


@lru_cache(maxsize=1)
def _secrets() -> tuple[str, ...]:
    return tuple(secret_values())  # the environment of this process: read once


def shown(text: str) -> str:
    """``text`` as it may be drawn."""
    return redact(text, _secrets())


def unshown(edited: str, original: str) -> str:
    """``edited`` (typed over ``shown(original)``) with each untouched ``[redacted]`` back to its credential."""
    if MARK not in edited or shown(original) == original:
        return edited
    hidden = iter(found(original, _secrets()))
    return re.sub(re.escape(MARK), lambda m: next(hidden, MARK), edited)
