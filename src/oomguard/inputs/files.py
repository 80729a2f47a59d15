"""The one door to the file system for everything oomguard reads.

Every input file (model configs, safetensors headers, launch scripts and
YAML, logs, nvidia-smi and topology captures, /proc files, the HF cache) is
opened here, so one set of rules holds for all of them:

- Only regular files are read. FIFOs, character and block devices, sockets and
  directories (or symlinks to them) are refused before they are opened: a
  FIFO with no writer would block forever, ``/dev/zero`` would never end.
  Streams are accepted only where the user named one: ``-`` (stdin), or a
  pipe passed as ``/dev/fd/N`` / ``/dev/stdin`` (bash's ``<(cmd)``).
- Every read stops at a stated number of bytes, whatever ``st_size`` says
  (``/proc`` files report 0; a file can grow while we read it).
- gzip is decoded here, with a cap on the decompressed size and a clear error
  for trailing bytes that are not another gzip member.
- Every ``OSError`` becomes one ``InputError`` naming the path.

Writes live in ``oomguard.inputs.writes``.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import sys
import zlib
from collections.abc import Iterator

from oomguard.errors import InputError
import oomguard.lazy_re as lazy_re

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import BinaryIO

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

# Stated caps, one per kind of input (a real file of that kind is far smaller).
CONFIG_BYTES = 20 * MiB  # config.json of the largest public models: < 100 KiB
LAUNCH_BYTES = 1 * MiB  # start_api.sh / --config YAML: a few KiB; parsing time grows with it
CAPTURE_BYTES = 64 * MiB  # nvidia-smi / topo captures, a CSV series of days at 1 s
PROC_BYTES = 4 * MiB  # one /proc or /sys file (/proc/PID/cmdline is <= 2 MiB on Linux)
LOG_BYTES = 8 * GiB  # one log, after decompression
SMALL_BYTES = 64 * KiB  # a ref file in the HF cache, one line of text

_GZIP_MAGIC = b"\x1f\x8b"
# /dev/fd/N, /proc/self/fd/N, /dev/stdin: a stream the user handed us by name.
_NAMED_STREAM = lazy_re.compile(r"^/(?:dev/fd|proc/self/fd|proc/\d+/fd)/\d+$|^/dev/stdin$")


def display(path: str | os.PathLike[str]) -> str:
    p = os.fspath(path)
    return "<stdin>" if p == "-" else p


def oserror_text(exc: OSError) -> str:
    """A short, stable description of an OS error (no Python class names)."""
    code = exc.errno
    if isinstance(exc, FileNotFoundError) or code == errno.ENOENT:
        return "no such file"
    if isinstance(exc, PermissionError) or code in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if isinstance(exc, IsADirectoryError) or code == errno.EISDIR:
        return "is a directory, not a file"
    if isinstance(exc, NotADirectoryError) or code == errno.ENOTDIR:
        return "a part of the path is not a directory"
    if code == errno.ENAMETOOLONG:
        return "file name too long"
    if code == errno.ELOOP:
        return "too many levels of symbolic links"
    return exc.strerror or exc.__class__.__name__


def input_error(exc: OSError, path: str | os.PathLike[str], what: str = "") -> InputError:
    return InputError(f"cannot read{' ' + what if what else ''}: {oserror_text(exc)}", file=_short(display(path)))


def _short(name: str) -> str:
    # A 5000-character path is an input too: show enough of it to recognise.
    return name if len(name) <= 300 else name[:150] + "…" + name[-100:]


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def is_named_stream(path: str) -> bool:
    return path == "-" or bool(_NAMED_STREAM.match(path))


def stat_path(path: str | os.PathLike[str], what: str = "") -> os.stat_result:
    """``os.stat`` with the one-line error."""
    try:
        return os.stat(path)
    except OSError as exc:
        raise input_error(exc, path, what) from None
    except ValueError:  # an embedded NUL byte
        raise InputError(f"cannot read{' ' + what if what else ''}: invalid file name (NUL byte)",
                         file=_short(display(path))) from None


def _stdin(what: str) -> BinaryIO:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError(f"{what + ': ' if what else ''}stdin is closed", file="<stdin>")
    return stream


def _open_fd(path: str, what: str, *, allow_stream: bool) -> tuple[int, bool]:
    """Open ``path`` read-only without ever blocking; (fd, is_stream)."""
    st = stat_path(path, what)
    stream_ok = allow_stream and is_named_stream(path) and stat.S_ISFIFO(st.st_mode)
    if not stat.S_ISREG(st.st_mode) and not stream_ok:
        hint = "; pass it on stdin instead (`... - < FILE`)" if allow_stream and stat.S_ISFIFO(st.st_mode) else ""
        raise InputError(f"{what + ': ' if what else ''}{_kind(st.st_mode)}, expected a regular file{hint}",
                         file=_short(display(path)))
    try:
        # O_NONBLOCK: if the path was swapped for a FIFO since the stat, open must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise input_error(exc, path, what) from None
    try:
        st2 = os.fstat(fd)
        if stat.S_ISREG(st2.st_mode):
            stream = False
        elif stream_ok and stat.S_ISFIFO(st2.st_mode):
            stream = True
        else:
            raise InputError(f"{what + ': ' if what else ''}{_kind(st2.st_mode)}, expected a regular file",
                             file=_short(display(path)))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, stream


def read_bytes(path: str | os.PathLike[str], *, limit: int, what: str = "", allow_stdin: bool = False,
               too_large: str | None = None) -> bytes:
    """The whole content of a regular file of at most ``limit`` bytes.

    Larger content is refused (never truncated silently), even when ``st_size``
    claims less: the read itself is bounded. ``too_large`` is the message for
    that case (``{size}`` is replaced by the size when known).
    """
    p = os.fspath(path)
    if p == "-":
        if not allow_stdin:
            raise InputError(f"{what + ': ' if what else ''}cannot read this input from stdin", file="-")
        src = _stdin(what)
        return _remembered(("-",), src, limit, p, what, too_large, lambda: _bounded(src, limit, p, what, too_large))
    fd, stream = _open_fd(p, what, allow_stream=allow_stdin)
    with os.fdopen(fd, "rb", buffering=0) as fh:
        st = os.fstat(fd)
        if stream:
            return _remembered((p, st.st_dev, st.st_ino), None, limit, p, what, too_large,
                               lambda: _bounded(fh, limit, p, what, too_large))
        if st.st_size > limit:
            raise _too_large(p, what, limit, too_large, st.st_size)
        return _bounded(fh, limit, p, what, too_large)


# A stream can be read once, but one command may read its launch more than once (fit --from reads it,
# then check's fixes of it; a model looked up by name reads it again): what a stream gave is kept for
# the rest of the process, keyed by the pipe itself (device, inode) or by the stdin object, so every
# later read of the same ``-`` or ``/dev/fd/N`` sees the same text instead of an empty pipe.
_STREAM_TEXTS: dict[tuple, tuple[object, bytes]] = {}


def _remembered(key: tuple, owner: object, limit: int, path: str, what: str, too_large: str | None, read) -> bytes:
    kept = _STREAM_TEXTS.get(key)
    if kept is not None and kept[0] is owner:
        if len(kept[1]) > limit:
            raise _too_large(path, what, limit, too_large, len(kept[1]))
        return kept[1]
    data = read()
    _STREAM_TEXTS[key] = (owner, data)  # the owner is held, so its id cannot be reused by another stdin
    return data


def read_prefix(path: str | os.PathLike[str], size: int, *, what: str = "") -> bytes:
    """The first ``size`` bytes of a regular file (fewer if it is shorter); for headers of large files."""
    p = os.fspath(path)
    fd, _stream = _open_fd(p, what, allow_stream=False)
    with os.fdopen(fd, "rb", buffering=0) as fh:
        chunks: list[bytes] = []
        total = 0
        try:
            while total < size:
                data = fh.read(size - total)
                if not data:
                    break
                chunks.append(data)
                total += len(data)
        except OSError as exc:
            raise input_error(exc, p, what) from None
    return b"".join(chunks)


def _too_large(path: str, what: str, limit: int, message: str | None, size: int | None) -> InputError:
    if message:
        text = message.replace("{size}", _size(size) if size is not None else f"over {_size(limit)}")
    else:
        text = (f"{what + ': ' if what else ''}larger than {_size(limit)}, the most oomguard reads "
                "for this kind of input")
    return InputError(text, file=_short(display(path)))


def _bounded(fh: BinaryIO, limit: int, path: str, what: str, too_large: str | None = None) -> bytes:
    try:
        data = fh.read(limit + 1)
        # An unbuffered read may return less than asked before the end; keep reading up to the cap.
        chunks = [data]
        total = len(data)
        while data and total <= limit:
            data = fh.read(limit + 1 - total)
            chunks.append(data)
            total += len(data)
    except OSError as exc:
        raise input_error(exc, path, what) from None
    if total > limit:
        raise _too_large(path, what, limit, too_large, None)
    return b"".join(chunks)


def _size(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value.is_integer() else f"{value:.1f} {unit}"
    return f"{n} bytes"


def read_text(path: str | os.PathLike[str], *, limit: int, what: str = "", strict: bool = False,
              allow_stdin: bool = False, too_large: str | None = None) -> str:
    """Text of a regular file (UTF-8; undecodable bytes replaced unless ``strict``)."""
    raw = read_bytes(path, limit=limit, what=what, allow_stdin=allow_stdin, too_large=too_large)
    if not strict:
        return raw.decode("utf-8", errors="replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(f"{what + ': ' if what else ''}not UTF-8 text", file=_short(display(path)), line=line) from None


def read_optional_text(path: str | os.PathLike[str], *, limit: int = PROC_BYTES) -> str | None:
    """Text of a file that may legitimately be absent or hidden (``/proc``, ``/sys``): None then.

    Absent, unreadable, a directory, or an OS error while reading (a process
    that exited under ``/proc/PID``): None, and the caller says what it could
    not see. A FIFO or device, or content over ``limit``, is an error all the
    same: a fake ``/proc`` tree with a FIFO in it must not hang ``host``.
    """
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except (OSError, ValueError):
        return None
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{_kind(st.st_mode)}, expected a regular file", file=_short(p))
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb", buffering=0) as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError("not a regular file", file=_short(p))
        try:
            raw = _bounded(fh, limit, p, "")
        except InputError:
            if not os.access(p, os.R_OK):
                return None
            try:
                fh.seek(0)
                fh.read(limit + 1)
            except OSError:
                return None  # the read itself failed (e.g. ESRCH): absent for our purposes
            raise
    return raw.decode("utf-8", errors="replace")


def list_dir(path: str | os.PathLike[str], what: str = "") -> list[Path]:
    """Entries of a directory, sorted by name, with the one-line error."""
    from pathlib import Path

    try:
        return sorted(Path(path).iterdir())
    except OSError as exc:
        raise input_error(exc, path, what) from None


def list_names(path: str | os.PathLike[str], what: str = "") -> list[str]:
    """``list_dir``'s entries as names (the same order), for a caller that needs no ``Path``: pathlib and the
    urllib.parse and ipaddress it imports are ~3 ms of a plan's start-up."""
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        raise input_error(exc, path, what) from None


def is_file(path: str | os.PathLike[str]) -> bool:
    """``Path.is_file`` that answers False instead of raising (too-long names, NUL bytes, EACCES)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def is_dir(path: str | os.PathLike[str]) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def exists(path: str | os.PathLike[str]) -> bool:
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


# --- streams (logs) ---------------------------------------------------------------------------------------


class _Capped(io.RawIOBase):
    """A raw stream that raises once more than ``limit`` bytes came out of it."""

    def __init__(self, raw: BinaryIO, limit: int, name: str, what: str):
        self._raw = raw
        self._limit = limit
        self._name = name
        self._what = what
        self.total = 0

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        # For a reader that maps a regular file instead of reading it (diagnose's scanner).
        return self._raw.fileno()

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        try:
            n = self._raw.readinto(b)  # type: ignore[attr-defined]
        except OSError as exc:
            raise input_error(exc, self._name, self._what) from None
        n = n or 0
        self.total += n
        if self.total > self._limit:
            raise InputError(
                f"{self._what + ': ' if self._what else ''}more than {_size(self._limit)}, the most oomguard reads "
                "from one input; pass the part around the failure (e.g. `tail -c 1G FILE | oomguard ... -`)",
                file=_short(display(self._name)))
        return n

    def close(self) -> None:
        try:
            if self._name != "-":
                self._raw.close()
        finally:
            super().close()


class GzipError(InputError):
    pass


class _Gunzip(io.RawIOBase):
    """Streaming gzip decoder: concatenated members, a cap on output, errors for what is not gzip.

    Written over ``zlib`` rather than ``gzip.GzipFile`` because GzipFile raises
    from inside a large read on trailing bytes, and the caller loses every line
    decoded before them (a log then read as 0 lines and called clean).
    """

    _IN = 256 * KiB
    _OUT = 1 * MiB

    def __init__(self, src: BinaryIO, limit: int, name: str, what: str):
        self._src = src
        self._limit = limit
        self._name = name
        self._what = what
        self._chunks = self._decode()
        self._pending = b""
        self._done = False
        self.total = 0
        self.members = 0

    def readable(self) -> bool:
        return True

    def _fail(self, problem: str) -> GzipError:
        return GzipError(f"{self._what + ': ' if self._what else ''}{problem}", file=_short(display(self._name)))

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        while not self._pending and not self._done:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                self._done = True
        n = min(len(b), len(self._pending))
        b[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _read(self) -> bytes:
        return self._src.read(self._IN)

    def _decode(self) -> Iterator[bytes]:
        buf = self._read()
        consumed = 0  # compressed bytes before ``buf``
        while True:
            if self.members:
                # After a member: another member, or the end (NUL padding is tolerated, as gzip(1) does).
                while len(buf) < 2:
                    more = self._read()
                    if not more:
                        break
                    buf += more
                if not buf.strip(b"\x00"):
                    while True:
                        more = self._read()
                        if not more:
                            return
                        if more.strip(b"\x00"):
                            buf = more
                            break
                if buf[:2] != _GZIP_MAGIC:
                    raise self._fail(
                        f"bytes after the end of the gzip data (at byte {consumed}) are not gzip: the file is "
                        "damaged or was appended to; `gzip -dc FILE > log` recovers the readable part")
            self.members += 1
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            while not d.eof:
                if not buf:
                    out = d.decompress(b"", self._OUT)  # output zlib still holds
                    if not out:
                        buf = self._read()
                        if not buf:
                            raise self._fail(
                                f"gzip data ends early after {self.total} decompressed bytes (truncated file); "
                                "`gzip -dc FILE > log` recovers the readable part")
                        continue
                else:
                    before = len(buf)
                    try:
                        out = d.decompress(buf, self._OUT)
                    except zlib.error as exc:
                        raise self._fail(f"corrupt gzip data after {self.total} decompressed bytes ({exc})") from None
                    buf = d.unconsumed_tail
                    consumed += before - len(buf) - (len(d.unused_data) if d.eof else 0)
                if out:
                    self.total += len(out)
                    if self.total > self._limit:
                        raise self._fail(f"decompresses to more than {_size(self._limit)}, the most oomguard "
                                         "reads from one input")
                    yield out
            buf = d.unused_data + buf

    def close(self) -> None:
        try:
            self._src.close()
        finally:
            super().close()


def open_stream(path: str, *, what: str = "", limit: int = LOG_BYTES, gunzip: bool = True) -> BinaryIO:
    """A buffered binary stream over a log: a regular file, ``-`` or a named pipe; gzip decoded.

    The stream supports ``peek`` (for content sniffing) and raises ``InputError``
    once more than ``limit`` bytes (decompressed) came out of it.
    """
    if path == "-":
        raw: BinaryIO = _stdin(what)
    else:
        fd, _stream = _open_fd(path, what, allow_stream=True)
        raw = os.fdopen(fd, "rb", buffering=0)
        if not _stream:
            size = os.fstat(fd).st_size
            if size > limit:
                raw.close()
                raise InputError(f"{what + ': ' if what else ''}{_size(size)}, more than {_size(limit)}, the most "
                                 "oomguard reads from one input; pass the part around the failure "
                                 "(e.g. `tail -c 1G FILE | oomguard ... -`)", file=_short(path))
    capped = io.BufferedReader(_Capped(raw, limit, path, what), buffer_size=256 * KiB)
    try:
        head = capped.peek(2)[:2]
    except InputError:
        capped.close()
        raise
    if gunzip and head == _GZIP_MAGIC:
        return io.BufferedReader(_Gunzip(capped, limit, path, what), buffer_size=256 * KiB)  # type: ignore[arg-type]
    return capped  # type: ignore[return-value]


def is_gzip(stream: BinaryIO) -> bool:
    return isinstance(getattr(stream, "raw", None), _Gunzip)


def iter_chunks(stream: BinaryIO, size: int) -> Iterator[bytes]:
    while True:
        chunk = stream.read(size)
        if not chunk:
            return
        yield chunk
