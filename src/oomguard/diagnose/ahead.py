"""The scanner's searches over a large file, run ahead in worker processes: the same answers, computed while it reads.

On a dense log (a crash loop, a flood of distinct error lines) most of a scan is spent in three passes over each
piece of the file: the keyword survey, the watch for exception names not seen yet (``prefilter``) and the
newline count. Here worker processes (forked: they share the compiled databases) read the pieces straight from
the file (``os.pread``), each taking every ``workers``-th one in order, run those passes and send the answers
back through a pipe; the scanner takes each answer when it reaches that piece.

Processes, not threads: the ``hyperscan`` binding releases the GIL while it scans, but its callback takes the GIL
back for every match (a crash loop's start-up markers: about 50 per piece), and ``bytes.count`` holds it. With a
worker thread the scanner waited on it (measured: a 256 MB crash loop took 1.2-1.4 s against 0.9-1.2 s on one thread).

The scanner's decisions do not change: an answer is taken only for exactly the bytes of one sub-block, and it
is exactly what the scanner's own search would have given there:
- a piece is the reader's block (the reader cuts at the last newline before each multiple of
  ``logs.READ_BYTES``), so it is whole lines; no keyword, marker or name spans lines, so a sub-block of several
  pieces is their union;
- the survey leaves out the keywords the scanner last told the workers were routine (``spec``: a bit set of ids
  through a control pipe, taken before each piece), and a survey that leaves out at least those gets what it found
  less the rest (each keyword is a literal of its own: the same first match, with or without the others);
- the name watch is the scanner's own expression for the names it last told the workers it knows (an answer says
  for which, and is taken only for those); before that, and when the names do not fit in one message, the workers
  look for every name (``new_exception_expression`` of nothing) and report each one they saw, and the scanner keeps
  the ones its own expression would match (``_is_new``: a name, less a suffix, that is not known).
Anything else (a different cut, a long line, a piece a worker could not read) the scanner computes itself, as
without this module. ``scanner.scan`` uses it only for a regular file of at least ``PARALLEL_FLOOR_BYTES`` with
the hyperscan engine, on Linux, with MIN_CPUS or more: one worker per CPU (``OOMGUARD_SCAN_JOBS=N`` asks for N
workers; 1 is the one-process scan).
"""

from __future__ import annotations

import fcntl
import io
import marshal
import os
import signal
from typing import Any

from oomguard.diagnose import prefilter
from oomguard.inputs import logs

JOBS_ENV = "OOMGUARD_SCAN_JOBS"
MAX_WORKERS = 8
# Read before a piece to find where the reader's block begins (the last newline before it): a little, then more.
_LOOKBACK = (4 * 1024, 64 * 1024)
_NAME_BYTES = prefilter._NAME_BYTES
_SUFFIXES = prefilter._EXCEPTION_SUFFIXES

# A piece's answers, as marshalled: (start, end, ids, at, engine, api, engine_count, newlines, names, spec,
# names_spec); offsets in the file; ``spec``: the number of the keywords its survey left out (``Ahead.specs``);
# ``names_spec``: 0 when ``names`` maps each name the watch saw (with its suffix) to the offsets just past its colon,
# else the number of the known names (``Ahead.name_sets``) whose watch gave ``names``, the offsets themselves.
_START, _END, _IDS, _AT, _ENGINE, _API, _ENGINE_COUNT, _NEWLINES, _NAMES, _SPEC, _NAMES_SPEC = range(11)
_PIPE_BYTES = 4096
# A message to the workers: its kind (1 byte: _KEYWORDS, a bit set of ids; _KNOWN, names joined by newlines), its
# number (4), its payload's length (2), the payload. At most PIPE_BUF bytes, so that it is written whole or not at all.
_HEAD = 7
_KEYWORDS, _KNOWN = 0, 1
_MESSAGE_BYTES = 4096


# With fewer CPUs than this the scan stays in one process unless OOMGUARD_SCAN_JOBS asks. The workers spend more CPU
# in all than the one-process scan (every piece read twice, a pipe and a process each; measured on the 1 GB benchmark
# logs, 2026-12-02: +20-30 % on the crash loop, 1.9 against 1.6 CPU-s at load 7; +5-20 % on distinct errors) while
# the scanning process's own share falls to 0.4-0.8 CPU-s. On two CPUs that extra is paid on a busy machine: on the
# shared 2-core development machine (load 5-14) two workers made every benchmark log slower than one process
# (256 MB crash loop 1.35-1.62 s against 0.73-0.96). From three CPUs the workers' share is at most the scanning
# process's (an estimate from those CPU figures: not measured here, which has two).
MIN_CPUS = 3


def workers() -> int:
    """Worker processes for a large scan; 0 is the one-process scan. ``$OOMGUARD_SCAN_JOBS`` when it is a positive
    integer (1: none), else the CPUs this process may run on (none below MIN_CPUS); none without ``fork`` or CPU
    affinity (not Linux)."""
    if not hasattr(os, "sched_getaffinity") or not hasattr(os, "fork"):
        return 0
    raw = os.environ.get(JOBS_ENV, "").strip()
    if raw.isdigit() and int(raw) > 0:
        n = int(raw)
        return 0 if n < 2 else min(n, MAX_WORKERS)
    try:
        n = len(os.sched_getaffinity(0))
    except OSError:
        return 0
    return 0 if n < MIN_CPUS else min(n, MAX_WORKERS)


def _names_db(engine: Any) -> Any:
    """``new_exception_expression`` of no names (any name, then ``:``), reporting where each match starts."""
    hs = engine._hs
    db = hs.Database(mode=hs.HS_MODE_BLOCK)
    db.compile(expressions=[prefilter.new_exception_expression(frozenset())], ids=[0],
               flags=[hs.HS_FLAG_MULTILINE | hs.HS_FLAG_SOM_LEFTMOST])
    return db


class Ahead:
    """Worker processes surveying the pieces of ``fd`` ahead of the scanner (see the module docstring)."""

    def __init__(self, engine: Any, fd: int, size: int, workers: int):
        self.engine = engine
        self.fd = fd
        self.size = size
        self.step = logs.READ_BYTES
        self.pieces = -(-size // self.step)
        self.stride = workers  # worker j reads pieces j, j + stride, ...
        self.survey_db = engine.survey_db()[0]
        self.names_db = _names_db(engine)  # every name, with where each match starts: built once, before the fork
        self.specs: dict[int, frozenset[int]] = {0: frozenset()}
        self.name_sets: dict[int, frozenset[bytes]] = {}
        self._told_names: frozenset[bytes] | None = None
        self.pids: list[int] = []
        self.readers: list[io.BufferedReader] = []
        self.controls: list[int] = []  # the write ends of the workers' control pipes
        self.hits = 0  # answers taken (tests check that they are)
        self.misses = 0
        self.narrowed = 0  # surveys answered by pieces that left routine keywords out
        self.named = 0  # name watches answered with the scanner's known names
        self._last: tuple[int, int, list[tuple] | None] | None = None
        self._new: dict[bytes, bool] = {}
        self._new_key: frozenset[bytes] | None = None
        self._held: dict[int, tuple | None] = {}  # read past what was asked for
        try:
            for j in range(workers):
                self._fork(j, workers)
        except OSError:
            if not self.pids:
                raise

    # --- the scanner's side ----------------------------------------------------------------------
    def survey(self, start: int, end: int, leave_out: frozenset[int]) -> prefilter.Survey | None:
        """``survey`` of the file's ``[start, end)`` with the database ``survey_db`` gave for ``leave_out`` (offsets
        in ``at`` absolute), or None."""
        if self.specs[len(self.specs) - 1] != leave_out:
            number = len(self.specs)
            self.specs[number] = leave_out
            bits = sum(1 << i for i in leave_out).to_bytes(max(leave_out, default=0) // 8 + 1, "little")
            self._tell(_KEYWORDS, number, bits)
        pieces = self._pieces(start, end)
        if pieces is None or not all(self.specs[p[_SPEC]] <= leave_out for p in pieces):
            self.misses += 1
            return None
        self.hits += 1
        self.narrowed += any(p[_SPEC] for p in pieces)
        out = prefilter.Survey(run_starts=[0] * len(prefilter.COUNT_MARKERS))
        for p in pieces:
            at = p[_AT]
            for i in p[_IDS]:
                if i not in leave_out and i not in out.ids:
                    out.ids.add(i)
                    out.at[i] = at[i]  # the first piece's: the first occurrence
        engine = any(p[_ENGINE] for p in pieces)
        api = sum(p[_API] for p in pieces)
        out.run_starts[1] = api
        if engine and not api:
            out.run_starts[0] = sum(p[_ENGINE_COUNT] for p in pieces)
        elif engine:
            out.uncounted = True
        return out

    def names(self, start: int, end: int, names: frozenset[bytes]) -> list[int] | None:
        """``new_names`` over the file's ``[start, end)`` for ``names`` (absolute offsets), or None."""
        if names is not self._told_names and names != self._told_names:
            number = len(self.name_sets) + 1
            self.name_sets[number] = names
            self._tell(_KNOWN, number, b"\n".join(sorted(names)))
        self._told_names = names
        pieces = self._pieces(start, end)
        if pieces is None or any(p[_NAMES_SPEC] and self.name_sets[p[_NAMES_SPEC]] != names for p in pieces):
            self.misses += 1
            return None
        self.hits += 1
        out: list[int] = []
        for p in pieces:
            if p[_NAMES_SPEC]:
                self.named += 1
                out += p[_NAMES]
            else:
                out += [pos for name, where in p[_NAMES].items() if self._is_new(name, names) for pos in where]
        return out

    def newlines(self, start: int, end: int) -> int | None:
        pieces = self._pieces(start, end)
        return None if pieces is None else sum(p[_NEWLINES] for p in pieces)

    def _tell(self, kind: int, number: int, payload: bytes) -> None:
        """The workers search the pieces they have not begun with this: the keywords to leave out, or the names
        known. A message too long, or a worker whose pipe is full (it is not reading), keeps what it had: the
        answers say which they are."""
        message = bytes([kind]) + number.to_bytes(4, "little") + len(payload).to_bytes(2, "little") + payload
        if len(message) > _MESSAGE_BYTES:
            return
        for control in self.controls:
            try:
                os.write(control, message)  # at most PIPE_BUF bytes: all of it or nothing
            except OSError:
                pass

    def _is_new(self, name: bytes, names: frozenset[bytes]) -> bool:
        """Whether ``new_exception_expression(names)`` matches this name (with its suffix): some suffix leaves a
        name that is not empty and not in ``names``."""
        if names is not self._new_key:
            self._new = {}
            self._new_key = names
        new = self._new.get(name)
        if new is None:
            new = self._new[name] = any(name.endswith(s) and len(name) > len(s) and name[:-len(s)] not in names
                                        for s in _SUFFIXES)
        return new

    def _pieces(self, start: int, end: int) -> list[tuple] | None:
        if self._last is not None and self._last[0] == start and self._last[1] == end:
            return self._last[2]
        # The reader's block that begins at ``start`` was cut at the last newline before a multiple of the step.
        k = -(-start // self.step)
        out: list[tuple] | None = []
        pos = start
        while pos < end:
            p = self._get(k)
            if p is None or p[_START] != pos or p[_END] > end:
                out = None
                break
            if p[_END] > p[_START]:
                out.append(p)  # type: ignore[union-attr]
            pos = p[_END]
            k += 1
        self._last = (start, end, out)
        return out

    def _get(self, k: int) -> tuple | None:
        """Piece ``k``'s answers from its worker (the ones before it, never asked for, are dropped)."""
        if k in self._held:
            return self._held.pop(k)
        if k >= self.pieces or k % self.stride >= len(self.readers):
            return None  # past the end, or a worker that could not be started
        reader = self.readers[k % self.stride]
        if reader.closed:
            return None
        while True:
            try:
                head = reader.read(4)
                body = reader.read(int.from_bytes(head, "little")) if len(head) == 4 else b""
                got, piece = marshal.loads(body) if body else (None, None)
            except (OSError, ValueError, EOFError, TypeError):
                got = piece = None
            if got is None:
                reader.close()  # the worker is gone: its pieces are the scanner's own
                return None
            if got == k:
                return piece
            if got > k:
                self._held = {got: piece}
                return None

    def close(self) -> None:
        for reader in self.readers:
            reader.close()
        for control in self.controls:
            os.close(control)
        self.controls.clear()
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
        self.readers.clear()
        self.pids.clear()

    # --- a worker's side -------------------------------------------------------------------------
    def _fork(self, j: int, workers: int) -> None:
        r, w = os.pipe()
        cr, cw = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            for fd in (r, w, cr, cw):
                os.close(fd)
            raise
        if pid == 0:
            code = 1
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # the scanner stops its workers itself
                os.close(r)
                os.close(cw)
                for reader in self.readers:
                    reader.close()  # the pipes of workers forked before: only the scanner uses them
                for control in self.controls:
                    os.close(control)
                os.set_blocking(cr, False)
                self._serve(j, workers, w, cr)
                code = 0
            except BaseException:  # noqa: BLE001 - never a traceback from a worker: the scanner does without it
                pass
            os._exit(code)
        os.close(w)
        os.close(cr)
        os.set_blocking(cw, False)
        try:
            # A small pipe: a worker stays a few pieces ahead, so that what the scanner tells it soon applies.
            fcntl.fcntl(r, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        except (OSError, AttributeError):
            pass
        self.pids.append(pid)
        self.readers.append(io.open(r, "rb", buffering=_PIPE_BYTES))
        self.controls.append(cw)

    def _serve(self, j: int, workers: int, w: int, control: int) -> None:
        db, number = self.survey_db, 0
        names_db, names_number = self.names_db, 0
        pending = b""
        for k in range(j, self.pieces, workers):
            try:
                pending += os.read(control, 1 << 16)
            except BlockingIOError:
                pass
            told: dict[int, bytes] = {}
            while len(pending) >= _HEAD and len(pending) >= _HEAD + int.from_bytes(pending[5:7], "little"):
                size = _HEAD + int.from_bytes(pending[5:7], "little")
                told[pending[0]], pending = pending[:size], pending[size:]
            if _KEYWORDS in told:
                bits = int.from_bytes(told[_KEYWORDS][_HEAD:], "little")
                db, leave_out = self.engine.survey_db(frozenset(i for i in range(bits.bit_length()) if bits >> i & 1))
                # The number the scanner gave them, unless survey_db gave the full database instead.
                number = int.from_bytes(told[_KEYWORDS][1:5], "little") if leave_out else 0
            if _KNOWN in told:
                payload = told[_KNOWN][_HEAD:]
                try:
                    names_db = self.engine.names_db(frozenset(payload.split(b"\n")) if payload else frozenset())
                    names_number = int.from_bytes(told[_KNOWN][1:5], "little")
                except Exception:  # noqa: BLE001 - a watch Hyperscan would not build: every name, as before
                    names_db, names_number = self.names_db, 0
            try:
                piece = self._piece(k, db, number, names_db, names_number)
            except Exception:  # noqa: BLE001 - a failed read or scan: the scanner searches that piece itself
                piece = None
            body = marshal.dumps((k, piece))
            view = memoryview(len(body).to_bytes(4, "little") + body)
            while view:
                view = view[os.write(w, view):]

    def _piece(self, k: int, db: Any, number: int, names_db: Any = None, names_number: int = 0) -> tuple | None:
        lo = k * self.step
        hi = min(lo + self.step, self.size)
        for look in _LOOKBACK:
            back = min(lo, look)
            data = os.pread(self.fd, hi - lo + back, lo - back)
            if len(data) != hi - lo + back:
                return None  # the file shrank: the scanner reads what is there
            nl = data.rfind(b"\n", 0, back)
            if k == 0 or nl >= 0:
                break
        else:
            return None  # a line longer than the look-back: where the block begins is not known here
        base = lo - back
        s = 0 if k == 0 else nl + 1
        e = len(data) if hi >= self.size else max(s, data.rfind(b"\n") + 1)
        if e == s:
            return (base + s, base + e, (), {}, 0, 0, 0, 0, {}, 0, 0)
        survey = self.engine.survey_with(db, data, s, e)
        engine = 1 if (survey.uncounted or survey.run_starts[0]) else 0
        head = (base + s, base + e, tuple(survey.ids), {i: base + v for i, v in survey.at.items()}, engine,
                survey.run_starts[1], survey.run_starts[0], data.count(b"\n", s, e))
        if names_number:
            found = tuple(base + pos for pos in self.engine.names_with(names_db, data, s, e))
            return (*head, found, number, names_number)
        names: dict[bytes, list[int]] = {}

        def on_name(_i: int, begin: int, to: int, _flags: int, _ctx: Any) -> None:
            # The match begins at the byte before the name, or at the name itself at the start of a line.
            first = s + begin if data[s + begin] in _NAME_BYTES else s + begin + 1
            where = names.setdefault(data[first:s + to - 1], [])
            if not where or where[-1] != base + s + to:  # the same name again, with another suffix
                where.append(base + s + to)

        self.names_db.scan(memoryview(data)[s:e], match_event_handler=on_name)
        return (*head, {name: tuple(where) for name, where in names.items()}, number, 0)
