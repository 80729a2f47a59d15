"""oomguard.numbers: the one safe conversion of outside text to numbers, and units.parse_size on it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oomguard import numbers
from oomguard.errors import InputError
from oomguard.numbers import NumberError
from oomguard.units import MAX_SIZE_BYTES, parse_size

HOSTILE = ["", " ", ".", "-", "+", "1.2.3", "1e999", "-1e999", "nan", "NaN", "inf", "-Infinity", "9" * 5000,
           "9" * 65, "0x10", "0o7", "0b1", "1__0", "_1", "1_", "١٢٣", "１２", "٣", "1,0", "1e", "e5", "--1",
           "2**40", "八", "1 2", "\x00", "1\n2"]


@pytest.mark.parametrize("text, value", [
    ("8192", 8192), ("+5", 5), ("-3", -3), ("1_000", 1000), (" 7 ", 7), ("0", 0), ("007", 7),
])
def test_parse_int_accepts_python_literals(text, value):
    assert numbers.parse_int(text) == value


@pytest.mark.parametrize("text", HOSTILE + ["1.5", "1e3"])
def test_parse_int_refuses_with_a_reason(text):
    with pytest.raises(NumberError) as e:
        numbers.parse_int(text)
    assert e.value.why and len(str(e.value)) < 160


@pytest.mark.parametrize("text, value", [("0.9", 0.9), (".5", 0.5), ("1e-3", 0.001), ("12", 12.0), ("1_0.5", 10.5),
                                         ("1e-320", 1e-320), ("-0", 0.0)])
def test_parse_float_accepts(text, value):
    assert numbers.parse_float(text) == value


@pytest.mark.parametrize("text", HOSTILE)
def test_parse_float_refuses_with_a_reason(text):
    with pytest.raises(NumberError):
        numbers.parse_float(text)


def test_reasons_name_the_problem():
    def why(f, t):
        with pytest.raises(NumberError) as e:
            f(t)
        return e.value.why

    assert "ASCII" in why(numbers.parse_int, "١٢٣") and "ASCII" in why(numbers.parse_float, "１２")
    assert "decimal" in why(numbers.parse_int, "0x10")
    assert "too many digits" in why(numbers.parse_int, "9" * 5000)
    assert "finite" in why(numbers.parse_float, "nan")
    assert "infinity" in why(numbers.parse_float, "1e999")
    assert "whole" in why(numbers.parse_int, "1.5")
    assert "at most 10" in why(lambda t: numbers.parse_int(t, hi=10), "11")
    assert "at least 1" in why(lambda t: numbers.parse_float(t, lo=1), "0.5")


def test_thousands_separators_only_where_asked_and_well_formed():
    assert numbers.parse_int("1,478,032", thousands=True) == 1478032
    assert numbers.parse_float("1,234.5", thousands=True) == 1234.5
    for bad in ("1,2", "12,34,567", ",1"):
        with pytest.raises(NumberError):
            numbers.parse_int(bad, thousands=True)
    with pytest.raises(NumberError):
        numbers.parse_int("1,478")


def test_typed_values():
    assert numbers.as_int(4096.0) == 4096 and numbers.as_int(7) == 7
    for bad in (True, 1.5, float("nan"), float("inf"), 1e300, None, "8", [1], {}):
        with pytest.raises(NumberError):
            numbers.as_int(bad)
    assert numbers.as_int("8", strings=True) == 8
    assert numbers.as_float(3) == 3.0
    for bad in (False, float("nan"), -float("inf"), 10 ** 400, "x"):
        with pytest.raises(NumberError):
            numbers.as_float(bad)


def test_input_errors_name_file_line_and_field():
    with pytest.raises(InputError) as e:
        numbers.input_int("1e999", field="--max-num-seqs", file="start_api.sh", line=3)
    assert str(e.value) == "start_api.sh:3: --max-num-seqs: '1e999' is not a whole number"
    with pytest.raises(InputError) as e:
        numbers.input_float(float("nan"), field="gpu-memory-utilization", file="c.yaml", line=2, lo=0, hi=1)
    assert str(e.value).startswith("c.yaml:2: gpu-memory-utilization: ") and "finite" in str(e.value)


def test_json_loads_refuses_nonfinite_with_its_path_and_caps_digits():
    assert numbers.json_loads('{"a": [1, 2.5]}') == {"a": [1, 2.5]}
    for text, where in (('{"a": {"b": NaN}}', "a.b"), ('[1, Infinity]', "[1]"), ('{"x": 1e999}', "x")):
        with pytest.raises(NumberError) as e:
            numbers.json_loads(text)
        assert where in str(e.value)
    with pytest.raises(ValueError):
        numbers.json_loads('{"a": ' + "9" * 5000 + "}")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=80), st.sampled_from(HOSTILE), st.integers().map(str),
                 st.floats(allow_nan=True, allow_infinity=True).map(repr)))
def test_any_text_is_a_bounded_number_or_a_number_error(text):
    for f in (numbers.parse_int, numbers.parse_float, numbers.parse_number):
        try:
            v = f(text)
        except NumberError:
            continue
        assert math.isfinite(v) and abs(v) <= numbers.FLOAT_LIMIT
    assert numbers.int_or_none(text) is None or isinstance(numbers.int_or_none(text), int)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(1 << 62), 1 << 62))
def test_round_trip_of_every_int64(n):
    assert numbers.parse_int(str(n)) == n
    assert numbers.parse_int(f"{n:,}", thousands=True) == n


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e18, max_value=1e18))
def test_round_trip_of_floats(x):
    assert numbers.parse_float(repr(x)) == x


# -- units.parse_size --------------------------------------------------------------------------

@pytest.mark.parametrize("text, size", [("10G", 10 << 30), ("10g", 10 ** 10), ("64M", 64 << 20), ("32k", 32000),
                                        ("1024", 1024), ("12.0", 12), ("0.5k", 500), ("8388607T", 8388607 << 40)])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["9" * 400 + "T", "9" * 5000, "8388608T", "1" * 30 + ".5k", "1e3", "-1", "12.5",
                                  "nan", "infG", "١٢G", "", "G"])
def test_parse_size_refuses_without_overflow(text):
    with pytest.raises(NumberError):
        parse_size(text)


@settings(max_examples=300, deadline=None)
@given(st.from_regex(r"\A[0-9]{0,30}\.?[0-9]{1,30}[kKmMgGtT]?(i?[bB])?\Z"))
def test_parse_size_is_bounded(text):
    try:
        n = parse_size(text)
    except NumberError:
        return
    assert 0 <= n <= MAX_SIZE_BYTES
