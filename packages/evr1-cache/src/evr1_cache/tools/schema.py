"""A small JSON-schema checker for tool arguments: the subset tool schemas use (objects, numbers, strings, arrays).

Why our own: model outputs are adversarial, a call's arguments are checked before any tool code runs, and the answer
must be one short sentence the model can act on ("argument 'end' must be a number"), not a validator's traceback.
Supported keywords: type, properties, required, additionalProperties (false), minimum, maximum, enum, items,
minItems, maxItems, description (ignored). `check_schema` refuses a schema using anything else, at registration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["SchemaError", "check_arguments", "check_schema"]

_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "minimum", "maximum", "enum", "items", "minItems",
     "maxItems", "description"}
)  # fmt: skip
_TYPES = frozenset({"object", "number", "integer", "string", "array", "boolean"})


class SchemaError(ValueError):
    """Arguments that do not fit a tool's schema; the message is what the model is told."""


def check_schema(schema: Mapping[str, Any], where: str = "schema") -> None:
    """Refuse a schema this checker cannot enforce (so a registered tool never silently accepts anything)."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where} must be a JSON object, got {type(schema).__name__}")
    unknown = sorted(set(schema) - _KEYWORDS)
    if unknown:
        raise ValueError(f"{where}: unsupported keyword(s) {unknown} (supported: {', '.join(sorted(_KEYWORDS))})")
    kind = schema.get("type")
    if kind not in _TYPES:
        raise ValueError(f"{where}: type must be one of {sorted(_TYPES)}, got {kind!r}")
    for name, sub in dict(schema.get("properties", {})).items():
        check_schema(sub, f"{where}.properties.{name}")
    if "items" in schema:
        check_schema(schema["items"], f"{where}.items")
    missing = [r for r in schema.get("required", ()) if r not in schema.get("properties", {})]
    if missing:
        raise ValueError(f"{where}: required {missing} are not among the properties")


def check_arguments(schema: Mapping[str, Any], value: object, name: str = "arguments") -> None:
    """SchemaError naming the first argument that does not fit `schema` (checked by `check_schema`)."""
    kind = schema["type"]
    if kind == "object":
        _object(schema, value, name)
    elif kind in ("number", "integer"):
        _number(schema, value, name, integer=kind == "integer")
    elif kind == "string":
        if not isinstance(value, str):
            raise SchemaError(f"{name} must be a string")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise SchemaError(f"{name} must be true or false")
    else:
        _array(schema, value, name)
    if "enum" in schema and value not in schema["enum"]:
        raise SchemaError(f"{name} must be one of {list(schema['enum'])}")


def _object(schema: Mapping[str, Any], value: object, name: str) -> None:
    if not isinstance(value, Mapping):
        raise SchemaError(f"{name} must be a JSON object")
    props: Mapping[str, Any] = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in value:
            raise SchemaError(f"missing argument {key!r}")
    if schema.get("additionalProperties", True) is False:
        extra = sorted(str(k) for k in value if k not in props)
        if extra:
            raise SchemaError(f"unknown argument(s) {extra[:3]}; known: {', '.join(props)}")
    for key, sub in props.items():
        if key in value and value[key] is not None:
            check_arguments(sub, value[key], f"argument {key!r}")


def _number(schema: Mapping[str, Any], value: object, name: str, *, integer: bool) -> None:
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or (integer and not float(value).is_integer())
    ):
        raise SchemaError(f"{name} must be {'an integer' if integer else 'a number'}")
    number = float(value)
    if "minimum" in schema and number < schema["minimum"]:
        raise SchemaError(f"{name} must be >= {schema['minimum']}")
    if "maximum" in schema and number > schema["maximum"]:
        raise SchemaError(f"{name} must be <= {schema['maximum']}")


def _array(schema: Mapping[str, Any], value: object, name: str) -> None:
    if not isinstance(value, list):
        raise SchemaError(f"{name} must be a JSON array")
    if "minItems" in schema and len(value) < schema["minItems"]:
        raise SchemaError(f"{name} needs at least {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        raise SchemaError(f"{name} takes at most {schema['maxItems']} items")
    if "items" in schema:
        for i, item in enumerate(value):
            check_arguments(schema["items"], item, f"{name}[{i}]")
