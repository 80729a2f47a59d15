"""Mutable records without the ``dataclasses`` module: what the commands' start-up path defines (issue 20 item 7).

Why not ``dataclasses``: importing it imports ``inspect``, which imports ``ast``, ``dis``, ``tokenize`` and
``linecache`` (about 8 ms of CPU on Python 3.11, two thirds of a bare interpreter's start-up), and each
``@dataclass`` compiles three or more methods from source (and calls ``inspect.signature`` for a class
without a docstring). ``plan --json`` is measured against ``python -c pass`` (benchmarks/cli_startup.py),
and every command's path reads launches, so the records it fills in step by step (a Launch as it is read,
a Plan as it is built, a report as its findings arrive) are ``record`` classes; its frozen records are
``typing.NamedTuple``.

``record`` keeps a dataclass's class body and behaviour, for what oomguard's records use: annotated fields
in order, plain defaults and ``field(default_factory=...)``, a generated ``__init__`` (one compiled function
per class, the same signature a dataclass has), ``__repr__`` and ``__eq__`` (fields compared as a tuple,
between instances of the same class) and no ``__hash__`` (unhashable, like a dataclass with ``eq``). It has
``replace(obj, **changes)`` as ``dataclasses.replace`` (a new record, the other fields passed as they are),
``record(frozen=True)`` (assigning a field raises; hashable by its fields) and no ``asdict`` or ``fields``:
a record that needs them stays a dataclass (host's facts do). A record's subclass is decorated too (its fields
follow the base's, as a dataclass's do); a dataclass must not subclass a record (it would not see the
base's fields). For type checkers ``record``, ``field`` and
``replace`` *are* ``dataclasses``' own, so the classes are checked as dataclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["field", "record", "replace"]

if TYPE_CHECKING:
    from dataclasses import dataclass as record, field, replace
else:
    class _Factory:
        """``field(default_factory=f)``: each instance gets its own ``f()``."""

        __slots__ = ("make",)

        def __init__(self, make):
            self.make = make

    def field(*, default_factory):
        return _Factory(default_factory)

    _NO_DEFAULT = object()

    def record(cls: type | None = None, *, frozen: bool = False):
        """``@record`` or ``@record(frozen=True)`` (assigning a field raises, as on a frozen dataclass)."""
        if cls is None:
            return lambda c: _build(c, frozen)
        return _build(cls, frozen)

    def _build(cls: type, frozen: bool) -> type:
        # fields: a record base's first (in its order), then this class's own, as a dataclass orders them
        defaults: dict[str, Any] = {}
        for base in reversed(cls.__mro__[1:]):
            defaults.update(base.__dict__.get("__record_defaults__", {}))
        for name in cls.__dict__.get("__annotations__", {}):
            defaults[name] = cls.__dict__.get(name, _NO_DEFAULT)
            if isinstance(defaults[name], _Factory):
                delattr(cls, name)  # no class attribute holding the marker, as a dataclass leaves none
        names = tuple(defaults)
        params, body, env = [], [], {"_set": object.__setattr__}
        seen_default = False
        for i, name in enumerate(names):
            default = defaults[name]
            if default is _NO_DEFAULT:
                if seen_default:
                    raise TypeError(f"record {cls.__qualname__}: field {name} without a default follows one with one")
                params.append(name)
                value = name
            else:
                seen_default = True
                env[f"_d{i}"] = default
                params.append(f"{name}=_d{i}")
                value = f"_d{i}.make() if {name} is _d{i} else {name}" if isinstance(default, _Factory) else name
            body.append(f"_set(self, {name!r}, {value})" if frozen else f"self.{name} = {value}")
        source = f"def __init__(self, {', '.join(params)}):\n    " + ("\n    ".join(body) or "pass")
        exec(source, env)  # one small function per class, a dataclass's __init__ (positional or keyword)
        init = env["__init__"]
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        cls.__init__ = init
        cls.__record_fields__ = names
        cls.__record_defaults__ = defaults
        cls.__match_args__ = names
        # like a dataclass, a method the class defines itself is kept
        for attr, method in (("__repr__", _repr), ("__eq__", _eq)):
            if attr not in cls.__dict__:
                setattr(cls, attr, method)
        if "__hash__" not in cls.__dict__ or cls.__dict__["__hash__"] is None:
            cls.__hash__ = _hash if frozen else None  # eq without frozen: unhashable, as a dataclass is
        if frozen:
            cls.__setattr__ = _refuse
            cls.__delattr__ = _refuse
        return cls

    def _refuse(self, name, *value):
        raise AttributeError(f"cannot assign to field {name!r} of frozen {type(self).__qualname__}")

    def _hash(self) -> int:
        return hash(_values(self))

    def replace(obj, **changes):
        return type(obj)(**{n: changes.pop(n) if n in changes else getattr(obj, n) for n in obj.__record_fields__},
                         **changes)  # a name that is not a field: the TypeError __init__ raises

    def _values(self) -> tuple:
        return tuple(getattr(self, n) for n in self.__record_fields__)

    def _repr(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__record_fields__)
        return f"{type(self).__qualname__}({inner})"

    def _eq(self, other: Any):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _values(self) == _values(other)
