"""Line parsers: each takes a ``LogLine`` and records facts and signals on a ``Collector``.

``feed`` runs them in a fixed order: kernel records first (their wording
overlaps with Python's), then memory lines, identity and phase markers, then
errors. The parsers only run on lines the prefilter selected, so they may be
thorough.
"""

from __future__ import annotations

import re

from oomguard.diagnose.classes import Phase
from oomguard.diagnose.events import LogLine, error_record
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.parsers import messages
from oomguard.diagnose.parsers.cues import parse_cues
from oomguard.diagnose.parsers.errors import REQUEST_ECHO, parse_errors
from oomguard.diagnose.parsers.identity import parse_identity
from oomguard.diagnose.parsers.kernel import parse_kernel
from oomguard.diagnose.parsers.memory import parse_memory
from oomguard.diagnose.parsers.numbers import BadNumber
import oomguard.lazy_re as lazy_re

MAX_NUMBER_NOTES = 10

__all__ = ["feed"]


_QUOTE = lazy_re.compile(r"^(?:>\s?)+")
# Markdown around the start of a pasted record ("`ValueError`: ...", "**RuntimeError:** ...", "```ERROR ...```"):
# the record is read as if it were unwrapped, when what is left starts like one.
_MARKDOWN = lazy_re.compile(r"^\s*(`{1,3}|\*{1,2})(?=\S)([^`*]{1,200}?)\1")
# A vLLM record or a traceback line behind a prefix nothing else strips: a cloud logger's
# ("INFO 2025-11-19T20:16:36.09Z [resource.labels.containerName: vllm] (EngineCore_DP0 pid=270) ERROR ..."), FastChat's
# ("2024-03-20 19:18:27 | ERROR | stderr |   File ..."), a compose service in brackets ("[llm]   | (APIServer pid=1) ...").
_EMBEDDED = lazy_re.compile(r"(?:^|[\s|\]])\s*((?:\([A-Za-z_][\w.:/=-]*(?:\s[\w.:/=-]+)*?(?:\s+pid=\d+)?(?:,\s*ip=[\w.:]+)?\)\s+)?"
                       r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d|Traceback \(most recent call last\)|"
                       r"File \"[^\"]{1,500}\", line \d))")
# A traceback flattened into one line with its newlines escaped (a JSON string: "...\\n  File \\"/x.py\\", line 3...").
MAX_ESCAPED_PIECES = 400
_RECORD_START = lazy_re.compile(r"^(?:[\w.]+(?:Error|Exception)\b|Traceback \(|(?:INFO|WARNING|ERROR|CRITICAL) )")


# A logfmt record (Go loggers, Docker Model Runner...): time="..." level=info msg="  File \"/x.py\", line 3" component=vllm
_LOGFMT = lazy_re.compile(r'^(?:time="[^"]{0,60}"\s+)?level=\w{1,10}\s+msg="((?:[^"\\]|\\.){0,100000})"')
# Colour codes whose ESC was lost in a paste: "[36m(main_task pid=1)", caret notation "^[[0;36m".
_ANSI_REMNANT = lazy_re.compile(r"\^\[\[[0-9;]{0,12}m|(?<![\w\]\[])\[[0-9]{1,3}(?:;[0-9]{1,3}){0,3}m")


def _unwrap(message: str) -> str | None:
    """The record inside a logfmt line or behind lost colour codes, or None when there is nothing to unwrap."""
    if message.startswith(("time=", "level=")):
        m = _LOGFMT.match(message)
        if m:
            return m.group(1).replace('\\"', '"').replace("\\\\", "\\")
    if "[" in message and "m" in message:
        cleaned = _ANSI_REMNANT.sub("", message)
        if cleaned != message:
            return cleaned.lstrip("`")
    return None


def _feed_escaped(line: LogLine, col: Collector) -> None:
    from oomguard.diagnose.lines import parse_line

    for piece in line.message.replace('\\"', '"').split("\\n")[:MAX_ESCAPED_PIECES]:
        if piece.strip():
            feed(parse_line(line.file, line.line, piece, truncated=line.truncated), col)


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
    if line.level is None and not line.kernel:
        unwrapped = _unwrap(line.message)
        if unwrapped is not None:
            from oomguard.diagnose.lines import parse_line

            line = parse_line(line.file, line.line, unwrapped, following=line.following, truncated=line.truncated)
            if not line.message:
                return
    if line.level is None and not line.kernel:
        if "\\n" in line.message and ('File \\"' in line.message or "Traceback" in line.message):
            _feed_escaped(line, col)
            return
        m = _EMBEDDED.search(line.message)
        if m and line.message[:m.start(1)].rstrip().endswith(("|", "]")):
            from oomguard.diagnose.lines import parse_line

            inner = parse_line(line.file, line.line, line.message[m.start(1):], following=line.following,
                               truncated=line.truncated)
            if inner.message:
                line = inner
    if line.level is None and line.message[:1] in "`*":
        m = _MARKDOWN.match(line.message)
        unwrapped = (m.group(2) + line.message[m.end():]) if m else line.message.strip("`*")
        if unwrapped != line.message and _RECORD_START.match(unwrapped):
            from oomguard.diagnose.lines import parse_line

            line = parse_line(line.file, line.line, unwrapped, following=line.following, truncated=line.truncated)
    if REQUEST_ECHO.search(line.message):
        # A prompt can say anything ("my pod was OOMKilled"): only the serving phase is read from it.
        parse_identity(line, col)
        return
    if messages.is_candidate(line):
        if col.message_lines is None:
            col.message_lines = messages.LineBuffer.new()
        col.message_lines.add(line)
    try:
        parse_cues(line, col)
        if parse_kernel(line, col):
            return
        parse_memory(line, col)
        parse_identity(line, col)
        parse_errors(line, col)
        if col.served_failure is None and col.state.phase >= Phase.READY and not line.prose \
                and (line.level in ("ERROR", "CRITICAL") or error_record(line.message, colon=True)):
            col.served_failure = (line.file, line.line, line.raw[:200])
    except BadNumber as exc:
        # A number nobody could have printed ('1.2.3', '1e999', 5000 digits): the rest of the line
        # cannot be trusted either, so it is skipped, and the output says so.
        col.skipped_numbers += 1
        if col.skipped_numbers <= MAX_NUMBER_NOTES:
            col.notes.append(f"{line.file}:{line.line}: line skipped, a number in it is unreadable ({exc})")
        elif col.skipped_numbers == MAX_NUMBER_NOTES + 1:
            col.notes.append("more lines with unreadable numbers were skipped (not listed)")
