"""nvidia-smi topo -m parsing on recorded outputs of five kinds of machine."""

from __future__ import annotations

import pytest

from oomguard.errors import InputError
from oomguard.inputs.topology import Link, LinkKind, parse_cpulist, parse_topology

from host_paths import TOPO


def load(name: str):
    path = TOPO / name
    return parse_topology(path.read_text(), str(path))


def test_dgx_a100_all_nvlink_and_nics():
    t = load("dgx_a100_8x_nv12.txt")
    assert t.gpus == tuple(range(8))
    assert t.devices[8:] == ("NIC0", "NIC1", "NIC2", "NIC3")
    assert t.link(0, 7) == Link(LinkKind.NVLINK, 12)
    assert str(t.link(3, 5)) == "NV12"
    assert t.link("GPU0", "NIC0").kind is LinkKind.PXB
    assert t.link("GPU0", "NIC3").kind is LinkKind.SYS
    assert [t.numa_node(g) for g in t.gpus] == [3, 3, 1, 1, 7, 7, 5, 5]
    assert t.cpu_affinity[4] == "112-127,240-255"
    assert 120 in t.cpus(4) and 0 not in t.cpus(4)
    # NVLink everywhere: no TP group crosses even a PCIe bridge.
    assert t.tp_groups_crossing(LinkKind.PIX, 8) == []
    assert t.tp_groups_crossing(LinkKind.SYS, 2) == []


def test_4090_two_sockets_ansi_header_sys_and_node():
    t = load("rtx4090_4x_two_sockets.txt")
    assert t.gpus == (0, 1, 2, 3)
    assert t.link(0, 1).kind is LinkKind.NODE
    assert t.link(1, 2).kind is LinkKind.SYS
    assert t.gpus_by_numa_node() == {0: [0, 1], 1: [2, 3]}
    assert t.tp_groups_crossing(LinkKind.SYS, 4) == [(0, 1, 2, 3)]
    assert t.tp_groups_crossing(LinkKind.SYS, 2) == []
    # Rank order follows CUDA_VISIBLE_DEVICES: 0,2 then 1,3 puts SYS inside both pairs.
    assert t.tp_groups_crossing(LinkKind.SYS, 2, gpus=[0, 2, 1, 3]) == [(0, 2), (1, 3)]
    # NODE or farther: both TP2 groups cross host bridges within their socket.
    assert t.tp_groups_crossing(LinkKind.NODE, 2) == [(0, 1), (2, 3)]


def test_l40s_pix_pairs():
    t = load("l40s_4x_pix_pairs.txt")
    assert t.link(0, 1).kind is LinkKind.PIX
    assert t.link(2, 3).kind is LinkKind.PIX
    assert t.link(1, 3).kind is LinkKind.SYS
    assert t.link("NIC0", "GPU0").kind is LinkKind.NODE
    assert t.worst_link([0, 1]) == Link(LinkKind.PIX)
    assert t.worst_link([0, 1, 2]) == Link(LinkKind.SYS)
    assert t.tp_groups_crossing(LinkKind.PXB, 2) == []


def test_3090_phb_pasted_with_spaces_and_no_numa():
    t = load("rtx3090_2x_phb_pasted.txt")
    assert "\t" not in (TOPO / "rtx3090_2x_phb_pasted.txt").read_text()
    assert t.link(0, 1).kind is LinkKind.PHB
    assert t.numa_node(0) is None  # "N/A"
    assert t.cpu_affinity == {0: "0-23", 1: "0-23"}
    assert t.tp_groups_crossing(LinkKind.PHB, 2) == [(0, 1)]
    assert t.tp_groups_crossing(LinkKind.NODE, 2) == []


def test_v100_mixed_nvlink_counts_old_driver_layout():
    t = load("v100_4x_nvlink_mixed_old_driver.txt")
    assert t.devices[-1] == "mlx5_0"
    assert t.link(0, 3) == Link(LinkKind.NVLINK, 2)
    assert t.link(0, 1) == Link(LinkKind.NVLINK, 1)
    # The weaker NVLink bond is the group's worst link.
    assert t.worst_link([0, 1, 3]) == Link(LinkKind.NVLINK, 1)
    assert t.numa_affinity[0] is None  # no NUMA Affinity column at all
    assert t.link(2, "mlx5_0").kind is LinkKind.PHB


def test_link_kind_order_and_legacy_soc():
    kinds = [LinkKind.SELF, LinkKind.NVLINK, LinkKind.PIX, LinkKind.PXB, LinkKind.PHB, LinkKind.NODE, LinkKind.SYS]
    assert [k.distance for k in kinds] == sorted(k.distance for k in kinds)
    assert Link.parse("SOC") == Link(LinkKind.SYS)
    assert Link.parse(" X ") == Link(LinkKind.SELF)
    with pytest.raises(ValueError):
        Link.parse("NVB")


def test_tp_groups_drop_a_short_tail_and_reject_zero():
    t = load("l40s_4x_pix_pairs.txt")
    assert t.tp_groups(3) == [(0, 1, 2)]
    with pytest.raises(ValueError):
        t.tp_groups(0)


def test_to_dict_round_trips_the_matrix():
    d = load("rtx4090_4x_two_sockets.txt").to_dict()
    assert d["matrix"]["GPU0"]["GPU2"] == "SYS"
    assert d["numa_affinity"]["GPU3"] == [1]


def test_cpulist():
    assert parse_cpulist("0-3,8,10-11") == frozenset({0, 1, 2, 3, 8, 10, 11})
    assert parse_cpulist("N/A") == frozenset()


BAD = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tQQQ\t0-3\nGPU1\tQQQ\t X \t0-3\n"


def test_unknown_link_names_file_and_line():
    with pytest.raises(InputError) as err:
        parse_topology(BAD, "topo.txt")
    assert str(err.value).startswith("topo.txt:2:")
    assert "QQQ" in str(err.value)


@pytest.mark.parametrize(
    "text, words",
    [
        ("nothing here\n", "no 'nvidia-smi topo -m' matrix"),
        ("\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tSYS\t X \n", "asymmetric"),
        ("\tGPU0\tGPU1\nGPU0\t X \tPHB\n\nLegend:\n", "lacks rows for GPU1"),
        ("\tGPU0\tGPU1\nGPU0\t X \nGPU1\tPHB\t X \n", "expected 2 link kinds"),
    ],
)
def test_malformed_matrices(text, words):
    with pytest.raises(InputError, match=words):
        parse_topology(text, "t.txt")


def _matrix(n: int, tail: str = "") -> str:
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\n"
    rows = "".join(f"GPU{i}\t" + "\t".join("X" if i == j else "SYS" for j in range(n)) + "\t0-3\t0\n" for i in range(n))
    return head + rows + tail


def test_a_matrix_with_more_devices_than_any_host_is_refused():
    with pytest.raises(InputError, match="more than 256 devices"):
        parse_topology(_matrix(300), "topo.txt")


def test_reading_stops_at_the_end_of_the_matrix():
    """A streamed file: the lines after the matrix (a legend, a pasted log) are never consumed."""
    consumed = []

    def lines():
        for no, line in enumerate((_matrix(2, "\nLegend:\n") + "junk\n" * 1000).splitlines(), start=1):
            consumed.append(no)
            yield no, line

    topo = parse_topology(lines(), "topo.txt")
    assert topo.gpus == (0, 1) and max(consumed) <= 5


@pytest.mark.parametrize("affinity, needle", [("0-99999999999", "at most 65,536"), ("3-1", "backwards"),
                                              ("٣", "ASCII"), ("0-" + "9" * 5000, "too many digits")])
def test_cpu_affinity_is_checked_when_read(affinity, needle):
    text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV4\t0-3\t0\nGPU1\tNV4\t X \t" + affinity + "\t0\n"
    with pytest.raises(InputError, match=needle):
        parse_topology(text, "topo.txt")


def test_duplicate_rows_and_aliased_gpu_names_are_refused():
    with pytest.raises(InputError, match="appears twice"):
        parse_topology("\tGPU0\tGPU1\nGPU0\t X \tSYS\nGPU0\t X \tSYS\nGPU1\tSYS\t X \n", "t")
    with pytest.raises(InputError, match="unknown link kind"):
        parse_topology("\tGPU0\tGPU1\nGPU0\t X \tNV" + "9" * 5000 + "\nGPU1\tSYS\t X \n", "t")
