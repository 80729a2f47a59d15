"""Byte units and the human-readable sizes vLLM accepts.

Integers of bytes end in ``_bytes`` everywhere; GiB appear only when printing.
"""

from __future__ import annotations

import re

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtT]?)(i?[bB])?\s*$")
# vLLM's utils/argparse_utils.py::human_readable_int: lower-case suffixes are
# decimal (10^3...), upper-case are binary (2^10...).
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": KiB, "M": MiB, "G": GiB, "T": 1 << 40}


def parse_size(text: str) -> int:
    """Parse '10737418240', '10G' (GiB), '10g' (GB), '64M' as vLLM does."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r}")
    number, suffix, _ = m.groups()
    if not suffix:
        value = float(number)
        if value != int(value):
            raise ValueError(f"not an integer number of bytes: {text!r}")
        return int(value)
    mult = _DECIMAL.get(suffix) or _BINARY[suffix]
    return int(float(number) * mult)


def gib(n_bytes: float) -> float:
    return n_bytes / GiB


def fmt_gib(n_bytes: float, digits: int = 2) -> str:
    return f"{n_bytes / GiB:.{digits}f}"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return cdiv(a, b) * b
