"""Building the runtime's own pydantic objects without validation.

Every turn makes a dozen small pydantic objects (events, the request, the
reply, the assistant message, ``ctx.turn``) from values the runtime already
checked. Validating them again, or ``model_construct`` (which re-resolves
every default on every call), was most of a turn's cost with a fast model
(measured by bench/runtime_bench.py). So each class gets a builder once: its
defaults in declaration order (so objects serialize with their fields as
declared), overlaid with the fields given.

Nothing here checks a value: only build what the runtime made, with values of
the declared types. Only the runtime's own classes are built here, so the
cache holds one entry per class of the runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

# What pydantic's own construction sets on a new model, as the four slots BaseModel declares;
# set through their descriptors (what object.__setattr__ finds for them, without the lookup).
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def _builder(cls: type) -> Callable[[dict[str, Any]], Any]:
    template: dict[str, Any] = {}
    factories = []
    for name, info in cls.model_fields.items():
        if info.default_factory is not None:
            factories.append((name, _factory(info.default_factory)))
        template[name] = None if info.is_required() or info.default_factory is not None else info.default
    size = len(template)
    new = cls.__new__
    # Every field is in the object's __dict__, given or defaulted, so every field counts as set:
    # one set for all the class's objects. Pydantic never changes it in place but to add a field
    # already in it (assigning one on an unfrozen model); a copy made by copy_with keeps it too.
    every = _every[cls] = set(template)

    def build(fields: dict[str, Any]) -> Any:
        values = {**template, **fields}
        if len(values) != size:
            raise TypeError(f"{cls.__name__} has no field(s) {sorted(set(fields) - set(template))}")
        if factories:
            for name, factory in factories:
                if name not in fields:
                    values[name] = factory()
        obj = new(cls)
        _set_dict(obj, values)
        _set_fields_set(obj, every)
        _set_extra(obj, None)
        _set_private(obj, None)
        return obj

    return build


# class -> the fields set its builder gives every object (all of them).
_every: dict[type, set[str]] = {}


def _factory(factory: Callable[[], Any]) -> Callable[[], Any]:
    """A default factory that is a model with nothing to run on construction (``ChatReply.usage``'s
    ``Usage``) makes its default with the model's own builder: the same object, no validation."""
    if isinstance(factory, type) and issubclass(factory, BaseModel):
        found = factory.__pydantic_decorators__
        if not (found.validators or found.field_validators or found.root_validators or found.model_validators
                or factory.__pydantic_post_init__):
            made = builder_for(factory)
            return lambda: made({})
    return factory


class _Builders(dict):
    """class -> its builder, made on first use (a dict: looking one up is one subscript)."""

    def __missing__(self, cls: type) -> Callable[[dict[str, Any]], Any]:
        made = self[cls] = _builder(cls)
        return made


# The builder of a class: ``builders[cls](fields)``, or ``builder_for(cls)(fields)``, is
# ``cls(**fields)`` without validation (every field counts as set).
builders: dict[type, Callable[[dict[str, Any]], Any]] = _Builders()
builder_for: Callable[[type], Callable[[dict[str, Any]], Any]] = builders.__getitem__


def build(cls: type, fields: dict[str, Any]) -> Any:
    """``cls(**fields)`` without validation (every field counts as set)."""
    return builder_for(cls)(fields)


def copy_with(model: Any, update: dict[str, Any]) -> Any:
    """``model.model_copy(update=update)``, without its generic copying of each slot when the
    model has only fields (no extra or private attributes: the runtime's own classes)."""
    cls = type(model)
    if model.__pydantic_extra__ is not None or model.__pydantic_private__ is not None \
            or cls.model_config.get("extra") == "allow":
        return model.model_copy(update=update)
    obj = cls.__new__(cls)
    _set_dict(obj, {**model.__dict__, **update})
    fields_set = model.__pydantic_fields_set__
    _set_fields_set(obj, fields_set if fields_set is _every.get(cls) else fields_set | update.keys())
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


# The classes a field typed ``str | None`` holds: what a quick look at a model made without validation checks
# before asking :func:`bad_fields` (a history append, a provider's reply).
TEXT_OR_NONE = frozenset((str, type(None)))


def bad_fields(model: BaseModel) -> str | None:
    """What a model made without validation (``model_copy(update=...)`` in the flow's code) holds that its
    class refuses: ``content is int 5: Input should be a valid string``; None when it is all as declared."""
    from pydantic import ValidationError

    from flowtui.runtime.errors import safe_repr

    try:
        type(model).model_validate(dict(model.__dict__))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in first["loc"]).lstrip(".")
        value = safe_repr(first.get("input"))
        return f"{where or 'value'} is {type(first.get('input')).__name__} {value}: {first['msg']}"
    return None
