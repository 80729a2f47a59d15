"""The one place where numbers captured from log text become Python numbers.

Logs are written by anyone: a capture group of ``[\\d.]+`` can hold ``.``,
``1.2.3``, a 5000-digit run (``int()`` refuses more than 4300 digits) or, through
``float()``, ``1e999`` (infinity). Every parser converts through ``num`` /
``integer`` / ``to_gib``; each raises ``BadNumber`` for anything that is not a
finite number inside the stated range, and ``parsers.feed`` skips the line with a
note instead of letting a traceback or an infinite GiB figure through.
"""

from __future__ import annotations

import math

_UNITS = {
    "B": 1, "bytes": 1, "KiB": 1 << 10, "KB": 1 << 10, "kB": 1 << 10, "MiB": 1 << 20, "MB": 1 << 20,
    "GiB": 1 << 30, "GB": 1 << 30, "TiB": 1 << 40,
}

GiB = 1 << 30
# No figure vLLM, PyTorch or the kernel prints has more digits than this (a byte count of a
# multi-terabyte host is 14); anything longer is not a number anyone printed.
MAX_CHARS = 32
# Default range: larger than any byte count, token count or pid a log holds (an exabyte), small
# enough that arithmetic on it stays finite.
LIMIT = 1e18


class BadNumber(ValueError):
    """A captured number that is not a finite number in range; the line is skipped."""

    def __init__(self, text: object, why: str) -> None:
        shown = str(text)
        if len(shown) > 24:
            shown = shown[:20] + "..."
        super().__init__(f"{why}: {shown!r}")
        self.text = shown
        self.why = why


def num(text: str | float | int, *, lo: float = -LIMIT, hi: float = LIMIT) -> float:
    """'1,234' -> 1234.0, '12.50' -> 12.5; ``BadNumber`` for '.', '1.2.3', '1e999', 'nan', 40 digits."""
    if isinstance(text, bool):
        raise BadNumber(text, "not a number")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        s = text.strip().replace(",", "").replace("_", "")
        if not s or len(s) > MAX_CHARS:
            raise BadNumber(text, "not a number" if not s else "too many digits")
        try:
            value = float(s)
        except ValueError:
            raise BadNumber(text, "not a number") from None
    if not math.isfinite(value):
        raise BadNumber(text, "not finite")
    if not lo <= value <= hi:
        raise BadNumber(text, "out of range")
    return value


def integer(text: str | int, *, lo: float = -LIMIT, hi: float = LIMIT) -> int:
    """A whole number as printed ('1,478'); ``BadNumber`` for '12.5', a 5000-digit run, out of range."""
    if isinstance(text, bool):
        raise BadNumber(text, "not a number")
    if isinstance(text, int):
        value = text
    else:
        s = text.strip().replace(",", "").replace("_", "")
        if not s or len(s) > MAX_CHARS:
            raise BadNumber(text, "not a number" if not s else "too many digits")
        try:
            value = int(s)
        except ValueError:
            raise BadNumber(text, "not a whole number") from None
    if not lo <= value <= hi:
        raise BadNumber(text, "out of range")
    return value


def to_bytes(value: str | float, unit: str) -> int:
    """A value with a unit as printed (vLLM's V0 "GB" means GiB) to bytes."""
    v = num(value) if isinstance(value, str) else num(value)
    scaled = v * _UNITS.get(unit, GiB)
    if not -LIMIT <= scaled <= LIMIT:
        raise BadNumber(value, "out of range")
    return int(scaled)


def to_gib(value: str | float, unit: str) -> float:
    return to_bytes(value, unit) / GiB


def maybe_number(text: str) -> int | float | None:
    """For printed argument values: the number when ``text`` is one (finite, in range), else None."""
    try:
        return integer(text)
    except BadNumber:
        pass
    try:
        return num(text)
    except BadNumber:
        return None


def fmt(value: float) -> str:
    """A GiB figure for sentences: '65.97'."""
    return f"{value:.2f}"
