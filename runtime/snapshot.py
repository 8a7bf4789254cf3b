"""TOML snapshots of a run's state, and starting a new run from one.

A snapshot holds what the model sees and what the steps exchange: memory,
tasks, history, the workflow state fields and the run's data (``ctx.data``),
folded from the events (so a live run and a journal give the same file)::

    workflow = "RevisaoWorkflow"
    memory = ["userId: 123", "Plano a seguir: ..."]
    tasks = []

    [state]
    aprovado = false
    rodadas = 2

    [data]
    conta_id = "acme"

    [[history]]
    role = "user"
    content = "Escreva sobre ctx.state"

``app.run(snapshot="x.toml")`` (``--from-snapshot``) starts a run with those
buckets and fields instead of the defaults, and with that data (``data=`` given
to the run wins key by key). TOML has no null: the fields set to None are named
in ``state_none`` (``state_none = ["nota"]``), and come back as None; one holding
None inside a list or a table is left out whole (its other items would come back
without it, shifted), and the snapshot says so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from flowtui.runtime.context import DESCRIBED, NON_FINITE_WORDS
from flowtui.runtime.errors import ConfigError
from flowtui.runtime.files import SNAPSHOT_KEYS, not_text, write_atomic
from flowtui.runtime.messages import Message
from flowtui.runtime.secrets import Redactor

KEYS = SNAPSHOT_KEYS  # what a snapshot holds (runtime.files checks a file it would replace by them)


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value if v is not None]
    return value


def _holds_described(value: Any) -> bool:
    """A list or table holding, at any depth, a value flowtui could only describe."""
    if isinstance(value, dict):
        return any(_holds_described(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_described(v) for v in value)
    return isinstance(value, str) and bool(DESCRIBED.search(value))


def _holds_none(value: Any) -> bool:
    if isinstance(value, dict):
        return any(v is None or _holds_none(v) for v in value.values())
    if isinstance(value, list):
        return any(v is None or _holds_none(v) for v in value)
    return False


def left_out(view: Any) -> list[tuple[str, str]]:
    """The state fields a snapshot of ``view`` leaves out, with why: flowtui could only describe their
    values (bytes that are no text, an object with no JSON form: a snapshot holding the description
    could not be loaded back), or they hold None inside (``[1, None, 2]`` came back as ``[1, 2]``,
    saying nothing). They start at their defaults."""
    gone = []
    for name, value in view.state.items():
        if _holds_described(value):  # (a lock inside a list came back as its repr too)
            gone.append((name, "flowtui could only describe it"))
        elif value == SECRET_MASK:  # (loaded back, the secret was the mask, silently)
            gone.append((name, "a SecretStr's value is never shown, only its mask"))
        elif _holds_none(value):
            gone.append((name, "it holds None, which TOML cannot write"))
    return gone


def left_out_said(gone: list[tuple[str, str]]) -> str:
    """``raw (flowtui could only describe it), l (it holds None, ...)``."""
    return ", ".join(f"{name} ({why})" for name, why in gone)


def snapshot_toml(view: Any, gone: list[tuple[str, str]] | None = None) -> str:
    """The TOML text of a :class:`~flowtui.runtime.fold.RunView`'s current state, credentials redacted;
    ``gone``: its :func:`left_out`, when the caller has it."""
    import tomli_w

    history = [m.model_dump(mode="json", exclude_defaults=True) for m in view.history]
    gone = left_out(view) if gone is None else gone
    skipped = {name for name, _ in gone}
    state = {name: value for name, value in view.state.items() if name not in skipped}
    data = {"workflow": view.workflow or "", "memory": list(view.memory), "tasks": list(view.tasks),
            "state": state, "data": view.data, "history": history}
    nones = [name for name, value in state.items() if value is None]
    if nones:  # (TOML has no null: left out, they came back as their defaults, a non-None one silently)
        data["state_none"] = nones
    from flowtui.runtime.encoding import safe_data

    text = tomli_w.dumps(_drop_none(safe_data(data, Redactor.from_environment())))
    if gone:
        return f"# left out: {left_out_said(gone)}; they start at their defaults\n{text}"
    return text


def write_snapshot(view: Any, path: str | Path) -> tuple[bool, list[tuple[str, str]]]:
    """Write ``view``'s snapshot to ``path`` atomically (owner-only): (whether it replaced a file, the
    state fields it left out and why)."""
    gone = left_out(view)
    return write_atomic(Path(path), snapshot_toml(view, gone)), gone


@dataclass
class Snapshot:
    """What a run starts from: buckets and workflow-state fields."""

    memory: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    history: list[Message] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    workflow: str | None = None
    source: str = "snapshot"  # the file it came from, for error messages


def load_snapshot(path: str | Path) -> Snapshot:
    """Read a snapshot file; errors name the file and the key at fault.

    An empty or partial file (a snapshot cut short by a crash) is refused, not
    read as "start from the defaults".
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"snapshot file not found: {p}") from None
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a folder, not a snapshot file") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read it: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")  # (a BOM an editor put in front is no TOML)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not a snapshot ({not_text(raw, exc)})") from None
    if not text.strip():
        raise ConfigError(f"{p}: empty, not a snapshot; write one with --snapshot-out") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{p}: a value in it is nested too deep to read (arrays or tables inside one "
                          "another hundreds of times); a snapshot flowtui wrote never is") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise ConfigError(f"{p}: a value in it cannot be read ({str(exc).split(';')[0]}); a snapshot "
                          "flowtui wrote never holds one") from None
    unknown = set(data) - set(KEYS)
    if unknown:
        raise ConfigError(f"{p}: unknown key(s) {sorted(unknown)}; a snapshot has workflow, memory, tasks, "
                          "history, state, state_none and data")
    checked: dict[str, Any] = {}
    for key, kind, strict in (("history", list[Message], False), ("memory", list[str], True),
                              ("tasks", list[str], True)):
        try:
            checked[key] = TypeAdapter(kind).validate_python(data.get(key, []), strict=strict)
        except ValidationError as exc:  # named as the file writes it: memory[2], history[0].role
            first = exc.errors()[0]
            where = key + "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in first["loc"])
            what = "a list of messages" if key == "history" else "a list of strings"
            raise ConfigError(f"{p}: {where}: {first['msg']} ({key} is {what})") from None
    history, memory, tasks = checked["history"], checked["memory"], checked["tasks"]
    keys = set(Message.model_fields)  # (a key no message has was dropped in silence: a misspelt one too)
    for i, item in enumerate(data.get("history", [])):
        if isinstance(item, dict) and (odd := sorted(set(item) - keys)):
            raise ConfigError(f"{p}: history[{i}]: a message has no key {odd[0]!r} (it has "
                              f"{', '.join(Message.model_fields)}); fix the file")
    from flowtui.runtime.wellformed import problems

    found = problems(history)
    if found:  # (it failed at the run's first model call, as a history to mend in the app)
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ConfigError(f"{p}: its history is no conversation a model takes: {found[0]}{more}; fix the file")
    state = data.get("state", {})
    if not isinstance(state, dict):
        raise ConfigError(f"{p}: [state] must be a table of field = value")
    nones = data.get("state_none", [])
    if not isinstance(nones, list) or not all(isinstance(name, str) for name in nones):
        raise ConfigError(f"{p}: state_none must be a list of the names of the state fields set to None "
                          '(state_none = ["nota"])')
    if twice := [name for name in nones if name in state]:
        raise ConfigError(f"{p}: state_none names {twice[0]!r}, which [state] gives a value too; keep one of them")
    state = {**state, **dict.fromkeys(nones)}
    run_data = data.get("data", {})
    if not isinstance(run_data, dict):
        raise ConfigError(f"{p}: [data] must be a table of key = value")
    return Snapshot(memory=memory, tasks=tasks, history=history, state=state, data=run_data,
                    workflow=str(data.get("workflow") or "") or None, source=str(p))


def check_workflow(snapshot: Snapshot, workflow: str) -> None:
    """Refuse a snapshot taken from another workflow."""
    if snapshot.workflow and snapshot.workflow != workflow:
        raise ConfigError(f"{snapshot.source}: a snapshot of workflow {snapshot.workflow}, not {workflow}; "
                          "start it with that workflow's flow file")


def _validated_json(adapter: TypeAdapter, value: Any) -> Any:
    """``value`` validated as JSON, strictly; nested deeper than pydantic's parser reads (200 levels, which
    a run's own snapshot may hold), as the Python value it is. A NaN or an infinity inside a list or a
    table, written as the run said it ("Infinity": an event's JSON cannot carry one), is read as the
    number where the field takes no such text (a list[float] holding one refused the run's own snapshot)."""
    try:
        return adapter.validate_json(json.dumps(value, default=str), strict=True)
    except ValidationError as exc:
        if "recursion limit" in str(exc):
            return adapter.validate_python(value, strict=True)
        numbers = _non_finite_numbers(value)
        if numbers is value:
            raise
        try:
            return adapter.validate_json(json.dumps(numbers, default=str), strict=True)
        except ValidationError:
            raise exc from None


def _non_finite_numbers(value: Any) -> Any:
    """``value`` with "NaN", "Infinity" and "-Infinity" inside its lists and tables as numbers (itself
    when it holds none)."""
    if isinstance(value, list):
        items = [_non_finite_numbers(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value)) else value
    if isinstance(value, dict):
        found = {k: _non_finite_numbers(v) for k, v in value.items()}
        return found if any(found[k] is not v for k, v in value.items()) else value
    return NON_FINITE_WORDS.get(value, value) if isinstance(value, str) else value


SECRET_MASK = "**********"  # what a pydantic SecretStr or SecretBytes is shown as, whatever it holds


def _secret(kind: Any) -> bool:
    """A SecretStr or SecretBytes field, also optional (``SecretStr | None``)."""
    from pydantic import SecretBytes, SecretStr

    return kind in (SecretStr, SecretBytes) or any(_secret(arg) for arg in getattr(kind, "__args__", ()))


def apply_state(obj: Any, cls: type, values: dict[str, Any], *, source: str) -> None:
    """Set workflow-state fields from a snapshot, each strictly validated against its type
    (``true`` is not an ``int``, ``"3"`` is not a number), then, for a pydantic state, by the class
    with the fields together (its field and model validators, its constraints)."""
    from flowtui.runtime.observe import field_type, state_fields

    known = state_fields(obj)
    declares = isinstance(obj, BaseModel) or dataclasses.is_dataclass(obj)  # (a plain class's run may add one)
    typed_all: dict[str, Any] = {}
    for name, value in values.items():
        if name not in known and (declares or not name.isidentifier() or name.startswith("_")):
            close = difflib.get_close_matches(name, sorted(known), n=1)
            raise ConfigError(f"{source}: [state] {name}: {cls.__name__} has no field {name!r}; "
                              + (f"did you mean {close[0]!r}? " if close else "")
                              + f"its fields are {', '.join(sorted(known)) or 'none'}")
        if isinstance(value, str) and DESCRIBED.search(value):
            raise ConfigError(f"{source}: [state] {name} = {value[:80]!r}: that is how flowtui described a value it "
                              "could not show or write, not the value; give the field a value of its type, or "
                              "leave the line out for its default")
        if value == SECRET_MASK and _secret(field_type(cls, name)):
            raise ConfigError(f"{source}: [state] {name} = {value!r}: that is the mask pydantic shows for a secret, "
                              "not the secret; leave the line out for its default, or give the secret itself")
        try:
            adapter = TypeAdapter(field_type(cls, name))
            if isinstance(value, str) and value in NON_FINITE_WORDS:  # a NaN or an infinity, as the run said it
                with contextlib.suppress(ValidationError):
                    adapter.validate_python(NON_FINITE_WORDS[value], strict=True)
                    value = NON_FINITE_WORDS[value]
            # Through JSON: strict about scalars, yet a TOML array fills a tuple and a table a model.
            # (a NaN or an infinity, which JSON cannot carry, is validated as it is)
            typed = adapter.validate_python(value, strict=True) if isinstance(value, float) \
                and not math.isfinite(value) else _validated_json(adapter, value)
        except ValidationError as exc:
            first = exc.errors()[0]
            inside = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in first["loc"])
            shown = repr(value)
            shown = shown if len(shown) <= 80 else f"{shown[:79]}… ({len(shown):,} characters)"
            raise ConfigError(f"{source}: [state] {name} = {shown}: {f'{name}{inside}: ' if inside else ''}"
                              f"{first['msg']} (the field is {_type_name(field_type(cls, name))})") from None
        except (ValueError, RecursionError) as exc:  # nested too deep to check
            raise ConfigError(f"{source}: [state] {name}: cannot be read ({type(exc).__name__}); give it a "
                              f"value of its type ({_type_name(field_type(cls, name))})") from None
        typed_all[name] = typed
    if not isinstance(obj, BaseModel):
        for name, typed in typed_all.items():
            setattr(obj, name, typed)
        return
    # The class's own validators too (a snapshot's n = 5 its validator refuses), on the fields together:
    # a model validator relating two (lo <= hi) refused a run's own snapshot checked a field at a time.
    try:
        # (by name: a field with an alias, N for n, was given its default, the snapshot's value dropped)
        whole = cls.model_validate({**{f: getattr(obj, f) for f in cls.model_fields}, **typed_all},
                                   by_alias=False, by_name=True)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(map(str, error["loc"])) or "the fields together"
        why = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        raise ConfigError(f"{source}: [state] {where}: {cls.__name__} refused it: {why}") from None
    for name in typed_all:
        obj.__dict__[name] = getattr(whole, name)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")
