"""oomguard.records: the start-up path's mutable records behave as the dataclasses they replace."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from pathlib import Path

import pytest

import typing

from oomguard.records import NamedTuple, field, record, replace


@record
class Rec:
    """A record like the launch reader's."""

    name: str
    line: int | None
    words: list = field(default_factory=list)
    quoted: str = ""

    def where(self) -> str:
        return f"{self.name}:{self.line}"


@dataclasses.dataclass
class Same:
    name: str
    line: int | None
    words: list = dataclasses.field(default_factory=list)
    quoted: str = ""


@record(frozen=True)
class Frozen:
    version: str
    note: str = ""


def test_init_repr_eq_as_a_dataclass():
    a, b = Rec("x", 3, quoted="'"), Same("x", 3, quoted="'")
    assert repr(a) == repr(b).replace("Same", "Rec")
    assert (a.name, a.line, a.words, a.quoted) == (b.name, b.line, b.words, b.quoted)
    assert a == Rec("x", 3, [], "'") and a != Rec("x", 4, quoted="'")
    assert a.__eq__(b) is NotImplemented and a != ("x", 3, [], "'")
    assert a.where() == "x:3"


def test_each_instance_gets_its_own_factory_value_and_no_class_attribute_holds_the_marker():
    a, b = Rec("a", 1), Rec("b", 2)
    a.words.append("w")
    assert b.words == [] and "words" not in vars(Rec)
    assert Rec.quoted == "" and Rec.__match_args__ == ("name", "line", "words", "quoted")


def test_signature_errors_as_a_dataclass():
    with pytest.raises(TypeError):
        Rec("x")  # line is required
    with pytest.raises(TypeError):
        Rec("x", 1, [], "", "extra")
    with pytest.raises(TypeError):
        Rec("x", 1, nope=2)


def test_mutable_records_are_unhashable_frozen_ones_hash_and_refuse_assignment():
    with pytest.raises(TypeError):
        hash(Rec("x", 1))
    f = Frozen("0.9.2")
    assert hash(f) == hash(Frozen("0.9.2")) and f == Frozen("0.9.2")
    with pytest.raises(AttributeError):
        f.note = "x"
    with pytest.raises(AttributeError):
        del f.version
    f.__dict__.setdefault("_memo", {})["k"] = 1  # memoising in the instance's __dict__ still works (Release)
    assert f._memo == {"k": 1}


def test_replace_keeps_the_other_fields_and_refuses_a_name_that_is_not_one():
    a = Rec("x", 3, ["w"])
    b = replace(a, line=4)
    assert (b.name, b.line, b.words) == ("x", 4, ["w"]) and b.words is a.words and a.line == 3
    assert replace(Frozen("1"), note="n") == Frozen("1", "n")
    with pytest.raises(TypeError):
        replace(a, nope=1)


def test_pickles():
    a = Rec("x", 3, ["w"])
    assert pickle.loads(pickle.dumps(a)) == a


def test_a_record_is_defined_without_importing_dataclasses():
    import subprocess
    import sys

    code = ("import sys\nfrom oomguard.records import record, field\n"
            "@record\nclass A:\n    x: int\n    y: list = field(default_factory=list)\n"
            "assert A(1).y == [] and A(1) == A(1)\n"
            "print('dataclasses' in sys.modules, 'inspect' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_a_field_without_a_default_after_one_with_a_default_is_refused():
    with pytest.raises(TypeError):
        @record
        class Bad:
            a: int = 0
            b: int


def test_a_subclass_field_without_a_default_after_the_bases_defaults_is_refused():
    with pytest.raises(TypeError):
        @record
        class Bad(Rec):
            extra: int


@record
class Sub(Rec):
    key: str | None = None
    node: object = None


def test_a_records_subclass_has_the_bases_fields_first():
    s = Sub("x", 3, key="k")
    assert Sub.__match_args__ == ("name", "line", "words", "quoted", "key", "node")
    assert (s.name, s.line, s.words, s.quoted, s.key, s.node) == ("x", 3, [], "", "k", None)
    assert s.where() == "x:3" and s != Rec("x", 3) and isinstance(s, Rec)
    assert Sub("y", 1).words is not Sub("y", 1).words


@record(slots=True)
class Slotted:
    a: int
    cache: dict = field(default_factory=dict, repr=False, compare=False)
    seen: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        self.cache["made"] = self.a


def test_field_options_post_init_and_slots_as_a_dataclass():
    s = Slotted(1)
    assert s.cache == {"made": 1} and repr(s) == "Slotted(a=1, seen=None)"
    assert s == Slotted(1, seen=5) and s != Slotted(2)
    assert not hasattr(s, "__dict__") and Slotted.__slots__ == ("a", "cache", "seen")
    with pytest.raises(AttributeError):
        s.other = 1
    s.seen = 3
    assert s.seen == 3 and pickle.loads(pickle.dumps(s)) == s


class Point(NamedTuple):
    """A frozen record."""

    x: int
    label: str | None = None

    @property
    def doubled(self) -> int:
        return 2 * self.x


class TypingPoint(typing.NamedTuple):
    """A frozen record."""

    x: int
    label: str | None = None

    @property
    def doubled(self) -> int:
        return 2 * self.x


def test_named_tuple_is_typings_class_without_the_annotation_checks():
    p, q = Point(3), TypingPoint(3)
    assert p == q == (3, None) and isinstance(p, tuple) and type(p).__mro__[1:] == (tuple, object)
    assert repr(p) == "Point(x=3, label=None)" and repr(q) == "TypingPoint(x=3, label=None)"
    assert p.doubled == 6 and Point.__doc__ == "A frozen record."
    assert Point._fields == TypingPoint._fields and Point._field_defaults == TypingPoint._field_defaults
    assert p._replace(label="a") == (3, "a") and p._asdict() == {"x": 3, "label": None}
    assert Point.__annotations__ == {"x": "int", "label": "str | None"}  # as written: not compiled
    assert Point.__module__ == __name__ and pickle.loads(pickle.dumps(p)) == p
    with pytest.raises(AttributeError):
        p.x = 4
    with pytest.raises(TypeError):
        class Bad(NamedTuple):
            a: int = 0
            b: int
    with pytest.raises(AttributeError):
        class Worse(NamedTuple):
            a: int

            def _replace(self):
                return self


def test_named_tuple_construction_and_errors_as_typings():
    p, q = Point(3, "a"), TypingPoint(3, "a")
    assert Point(x=3, label="a") == Point(3, label="a") == p == q and Point._make([3, "a"]) == p
    assert Point.__match_args__ == TypingPoint.__match_args__ == ("x", "label")
    assert Point.__new__.__defaults__ == TypingPoint.__new__.__defaults__ == (None,)
    assert Point.x.__doc__ == TypingPoint.x.__doc__ and type(Point.x) is type(TypingPoint.x)
    assert copy.deepcopy(p) == p and p.__getnewargs__() == (3, "a")
    for make in (lambda cls: cls(), lambda cls: cls(1, 2, 3), lambda cls: cls(1, nope=2),
                 lambda cls: cls(3)._replace(nope=1), lambda cls: cls._make([1, 2, 3])):
        errors = []
        for cls in (Point, TypingPoint):
            with pytest.raises((TypeError, ValueError)) as exc:
                make(cls)
            errors.append((exc.type, str(exc.value).replace(cls.__name__, "P")))
        assert errors[0] == errors[1]
    with pytest.raises(ValueError):
        class Private(NamedTuple):
            _hidden: int


def test_named_tuple_new_for_many_fields_is_compiled_beyond_the_precompiled_ones():
    scope = {"NamedTuple": NamedTuple, "__name__": __name__}
    exec("class Wide(NamedTuple):\n" + "".join(f"    f{i}: int\n" for i in range(69)) + "    f69: int = 0\n", scope)
    w = scope["Wide"](*range(69), f69=5)
    assert w.f0 == 0 and w.f68 == 68 and w == (*range(69), 5) and w._fields == tuple(f"f{i}" for i in range(70))


def test_the_precompiled_tuple_new_module_is_the_generators_output():
    from oomguard import _tuple_new, records

    assert Path(_tuple_new.__file__).read_text() == records.tuple_new_source(), (
        "regenerate src/oomguard/_tuple_new.py (its docstring has the command)")


def test_init_is_compiled_for_the_first_instance_and_then_is_the_class_own():
    @record
    class Late:
        a: int
        b: list = field(default_factory=list)

    @record
    class Later(Late):
        c: str = "x"

    stand_in = Late.__init__
    assert Later(1) == Later(1, [], "x") and Late.__init__ is stand_in  # the subclass compiled its own only
    assert Late(1, [2]).b == [2] and Late.__init__ is not stand_in and Late.__init__.__qualname__.endswith("Late.__init__")
    with pytest.raises(TypeError):
        Late()
