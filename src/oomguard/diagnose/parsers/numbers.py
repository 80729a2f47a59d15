"""Where numbers captured from log text become Python numbers (through ``oomguard.numbers``).

Logs are written by anyone: a capture group of ``[\\d.]+`` can hold ``.``,
``1.2.3``, a 5000-digit run (``int()`` refuses more than 4300 digits) or, through
``float()``, ``1e999`` (infinity). Every parser converts through ``num`` /
``integer`` / ``to_gib``; each raises ``BadNumber`` for anything that is not a
finite number inside the stated range, and ``parsers.feed`` skips the line with a
note instead of letting a traceback or an infinite GiB figure through.
"""

from __future__ import annotations

from oomguard import numbers

_UNITS = {
    "B": 1, "bytes": 1, "KiB": 1 << 10, "KB": 1 << 10, "kB": 1 << 10, "MiB": 1 << 20, "MB": 1 << 20,
    "GiB": 1 << 30, "GB": 1 << 30, "TiB": 1 << 40,
}

GiB = 1 << 30
MAX_CHARS = numbers.MAX_CHARS
# Default range: larger than any byte count, token count or pid a log holds (an exabyte), small
# enough that arithmetic on it stays finite.
LIMIT = 1e18


class BadNumber(numbers.NumberError):
    """A captured number that is not a finite number in range; the line is skipped."""

    def __init__(self, text: object, why: str) -> None:
        super().__init__(text, why)
        # Notes read "a number in it is unreadable (too many digits ...: '999...')".
        short = why[3:] if why.startswith("is ") else why[4:] if why.startswith("has ") else why
        self.args = (f"{short}: {self.text!r}",)

    def __str__(self) -> str:
        return self.args[0]


def num(text: str | float | int, *, lo: float = -LIMIT, hi: float = LIMIT) -> float:
    """'1,234' -> 1234.0, '12.50' -> 12.5; ``BadNumber`` for '.', '1.2.3', '1e999', 'nan', 40 digits."""
    try:
        if isinstance(text, str):
            return numbers.parse_float(text, lo=lo, hi=hi, thousands=True)
        return numbers.as_float(text, lo=lo, hi=hi)
    except numbers.NumberError as exc:
        raise BadNumber(text, exc.why) from None


def integer(text: str | int, *, lo: float = -LIMIT, hi: float = LIMIT) -> int:
    """A whole number as printed ('1,478'); ``BadNumber`` for '12.5', a 5000-digit run, out of range."""
    try:
        if isinstance(text, str):
            return numbers.parse_int(text, lo=lo, hi=hi, thousands=True)
        if isinstance(text, float):  # only ints are whole numbers here, as before
            raise numbers.NumberError(text, "is not a whole number")
        return numbers.as_int(text, lo=lo, hi=hi)
    except numbers.NumberError as exc:
        raise BadNumber(text, exc.why) from None


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
