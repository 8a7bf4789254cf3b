"""Calling user code: sync or async, with the right origin, never freezing the loop.

Async functions are awaited. Sync functions run in a worker thread when
``offload`` is on (a sync tool that sleeps must not freeze the app), inline
otherwise. Context variables (the current node, the origin) follow into the
thread, so events emitted there are attributed correctly.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from flowtui.runtime.bus import current_origin

_IS_ASYNC: dict[Any, bool] = {}


def is_async(fn: Callable[..., Any]) -> bool:
    key = getattr(fn, "__func__", fn)
    try:
        return _IS_ASYNC[key]
    except KeyError:
        result = _IS_ASYNC[key] = inspect.iscoroutinefunction(fn)
        return result
    except TypeError:  # unhashable callable
        return inspect.iscoroutinefunction(fn)


async def call_user(fn: Callable[..., Any], args: Sequence[Any], *, origin: str, offload: bool,
                    kwargs: dict[str, Any] | None = None, then: Callable[[], None] | None = None) -> Any:
    """Call ``fn``; ``then()`` runs right after, still under ``origin`` (so the
    state changes it finds are attributed to this code)."""
    token = current_origin.set(origin)
    try:
        if is_async(fn):
            result = await fn(*args, **(kwargs or {}))
            return result
        if offload:
            result = await asyncio.to_thread(fn, *args, **(kwargs or {}))
        else:
            result = fn(*args, **(kwargs or {}))
        if inspect.isawaitable(result):
            result = await result
        return result
    finally:
        if then is not None:
            then()
        current_origin.reset(token)
