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
from functools import cache
from typing import Any

from pydantic import BaseModel

_setattr = object.__setattr__


def _builder(cls: type) -> Callable[[dict[str, Any]], Any]:
    template: dict[str, Any] = {}
    factories = []
    for name, info in cls.model_fields.items():
        if info.default_factory is not None:
            factories.append((name, _factory(info.default_factory)))
        template[name] = None if info.is_required() or info.default_factory is not None else info.default
    size = len(template)
    new = cls.__new__

    def build(fields: dict[str, Any]) -> Any:
        values = {**template, **fields}
        if len(values) != size:
            raise TypeError(f"{cls.__name__} has no field(s) {sorted(set(fields) - set(template))}")
        if factories:
            for name, factory in factories:
                if name not in fields:
                    values[name] = factory()
        obj = new(cls)
        _setattr(obj, "__dict__", values)
        _setattr(obj, "__pydantic_fields_set__", set(fields))
        _setattr(obj, "__pydantic_extra__", None)
        _setattr(obj, "__pydantic_private__", None)
        return obj

    return build


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


# The builder of a class: ``builder_for(cls)(fields)`` is ``cls(**fields)`` without validation
# (``fields``, as given, is the model's fields set). Made once per class.
builder_for: Callable[[type], Callable[[dict[str, Any]], Any]] = cache(_builder)


def build(cls: type, fields: dict[str, Any]) -> Any:
    """``cls(**fields)`` without validation (``fields``, as given, is the model's fields set)."""
    return builder_for(cls)(fields)


def copy_with(model: Any, update: dict[str, Any]) -> Any:
    """``model.model_copy(update=update)``, without its generic copying of each slot when the
    model has only fields (no extra or private attributes: the runtime's own classes)."""
    cls = type(model)
    if model.__pydantic_extra__ is not None or model.__pydantic_private__ is not None \
            or cls.model_config.get("extra") == "allow":
        return model.model_copy(update=update)
    obj = cls.__new__(cls)
    _setattr(obj, "__dict__", {**model.__dict__, **update})
    _setattr(obj, "__pydantic_fields_set__", model.__pydantic_fields_set__ | update.keys())
    _setattr(obj, "__pydantic_extra__", None)
    _setattr(obj, "__pydantic_private__", None)
    return obj
