"""``ScriptedProvider``: replays replies in order, for offline, deterministic runs.

Replies are a list (each a string or ``{"content", "tool_calls"}``), a mapping
of agent name to such a list, or the path of a TOML file holding either::

    # revisao.replies.toml
    PlannerAgent = ["1. Escrever  2. Revisar"]

    [[RevisorAgent]]
    content = "REPROVADO: falta um exemplo"

A path is relative to the file that defines the provider subclass. Replies go
through the parser a real model's answer goes through (:func:`model_reply`:
``<think>`` blocks, tool-call rescue, call ids), without importing litellm.
"""

from __future__ import annotations

import inspect
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flowtui.runtime.errors import ConfigError, ScriptExhaustedError
from flowtui.runtime.files import not_a_file, not_text
from flowtui.runtime.providers.base import ChatReply, ChatRequest, Provider, with_estimated_usage
from flowtui.runtime.messages import ToolCall
from flowtui.runtime.providers.replies import model_reply, split_reply


def load_replies(source: Any, *, base: Path | None = None,
                 who: str = "ScriptedProvider:") -> list[Any] | dict[str, list[Any]]:
    """Replies from a list, a mapping or a TOML file path (``base`` resolves relative paths), each
    checked now (a reply of the wrong shape is said when the flow loads, with the file and the agent,
    not at the model call that would have played it). ``who`` begins each error: what gave them."""
    replies = _loaded(source, base=base, who=who)
    where = f"{source}: " if isinstance(source, (str, Path)) else ""
    for agent, items in replies.items() if isinstance(replies, dict) else (("", replies),):
        for i, reply in enumerate(items):
            split_reply(reply, where=f"{who} {where}reply {i + 1}" + (f" for {agent}" if agent else ""))
    return replies


def _loaded(source: Any, *, base: Path | None, who: str) -> list[Any] | dict[str, list[Any]]:
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_absolute() and base is not None:
            path = base / path
        raw = b""
        if why := not_a_file(path, "a TOML replies file"):  # (a device was read until memory ran out, a pipe for ever)
            raise ConfigError(f"{who} {path}: {why}")
        try:
            raw = path.read_bytes()
            data = tomllib.loads(raw.decode("utf-8-sig"))  # (a BOM, as Notepad saves: not TOML's)
        except FileNotFoundError:
            text = isinstance(source, str) and not source.endswith(".toml") and ("/" not in source or " " in source)
            raise ConfigError(f"{who} no such replies file: {path.resolve()}" + (  # a reply given as a string
                f"; a string is the path of a TOML file: for one reply, give a list: [{source!r:.60}]"
                if text else "")) from None
        except IsADirectoryError:
            raise ConfigError(f"{who} {path}: is a folder, not a TOML replies file") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{who} {path}: not a TOML replies file ({not_text(raw, exc)})") from None
        except OSError as exc:
            raise ConfigError(f"{who} {path}: cannot read it: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{who} {path}: not valid TOML: {exc}") from None
        except RecursionError:
            raise ConfigError(f"{who} {path}: a value in it is nested too deep to read") from None
        except ValueError as exc:  # an integer of more digits than Python converts
            raise ConfigError(f"{who} {path}: a value in it cannot be read "
                              f"({str(exc).split(';')[0]})") from None
        if not data:  # (it ran, and failed at the first model call: "no more replies (it has: none)")
            raise ConfigError(f"{who} {path}: holds no replies; write each agent's, e.g. "
                              f"RevisorAgent = [\"APROVADO\"] (the README's --replies)")
        if set(data) == {"replies"}:
            data = data["replies"]
        source = data
        where = f"{path}: "
    else:
        where = ""
    if isinstance(source, Mapping):
        for agent, replies in source.items():
            if not isinstance(replies, list):
                raise ConfigError(f"{who} {where}replies for {agent!r} must be a list of replies, "
                                  f"not {type(replies).__name__}")
        return {str(k): list(v) for k, v in source.items()}
    if isinstance(source, (list, tuple)):
        return list(source)
    raise ConfigError(f"{who} {where}replies must be a list, a mapping or a TOML path, "
                      f"got {type(source).__name__}")


class ScriptedProvider(Provider):
    """Replays scripted replies; running out is an error naming the agent."""

    replies: Any = None

    def __init__(self, replies: Any = None) -> None:
        source = replies if replies is not None else type(self).replies
        if source is None:
            raise ConfigError(f"{type(self).__name__}: no replies; pass ScriptedProvider([...]) or set replies = ...")
        self._source = source
        self._base = self._defining_dir()
        self._replies = load_replies(source, base=self._base)
        self._cursor: dict[str, int] = {}

    def _defining_dir(self) -> Path | None:
        cls = type(self)
        if cls is ScriptedProvider:
            # Instances made inline: relative to the file that created them.
            frame = sys._getframe(2)
            return Path(frame.f_code.co_filename).parent
        try:
            return Path(inspect.getfile(cls)).parent
        except (TypeError, OSError):
            return None

    def fork(self) -> "ScriptedProvider":
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin._cursor = {}
        return twin

    def with_replies(self, source: Any) -> "ScriptedProvider":
        """A copy serving ``source`` instead (``--replies FILE``)."""
        twin = self.fork()
        twin._replies = load_replies(source, base=Path.cwd())
        return twin

    def _next(self, agent: str) -> tuple[Any, int, int]:
        if isinstance(self._replies, dict):
            key, pool = agent, self._replies.get(agent)
            if pool is None:
                raise ScriptExhaustedError(
                    f"{type(self).__name__} has no replies for agent {agent}; add a list named {agent!r} "
                    f"(it has: {', '.join(sorted(self._replies)) or 'none'})", agent=agent)
        else:
            key, pool = "", self._replies
        i = self._cursor.get(key, 0)
        if i >= len(pool):
            raise ScriptExhaustedError(
                f"{type(self).__name__} ran out of replies for agent {agent}: it had {len(pool)} and "
                f"{agent} asked for reply {i + 1}; add replies to the script", agent=agent)
        self._cursor[key] = i + 1
        return pool[i], i, len(pool)

    def skip(self, request: ChatRequest, reply: ChatReply) -> None:
        """The reply was served from a journal: the next call gets the reply after it."""
        key = request.agent if isinstance(self._replies, dict) else ""
        self._cursor[key] = self._cursor.get(key, 0) + 1

    async def complete(self, request: ChatRequest) -> ChatReply:
        reply, i, _ = self._next(request.agent)
        content, calls = split_reply(reply, where=f"{type(self).__name__} reply {i + 1} for {request.agent}")
        # Parsed as a model's answer is (think blocks, rescue, call ids), without litellm: an
        # offline run never waits seconds for it to import. Its tokens are estimated as those of every reply
        # that says no usage are, and marked so.
        return with_estimated_usage(request, model_reply(
            request, content, [ToolCall(name=c["name"], args=c["args"]) for c in calls],
            rescue=self.rescue_tool_calls, model="scripted"))
