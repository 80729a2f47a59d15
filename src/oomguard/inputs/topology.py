"""Parse the matrix printed by ``nvidia-smi topo -m``.

The output is a square matrix of link kinds between devices (GPUs, then NICs),
followed by affinity columns and a legend::

            GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
    GPU0     X      SYS     NODE    0-31,64-95      0               N/A
    GPU1    SYS      X      SYS     32-63,96-127    1               N/A

Drivers differ in what they print: older ones have no ``NUMA Affinity`` or
``GPU NUMA ID`` column, name NICs ``mlx5_0`` instead of ``NIC0``, spell ``SYS``
as ``SOC``, underline the header with ANSI escapes, and leave empty cells
between tabs. Copies pasted from a terminal or a forum have their tabs
expanded to spaces. So rows are split on whitespace and the cells after the
matrix are matched to the affinity headers in order; the only multi-word
headers are the known affinity names.

vLLM gives tensor-parallel ranks to GPUs in the order of
``CUDA_VISIBLE_DEVICES`` with TP innermost, so the GPUs of one TP group are
consecutive in that order; ``tp_groups`` and ``tp_groups_crossing`` follow that.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from enum import Enum
from collections.abc import Iterable, Sequence

from oomguard.errors import InputError

__all__ = ["Link", "LinkKind", "Topology", "parse_topology", "parse_cpulist"]


class LinkKind(str, Enum):
    """How two devices are connected, nearest first (the legend of ``topo -m``)."""

    SELF = "X"
    NVLINK = "NV"  # a bonded set of N NVLinks; the count is on Link
    PIX = "PIX"  # at most one PCIe bridge
    PXB = "PXB"  # several PCIe bridges, no host bridge
    PHB = "PHB"  # a PCIe host bridge (the CPU's root complex)
    NODE = "NODE"  # host bridges within one NUMA node
    SYS = "SYS"  # the inter-socket interconnect (QPI/UPI/Infinity Fabric)

    @property
    def distance(self) -> int:
        """0 for self, larger is farther; used to compare link kinds."""
        return _DISTANCE[self]

    @property
    def meaning(self) -> str:
        return _MEANING[self]


_DISTANCE = {
    LinkKind.SELF: 0,
    LinkKind.NVLINK: 1,
    LinkKind.PIX: 2,
    LinkKind.PXB: 3,
    LinkKind.PHB: 4,
    LinkKind.NODE: 5,
    LinkKind.SYS: 6,
}

_MEANING = {
    LinkKind.SELF: "self",
    LinkKind.NVLINK: "NVLink",
    LinkKind.PIX: "at most one PCIe bridge",
    LinkKind.PXB: "several PCIe bridges",
    LinkKind.PHB: "a PCIe host bridge (through the CPU)",
    LinkKind.NODE: "PCIe host bridges within one NUMA node",
    LinkKind.SYS: "the CPU interconnect between NUMA nodes",
}


@dataclass(frozen=True)
class Link:
    kind: LinkKind
    nvlinks: int = 0  # number of bonded NVLinks when kind is NVLINK

    def __str__(self) -> str:
        if self.kind is LinkKind.NVLINK:
            return f"NV{self.nvlinks}"
        return self.kind.value

    @classmethod
    def parse(cls, cell: str) -> Link:
        return _parse_link(cell.strip().upper())


@functools.lru_cache(maxsize=256)
def _parse_link(text: str) -> Link:
    # Cached: a matrix holds a handful of distinct cells, and one shared Link per kind keeps a
    # large matrix small.
    m = re.fullmatch(r"NV(\d{1,3})", text)
    if m:
        return Link(LinkKind.NVLINK, int(m.group(1)))
    if text == "SOC":  # the pre-2017 spelling of SYS
        return Link(LinkKind.SYS)
    try:
        return Link(LinkKind(text))
    except ValueError:
        raise ValueError(f"unknown link kind {text[:20]!r}") from None


@dataclass(frozen=True)
class Topology:
    """The parsed matrix. GPUs are addressed by index (0 for ``GPU0``) or name."""

    devices: tuple[str, ...]  # every column of the matrix, GPUs first as printed
    gpus: tuple[int, ...]  # GPU indices in row order
    links: dict[tuple[str, str], Link] = field(repr=False)
    cpu_affinity: dict[int, str | None] = field(default_factory=dict)  # cpulist text per GPU
    numa_affinity: dict[int, tuple[int, ...] | None] = field(default_factory=dict)

    # --- look-ups -----------------------------------------------------------
    def link(self, a: int | str, b: int | str) -> Link:
        key = (_name(a), _name(b))
        try:
            return self.links[key]
        except KeyError:
            raise KeyError(f"no link between {key[0]} and {key[1]} in the topology") from None

    def numa_node(self, gpu: int) -> int | None:
        """The single NUMA node of a GPU, or None when unknown or ambiguous."""
        nodes = self.numa_affinity.get(gpu)
        if nodes and len(nodes) == 1:
            return nodes[0]
        return None

    def cpus(self, gpu: int) -> frozenset[int]:
        text = self.cpu_affinity.get(gpu)
        return parse_cpulist(text) if text else frozenset()

    def worst_link(self, gpus: Sequence[int]) -> Link | None:
        """The farthest link between any two GPUs of the group (None for one GPU)."""
        worst: Link | None = None
        for i, a in enumerate(gpus):
            for b in gpus[i + 1 :]:
                lk = self.link(a, b)
                if worst is None or lk.kind.distance > worst.kind.distance or (
                    lk.kind is LinkKind.NVLINK
                    and worst.kind is LinkKind.NVLINK
                    and lk.nvlinks < worst.nvlinks
                ):
                    worst = lk
        return worst

    def tp_groups(self, tp: int, gpus: Sequence[int] | None = None) -> list[tuple[int, ...]]:
        """Consecutive groups of ``tp`` GPUs, in rank order; a short tail is dropped."""
        if tp < 1:
            raise ValueError("tensor-parallel size must be at least 1")
        order = list(self.gpus if gpus is None else gpus)
        return [tuple(order[i : i + tp]) for i in range(0, len(order) - tp + 1, tp)]

    def tp_groups_crossing(
        self, link_kind: LinkKind, tp: int, gpus: Sequence[int] | None = None
    ) -> list[tuple[int, ...]]:
        """TP groups in which some pair of GPUs is linked by ``link_kind`` or a farther kind.

        ``tp_groups_crossing(LinkKind.SYS, 4)`` lists the groups whose all-reduce
        crosses the CPU interconnect. ``gpus`` is the rank order (the physical
        indices of ``CUDA_VISIBLE_DEVICES``); all GPUs in index order by default.
        """
        crossing = []
        for group in self.tp_groups(tp, gpus):
            worst = self.worst_link(group)
            if worst is not None and worst.kind.distance >= link_kind.distance:
                crossing.append(group)
        return crossing

    def gpus_by_numa_node(self) -> dict[int, list[int]]:
        """GPU indices grouped by their NUMA node (GPUs with an unknown node left out)."""
        out: dict[int, list[int]] = {}
        for g in self.gpus:
            node = self.numa_node(g)
            if node is not None:
                out.setdefault(node, []).append(g)
        return out

    def to_dict(self) -> dict:
        return {
            "gpus": [f"GPU{g}" for g in self.gpus],
            "devices": list(self.devices),
            "matrix": {
                f"GPU{a}": {d: str(self.links[(f"GPU{a}", d)]) for d in self.devices}
                for a in self.gpus
            },
            "cpu_affinity": {f"GPU{g}": self.cpu_affinity.get(g) for g in self.gpus},
            "numa_affinity": {
                f"GPU{g}": (list(v) if (v := self.numa_affinity.get(g)) is not None else None)
                for g in self.gpus
            },
        }


def _name(dev: int | str) -> str:
    return f"GPU{dev}" if isinstance(dev, int) else dev


# ---------------------------------------------------------------------------
# parsing

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Multi-word headers after the matrix, longest first so that "GPU NUMA ID" is
# not read as a device called "GPU".
_AFFINITY_HEADERS = ("GPU NUMA ID", "CPU Affinity", "NUMA Affinity")
_GPU_NAME = re.compile(r"GPU(0|[1-9][0-9]{0,4})$")  # canonical: GPU01 would alias GPU1
# Linux's NR_CPUS is at most 8192; a CPU or NUMA id past this is not from a real machine, and
# '0-99999999999' would otherwise build a set of 10^11 ints.
MAX_CPU_ID = 1 << 16
# The most devices (GPUs and NICs) a matrix may have. Hosts have at most 8-16 GPUs and a few
# NICs; the matrix is read in O(devices^2) time and memory, so the cap is the bound.
MAX_DEVICES = 256
# Lines scanned for the header before giving up: a terminal capture has some prelude, not MBs.
MAX_HEADER_SCAN_LINES = 100_000


def parse_cpulist(text: str | None) -> frozenset[int]:
    """Parse a Linux cpulist ('0-31,64-95', '3', 'N/A' -> empty)."""
    if not text or text.strip().upper() in ("N/A", "NA", "-"):
        return frozenset()
    from oomguard.numbers import parse_int

    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        # parse_int raises NumberError (a ValueError) for what no kernel prints: the callers' contract.
        first = parse_int(lo, lo=0, hi=MAX_CPU_ID)
        if hi:
            last = parse_int(hi, lo=0, hi=MAX_CPU_ID)
            if last < first:
                raise ValueError(f"cpulist range {part!r} runs backwards")
            cpus.update(range(first, last + 1))
        else:
            cpus.add(first)
    return frozenset(cpus)


def _parse_nodes(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        nodes = parse_cpulist(text)  # NUMA affinity uses the same list syntax ('0', '0-1')
    except ValueError:
        return None
    return tuple(sorted(nodes)) or None


def _split_header(line: str) -> tuple[list[str], list[str]]:
    """Device names and affinity headers of the header line."""
    text = line
    found: list[tuple[int, str]] = []
    for name in _AFFINITY_HEADERS:
        idx = text.find(name)
        if idx >= 0:
            found.append((idx, name))
            text = text[:idx] + " " * len(name) + text[idx + len(name) :]
    found.sort()
    first_affinity = found[0][0] if found else len(line)
    devices = line[:first_affinity].split()
    return devices, [name for _, name in found]


def parse_topology(text: str | Iterable[tuple[int, str]], source: str | None = None) -> Topology:
    """Parse ``nvidia-smi topo -m`` output; raise InputError naming the line on bad input.

    ``text`` is the whole text or ``(line_no, line)`` pairs of a streamed file: reading stops at
    the end of the matrix, so what follows it (a legend, a pasted log) is never read.
    """
    numbered = enumerate(text.splitlines(), start=1) if isinstance(text, str) else iter(text)
    header_no = header = None
    for scanned, (no, raw) in enumerate(numbered):
        ln = _ANSI.sub("", raw).rstrip("\r\n")
        if re.match(r"^\s+GPU0\b", ln) or re.match(r"^GPU0\s+GPU1\b", ln):
            header_no, header = no - 1, ln
            break
        if scanned >= MAX_HEADER_SCAN_LINES:
            break
    if header_no is None:
        raise InputError(
            "no 'nvidia-smi topo -m' matrix found (expected a header line starting with GPU0)",
            file=source,
        )
    devices, affinity_headers = _split_header(header)
    if len(devices) > MAX_DEVICES:
        raise InputError(f"the topology matrix has more than {MAX_DEVICES} devices, the most "
                         "oomguard reads (a host has at most a few dozen GPUs and NICs)",
                         file=source, line=header_no + 1)
    if len(set(devices)) != len(devices):
        raise InputError("duplicate device names in the topology header", file=source, line=header_no + 1)

    links: dict[tuple[str, str], Link] = {}
    cpu_affinity: dict[int, str | None] = {}
    numa_affinity: dict[int, tuple[int, ...] | None] = {}
    gpus: list[int] = []
    seen_rows: set[str] = set()
    device_set = set(devices)

    for offset, raw in numbered:
        raw = _ANSI.sub("", raw).rstrip("\r\n") if "\x1b" in raw else raw.rstrip("\r\n")
        if not raw.strip():
            if seen_rows:
                break  # the blank line before the legend
            continue
        cells = raw.split()
        name = cells[0]
        if name.rstrip(":").lower() in ("legend", "nic"):
            break
        if name not in device_set:
            if seen_rows:
                break
            raise InputError(f"row {name[:40]!r} is not a device of the header", file=source, line=offset)
        if name in seen_rows:
            raise InputError(f"row {name} appears twice in the topology matrix", file=source, line=offset)
        if len(cells) < 1 + len(devices):
            raise InputError(
                f"row {name} has {len(cells) - 1} cells, expected {len(devices)} link kinds",
                file=source,
                line=offset,
            )
        for dev, cell in zip(devices, cells[1 : 1 + len(devices)], strict=True):
            try:
                links[(name, dev)] = Link.parse(cell)
            except ValueError as exc:
                raise InputError(f"{exc} between {name} and {dev}", file=source, line=offset) from None
        seen_rows.add(name)
        m = _GPU_NAME.match(name)
        if m:
            gpu = int(m.group(1))
            gpus.append(gpu)
            rest = cells[1 + len(devices) :]
            values = dict(zip(affinity_headers, rest, strict=False))  # trailing cells may be missing
            cpu_affinity[gpu] = _na(values.get("CPU Affinity"))
            try:  # checked here: Topology.cpus() parses it again when a check asks
                parse_cpulist(cpu_affinity[gpu])
            except ValueError as exc:
                raise InputError(f"GPU{gpu}: CPU Affinity {cpu_affinity[gpu][:40]!r} is not a cpulist ({exc})",
                                 file=source, line=offset) from None
            numa_affinity[gpu] = _parse_nodes(_na(values.get("NUMA Affinity")))

    if not gpus:
        raise InputError("the topology matrix has no GPU rows", file=source, line=header_no + 1)
    missing = [d for d in devices if _GPU_NAME.match(d) and d not in seen_rows]
    if missing:
        raise InputError(f"the topology matrix lacks rows for {', '.join(missing)}", file=source)
    # The matrix must be symmetric between GPUs; a mismatch means a garbled paste.
    for a in gpus:
        for b in gpus:
            la, lb = links[(f"GPU{a}", f"GPU{b}")], links[(f"GPU{b}", f"GPU{a}")]
            if la != lb:
                raise InputError(
                    f"asymmetric topology: GPU{a}->GPU{b} is {la} but GPU{b}->GPU{a} is {lb}",
                    file=source,
                )
    return Topology(
        devices=tuple(devices),
        gpus=tuple(gpus),
        links=links,
        cpu_affinity=cpu_affinity,
        numa_affinity=numa_affinity,
    )


def _na(value: str | None) -> str | None:
    if value is None or value.strip().upper() in ("N/A", "NA", ""):
        return None
    return value.strip()

