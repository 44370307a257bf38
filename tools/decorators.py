"""``@tool``: a typed, documented function becomes a ``Tool``.

The parameters schema is derived from the signature and the descriptions from
the docstring, so a tool's contract with the model cannot drift from the code
that serves it (as in openai-agents' ``function_schema`` and pydantic-ai's
tools, without pydantic). Only types with an exact JSON Schema are accepted;
anything else is refused when the module is imported, not when a model calls.

    @tool(timeout_s=5)
    def city_population(city: str, year: int | None = None) -> dict:
        '''Population of a city.

        Args:
            city: The city's English name.
            year: Census year; the latest when omitted.
        '''
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, Required, Union, get_args, get_origin, overload

from tools import docstrings
from tools.base import CacheScope, Handler, SideEffects, Tool, ToolContext, ToolPolicy, ToolPool
from tools.sandbox_limits import SandboxLimits

Converter = Callable[[Any], Any]

_SUPPORTED = (
    "str, int, float, bool, Literal[...], list[X], dict[str, X], X | None, "
    "TypedDict and dataclass classes, Annotated[X, 'description']"
)
_PRIMITIVES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_LITERAL_TYPES: dict[type, str] = {str: "string", int: "integer", bool: "boolean"}


# "No default to show": unlike None, which is a JSON default (null).
_UNSET: Any = object()


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class _Shape:
    """The JSON Schema of one Python type, and how a validated JSON value becomes that type."""

    schema: dict[str, Any]
    convert: Converter = _identity
    # None is allowed: such a parameter may be omitted and is then passed None.
    nullable: bool = False


@dataclass(frozen=True)
class _Field:
    """One property of an object: a function parameter or a dataclass/TypedDict field."""

    name: str
    shape: _Shape
    required: bool
    # Omitted, it is passed None (an ``X | None`` without a default).
    fill_none: bool = False
    # The default shown to the model; _UNSET when there is none to show.
    default: Any = None


@overload
def tool(name: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    name: str | None = None,
    description: str | None = None,
    *,
    timeout_s: float = ...,
    max_attempts: int = ...,
    backoff_initial_s: float = ...,
    backoff_max_s: float = ...,
    side_effects: SideEffects = ...,
    requires_approval: bool = ...,
    pool: ToolPool = ...,
    cache_ttl_s: float = ...,
    cache_scope: CacheScope = ...,
    sandbox: SandboxLimits | None = ...,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    name: str | Callable[..., Any] | None = None,
    description: str | None = None,
    *,
    timeout_s: float = ToolPolicy.timeout_s,
    max_attempts: int = ToolPolicy.max_attempts,
    backoff_initial_s: float = ToolPolicy.backoff_initial_s,
    backoff_max_s: float = ToolPolicy.backoff_max_s,
    side_effects: SideEffects = ToolPolicy.side_effects,
    requires_approval: bool = ToolPolicy.requires_approval,
    pool: ToolPool = ToolPolicy.pool,
    cache_ttl_s: float = ToolPolicy.cache_ttl_s,
    cache_scope: CacheScope = ToolPolicy.cache_scope,
    sandbox: SandboxLimits | None = ToolPolicy.sandbox,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` of the decorated function (``@tool`` or ``@tool(...)``).

    ``name`` defaults to the function's name and ``description`` to the first
    paragraph of its docstring. A parameter annotated ``ToolContext`` receives
    the call's context; every other parameter is an argument the model gives.
    Unsupported annotations raise ``TypeError`` here, at decoration time.
    """
    policy = ToolPolicy(
        timeout_s=timeout_s,
        max_attempts=max_attempts,
        backoff_initial_s=backoff_initial_s,
        backoff_max_s=backoff_max_s,
        side_effects=side_effects,
        requires_approval=requires_approval,
        pool=pool,
        cache_ttl_s=cache_ttl_s,
        cache_scope=cache_scope,
        sandbox=sandbox,
    )
    if callable(name):  # bare @tool
        return function_tool(name, policy=policy)

    def decorate(func: Callable[..., Any]) -> Tool:
        return function_tool(func, name=name, description=description, policy=policy)

    return decorate


def function_tool(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    policy: ToolPolicy = ToolPolicy(),
) -> Tool:
    """The ``Tool`` for ``func``, as ``@tool`` builds it; usable without decorating."""
    where = getattr(func, "__qualname__", repr(func))
    if not callable(func):
        raise TypeError(f"@tool needs a function, got {func!r}")
    doc = inspect.getdoc(func)
    description = description if description is not None else docstrings.summary(doc)
    if not description.strip():
        raise TypeError(f"{where}: give the tool a description (a docstring or description=...)")
    fields, context_name = _parameters(func, where, docstrings.argument_descriptions(doc))
    return Tool(
        name=name if name is not None else func.__name__,
        description=description,
        parameters=_object_schema(fields),
        handler=_handler(func, fields, context_name),
        policy=policy,
    )


# --- the signature -----------------------------------------------------------


def _parameters(
    func: Callable[..., Any], where: str, documented: dict[str, str]
) -> tuple[list[_Field], str | None]:
    """The model-facing parameters of ``func``, and the name of its context parameter if any."""
    hints = _type_hints(func, where)
    fields: list[_Field] = []
    context_name: str | None = None
    for parameter in inspect.signature(func).parameters.values():
        here = f"{where}: parameter {parameter.name!r}"
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            raise TypeError(f"{here}: *args, **kwargs and positional-only parameters are not supported")
        if parameter.name not in hints:
            raise TypeError(f"{here} needs a type annotation")
        if _unannotated(hints[parameter.name]) is ToolContext:
            if context_name is not None:
                raise TypeError(f"{here}: only one parameter may receive the ToolContext")
            context_name = parameter.name
            continue
        shape = _documented(_shape(hints[parameter.name], here, ()), documented.get(parameter.name))
        fields.append(_field(parameter.name, shape, parameter.default))
    return fields, context_name


def _field(name: str, shape: _Shape, default: Any) -> _Field:
    """A property: required unless it has a default or is nullable (then it defaults to None)."""
    if default is inspect.Parameter.empty or default is dataclasses.MISSING:
        return _Field(name, shape, required=not shape.nullable, fill_none=shape.nullable, default=_UNSET)
    return _Field(name, shape, required=False, default=default)


def _type_hints(owner: Any, where: str) -> dict[str, Any]:
    """Resolved annotations (string ones too), keeping ``Annotated`` metadata."""
    try:
        return typing.get_type_hints(owner, include_extras=True)
    except (NameError, TypeError) as exc:
        raise TypeError(
            f"{where}: cannot resolve the type annotations ({exc}); "
            "types used in them must be importable at module level"
        ) from exc


def _object_schema(fields: list[_Field], description: str | None = None) -> dict[str, Any]:
    """``{"type": "object", ...}`` for ``fields``, closed to other properties."""
    schema: dict[str, Any] = {"type": "object"}
    if description:
        schema["description"] = description
    schema["properties"] = {f.name: _with_default(f) for f in fields}
    required = [f.name for f in fields if f.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _with_default(item: _Field) -> dict[str, Any]:
    """The field's schema, plus ``default`` when the default is plain JSON the model can read."""
    if item.default is _UNSET or not _is_json(item.default):
        return item.shape.schema
    return {**item.shape.schema, "default": item.default}


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


# --- types -------------------------------------------------------------------


def _shape(annotation: Any, where: str, enclosing: tuple[type, ...]) -> _Shape:
    """The schema and converter of one annotation; ``TypeError`` if it has no exact JSON form.

    ``enclosing`` holds the classes being translated, to refuse recursive
    types (a schema would need ``$ref``, which several providers do not accept).
    """
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *metadata = get_args(annotation)
        text = next((item for item in metadata if isinstance(item, str)), None)
        return _described(_shape(inner, where, enclosing), text)
    if annotation in _PRIMITIVES:
        return _primitive(annotation)
    if origin is Literal:
        return _literal(get_args(annotation), where)
    if origin in (Union, types.UnionType):
        return _optional(get_args(annotation), where, enclosing)
    if origin is list:
        return _list(get_args(annotation), where, enclosing)
    if origin is dict:
        return _dict(get_args(annotation), where, enclosing)
    if isinstance(annotation, type) and (typing.is_typeddict(annotation) or dataclasses.is_dataclass(annotation)):
        if annotation in enclosing:
            raise TypeError(f"{where}: recursive type {annotation.__qualname__} is not supported")
        if typing.is_typeddict(annotation):
            return _typeddict(annotation, where, (*enclosing, annotation))
        return _dataclass(annotation, where, (*enclosing, annotation))
    raise TypeError(f"{where}: unsupported type {_show(annotation)}; supported: {_SUPPORTED}")


def _primitive(annotation: type) -> _Shape:
    if annotation is float:
        # JSON has one number type: 3 arrives as int; the function asked for a float.
        return _Shape({"type": "number"}, lambda value: float(value))
    if annotation is int:
        # Draft 2020-12 counts 3.0 as an integer; hand the function a real int.
        return _Shape({"type": "integer"}, lambda value: int(value))
    return _Shape({"type": _PRIMITIVES[annotation]})


def _literal(values: tuple[Any, ...], where: str) -> _Shape:
    """``Literal[...]`` as an ``enum`` (with its ``type`` when all values share one)."""
    for value in values:
        if value is not None and type(value) not in _LITERAL_TYPES:
            raise TypeError(f"{where}: Literal values must be str, int, bool or None, got {value!r}")
    present = [value for value in values if value is not None]
    schema: dict[str, Any] = {}
    kinds = {_LITERAL_TYPES[type(value)] for value in present}
    if len(kinds) == 1:
        schema["type"] = kinds.pop()
    schema["enum"] = present
    shape = _Shape(schema)
    return _nullable(shape) if None in values else shape


def _optional(members: tuple[Any, ...], where: str, enclosing: tuple[type, ...]) -> _Shape:
    """``X | None``: X, or null. Other unions have no exact, convertible form and are refused."""
    others = [member for member in members if member is not type(None)]
    if len(others) != 1 or len(others) == len(members):
        raise TypeError(
            f"{where}: unsupported union {' | '.join(_show(member) for member in members)}; "
            "only X | None is supported"
        )
    return _nullable(_shape(others[0], where, enclosing))


def _nullable(shape: _Shape) -> _Shape:
    """``shape`` also accepting null: ``type: [X, "null"]`` when possible, else ``anyOf``."""
    schema = dict(shape.schema)
    if isinstance(schema.get("type"), str):
        schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
    elif "enum" in schema and "type" not in schema:
        schema["enum"] = [*schema["enum"], None]
    else:
        description = schema.pop("description", None)
        schema = {"anyOf": [schema, {"type": "null"}]}
        if description:
            schema["description"] = description
    inner = shape.convert
    return _Shape(schema, lambda value: None if value is None else inner(value), nullable=True)


def _list(arguments: tuple[Any, ...], where: str, enclosing: tuple[type, ...]) -> _Shape:
    if len(arguments) != 1:
        raise TypeError(f"{where}: give the item type, e.g. list[str]")
    item = _shape(arguments[0], where, enclosing)
    convert = item.convert
    return _Shape({"type": "array", "items": item.schema}, lambda values: [convert(v) for v in values])


def _dict(arguments: tuple[Any, ...], where: str, enclosing: tuple[type, ...]) -> _Shape:
    if len(arguments) != 2 or arguments[0] is not str:
        raise TypeError(f"{where}: only dict[str, X] is supported (JSON object keys are strings)")
    value = _shape(arguments[1], where, enclosing)
    convert = value.convert
    return _Shape(
        {"type": "object", "additionalProperties": value.schema},
        lambda values: {key: convert(v) for key, v in values.items()},
    )


def _typeddict(cls: type, where: str, enclosing: tuple[type, ...]) -> _Shape:
    """A TypedDict as a nested object; the function receives a plain dict, as TypedDicts are."""
    here = f"{where} ({cls.__qualname__})"
    documented = docstrings.argument_descriptions(cls.__doc__)
    fields: list[_Field] = []
    for key, annotation in _type_hints(cls, here).items():
        required, annotation = _requiredness(cls, key, annotation)
        shape = _documented(_shape(annotation, f"{here}.{key}", enclosing), documented.get(key))
        fields.append(_Field(key, shape, required=required, default=_UNSET))
    schema = _object_schema(fields, docstrings.summary(cls.__doc__))
    converters = {item.name: item.shape.convert for item in fields}
    return _Shape(schema, lambda value: {key: converters[key](v) for key, v in value.items()})


def _requiredness(cls: type, key: str, annotation: Any) -> tuple[bool, Any]:
    """Whether a TypedDict key is required, and its annotation without Required/NotRequired.

    Explicit ``Required``/``NotRequired`` wins over ``__required_keys__``, which
    Python 3.11 gets wrong for string (postponed) annotations.
    """
    origin = get_origin(annotation)
    if origin is Required or origin is NotRequired:
        return origin is Required, get_args(annotation)[0]
    return key in cls.__required_keys__, annotation  # type: ignore[attr-defined]


def _dataclass(cls: type, where: str, enclosing: tuple[type, ...]) -> _Shape:
    """A dataclass as a nested object; the function receives an instance."""
    here = f"{where} ({cls.__qualname__})"
    hints = _type_hints(cls, here)
    documented = docstrings.argument_descriptions(cls.__doc__)
    fields: list[_Field] = []
    for item in dataclasses.fields(cls):
        if not item.init:
            continue
        shape = _documented(_shape(hints[item.name], f"{here}.{item.name}", enclosing), documented.get(item.name))
        default = item.default
        if default is dataclasses.MISSING and item.default_factory is not dataclasses.MISSING:
            default = _UNSET  # optional, but no value to show the model
        fields.append(_field(item.name, shape, default))
    schema = _object_schema(fields, _class_summary(cls))

    def convert(value: dict[str, Any]) -> Any:
        return cls(**_keyword_arguments(fields, value))

    return _Shape(schema, convert)


def _class_summary(cls: type) -> str:
    """The class docstring's summary, unless it is the one ``@dataclass`` generates."""
    text = docstrings.summary(cls.__doc__)
    return "" if text.startswith(f"{cls.__name__}(") else text


def _described(shape: _Shape, description: str | None) -> _Shape:
    """``shape`` with ``description`` (from ``Annotated``, which is closest to the type)."""
    if not description:
        return shape
    return dataclasses.replace(shape, schema={**shape.schema, "description": description})


def _documented(shape: _Shape, description: str | None) -> _Shape:
    """``shape`` with the docstring's ``description``, unless ``Annotated`` gave one."""
    return shape if "description" in shape.schema else _described(shape, description)


def _unannotated(annotation: Any) -> Any:
    return get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation


def _show(annotation: Any) -> str:
    return getattr(annotation, "__qualname__", None) or repr(annotation)


# --- the handler ---------------------------------------------------------------


def _keyword_arguments(fields: list[_Field], arguments: dict[str, Any]) -> dict[str, Any]:
    """Validated JSON arguments as Python keyword arguments of the declared types."""
    kwargs: dict[str, Any] = {}
    for item in fields:
        if item.name in arguments:
            kwargs[item.name] = item.shape.convert(arguments[item.name])
        elif item.fill_none:
            kwargs[item.name] = None
    return kwargs


def _handler(func: Callable[..., Any], fields: list[_Field], context_name: str | None) -> Handler:
    """Adapt ``func`` to the ``(arguments, context)`` handler interface the executor calls."""

    def call_arguments(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        kwargs = _keyword_arguments(fields, arguments)
        if context_name is not None:
            kwargs[context_name] = context
        return kwargs

    if inspect.iscoroutinefunction(func):

        async def handler(arguments: dict[str, Any], context: ToolContext) -> Any:
            return await func(**call_arguments(arguments, context))

    else:

        def handler(arguments: dict[str, Any], context: ToolContext) -> Any:  # type: ignore[misc]
            return func(**call_arguments(arguments, context))

    # Keep the function's module and name: the registry names them when two
    # tools clash, and logs and tracebacks read better.
    return functools.update_wrapper(handler, func)
