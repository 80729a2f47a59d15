"""Line parsers: each takes a ``LogLine`` and records facts and signals on a ``Collector``.

``feed`` runs them in a fixed order: kernel records first (their wording
overlaps with Python's), then memory lines, identity and phase markers, then
errors. The parsers only run on lines the prefilter selected, so they may be
thorough.
"""

from __future__ import annotations

import re

from oomguard.diagnose.events import LogLine
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.parsers.cues import parse_cues
from oomguard.diagnose.parsers.errors import REQUEST_ECHO, parse_errors
from oomguard.diagnose.parsers.identity import parse_identity
from oomguard.diagnose.parsers.kernel import parse_kernel
from oomguard.diagnose.parsers.memory import parse_memory
from oomguard.diagnose.parsers.numbers import BadNumber

MAX_NUMBER_NOTES = 10

__all__ = ["feed"]


_QUOTE = re.compile(r"^(?:>\s?)+")


def feed(line: LogLine, col: Collector) -> None:
    if not line.message:
        return
    if line.prose and line.message.startswith(">"):
        # A quote in an issue reply ("> ERROR 03-13 09:07:24 [core.py:330] ..."): read what is quoted as it was.
        from oomguard.diagnose.lines import parse_line

        quoted = _QUOTE.sub("", line.raw.lstrip())
        if quoted.strip():
            line = parse_line(line.file, line.line, quoted, following=line.following, truncated=line.truncated)
            if not line.message:
                return
    if REQUEST_ECHO.search(line.message):
        # A prompt can say anything ("my pod was OOMKilled"): only the serving phase is read from it.
        parse_identity(line, col)
        return
    try:
        parse_cues(line, col)
        if parse_kernel(line, col):
            return
        parse_memory(line, col)
        parse_identity(line, col)
        parse_errors(line, col)
    except BadNumber as exc:
        # A number nobody could have printed ('1.2.3', '1e999', 5000 digits): the rest of the line
        # cannot be trusted either, so it is skipped, and the output says so.
        col.skipped_numbers += 1
        if col.skipped_numbers <= MAX_NUMBER_NOTES:
            col.notes.append(f"{line.file}:{line.line}: line skipped, a number in it is unreadable ({exc})")
        elif col.skipped_numbers == MAX_NUMBER_NOTES + 1:
            col.notes.append("more lines with unreadable numbers were skipped (not listed)")
