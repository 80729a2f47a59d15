"""Byte units and the human-readable sizes vLLM accepts.

Integers of bytes end in ``_bytes`` everywhere; GiB appear only when printing.
"""

from __future__ import annotations

import re

from oomguard.numbers import NumberError, parse_float, parse_int
import oomguard.lazy_re as lazy_re

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

_SIZE = lazy_re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtT]?)(i?[bB])?\s*$")
# vLLM's utils/argparse_utils.py::human_readable_int: lower-case suffixes are
# decimal (10^3...), upper-case are binary (2^10...).
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": KiB, "M": MiB, "G": GiB, "T": 1 << 40}
# The largest size accepted: int64, what vLLM hands to torch. Checked on the result, so that
# '9' * 400 + 'T' or 8e6T is refused instead of becoming float infinity.
MAX_SIZE_BYTES = (1 << 63) - 1


def parse_size(text: str) -> int:
    """Parse '10737418240', '10G' (GiB), '10g' (GB), '64M' as vLLM does.

    Raises ``oomguard.numbers.NumberError`` (a ValueError) for text that is not a size or a
    size past ``MAX_SIZE_BYTES``; the number is read by ``oomguard.numbers`` (length-capped).
    """
    m = _SIZE.match(str(text))
    if not m:
        raise NumberError(str(text), "is not a size (a byte count, or a number with k/m/g/t or K/M/G/T)")
    number, suffix, _ = m.groups()
    too_large = NumberError(str(text), f"is larger than the largest size ({MAX_SIZE_BYTES:,} bytes)")
    try:
        # parse_float bounds the number (|x| <= 2**63), so the product below stays finite.
        value = parse_int(number, lo=0) if "." not in number else parse_float(number, lo=0)
    except NumberError as exc:
        raise (too_large if "at most" in exc.why or "too many" in exc.why else exc) from None
    if not suffix:
        if isinstance(value, float) and not value.is_integer():
            raise NumberError(str(text), "is not an integer number of bytes")
    else:
        value = value * (_DECIMAL.get(suffix) or _BINARY[suffix])
    if value > MAX_SIZE_BYTES:
        raise too_large
    return int(value)


def gib(n_bytes: float) -> float:
    return n_bytes / GiB


def fmt_gib(n_bytes: float, digits: int = 2) -> str:
    return f"{n_bytes / GiB:.{digits}f}"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return cdiv(a, b) * b
