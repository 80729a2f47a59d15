"""inputs.structured: JSON/YAML with depth, alias, node-count and size bounds."""

from __future__ import annotations

import datetime
import time

import pytest

from oomguard.errors import InputError
from oomguard.inputs import structured

LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
max_model_len: 4096
"""


def test_billion_laughs_is_refused_fast():
    t0 = time.monotonic()
    with pytest.raises(InputError, match="expands to more than") as e:
        structured.load_yaml(LAUGHS, file="cfg.yaml")
    assert time.monotonic() - t0 < 5
    assert str(e.value).startswith("cfg.yaml:")


def test_many_aliases_are_refused():
    text = "a: &x 1\nb: [" + ", ".join(["*x"] * (structured.MAX_YAML_ALIASES + 1)) + "]\n"
    with pytest.raises(InputError, match="aliases"):
        structured.load_yaml(text)


def test_a_few_aliases_are_fine():
    assert structured.load_yaml("base: &b {x: 1}\nother: *b\n") == {"base": {"x": 1}, "other": {"x": 1}}


@pytest.mark.parametrize("text", ["a: " + "[" * 5000 + "]" * 5000, "a:\n" + "".join(" " * i + "- \n" for i in range(1, 200))])
def test_deep_yaml(text):
    with pytest.raises(InputError, match="nested too deeply|invalid YAML"):
        structured.load_yaml(text)


def test_deep_json_is_one_line_not_recursion_error():
    for depth in (100, 100_000):
        with pytest.raises(InputError, match="nested too deeply"):
            structured.load_json("[" * depth + "]" * depth, file="config.json")


def test_yaml_size_is_the_time_bound():
    text = "k: v\n" * (structured.yaml_size_limit() // 5 + 10)
    with pytest.raises(InputError, match="YAML larger than"):
        structured.load_yaml(text)


def test_values_and_marks_from_one_parse():
    data, node = structured.load_yaml_with_node("max_model_len: 8192\nwhen: 2024-01-01\n")
    assert data == {"max_model_len": 8192, "when": datetime.date(2024, 1, 1)}
    assert [k.start_mark.line for k, _ in node.value] == [0, 1]


def test_unsafe_tags_stay_refused():
    with pytest.raises(InputError, match="invalid YAML"):
        structured.load_yaml("a: !!python/object/apply:os.system ['true']\n")


@pytest.mark.parametrize("text", [
    "a: &x [*x]\n",
    "a: &x {k: *x}\n",
    "a: &b {x: &c [1, *c], y: 2}\nc: *b\n",
])
def test_a_recursive_alias_is_refused_not_walked_forever(text):
    # The alias-expansion count used to loop (and grow its stack) forever on these; the fuzz
    # campaign's `gpu-memory-utilization: &a [*a]` ran past 30 s and a run reached 16 GB.
    with pytest.raises(InputError, match="refers to itself"):
        structured.load_yaml("model: m\n" + text, file="c.yaml")


def test_shared_aliases_that_are_not_recursive_still_load():
    assert structured.load_yaml("a: &b [1, 2]\nc: [*b, *b]\nd: {e: *b}\n") == {"a": [1, 2], "c": [[1, 2], [1, 2]], "d": {"e": [1, 2]}}
