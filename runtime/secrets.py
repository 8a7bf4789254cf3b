"""Keeping credentials out of everything flowtui writes or shows.

One rule for the whole runtime: the value of every environment variable whose
name looks like a credential (``*_API_KEY``, ``*_KEY``, ``*TOKEN*``,
``*SECRET*``, ``*PASSWORD*``; at least 6 characters), any credential-looking
keyword a provider was given, and anything shaped like an ``sk-…``/``rk-…``/``pk-…`` key is
replaced by ``[redacted]``. The journal, ``flowtui run``'s output and provider
error messages all go through :func:`redact`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_NAME = re.compile(r"(API_KEY|_KEY$|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_KEY_SHAPE = re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-*]{6,}")
MIN_LENGTH = 6


def secret_values(extra: Mapping[str, Any] | None = None) -> list[str]:
    """Credential values from the environment (and ``extra`` keywords), longest first."""
    values = {v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= MIN_LENGTH}
    if extra:
        values |= {v for k, v in extra.items()
                   if isinstance(v, str) and len(v) >= MIN_LENGTH and re.search(r"key|token|secret|password", k, re.I)}
    return sorted(values, key=len, reverse=True)


def found(text: str, secrets: Iterable[str]) -> list[str]:
    """The credentials in ``text``, in the order they appear (what :func:`redact` replaces)."""
    pattern = "|".join([re.escape(s) for s in secrets] + [_KEY_SHAPE.pattern])
    return [m.group(0) for m in re.finditer(pattern, text)]


def redact(text: str, secrets: Iterable[str]) -> str:
    for value in secrets:
        if value in text:
            text = text.replace(value, "[redacted]")
    return _KEY_SHAPE.sub("[redacted]", text) if "k-" in text else text
