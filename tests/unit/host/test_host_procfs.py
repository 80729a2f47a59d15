"""Parsers of /proc text formats, and the InputErrors they raise on garbage."""

from __future__ import annotations

import pytest

from oomguard.errors import InputError
from oomguard.host.procfs import (
    parse_limits_nofile,
    parse_meminfo,
    parse_node_meminfo,
    parse_shm_mount,
    parse_swaps,
)
from oomguard.units import GiB, KiB, MiB

from host_paths import ROOTS


def test_meminfo_of_a_fixture():
    m = parse_meminfo((ROOTS / "bad_kernel_settings/proc/meminfo").read_text())
    assert m.mem_total_bytes == 251 * GiB
    assert m.mem_available_bytes == 231 * GiB
    assert m.swap_total_bytes == 8 * GiB
    assert m.commit_limit_bytes == int(133.5 * GiB)
    assert not m.available_estimated


def test_meminfo_without_memavailable_is_estimated():
    m = parse_meminfo("MemTotal: 1000 kB\nMemFree: 100 kB\nCached: 300 kB\nBuffers: 50 kB\n")
    assert m.available_estimated
    assert m.mem_available_bytes == 450 * KiB


def test_meminfo_errors_name_file_and_line():
    with pytest.raises(InputError, match=r"^m:2: not a meminfo line"):
        parse_meminfo("MemTotal: 1 kB\nthis is not meminfo\n", "m")
    with pytest.raises(InputError, match="no MemTotal"):
        parse_meminfo("MemFree: 1 kB\n", "m")


def test_swaps():
    areas = parse_swaps(
        "Filename\tType\tSize\tUsed\tPriority\n/swap.img file 8388604 1048576 -2\n/dev/sdb2 partition 1024 0 5\n"
    )
    assert [a.filename for a in areas] == ["/swap.img", "/dev/sdb2"]
    assert areas[0].size_bytes == 8388604 * KiB and areas[0].used_bytes == GiB
    assert parse_swaps("Filename\tType\tSize\tUsed\tPriority\n") == ()
    with pytest.raises(InputError, match=":2:"):
        parse_swaps("Filename Type Size Used Priority\n/swap file x y z\n", "s")


def test_limits():
    text = (ROOTS / "bad_kernel_settings/proc/self/limits").read_text()
    assert parse_limits_nofile(text) == (1024, 4096)
    assert parse_limits_nofile("Max open files            unlimited            unlimited            files\n") == (None, None)
    with pytest.raises(InputError, match="no 'Max open files'"):
        parse_limits_nofile("Limit Soft Hard\n", "l")


@pytest.mark.parametrize(
    "options, expected",
    [
        ("rw,nosuid,nodev,size=65536k,inode64", 64 * MiB),
        ("rw,size=16g", 16 * GiB),
        ("rw,size=25%", 25 * GiB),
        ("rw,nosuid,nodev", 50 * GiB),  # tmpfs default: half of RAM
    ],
)
def test_shm_mount_sizes(options, expected):
    text = f"proc /proc proc rw 0 0\ntmpfs /dev/shm tmpfs {options} 0 0\n"
    assert parse_shm_mount(text, 100 * GiB) == expected


def test_shm_last_mount_wins_and_absent_is_none():
    text = "tmpfs /dev/shm tmpfs rw,size=64m 0 0\nshm /dev/shm tmpfs rw,size=8g 0 0\n"
    assert parse_shm_mount(text, 100 * GiB) == 8 * GiB
    assert parse_shm_mount("proc /proc proc rw 0 0\n", 100 * GiB) is None
    with pytest.raises(InputError, match="bad tmpfs size"):
        parse_shm_mount("tmpfs /dev/shm tmpfs rw,size=lots 0 0\n", GiB, "mounts")


def test_node_meminfo():
    assert parse_node_meminfo("Node 1 MemTotal:  2048 kB\nNode 1 MemFree:  1024 kB\n", "n") == (2 * MiB, MiB)


@pytest.mark.parametrize("value, needle", [("9" * 5000, "too many digits"), ("١٢٣", "ASCII"),
                                           (str(1 << 60), "out of range")])
def test_meminfo_numbers_are_read_safely(value, needle):
    # int() of a 5000-digit run raised ValueError (internal error); a kB figure past 2**53 is no RAM.
    with pytest.raises(InputError, match=f"meminfo:1: MemTotal: .*{needle}"):
        parse_meminfo(f"MemTotal: {value} kB\nMemAvailable: 1 kB\n", "meminfo")


def test_swaps_limits_and_node_meminfo_numbers_are_read_safely():
    with pytest.raises(InputError, match="swaps:2: swap Size"):
        parse_swaps("Filename Type Size Used Priority\n/swap file " + "9" * 5000 + " 0 -2\n", "swaps")
    with pytest.raises(InputError, match="limits:1: Max open files"):
        parse_limits_nofile("Max open files            " + "9" * 5000 + "   1   files\n", "limits")
    with pytest.raises(InputError, match="node0/meminfo:1: MemTotal"):
        parse_node_meminfo("Node 0 MemTotal: " + "9" * 100 + " kB\n", "node0/meminfo")
