"""Small helpers to read numbers the way vLLM and PyTorch print them."""

from __future__ import annotations

_UNITS = {
    "B": 1, "bytes": 1, "KiB": 1 << 10, "KB": 1 << 10, "kB": 1 << 10, "MiB": 1 << 20, "MB": 1 << 20,
    "GiB": 1 << 30, "GB": 1 << 30, "TiB": 1 << 40,
}

GiB = 1 << 30


def num(text: str) -> float:
    """'1,234' -> 1234.0, '12.50' -> 12.5."""
    return float(text.replace(",", "").replace("_", ""))


def to_bytes(value: str | float, unit: str) -> int:
    """A value with a unit as printed (vLLM's V0 "GB" means GiB) to bytes."""
    v = num(value) if isinstance(value, str) else value
    return int(v * _UNITS.get(unit, GiB))


def to_gib(value: str | float, unit: str) -> float:
    return to_bytes(value, unit) / GiB


def fmt(value: float) -> str:
    """A GiB figure for sentences: '65.97'."""
    return f"{value:.2f}"
