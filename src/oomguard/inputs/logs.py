"""Streaming, bounded-memory readers for the text files operators hand us.

Logs can be many gigabytes, gzip-compressed, piped on stdin, carry invalid
UTF-8, NUL bytes or a single 10 MB line. Nothing here loads a whole file:

- ``open_binary`` opens a path (or ``-`` for stdin), transparently gunzips,
  and turns OS errors into ``InputError``.
- ``sniff`` reads the first bytes without consuming them, so a kind detector
  can look at content rather than the file name.
- ``iter_blocks`` yields large blocks of whole lines (bytes) with the line
  number of their first line. A line longer than ``max_carry_bytes`` is cut
  into pieces and reported in ``ReadNotes``; memory stays bounded by
  ``chunk_bytes + max_carry_bytes``.
- ``iter_text_lines`` is the simple line-by-line path for small structured
  files (nvidia-smi output).

Decoding is always ``utf-8`` with replacement; every oddity is counted in
``ReadNotes`` so the caller can tell the user what could not be read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from oomguard.errors import InputError
from oomguard.inputs import files

KiB = 1 << 10
MiB = 1 << 20

CHUNK_BYTES = 8 * MiB
# A line longer than this is scanned in pieces instead of being accumulated.
MAX_CARRY_BYTES = 1 * MiB
# Lines we keep for display are cut to this length.
MAX_LINE_BYTES = 16 * KiB
SNIFF_BYTES = 64 * KiB
_MAX_NOTED_LINES = 5


@dataclass
class ReadNotes:
    """What went wrong (or oddly) while reading one input."""

    bytes_read: int = 0
    lines: int = 0
    gzip: bool = False
    empty: bool = False
    binary: bool = False
    invalid_utf8_lines: int = 0
    first_invalid_utf8: list[int] = field(default_factory=list)
    long_lines: int = 0
    first_long_lines: list[int] = field(default_factory=list)
    longest_line_bytes: int = 0
    truncated_lines: int = 0
    nul_bytes: bool = False
    messages: list[str] = field(default_factory=list)

    def note_invalid_utf8(self, line: int) -> None:
        self.invalid_utf8_lines += 1
        if len(self.first_invalid_utf8) < _MAX_NOTED_LINES:
            self.first_invalid_utf8.append(line)

    def note_long_line(self, line: int, length: int) -> None:
        if not self.first_long_lines or self.first_long_lines[-1] != line:
            self.long_lines += 1
            if len(self.first_long_lines) < _MAX_NOTED_LINES:
                self.first_long_lines.append(line)
        self.longest_line_bytes = max(self.longest_line_bytes, length)

    def summary(self) -> list[str]:
        """One sentence per problem, for the user."""
        out = list(self.messages)
        if self.empty:
            out.append("file is empty")
        if self.binary:
            out.append("binary content (NUL bytes or mostly non-text); not read")
        if self.invalid_utf8_lines:
            where = ", ".join(str(n) for n in self.first_invalid_utf8)
            out.append(
                f"{self.invalid_utf8_lines} line(s) with invalid UTF-8 (first at line {where}); "
                "undecodable bytes shown as U+FFFD"
            )
        if self.long_lines:
            where = ", ".join(str(n) for n in self.first_long_lines)
            out.append(
                f"{self.long_lines} line(s) longer than {MAX_CARRY_BYTES // MiB} MiB (line {where}; "
                f"longest seen {self.longest_line_bytes / MiB:.1f} MiB): scanned in pieces, "
                "shown truncated"
            )
        if self.truncated_lines:
            out.append(
                f"{self.truncated_lines} matched line(s) longer than {MAX_LINE_BYTES // KiB} KiB "
                "shown truncated"
            )
        return out


@dataclass
class Block:
    """Whole lines of a file: ``data[:end]`` (the rest of ``data`` is not part of this block).

    ``end`` ends with a newline except at EOF or in a long line. A consumer that counts newlines
    anyway (to number its hits) records how far it got in ``counted_to`` / ``counted_lines``, so the
    reader only counts the remainder: every byte is counted once.
    """

    data: bytes
    first_line: int
    end: int = -1
    # True when ``data`` is a piece of one line longer than MAX_CARRY_BYTES.
    long_line_piece: bool = False
    counted_to: int = 0
    counted_lines: int = 0

    def __post_init__(self) -> None:
        if self.end < 0:
            self.end = len(self.data)

    @property
    def text(self) -> bytes:
        return self.data if self.end == len(self.data) else self.data[: self.end]


def display_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def open_binary(path: str) -> BinaryIO:
    """Open ``path`` for binary reading (``-`` is stdin); gunzip when it starts with gzip magic.

    Goes through ``oomguard.inputs.files``: regular files and named pipes only, a
    byte cap on the (decompressed) stream, one-line errors.
    """
    return files.open_stream(path)


def is_gzip(stream: BinaryIO) -> bool:
    return files.is_gzip(stream)


def sniff(stream: BinaryIO, size: int = SNIFF_BYTES) -> bytes:
    """Return up to ``size`` leading bytes without consuming them (the stream must support peek)."""
    peek = getattr(stream, "peek", None)
    if peek is None:
        return b""
    data = b""
    try:
        # BufferedReader.peek returns at most its buffer size; a gzip stream may return less.
        data = peek(size)
    except OSError as exc:
        raise InputError(f"cannot read: {files.oserror_text(exc)}") from None
    return data[:size]


def looks_binary(sample: bytes) -> bool:
    """True for content that is not text: NUL bytes, or mostly control/undecodable bytes."""
    if not sample:
        return False
    if sample.count(b"\x00") > max(4, len(sample) // 1000):
        return True
    text_like = sum(1 for b in sample[:8192] if b >= 0x20 or b in (9, 10, 13, 27))
    window = min(len(sample), 8192)
    if text_like / window < 0.85:
        return True
    # Many invalid UTF-8 sequences in the head: random bytes rather than a log with a stray byte.
    decoded = sample[:8192].decode("utf-8", errors="replace")
    return decoded.count("\ufffd") > window * 0.1


def iter_blocks(
    stream: BinaryIO,
    notes: ReadNotes,
    *,
    chunk_bytes: int = CHUNK_BYTES,
    max_carry_bytes: int = MAX_CARRY_BYTES,
) -> Iterator[Block]:
    """Yield blocks of whole lines; bounded memory whatever the line lengths.

    A short read means end of file (buffered and gzip readers return what was asked for until
    then), so the last block also carries a final line without a newline: a parser looking at
    "the next line" sees it.
    """
    carry = b""
    line_no = 1
    in_long_line = False
    last_byte = b""
    while True:
        try:
            chunk = stream.read(chunk_bytes)
        except OSError as exc:  # files.open_stream turns these into InputError; a caller's own stream may not
            raise InputError(f"read stopped after {notes.bytes_read} bytes: {files.oserror_text(exc)}") from None
        if not chunk:
            break
        notes.bytes_read += len(chunk)
        last_byte = chunk[-1:]
        buf = carry + chunk if carry else chunk
        last = len(chunk) < chunk_bytes
        cut = len(buf) - 1 if last else buf.rfind(b"\n")
        if cut < 0:
            if len(buf) > max_carry_bytes:
                # One line longer than we are willing to hold: scan it in pieces.
                notes.note_long_line(line_no, len(buf) + (max_carry_bytes if in_long_line else 0))
                yield Block(buf, line_no, long_line_piece=True)
                carry = b""
                in_long_line = True
            else:
                carry = buf
            continue
        end = cut + 1
        carry = buf[end:]
        if in_long_line:
            notes.note_long_line(line_no, buf.find(b"\n") + max_carry_bytes)
            in_long_line = False
        block = Block(buf, line_no, end)
        yield block
        line_no = block.first_line + block.counted_lines + buf.count(b"\n", block.counted_to, end)
        if len(carry) > max_carry_bytes:
            notes.note_long_line(line_no, len(carry))
            yield Block(carry, line_no, long_line_piece=True)
            carry = b""
            in_long_line = True
        if last:
            break
    partial = False
    if carry:
        yield Block(carry, line_no)
        partial = True
    elif notes.bytes_read and last_byte != b"\n":
        partial = True
    # line_no is the number the next line would have; a final line without a newline counts too.
    notes.lines = line_no if partial else line_no - 1
    if notes.bytes_read == 0:
        notes.empty = True


def decode_line(raw: bytes, line_no: int, notes: ReadNotes, limit: int = MAX_LINE_BYTES) -> str:
    """Decode one raw line for display: strip the newline, cut to ``limit``, replace bad UTF-8."""
    raw = raw.rstrip(b"\r\n")
    if len(raw) > limit:
        notes.truncated_lines += 1
        raw = raw[:limit]
    if b"\x00" in raw:
        notes.nul_bytes = True
        raw = raw.replace(b"\x00", b"")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        notes.note_invalid_utf8(line_no)
        return raw.decode("utf-8", errors="replace")


def iter_text_lines(stream: BinaryIO, notes: ReadNotes) -> Iterator[tuple[int, str]]:
    """Yield ``(line_no, text)`` for every line, bounded memory (long lines are truncated)."""
    for block in iter_blocks(stream, notes):
        if block.long_line_piece:
            yield block.first_line, decode_line(block.data, block.first_line, notes)
            continue
        line_no = block.first_line
        parts = block.text.split(b"\n")
        if parts and parts[-1] == b"":
            parts.pop()
        for raw in parts:
            yield line_no, decode_line(raw, line_no, notes)
            line_no += 1
