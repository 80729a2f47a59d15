"""Helpers shared by the host check families."""

from __future__ import annotations

from oomguard.units import GiB


def gib_text(n: float) -> str:
    return f"{n / GiB:.1f} GiB"
