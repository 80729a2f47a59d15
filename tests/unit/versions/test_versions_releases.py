"""Version parsing, families and which table a version request maps to."""

from __future__ import annotations

import subprocess
import sys

import pytest

from oomguard.errors import InputError
from oomguard.versions import SUPPORTED, family_of, get_release, parse_version


def test_supported_covers_every_family_and_is_sorted():
    assert SUPPORTED[0] == "0.6.0" and SUPPORTED[-1] == "0.33.0"
    assert [parse_version(v) for v in SUPPORTED] == sorted(parse_version(v) for v in SUPPORTED)
    for required in ("0.6.6.post1", "0.7.3", "0.8.5.post1", "0.10.2", "0.11.0", "0.15.0", "0.19.0",
                     "0.20.0", "0.25.0", "0.27.0", "0.28.0", "0.30.0", "0.32.0", "0.33.0"):
        assert required in SUPPORTED
    assert {family_of(v) for v in SUPPORTED} == {"0.6-0.7", "0.8-0.10", "0.11-0.19", "0.20-0.27", "0.28-0.33"}


@pytest.mark.parametrize("text,key", [
    ("0.33.0", (0, 33, 0, 0, 0)),
    ("v0.11", (0, 11, 0, 0, 0)),
    ("0.8.5.post1", (0, 8, 5, 0, 1)),
    ("0.10.1.1", (0, 10, 1, 1, 0)),
    ("0.33.0+cu128", (0, 33, 0, 0, 0)),
    ("0.10.2.dev12+g1234abc", (0, 10, 2, 0, 0)),
])
def test_parse_version(text, key):
    assert parse_version(text).release == key


def test_version_order_puts_prereleases_and_posts_in_place():
    order = ["0.8.5", "0.8.5.post1", "0.9.0rc1", "0.9.0", "0.10.1", "0.10.1.1", "0.10.2"]
    assert sorted(order, key=parse_version) == order
    assert parse_version("banana") is None


@pytest.mark.parametrize("version,family", [
    ("0.6.3.post1", "0.6-0.7"), ("0.7.3", "0.6-0.7"), ("0.8.0", "0.8-0.10"), ("0.10.2", "0.8-0.10"),
    ("0.11.0", "0.11-0.19"), ("0.19.1", "0.11-0.19"), ("0.20.0", "0.20-0.27"), ("0.27.1", "0.20-0.27"),
    ("0.28.0", "0.28-0.33"), ("0.33.0", "0.28-0.33"), ("0.40.0", "0.28-0.33"),
])
def test_family_of(version, family):
    assert family_of(version) == family


def test_family_of_rejects_older_and_garbage():
    with pytest.raises(InputError):
        family_of("0.5.4")
    with pytest.raises(InputError):
        family_of("latest-ish")


@pytest.mark.parametrize("spec,version", [
    (None, "0.33.0"), ("latest", "0.33.0"), ("0.33", "0.33.0"), ("0.33.0", "0.33.0"),
    ("v0.11.0", "0.11.0"), ("0.11", "0.11.2"), ("0.6", "0.6.6.post1"), ("0.8", "0.8.5.post1"),
    ("0.8.5.post1", "0.8.5.post1"), ("0.10.1.1", "0.10.1.1"),
])
def test_get_release_exact_and_minor(spec, version):
    rel = get_release(spec)
    assert rel.version == version
    assert rel.note == ""


def test_get_release_family_names():
    assert get_release("0.11-0.19").version == "0.19.1"
    assert get_release("v0").version == "0.7.3"
    assert get_release("early-v1").version == "0.10.2"
    assert get_release("0.28-0.33").version == "0.33.0"
    assert "family" in get_release("0.20-0.27").note


ALL_PUBLISHED_0_6_TO_0_33 = (
    "0.6.0 0.6.1 0.6.1.post1 0.6.1.post2 0.6.2 0.6.3 0.6.3.post1 0.6.4 0.6.4.post1 0.6.5 0.6.6 0.6.6.post1 "
    "0.7.0 0.7.1 0.7.2 0.7.3 0.8.0 0.8.1 0.8.2 0.8.3 0.8.4 0.8.5 0.8.5.post1 0.9.0 0.9.0.1 0.9.1 0.9.2 "
    "0.10.0 0.10.1 0.10.1.1 0.10.2 0.11.0 0.11.1 0.11.2 0.12.0 0.13.0 0.14.0 0.14.1 0.15.0 0.15.1 0.16.0 "
    "0.17.0 0.17.1 0.18.0 0.18.1 0.19.0 0.19.1 0.20.0 0.20.1 0.20.2 0.21.0 0.22.0 0.22.1 0.23.0 0.24.0 "
    "0.25.0 0.25.1 0.26.0 0.27.0 0.27.1 0.28.0 0.29.0 0.30.0 0.31.0 0.32.0 0.33.0"
).split()


@pytest.mark.parametrize("version", ALL_PUBLISHED_0_6_TO_0_33)
def test_every_published_release_has_its_own_table(version):
    rel = get_release(version)
    assert rel.version == version
    assert rel.note == ""


def test_unpublished_version_picks_nearest_lower_in_family_and_says_so():
    rel = get_release("0.8.6")
    assert rel.version == "0.8.5.post1"
    assert "0.8.6" in rel.note and "0.8.5.post1" in rel.note and "0.8-0.10" in rel.note
    assert get_release("0.6.4.post2").version == "0.6.4.post1"


def test_prerelease_and_dev_builds():
    assert get_release("0.11.0rc1").version == "0.11.0"
    assert "pre-release" in get_release("0.11.0rc1").note
    assert get_release("0.11.1.dev3+gabcdef").version == "0.11.1"


def test_newer_than_newest_uses_newest_with_a_hint():
    rel = get_release("0.34.0")
    assert rel.version == "0.33.0"
    assert "newer" in rel.note and "gen_flag_tables.py 0.34.0" in rel.note


def test_older_than_supported_raises_with_the_list():
    with pytest.raises(InputError) as err:
        get_release("0.5.4")
    assert "0.6.0" in str(err.value) and "0.33.0" in str(err.value)


def test_garbage_version_raises_input_error():
    with pytest.raises(InputError) as err:
        get_release("zero point thirty")
    assert "not a vLLM version" in str(err.value)


def test_release_metadata():
    rel = get_release("0.33.0")
    assert rel.commit == "4ba787ec9"
    assert rel.family == "0.28-0.33"
    assert get_release("0.6.6.post1").commit is None


def test_import_is_lazy():
    code = ("import sys, oomguard.versions; "
            "print('oomguard.versions.table' in sys.modules, 'json' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "False"
