"""Registries of named, frozen-dataclass objects (encodings, normalisers).

A family file defines a frozen dataclass and decorates it with its registry's
``register``; nothing else lists it. Each dataclass field that the user sets carries its
documentation in ``metadata["doc"]`` (and, for a closed set of values, ``metadata["choices"]``),
so that :func:`Registry.parameters` can describe it to a command line or a form.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import MISSING, dataclass, field

from ._validation import DomainError, RenamedError

__all__ = ["Parameter", "Registry", "param", "REQUIRED"]

REQUIRED = MISSING  # the default of a parameter that must be given


def param(default=MISSING, *, doc: str, choices=None, kw_only: bool = False, factory=None):
    """A dataclass field with its documentation (``metadata["doc"]``) and optional ``choices``."""
    meta = {"doc": doc}
    if choices is not None:
        meta["choices"] = tuple(choices)
    if factory is not None:
        return field(default_factory=factory, metadata=meta, kw_only=kw_only)
    return field(default=default, metadata=meta, kw_only=kw_only)


@dataclass(frozen=True)
class Parameter:
    """One constructor parameter of a registered class.

    Attributes
    ----------
    name : str
        The keyword.
    type : object
        The annotated type (e.g. ``float``, ``int``, ``bool``, ``str``, ``float | None``).
    default : object
        The default, or :data:`REQUIRED` (``dataclasses.MISSING``) when it must be given.
    doc : str
        One line a reader can act on (domain included).
    choices : tuple or None
        The admissible values, for a closed set.
    """

    name: str
    type: object
    default: object
    doc: str
    choices: tuple | None = None

    @property
    def required(self) -> bool:
        return self.default is MISSING

    def convert(self, text: str):
        """A command-line string as this parameter's value (``DomainError`` naming it if it does not parse).

        ``float``/``int``: a number; ``bool``: true/false/yes/no/1/0; ``tuple``: comma-separated
        numbers, with ``;`` between heads; anything else (``str``, ``object``): the text itself,
        for the class to validate (an expression is parsed, never evaluated).
        """
        if not isinstance(text, str):
            raise DomainError(self.name, text, "a string to convert")
        kinds = set(typing.get_args(self.type)) or {self.type}
        kinds.discard(type(None))
        t = text.strip()
        try:
            if kinds <= {bool}:
                low = t.lower()
                if low in ("true", "yes", "1"):
                    return True
                if low in ("false", "no", "0"):
                    return False
                raise ValueError(t)
            if kinds <= {int}:
                return int(t)
            if kinds <= {float, int}:
                return float(t)
            if kinds <= {tuple}:
                rows = [tuple(float(x) for x in row.split(",") if x.strip()) for row in t.split(";")]
                return rows[0] if len(rows) == 1 else tuple(rows)
        except ValueError:
            raise DomainError(self.name, text, f"a value of type {self.type}: {self.doc}") from None
        if self.choices is not None and t not in self.choices:
            raise DomainError(self.name, text, f"one of {', '.join(map(str, self.choices))}")
        return t


def renamed_parameters(cls) -> dict:
    """``{old: new}``: the former keyword names a registered class refuses (its ``renamed`` attribute)."""
    return dict(getattr(cls, "renamed", None) or {})


def _refuse_renamed(cls) -> None:
    """Make ``cls(old=...)`` raise :class:`RenamedError` naming the new keyword (not ``TypeError``)."""
    renamed = renamed_parameters(cls)
    if not renamed or getattr(cls.__init__, "_refuses_renamed", False):
        return
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        for old in kwargs:
            if old in renamed:
                raise RenamedError(old, kwargs[old], renamed[old], getattr(cls, "renamed_reason", "") or f"a parameter of {cls.__name__}")
        init(self, *args, **kwargs)

    __init__._refuses_renamed = True
    cls.__init__ = __init__


class Registry:
    """Name -> frozen dataclass, filled by the ``register`` decorator where each class is defined."""

    def __init__(self, kind: str):
        self.kind = kind
        self._classes: dict[str, type] = {}

    def register(self, cls):
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise TypeError(f"{cls.__name__} needs a class attribute 'name' to be registered")
        if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:
            raise TypeError(f"{cls.__name__} must be a frozen dataclass to be registered")
        if name in self._classes and self._classes[name] is not cls:
            raise TypeError(f"{self.kind} name {name!r} registered twice")
        self._classes[name] = cls
        _refuse_renamed(cls)
        return cls

    def names(self) -> tuple:
        return tuple(self._classes)

    def lookup(self, name) -> type:
        if not isinstance(name, str) or name not in self._classes:
            raise DomainError(self.kind, name, f"one of the registered {self.kind}s: {', '.join(self._classes)}")
        return self._classes[name]

    def get(self, name, **params):
        cls = self.lookup(name)
        accepted = {p.name for p in self.parameters(name)}
        for key in params:
            if key in renamed_parameters(cls):
                raise RenamedError(key, params[key], renamed_parameters(cls)[key], getattr(cls, "renamed_reason", "") or f"a parameter of {self.kind} {name!r}")
            if key not in accepted:
                raise DomainError(key, params[key], f"a parameter of {self.kind} {name!r}: one of {', '.join(sorted(accepted))}")
        missing = [p.name for p in self.parameters(name) if p.required and p.name not in params]
        if missing:
            raise DomainError(missing[0], None, f"a value: {self.kind} {name!r} needs {', '.join(missing)}")
        return cls(**params)

    def parameters(self, name) -> tuple:
        cls = self.lookup(name)
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # an annotation that cannot be resolved: fall back to its text
            hints = {}
        out = []
        for f in dataclasses.fields(cls):
            if not f.init or f.name.startswith("_"):
                continue
            if f.default is not MISSING:
                default = f.default
            elif f.default_factory is not MISSING:
                default = f.default_factory()
            else:
                default = MISSING
            out.append(Parameter(f.name, hints.get(f.name, f.type), default, f.metadata.get("doc", ""), f.metadata.get("choices")))
        return tuple(out)
