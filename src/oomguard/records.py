"""Mutable records without the ``dataclasses`` module: what the commands' start-up path defines (issue 20 item 7).

Why not ``dataclasses``: importing it imports ``inspect``, which imports ``ast``, ``dis``, ``tokenize`` and
``linecache`` (about 8 ms of CPU on Python 3.11, two thirds of a bare interpreter's start-up), and each
``@dataclass`` compiles three or more methods from source (and calls ``inspect.signature`` for a class
without a docstring). ``plan --json`` is measured against ``python -c pass`` (benchmarks/cli_startup.py),
and every command's path reads launches, so the records it fills in step by step (a Launch as it is read,
a Plan as it is built, a report as its findings arrive) are ``record`` classes; its frozen records are
``typing.NamedTuple``.

``record`` keeps a dataclass's class body and behaviour, for what oomguard's records use: annotated fields
in order, plain defaults and ``field(default=..., default_factory=..., repr=..., compare=...)``,
``__post_init__``, ``slots=True``, a generated ``__init__`` (one compiled function
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

__all__ = ["NamedTuple", "field", "record", "replace"]

# typing's own constant without importing typing: plan's path uses typing's names in annotations only, which
# ``from __future__ import annotations`` leaves as strings, so importing typing (~2.5 ms with contextlib on
# Python 3.11) would buy nothing at run time. mypy and pyright read a module's own ``TYPE_CHECKING`` as True.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from dataclasses import dataclass as record, field, replace
    from typing import Any, NamedTuple
else:
    import collections

    # typing.NamedTuple's class syntax (fields, defaults, docstring, methods), made by collections.namedtuple
    # as typing's is, without typing's check of each annotation: with ``from __future__ import annotations``
    # every annotation is a string that typing compiles into a ForwardRef (~8 us a field, ~100 us a class;
    # plan's path defines 30 of them). The class made is the same: a tuple subclass with _fields, _replace,
    # _asdict, the field docstrings and __annotations__ as written.
    _NOT_COPIED = frozenset({"__module__", "__qualname__", "__annotations__", "__dict__", "__weakref__"})
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults",
                             "_make", "_replace", "_asdict", "_source"})

    class _NamedTupleMeta(type):
        def __new__(mcls, name, bases, ns):
            if bases != (_NamedTupleBase,):
                raise TypeError("a NamedTuple class has NamedTuple as its only base")
            annotations = ns.get("__annotations__", {})
            defaults = []
            for field_name in annotations:
                if field_name in ns:
                    defaults.append(ns[field_name])
                elif defaults:
                    raise TypeError(f"{name}: field {field_name} without a default follows one with a default")
            cls = collections.namedtuple(name, tuple(annotations), defaults=defaults, module=ns["__module__"])
            cls.__qualname__ = ns.get("__qualname__", name)
            cls.__annotations__ = dict(annotations)
            for key, value in ns.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"{name}: cannot overwrite NamedTuple attribute {key}")
                if key not in _NOT_COPIED and key not in cls._fields:
                    setattr(cls, key, value)
            return cls

    _NamedTupleBase = type.__new__(_NamedTupleMeta, "NamedTuple", (), {})

    def NamedTuple(*args, **kwargs):  # noqa: N802  (the class statement's base, as typing's)
        raise TypeError("oomguard.records.NamedTuple is a base class only (class X(NamedTuple): ...)")

    NamedTuple.__mro_entries__ = lambda bases: (_NamedTupleBase,)

    _NO_DEFAULT = object()

    class _Field:
        """``field(...)``: a default made per instance (``default_factory``), or a field left out of the
        repr or of comparisons."""

        __slots__ = ("default", "factory", "repr", "compare")

        def __init__(self, default, factory, repr, compare):
            self.default, self.factory, self.repr, self.compare = default, factory, repr, compare

    def field(*, default=_NO_DEFAULT, default_factory=None, repr=True, compare=True):
        return _Field(default, default_factory, repr, compare)

    def record(cls: type | None = None, *, frozen: bool = False, slots: bool = False):
        """``@record``, ``@record(frozen=True)`` (assigning a field raises, as on a frozen dataclass) or
        ``@record(slots=True)`` (instances without a ``__dict__``)."""
        if cls is None:
            return lambda c: _build(c, frozen, slots)
        return _build(cls, frozen, slots)

    def _build(cls: type, frozen: bool, slots: bool) -> type:
        # fields: a record base's first (in its order), then this class's own, as a dataclass orders them
        spec: dict[str, _Field] = {}
        for base in reversed(cls.__mro__[1:]):
            spec.update(base.__dict__.get("__record_spec__", {}))
        own = tuple(cls.__dict__.get("__annotations__", {}))
        for name in own:
            value = cls.__dict__.get(name, _NO_DEFAULT)
            spec[name] = value if isinstance(value, _Field) else _Field(value, None, True, True)
            if isinstance(value, _Field):  # the class attribute is the plain default, or none (as a dataclass's)
                delattr(cls, name)
                if value.default is not _NO_DEFAULT:
                    setattr(cls, name, value.default)
        names = tuple(spec)
        params, body, env = [], [], {"_set": object.__setattr__}
        seen_default = False
        for i, name in enumerate(names):
            f = spec[name]
            value = name
            if f.factory is not None:
                env[f"_d{i}"] = f  # the marker: "not given", make one
                params.append(f"{name}=_d{i}")
                value = f"_d{i}.factory() if {name} is _d{i} else {name}"
            elif f.default is not _NO_DEFAULT:
                env[f"_d{i}"] = f.default
                params.append(f"{name}=_d{i}")
            elif any(spec[n].factory is not None or spec[n].default is not _NO_DEFAULT for n in names[:i]):
                raise TypeError(f"record {cls.__qualname__}: field {name} without a default follows one with one")
            else:
                params.append(name)
            body.append(f"_set(self, {name!r}, {value})" if frozen else f"self.{name} = {value}")
        if hasattr(cls, "__post_init__"):
            body.append("self.__post_init__()")
        if slots:
            # a class's __slots__ are fixed when it is made: make it again, as dataclass(slots=True) does
            ns = {k: v for k, v in cls.__dict__.items() if k not in own and k not in ("__dict__", "__weakref__")}
            ns["__slots__"] = tuple(n for n in own if not any(n in getattr(b, "__slots__", ()) for b in cls.__mro__[1:]))
            cls = type(cls)(cls.__name__, cls.__bases__, ns)
        source = f"def __init__(self, {', '.join(params)}):\n    " + ("\n    ".join(body) or "pass")
        exec(source, env)  # one small function per class, a dataclass's __init__ (positional or keyword)
        init = env["__init__"]
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        cls.__init__ = init
        cls.__record_spec__ = spec
        cls.__record_fields__ = names
        cls.__record_repr__ = tuple(n for n in names if spec[n].repr)
        cls.__record_compare__ = tuple(n for n in names if spec[n].compare)
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

    def replace(obj, **changes):
        return type(obj)(**{n: changes.pop(n) if n in changes else getattr(obj, n) for n in obj.__record_fields__},
                         **changes)  # a name that is not a field: the TypeError __init__ raises

    def _values(self) -> tuple:
        return tuple(getattr(self, n) for n in self.__record_compare__)

    def _hash(self) -> int:
        return hash(_values(self))

    def _repr(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__record_repr__)
        return f"{type(self).__qualname__}({inner})"

    def _eq(self, other: Any):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _values(self) == _values(other)
