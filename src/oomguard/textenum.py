"""Enums whose members are their text (one definition of what ``str()`` of a member gives).

``class Source(TextEnum)``: each member is a ``str`` equal to its value, and ``str()`` / ``format()`` give
that value (what the output, the JSON and the CLI's choices show), not ``Source.NVML``. ``enum.StrEnum`` is
the same from Python 3.11; oomguard supports 3.10.
"""

from __future__ import annotations

from enum import Enum


class TextEnum(str, Enum):
    def __str__(self) -> str:
        return self.value
