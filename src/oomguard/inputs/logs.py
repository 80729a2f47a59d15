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
- ``iter_scan_blocks`` is what diagnose's scanner reads: for a regular,
  uncompressed file, one reused buffer read straight from the descriptor
  (no per-block allocation, no carry copy); for gzip and stdin,
  ``iter_blocks``. Each block also carries up to ``context_bytes`` of the
  lines before it, for a scanner that needs to look back (the lines before
  an error).
- ``iter_text_lines`` is the simple line-by-line path for small structured
  files (nvidia-smi output).

Decoding is always ``utf-8`` with replacement; every oddity is counted in
``ReadNotes`` so the caller can tell the user what could not be read.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO

from oomguard.errors import InputError
from oomguard.inputs import files
from oomguard.records import field, record

KiB = 1 << 10
MiB = 1 << 20

CHUNK_BYTES = 8 * MiB
# A line longer than this is scanned in pieces instead of being accumulated.
MAX_CARRY_BYTES = 1 * MiB
# Lines we keep for display are cut to this length.
MAX_LINE_BYTES = 16 * KiB
SNIFF_BYTES = 64 * KiB
_MAX_NOTED_LINES = 5


@record
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


@record
class Block:
    """Whole lines of a file: ``data[begin:end]`` (the rest of ``data`` is not part of this block).

    ``end`` ends with a newline except at EOF or in a long line. ``data[:begin]`` (from
    ``iter_scan_blocks`` only) is context: whole lines just before the block, already yielded;
    ``first_line`` is the number of the line at ``begin``. A consumer that counts newlines
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
    begin: int = 0
    offset: int = 0  # the file offset of ``data[0]`` (decompressed bytes for gzip)
    # False when the next block shares this one's buffer and all of ``data`` stays valid in it (a scanner
    # may keep positions of this block pending); True when it is the last before the buffer changes.
    flush: bool = True

    def __post_init__(self) -> None:
        if self.end < 0:
            self.end = len(self.data)
        self.counted_to = max(self.counted_to, self.begin)

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
    offset = 0  # of ``buf``
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
                yield Block(buf, line_no, long_line_piece=True, offset=offset)
                offset += len(buf)
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
        block = Block(buf, line_no, end, offset=offset)
        yield block
        line_no = block.first_line + block.counted_lines + buf.count(b"\n", block.counted_to, end)
        offset += end
        if len(carry) > max_carry_bytes:
            notes.note_long_line(line_no, len(carry))
            yield Block(carry, line_no, long_line_piece=True, offset=offset)
            offset += len(carry)
            carry = b""
            in_long_line = True
        if last:
            break
    partial = False
    if carry:
        yield Block(carry, line_no, offset=offset)
        partial = True
    elif notes.bytes_read and last_byte != b"\n":
        partial = True
    # line_no is the number the next line would have; a final line without a newline counts too.
    notes.lines = line_no if partial else line_no - 1
    if notes.bytes_read == 0:
        notes.empty = True


def iter_scan_blocks(stream: BinaryIO, notes: ReadNotes, *, context_bytes: int = 0, direct: bool = False,
                     chunk_bytes: int = CHUNK_BYTES, max_carry_bytes: int = MAX_CARRY_BYTES) -> Iterator[Block]:
    """Blocks for a scanner, each with up to ``context_bytes`` of whole lines before it (``Block.begin``).

    With ``direct`` (the caller has consumed nothing from ``stream``, only peeked), a regular file that
    is not compressed is read from its descriptor into one reused buffer (``_file_blocks``); anything
    else (gzip, stdin, a pipe) through ``iter_blocks``. Blocks of a regular file share that buffer: a
    block's ``data`` stays valid until the block after one with ``flush`` set.
    """
    fd = regular_fd(stream) if direct else None
    if fd is not None:
        yield from _file_blocks(fd, notes, context_bytes, chunk_bytes, max_carry_bytes)
        return
    prev: Block | None = None
    for block in iter_blocks(stream, notes, chunk_bytes=chunk_bytes, max_carry_bytes=max_carry_bytes):
        if block.long_line_piece or prev is None or not context_bytes:
            yield block
        else:
            tail = prev.data[max(0, prev.end - context_bytes):prev.end]
            cut = tail.find(b"\n")
            tail = tail[cut + 1:] if cut >= 0 and len(tail) == context_bytes else tail
            joined = Block(tail + block.data, block.first_line, end=len(tail) + block.end, begin=len(tail),
                           offset=block.offset - len(tail))
            yield joined
            # Hand the consumer's newline counting back to iter_blocks (it numbers the next block from it).
            block.counted_to = max(0, joined.counted_to - len(tail))
            block.counted_lines = joined.counted_lines
        prev = None if block.long_line_piece else block


def regular_fd(stream: BinaryIO) -> int | None:
    """The descriptor of the regular, uncompressed file behind ``stream``, else None."""
    if files.is_gzip(stream):
        return None
    try:
        fd = stream.fileno()
        st = os.fstat(fd)
    except (OSError, ValueError, AttributeError):
        return None  # not backed by a descriptor: read it as a stream
    return fd if stat.S_ISREG(st.st_mode) and st.st_size > 0 else None


READ_BYTES = 256 * KiB


def _file_blocks(fd: int, notes: ReadNotes, context_bytes: int, chunk_bytes: int, max_carry_bytes: int,
                 read_bytes: int = READ_BYTES) -> Iterator[Block]:
    """``iter_blocks`` for a regular file, without its copies.

    The file is read ``read_bytes`` at a time into one buffer of ``chunk_bytes`` (plus room for context
    and a carried partial line), and each piece is handed over while it is still in the CPU's cache:
    the scanner counts its lines and searches it right after the read, so each byte comes from memory
    once, not three times (on a shared machine memory bandwidth, not the CPU, is the limit). Earlier
    pieces stay in the buffer as context (``Block.begin``) until it is full; then its last
    ``context_bytes`` move to its front, and the block before that has ``flush`` set.

    Not a memory map: copying windows out of a map cost twice as much as reading them here (page
    faults), and a map faults (SIGBUS) when the file is truncated under it (logrotate's copytruncate).
    The file is read up to the size it had when opened: a log still being written is read as a
    snapshot, not chased.
    """
    size = os.fstat(fd).st_size
    reader = io.FileIO(fd, "rb", closefd=False)
    reader.seek(0)
    cap = context_bytes + max_carry_bytes + chunk_bytes
    buf = bytearray(cap)
    view = memoryview(buf)
    head = 0  # valid bytes in buf
    begin = 0  # buf[begin:head] is not yet handed over (a partial line); buf[:begin] is context
    offset = 0  # of buf[0] in the file
    line_no = 1
    total = 0
    last_byte = b""
    in_long_line = False
    while True:
        if cap - head < read_bytes:
            # Full: keep the last whole lines (context for the next block) and the partial line after them.
            pre = max(0, begin - context_bytes)
            if pre:
                nl = buf.find(b"\n", pre, begin)
                pre = nl + 1 if nl >= 0 else begin
            buf[:head - pre] = buf[pre:head]
            offset += pre
            begin -= pre
            head -= pre
        want = min(read_bytes, size - total, cap - head)
        got = 0
        try:
            while got < want:
                n = reader.readinto(view[head + got:head + want])
                if not n:
                    break
                got += n
        except OSError as exc:
            raise InputError(f"read stopped after {total} bytes: {files.oserror_text(exc)}") from None
        total += got
        notes.bytes_read = total
        valid = head + got
        last = got < want or total >= size
        if got:
            last_byte = bytes(buf[valid - 1:valid])
        cut = valid - 1 if last else buf.rfind(b"\n", begin, valid)
        if cut < begin:
            if valid - begin > max_carry_bytes:
                # One line longer than we are willing to hold: scan it in pieces. The lines before it are
                # still in the buffer: an empty block over them lets a scanner finish its context there.
                if begin:
                    yield Block(buf, line_no, end=begin, begin=begin, offset=offset)
                notes.note_long_line(line_no, valid - begin + (max_carry_bytes if in_long_line else 0))
                yield Block(bytes(buf[begin:valid]), line_no, long_line_piece=True, offset=offset + begin)
                offset += valid
                head = begin = 0
                in_long_line = True
            else:
                head = valid
            if last:
                break
            continue
        end = cut + 1
        if in_long_line:
            notes.note_long_line(line_no, buf.find(b"\n", begin, end) - begin + max_carry_bytes)
            in_long_line = False
        block = Block(buf, line_no, end=end, begin=begin, offset=offset,
                      flush=last or cap - valid < read_bytes or valid - end > max_carry_bytes)
        yield block
        line_no = block.first_line + block.counted_lines + buf.count(b"\n", block.counted_to, end)
        if last:
            break
        begin, head = end, valid
        if valid - end > max_carry_bytes:
            notes.note_long_line(line_no, valid - end)
            yield Block(bytes(buf[end:valid]), line_no, long_line_piece=True, offset=offset + end)
            in_long_line = True
            # What follows is the rest of that line: no context carries over it (as in iter_blocks).
            offset += valid
            head = begin = 0
    # line_no is the number the next line would have; a final line without a newline counts too.
    partial = bool(total) and last_byte != b"\n"
    notes.lines = line_no if partial else line_no - 1
    if total == 0:
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
        raw_text = block.text
        pos, size = 0, len(raw_text)
        while pos < size:
            # A megabyte of whole lines at a time: decoded, a block of short lines is several times its size in
            # str objects (8 MiB of 10-byte lines: ~60 MB at once).
            end = size if size - pos <= _DECODE_BYTES else (raw_text.find(b"\n", pos + _DECODE_BYTES) + 1 or size)
            piece = raw_text[pos:end] if pos or end < size else raw_text
            pos = end
            lines = _decoded_lines(piece)
            if lines is not None:
                # The common case in one go (a million-row nvidia-smi series): what decode_line gives each line.
                yield from enumerate(lines, start=line_no)
                line_no += len(lines)
                continue
            parts = piece.split(b"\n")
            if parts and parts[-1] == b"":
                parts.pop()
            for raw in parts:
                yield line_no, decode_line(raw, line_no, notes)
                line_no += 1


_DECODE_BYTES = 1 * MiB


def _decoded_lines(raw: bytes) -> list[str] | None:
    """A block's lines as ``decode_line`` would give them, decoded at once; None when one of them needs
    ``decode_line``'s care (invalid UTF-8, a NUL byte, a line that may be over MAX_LINE_BYTES)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\x00" in text:
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    # Characters, not bytes: exact for ASCII, and a UTF-8 character is at most 4 bytes.
    if lines and max(map(len, lines)) > (MAX_LINE_BYTES if len(text) == len(raw) else MAX_LINE_BYTES // 4):
        return None
    if "\r" in text:
        lines = [line.rstrip("\r") for line in lines]
    return lines
