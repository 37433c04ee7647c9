"""The project's error type for bad input, and the checks every input boundary shares.

Every boundary netlab reads from (command-line options, spec strings such as
``leafspine,racks=4``, topology YAML and Crux CSV files, trace files) turns a
bad input into one :class:`InputError` whose message names the file, the line
or field, and what is allowed, before anything is written. The parsers raise
subclasses (:class:`netlab.spec.SpecError`, :class:`netlab.topology.TopologyError`,
:class:`netlab.traces.TraceError`), so ``except InputError`` catches them all;
they are ``ValueError``\\ s too, as before. Anything else escaping a parser is a bug
(``tests/test_fuzz_inputs.py`` fuzzes them for that).

A name looked up in a registry (a policy, a network model, a communication
pattern, a zoo model) that is not there is an :class:`UnknownNameError`, from
``Registry.get`` and from every schema field that holds such a name alike: an
``InputError``, and a ``KeyError`` for callers that look names up.

Parameters of builders and loaders are checked with pydantic against the
function's own annotated signature (:func:`checked`), so the signature is the
schema: a fraction for an integer, NaN or infinity for a rate, a misspelt key
(listing the valid keys) are refused there, whoever calls the function.
Configuration objects (``SimConfig``, a sweep cell's parameters) are
:class:`Schema` models: pydantic models whose errors are ``InputError``\\ s.

A bad value is quoted in a message through :func:`short`, a bounded prefix of
its ``repr``: a value can be a 128 KiB field or a YAML structure of nested
aliases whose whole ``repr`` would not fit in memory.

Text files are read through :func:`read_text`, which checks the size before
reading and reports undecodable bytes with their line.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import reprlib
from pathlib import Path
from typing import Annotated, Any, Callable, ClassVar, Literal, get_args, get_origin, get_type_hints

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model
from pydantic_core import PydanticCustomError


class InputError(ValueError):
    """Bad input at a boundary; the message names the file, the line or field, and what is allowed."""


class UnknownNameError(InputError, KeyError):
    """A name that is not registered (policy, network model, pattern, zoo model...); also a ``KeyError``."""

    __str__ = BaseException.__str__  # the message as written, not KeyError's quoted repr of it


def unknown_name(what: str, value, allowed, field: str | None = None) -> str:
    """The one wording of an unknown name: ``field 'policy': unknown ordering policy 'x'; allowed: a, b``."""
    head = f"field {field!r}: " if field else ""
    return f"{head}unknown {what} {short(value)}; allowed: {', '.join(allowed)}"


_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlevel = 2
_repr.maxlist = _repr.maxtuple = _repr.maxdict = 4


def short(value) -> str:
    """A bounded ``repr`` for messages (a value can be a 128 KiB field or a deeply nested YAML structure)."""
    try:
        return _repr.repr(value)
    except Exception:  # noqa: BLE001 - a repr that fails must not hide the real error
        return f"<{type(value).__name__}>"


# -- annotated types: the allowed values, said once ---------------------------------------------------------------

def not_bool(value):
    """A yes/no value is not a number (pydantic would take True as 1)."""
    if isinstance(value, bool):
        raise ValueError("is a yes/no value, not a number")
    return value


def _finite(value):
    not_bool(value)
    number = value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value  # pydantic says "is not a number"
    if isinstance(number, float) and not math.isfinite(number):
        raise ValueError("is not finite (NaN and infinity are not allowed)")
    return value


def _label(value):
    """Labels may be written as numbers (``name: 2024``); anything else must already be a string."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def Int(ge: int | None = None, le: int | None = None, what: str | None = None):
    """An integer (2.0 and "2" are 2; 2.5, "abc" and yes/no are refused) within ``[ge, le]``."""
    bounds = [f">= {ge}" if ge is not None else None, f"<= {le:,}" if le is not None else None]
    text = what or " ".join(["an integer", " and ".join(b for b in bounds if b)]).strip()
    return Annotated[int, BeforeValidator(not_bool), Field(ge=ge, le=le, description=text)]


def Float(gt: float | None = None, ge: float | None = None, le: float | None = None, what: str | None = None,
          lt: float | None = None):
    """A finite number (NaN and infinity are refused) within the bounds."""
    num = lambda x: f"{int(x):,}" if float(x).is_integer() else f"{x:,}"  # noqa: E731
    bounds = [f"> {num(gt)}" if gt is not None else None, f">= {num(ge)}" if ge is not None else None,
              f"< {num(lt)}" if lt is not None else None, f"<= {num(le)}" if le is not None else None]
    text = what or " ".join(["a finite number", " and ".join(b for b in bounds if b)]).strip()
    return Annotated[float, BeforeValidator(_finite),
                     Field(gt=gt, ge=ge, lt=lt, le=le, allow_inf_nan=False, description=text)]


#: a free-form label (topology name, ...): a string or a number written as one, at most 200 characters
Label = Annotated[str, BeforeValidator(_label), Field(max_length=200, description="a text label of at most 200 "
                                                                                   "characters")]

#: a name that may end up in a file path (a Gavel VC, a workload set): the topology's name pattern
Name = Annotated[str, BeforeValidator(_label),
                 Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
                       description="a name: a letter or digit, then letters, digits, '_', '.' or '-' "
                                   "(at most 64 characters)")]

# -- checking a function's parameters ------------------------------------------------------------------------------

_REASONS = {
    "int_from_float": "is not a whole number",
    "int_parsing": "is not an integer",
    "int_type": "is not an integer",
    "float_parsing": "is not a number",
    "float_type": "is not a number",
    "finite_number": "is not finite",
    "string_type": "is not text",
    "literal_error": "is not one of the allowed values",
    "extra_forbidden": "is not a known field",
    "string_pattern_mismatch": "does not match the allowed pattern",
    "list_type": "is not a list",
    "dict_type": "is not a mapping",
    "model_type": "is not a mapping",
    "model_attributes_type": "is not a mapping",
    "bool_type": "is not true or false",
    "bool_parsing": "is not true or false",
}
_BOUNDS = {"greater_than": ("gt", ">"), "greater_than_equal": ("ge", ">="), "less_than": ("lt", "<"),
           "less_than_equal": ("le", "<=")}


def reason(err: dict) -> str:
    """A pydantic error as a predicate: ``is not a whole number``, ``must be >= 1``, ..."""
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in _REASONS:
        return _REASONS[kind]
    if kind in _BOUNDS:
        key, op = _BOUNDS[kind]
        return f"must be {op} {ctx.get(key)}"
    if kind in ("string_too_long", "too_long"):
        return f"is too long (at most {ctx.get('max_length')})"
    if kind == "value_error":  # our own BeforeValidators
        return str(ctx.get("error", err["msg"]))
    return err["msg"][:1].lower() + err["msg"][1:]


def loc_text(loc: tuple) -> str:
    """``('hosts', 3, 'gpus')`` -> ``hosts[3].gpus``."""
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc))


def describe_errors(exc: ValidationError, model=None, where=lambda loc: None) -> str:
    """Each problem as ``field 'x' <reason>, got <value> (allowed: <...>)``, joined by ``; ``.

    ``model`` gives the allowed values (its fields' descriptions); ``where(loc)`` an
    optional note such as a file line; an unknown key is listed with the known ones.
    """
    lines = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        # the entry, then its field: hosts[3]: field 'gpus'
        cut = max((i for i, p in enumerate(loc) if isinstance(p, str)), default=0)
        entry, field = loc_text(loc[:cut]), loc_text(loc[cut:])
        entry = f"{entry}: " if entry else ""
        note = where(loc)
        note = f" at {note}" if note else ""
        if err["type"] in ("missing", "missing_argument"):
            lines.append(f"{entry}missing field {field!r}{note}")
            continue
        if err["type"] == "unknown_name":
            ctx = err.get("ctx") or {}
            lines.append(entry + unknown_name(ctx.get("what", "name"), err.get("input"), [ctx.get("allowed", "")],
                                              field or None) + note)
            continue
        text = f"{entry}field {field!r} {reason(err)}" if field else f"{entry}value {reason(err)}"
        text += f", got {short(err.get('input'))}{note}"
        hint = field_hint(model, loc) if model is not None else None
        owner = _model_at(model, loc[:-1]) if model is not None else None
        if err["type"] == "extra_forbidden" and owner is not None:
            text += " (known fields: " + ", ".join(owner.model_fields) + ")"
        elif hint:
            text += f" (allowed: {hint})"
        lines.append(text)
    return "; ".join(lines)


def _model_at(model, loc: tuple):
    """The pydantic model that holds the fields at ``loc`` (lists skipped)."""
    for part in loc:
        if isinstance(part, int):
            continue
        info = getattr(model, "model_fields", {}).get(part)
        model = _inner_model(info.annotation) if info is not None else None
        if model is None:
            return None
    return model


def field_hint(model, loc: tuple) -> str | None:
    """The allowed values of ``loc`` in a pydantic ``model`` (its Field description), following nested models."""
    current = model
    hint = None
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return hint if part is loc[-1] else None
        info = fields[part]
        hint = info.description or _literal_hint(info.annotation) or _nested_hint(info.annotation)
        current = _inner_model(info.annotation)
    return hint


def _nested_hint(annotation) -> str | None:
    """The description inside ``Optional[Annotated[..., Field(description=...)]]``."""
    for arg in get_args(annotation):
        for meta in getattr(arg, "__metadata__", ()):
            if getattr(meta, "description", None):
                return meta.description + (" or empty" if type(None) in get_args(annotation) else "")
        hint = _literal_hint(arg)
        if hint:
            return hint
    return None


def _literal_hint(annotation) -> str | None:
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(annotation))
    return None


def _inner_model(annotation):
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    for arg in get_args(annotation):
        inner = _inner_model(arg)
        if inner is not None:
            return inner
    return None


def checked(error: type[InputError], what: str, skip: tuple[str, ...] = ()) -> Callable:
    """Decorate a builder or loader so every call checks its parameters against its annotated signature.

    Unknown keyword arguments name the valid keys; each bad value is reported
    with its field, the value given and the allowed values (the annotation's
    description), as one ``error``. Parameters in ``skip`` are passed through.
    """

    def deco(func):
        @functools.lru_cache(maxsize=1)
        def schema():
            """(signature, checked fields, known names, model): made at the first call, not at import (start-up)."""
            sig = inspect.signature(func)
            hints = get_type_hints(func, include_extras=True)  # evaluates string annotations (PEP 563)
            fields = {}
            for name, p in sig.parameters.items():
                if name in skip or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                    continue
                fields[name] = (hints.get(name, Any), ... if p.default is p.empty else p.default)
            model = create_model(f"{func.__name__}_params",
                                 __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True), **fields)
            return sig, fields, sorted(fields) + sorted(skip), model

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            sig, fields, known, model = schema()
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as exc:
                unknown = sorted(set(kwargs) - set(sig.parameters))
                if unknown:
                    raise error(f"{what}: unknown parameter(s) {', '.join(repr(u) for u in unknown)}; "
                                f"known: {', '.join(known)}") from None
                raise error(f"{what}: {exc}; known parameters: {', '.join(known)}") from None
            given = {k: v for k, v in bound.arguments.items() if k in fields}
            try:
                values = model.model_validate(given)
            except ValidationError as exc:
                raise error(f"{what}: " + describe_errors(exc, model)) from None
            bound.arguments.update({k: getattr(values, k) for k in given})
            return func(*bound.args, **bound.kwargs)

        return wrapper

    return deco


# -- configuration models -----------------------------------------------------------------------------------------

def registered(registry: Callable[[], Any], nullable: bool = False):
    """A field holding a name of ``registry()`` (called when a value is checked, so the registry's modules are
    imported only then); ``nullable``: None too (the default choice). Anything else is an ``unknown_name`` error,
    which :class:`Schema` raises as :class:`UnknownNameError` naming the field and the registered names."""

    def check(value):
        if value is None and nullable:
            return None
        reg = registry()
        if isinstance(value, str) and value in reg:
            return value
        allowed = ", ".join(reg.names()) + (", or null for the default" if nullable else "")
        raise PydanticCustomError("unknown_name", "unknown {what}", {"what": reg.what, "allowed": allowed})

    return Annotated[(str | None) if nullable else str, BeforeValidator(check)]


class Schema(BaseModel):
    """A configuration model at an input boundary: pydantic validation whose failures are one :class:`InputError`
    (:attr:`error`; :class:`UnknownNameError` when a registered name is unknown) naming every bad field, the value
    (bounded) and what is allowed. Built, parsed (:meth:`parse`) or assigned to: checked every time."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, arbitrary_types_allowed=True)
    #: the error class of a bad field (a subclass of InputError)
    error: ClassVar[type[InputError]] = InputError

    def __init__(self, /, **data):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise type(self).input_error(exc) from None

    # as pydantic's own RootModel does: model_validate keeps pydantic's init (this one only wraps its errors)
    __init__.__pydantic_base_init__ = True

    def __setattr__(self, name, value):
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise type(self).input_error(exc) from None

    @classmethod
    def model_validate(cls, obj, *, where: str | None = None, **options):
        """pydantic's ``model_validate``, failing with one :class:`InputError`; ``where`` names the source."""
        try:
            return super().model_validate(obj, **options)
        except ValidationError as exc:
            raise cls.input_error(exc, where) from None

    @classmethod
    def parse(cls, data, where: str | None = None, strict: bool | None = None):
        """``data`` (a mapping) as this model; ``where`` names the source in the message (a file)."""
        return cls.model_validate(data, where=where, strict=strict)

    @classmethod
    def input_error(cls, exc: ValidationError, where: str | None = None) -> InputError:
        names = any(e["type"] == "unknown_name" for e in exc.errors(include_url=False))
        return (UnknownNameError if names else cls.error)(f"{where or cls.__name__}: {describe_errors(exc, cls)}")


# -- text files -----------------------------------------------------------------------------------------------------

def read_text(path, error: type[InputError], max_bytes: int, what: str = "file") -> str:
    """The UTF-8 text of ``path``, refusing before reading a file over ``max_bytes`` and naming the line of any
    byte that is not UTF-8 (a binary or Latin-1 file); every failure is one ``error`` naming the file."""
    from .fileio import NotRegularFile, open_regular

    path = Path(path)
    try:
        with open_regular(path) as fh:  # a FIFO or a device is refused, not read (it would block or never end)
            size = os.fstat(fh.fileno()).st_size
            if size > max_bytes:
                raise error(f"{path}: {what} is {size:,} bytes, over the limit of {max_bytes:,} bytes")
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (IsADirectoryError, NotRegularFile) as exc:
        kind = getattr(exc, "kind", "a directory")
        raise error(f"{path}: is {kind}, expected a {what} (a regular file)") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:  # grew while being read, or a special file with no size
        raise error(f"{path}: {what} is over the limit of {max_bytes:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{path}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); "
                    f"a {what} must be UTF-8 (save it as UTF-8, not Latin-1 or a binary format)") from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise error(f"{path}, line {line}: NUL byte; a {what} must be text (UTF-8)")
    return text


def finite(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
