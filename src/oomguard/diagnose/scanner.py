"""The fast path over a log: one multi-keyword pass over the bytes, parse only the lines that matter.

Blocks of whole lines come from ``logs.iter_scan_blocks`` (a regular file is read straight into one
buffer, piece by piece; gzip and stdin are streamed). Each piece is searched once for the
``prefilter`` keywords; only the lines holding one are decoded and parsed, with the couple of lines
above each (a message a terminal wrapped) and the first and last serving line of each gap between
them (``FREQUENT``). Stretches that only repeat what was parsed already (a crash loop's thousands of
start-ups, a flood of error lines) are counted, not parsed line by line (see HEAD_LINES below). Memory
does not grow with the file: one buffer and the bounded ``Collector``.

``every_line()`` switches to the reference the fast path is tested against: every line parsed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

from oomguard.diagnose import parsers, prefilter
from oomguard.diagnose.classes import Phase
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.lines import parse_line
from oomguard.diagnose.prefilter import FREQUENT
from oomguard.inputs import logs
import oomguard.lazy_re as lazy_re
from oomguard.records import field, record

_FOLLOW_LINES = 2
_FOLLOW_BYTES = 2048

# Grouping (crash loops, floods of error lines). Once a file has had HEAD_LINES lines parsed, a keyword seen in
# SATURATION parsed lines is routine, and a stretch of lines whose keywords are all routine is counted instead of
# parsed line by line:
# - a stretch opens at once when the server was serving, else (a start-up in progress) at the next start-up,
#   so that the run being read is read to its end, or after GRACE_LINES more routine lines when none comes;
# - it closes before the next line with something new, and at the end of the input; then its last lines are
#   parsed, in order, as context: from its last start-up when that is within RUN_CONTEXT_LINES matched lines
#   (the last run of a crash loop is read whole), else its last CONTEXT_LINES (a traceback before an error);
# - a stretch no longer than its context is parsed whole, so a short log is read exactly as if every
#   matched line were parsed (tests/unit/diagnose/test_diagnose_fast_path.py holds the corpus to that).
# EXTRA_LINES bounds what grace and context parse in one input (a file of many different rare lines), after
# which both shrink to a few lines: time stays bounded by the input's size, never by its content.
HEAD_LINES = 200
SATURATION = 8
GRACE_LINES = 256
CONTEXT_LINES = 64
RUN_CONTEXT_LINES = 512
CONTEXT_BYTES = 512 * 1024
EXTRA_LINES = 20_000
SUB_BYTES = 256 * 1024  # one survey per this many bytes: a few callbacks each, however dense the text
# A stretch this many surveys long looks only for keywords not routine (a smaller search, built once: ~5 ms).
_FULL_SURVEYS = 8
_MAX_STRETCH_NOTES = 5
_CONTEXT_WINDOW = 8 * 1024  # the first look at a stretch's end (see _Scanner._context)


def scan(stream: BinaryIO, name: str, col: Collector, notes: logs.ReadNotes, *, direct: bool = False) -> int:
    """The fast path over a log: keyword search per block, parse only matching lines; returns how many were
    parsed. ``direct``: ``stream`` is untouched (only peeked), so a regular file may be read from its descriptor."""
    if _EVERY_LINE[0]:
        return _scan_every_line(stream, name, col, notes)
    engine = prefilter.engine()
    ahead = _ahead(stream, engine) if direct else None
    scanner = _Scanner(name, col, notes, engine, ahead)
    try:
        for block in logs.iter_scan_blocks(stream, notes, context_bytes=CONTEXT_BYTES, direct=direct):
            if block.long_line_piece:
                scanner.long_piece(block)
            else:
                scanner.feed(block)
        scanner.finish()
    finally:
        if ahead is not None:
            ahead.close()
    return scanner.parsed


# A regular file this large is surveyed by worker processes too (``ahead``); smaller ones never start one. Starting
# them costs 20-40 ms; on two CPUs they save about 0.5 s per GB of dense log (ahead.MIN_CPUS), so ~64 MB to break even.
PARALLEL_FLOOR_BYTES = 64 * 1024 * 1024


def _ahead(stream: BinaryIO, engine: prefilter.Engine) -> Any:
    """The worker processes that run the scanner's searches ahead of it (``ahead.Ahead``), or None: another engine,
    not a regular file, smaller than PARALLEL_FLOOR_BYTES, too few CPUs (``ahead.workers``), or threads running."""
    if engine.name != "hyperscan":
        return None
    fd = logs.regular_fd(stream)
    if fd is None:
        return None
    size = os.fstat(fd).st_size
    if size < PARALLEL_FLOOR_BYTES:
        return None
    from oomguard.diagnose import ahead

    n = ahead.workers()
    threading = sys.modules.get("threading")
    if not n or (threading is not None and threading.active_count() > 1):
        return None  # threads: a fork would not carry them, and a lock one of them holds could stay held in a worker
    try:
        return ahead.Ahead(engine, fd, size, n)
    except OSError:
        return None  # no process to spare: the scan runs on its own


_EVERY_LINE = [False]


@contextmanager
def every_line() -> Iterator[None]:
    """Within this block, every line of every log is parsed (no prefilter, no grouping): the reference that
    the fast path is tested against."""
    _EVERY_LINE[0] = True
    try:
        yield
    finally:
        _EVERY_LINE[0] = False


def _scan_every_line(stream: BinaryIO, name: str, col: Collector, notes: logs.ReadNotes) -> int:
    parsed = 0
    for block in logs.iter_blocks(stream, notes):
        data = block.data
        if block.long_line_piece:
            text = logs.decode_line(data[:logs.MAX_LINE_BYTES], block.first_line, notes)
            parsers.feed(parse_line(name, block.first_line, text, truncated=True), col)
            parsed += 1
            continue
        cursor = _Cursor(block)
        pos = 0
        size = block.end
        while pos < size:
            line_end = data.find(b"\n", pos, size)
            if line_end < 0:
                line_end = size
            line_no = cursor.line_at(pos)
            raw = data[pos:line_end]
            text = logs.decode_line(raw, line_no, notes)
            parsers.feed(parse_line(name, line_no, text, following=_following(data, line_end, size),
                                    truncated=len(raw) > logs.MAX_LINE_BYTES), col)
            parsed += 1
            pos = line_end + 1
    return parsed


@record
class _Stretch:
    """Routine lines not parsed one by one (see HEAD_LINES above)."""

    start: int  # absolute byte offset
    first_line: int
    pos: int  # where it starts in the current block's data (0: before it)
    ids: set[int] = field(default_factory=set)
    run_starts: list[int] = field(default_factory=list)  # prefilter.COUNT_MARKERS inside it, per marker
    known: frozenset[int] = frozenset()  # keywords its surveys may leave out (all routine while it is open)
    uncounted: bool = False  # a survey found engine lines it did not count (prefilter.Survey.uncounted)
    surveys: int = 0


class _Scanner:
    def __init__(self, name: str, col: Collector, notes: logs.ReadNotes, engine: prefilter.Engine, ahead: Any = None):
        self.name = name
        self.ahead = ahead  # ahead.Ahead: the same searches, run by worker processes before they are asked for
        self.col = col
        self.notes = notes
        self.engine = engine
        self.markers = prefilter.run_start_markers()
        self.seen = [0] * len(engine.labels)
        self.saturated: set[int] = set()
        self.refuted = [0] * len(engine.labels)  # see _refute
        self.names: set[bytes] = set()  # the exception names parsed lines gave (prefilter.known_names)
        self._names_key: frozenset[bytes] = frozenset()
        self.parsed = 0
        self.extra = 0  # lines parsed as grace or context
        self.grace = GRACE_LINES
        self.frequent_seen: set[bytes] = set()
        self.serving_procs: set[bytes] = set()
        self.block: logs.Block | None = None
        self.cursor: _Cursor | None = None
        self.gap_start = 0
        self.stretch: _Stretch | None = None
        # What was counted rather than parsed, for the notes.
        self.stretches = 0
        self.stretch_lines = 0
        self.stretch_bytes = 0
        self.stretch_starts = 0
        self.stretch_ids: set[int] = set()
        self.stretch_notes: list[str] = []
        # prefilter.COUNT_MARKERS in the whole input, per marker: every byte is in exactly one sub-block, and each
        # sub-block is counted once (by its survey, or by bytes.count where none was made), parsed or not.
        self.all_starts = [0] * len(prefilter.COUNT_MARKERS)

    # --- blocks ----------------------------------------------------------------------------------
    def feed(self, block: logs.Block) -> None:
        prev = self.block
        self.block = block
        self.cursor = _Cursor(block)
        if prev is not None and not prev.flush and prev.data is block.data:
            # Same buffer: the gap after the last hit goes on (serving lines are looked at once per gap).
            self.gap_start = max(0, self.gap_start + prev.offset - block.offset)
        else:
            self.gap_start = block.begin
        if self.stretch is not None:
            self.stretch.pos = max(0, self.stretch.start - block.offset)
        data = block.data
        pos, end = block.begin, block.end
        while pos < end:
            sub_end = pos + SUB_BYTES
            if sub_end >= end - SUB_BYTES // 2:
                sub_end = end
            else:
                nl = data.find(b"\n", sub_end, end)
                sub_end = end if nl < 0 else nl + 1
            self._sub_block(pos, sub_end)
            pos = sub_end
        if self.stretch is None and block.flush:
            self._frequent(self.gap_start, end)
            self.gap_start = end

    def long_piece(self, block: logs.Block) -> None:
        """A piece of a line longer than the reader holds: the part around its first keyword is parsed."""
        if self.stretch is not None and self.block is not None:
            self._close_stretch(self.block.end)
        elif self.block is not None and not self.block.flush:
            self._frequent(self.gap_start, self.block.end)
        self.block = None
        self._add_starts([block.data.count(m) for m in prefilter.COUNT_MARKERS])
        found = self.engine.lines(block.data, 0, len(block.data))
        if not found:
            return
        hit = found[0][2]
        data = block.data
        start = max(0, hit - logs.MAX_LINE_BYTES // 2)
        text = logs.decode_line(data[start:start + logs.MAX_LINE_BYTES], block.first_line, self.notes)
        parsers.feed(parse_line(self.name, block.first_line, text, truncated=True), self.col)
        self._count(found[0][3])

    def finish(self) -> None:
        if self.stretch is not None and self.block is not None:
            self._close_stretch(self.block.end)
        elif self.block is not None and not self.block.flush:
            self._frequent(self.gap_start, self.block.end)
        if self.stretches:
            names = ", ".join(sorted({self.engine.labels[i] for i in self.stretch_ids})[:12])
            self.notes.messages.extend(self.stretch_notes)
            if self.stretches > _MAX_STRETCH_NOTES:
                self.notes.messages.append(f"{self.stretches - _MAX_STRETCH_NOTES:,} more such stretches")
            starts = f", {self.stretch_starts:,} start-up(s)" if self.stretch_starts else ""
            self.notes.messages.append(
                f"{self.stretch_lines:,} line(s) in {self.stretches:,} stretch(es) ({self.stretch_bytes / 1e6:,.1f} MB"
                f"{starts}) only repeat lines shown (matching: {names}): counted, not parsed one by one")
        runs = prefilter.start_ups(self.all_starts)
        if runs > 1:
            # The whole input's, parsed start-ups included: a crash loop of N start-ups says N.
            self.notes.messages.append(f"{runs:,} start-ups in this input (counted by their lines "
                                       f"{' / '.join(repr(m.decode()) for m in reversed(prefilter.COUNT_MARKERS))})")
        if self.engine.name != "hyperscan":
            self.notes.messages.append(f"keyword scan with {self.engine.name} (the hyperscan package is not "
                                       "installed or does not run here): slower, same result")

    # --- one sub-block ---------------------------------------------------------------------------
    def _sub_block(self, a: int, b: int) -> None:
        block = self.block
        assert block is not None and self.cursor is not None
        data = block.data
        survey = None
        st = self.stretch
        forced: set[int] = set()  # lines naming an exception not seen yet: parsed, whatever their patterns
        if st is not None:
            survey = self._survey(a, b, st.known)
            st.surveys += 1
            if not st.known and st.surveys == _FULL_SURVEYS:
                # After its first survey (which names its keywords, for the notes) a stretch looks only for the
                # new; nothing is parsed while it is open, so what is routine does not change.
                st.known = frozenset(self.saturated)
            quiet = survey.ids <= self.saturated or self._refuted_at(survey, data, a, b)
            forced = self._new_names(data, a, b)
            quiet = quiet and not forced
            self._add_starts(survey.run_starts)
            if quiet:
                st.ids |= survey.ids
                st.uncounted |= survey.uncounted
                for i, n in enumerate(survey.run_starts):
                    st.run_starts[i] += n
                self._count_lines(a, b)  # newlines are counted here, once
                return
        if survey is None and self.engine.surveys_keywords:
            # Outside a stretch too, a block whose keywords are all routine (on lines no pattern selected, or
            # routine ones) holds nothing to parse: the literal survey says so at memory speed, where the
            # pattern automaton would read the whole block (1 GB of serving traffic: a dozen lines to parse).
            survey = self._survey(a, b, frozenset())
            self._add_starts(survey.run_starts)
            if survey.ids <= self.saturated and (self.parsed < HEAD_LINES or not (forced := self._new_names(data, a, b))):
                if self.ahead is not None:
                    self._count_lines(a, b)  # the workers counted them (else the reader counts them later)
                return
        if survey is None:
            self._add_starts([data.count(m, a, b) for m in prefilter.COUNT_MARKERS])
        found = survey.lines if survey is not None and survey.lines is not None else self.engine.lines(data, a, b)
        if survey is not None and survey.lines is None and not forced:
            self._refute(survey.ids, found)
        extra = False
        for line_start, line_end, hit, ids in found:
            if self.parsed >= HEAD_LINES and ids <= self.saturated and line_start not in forced:
                st = self.stretch
                if st is not None:
                    st.ids |= ids
                    self._count_starts(st, line_start, line_end, 1)
                    continue
                if self.grace > 0 and self.col.state.phase < Phase.READY and not self._starts_run(line_start, line_end):
                    self.grace -= 1  # the run being read is read to its end
                    extra = True
                else:
                    self._open_stretch(self.gap_start)
                    self.stretch.ids |= ids  # type: ignore[union-attr]
                    self._count_starts(self.stretch, line_start, line_end, 1)  # type: ignore[arg-type]
                    continue
            elif self.parsed >= HEAD_LINES:
                # Something new: after it, a run is again read to its end before lines are counted.
                self.grace = GRACE_LINES if self.extra < EXTRA_LINES else 0
            if self.stretch is not None:
                self._close_stretch(line_start)
            self._lead_in(self.gap_start, line_start)
            self._parse(line_start, line_end, hit, ids)
            if extra:
                self.extra += 1
                extra = False
            self.gap_start = line_end + 1

    def _add_starts(self, counts: list[int]) -> None:
        for i, n in enumerate(counts):
            self.all_starts[i] += n

    def _count_lines(self, a: int, b: int) -> None:
        """Newlines up to ``b`` counted (the workers' count of ``[a, b)`` when they have it)."""
        block = self.block
        assert block is not None and self.cursor is not None
        if self.ahead is not None and block.counted_to == a:
            n = self.ahead.newlines(block.offset + a, block.offset + b)
            if n is not None:
                block.counted_lines += n
                block.counted_to = b
                return
        self.cursor.line_at(b)

    def _survey(self, a: int, b: int, known: frozenset[int]) -> prefilter.Survey:
        """``engine.survey`` of the current block's ``[a, b)``: the workers' answer when they have it."""
        data = self.block.data  # type: ignore[union-attr]
        ahead = self.ahead
        if ahead is None:
            return self.engine.survey(data, a, b, known)
        db, leave_out = self.engine.survey_db(known)  # type: ignore[attr-defined]
        offset = self.block.offset  # type: ignore[union-attr]
        survey = ahead.survey(offset + a, offset + b, leave_out)
        if survey is None:
            return self.engine.survey_with(db, data, a, b)  # type: ignore[attr-defined]
        survey.at = {i: pos - offset for i, pos in survey.at.items()}
        return survey

    def _new_names(self, data: bytes, a: int, b: int) -> set[int]:
        """Lines of the block that name an exception no parsed line named (prefilter.known_names): new, whatever
        their keywords and patterns say (a crash loop's Traceback and RuntimeError lines are routine; a new
        ValueError among them is not). Before HEAD_LINES nothing is routine, so nothing needs forcing."""
        if len(self._names_key) != len(self.names):
            self._names_key = frozenset(self.names)
        found = None
        if self.ahead is not None:
            offset = self.block.offset  # type: ignore[union-attr]
            found = self.ahead.names(offset + a, offset + b, self._names_key)
            if found is not None:
                found = [pos - offset for pos in found]
        if found is None:
            found = self.engine.new_names(data, a, b, self._names_key)
        return {prefilter.line_bounds(data, pos - 1, a, b)[0] for pos in found}

    def _refute(self, ids: set[int], found: list[tuple[int, int, int, frozenset[int]]]) -> None:
        """A survey (keywords) said a block of a stretch holds something new, and its lines (patterns) say
        they are all routine: the keywords that made it look new are on lines no parser acts on. After
        SATURATION such blocks a keyword is routine too, so a stretch of them is surveyed, not read line by
        line (crash-loop start-ups print words like "Loading" on lines the patterns leave alone)."""
        if not all(line_ids <= self.saturated for *_, line_ids in found):
            return
        for i in ids - self.saturated:
            self.refuted[i] += 1
            if self.refuted[i] >= SATURATION:
                self.saturated.add(i)

    def _refuted_at(self, survey: prefilter.Survey, data: bytes, a: int, b: int) -> bool:
        """In a stretch, keywords not yet routine in a block: the lines where each first occurs are given to the
        pattern automaton (a few lines, not the whole block). When none holds anything new, those keywords are
        refuted once (``_refute``) and the block stays in the stretch; else False: the block is read line by line.
        A crash loop's first blocks (keywords such as "Loading" on lines no pattern wants) then cost a few
        lines each instead of a dense block through the automaton."""
        new = survey.ids - self.saturated
        where = survey.at
        if not where or not all(i in where for i in new):
            return False
        found: list[tuple[int, int, int, frozenset[int]]] = []
        done: set[int] = set()
        for i in new:
            # ``where[i]`` is just past the first match (its last byte is on the line; " GPU\n" ends at its newline).
            line_start, line_end = prefilter.line_bounds(data, min(where[i], b) - 1, a, b)
            if line_start in done:
                continue
            done.add(line_start)
            line = self.engine.lines(data, line_start, min(line_end + 1, b))
            if line and not line[0][3] <= self.saturated:
                return False  # something new there: the block is read line by line
            found += line
        self._refute(survey.ids, found)
        return True

    def _starts_run(self, line_start: int, line_end: int) -> bool:
        assert self.block is not None
        raw = self.block.data[line_start:line_end]
        return any(m in raw for m in self.markers)

    def _count_starts(self, st: _Stretch, line_start: int, line_end: int, sign: int) -> None:
        assert self.block is not None
        raw = self.block.data[line_start:line_end]
        for i, m in enumerate(prefilter.COUNT_MARKERS):
            if m in raw:
                st.run_starts[i] += sign * raw.count(m)

    def _lead_in(self, gap: int, line_start: int) -> None:
        """Before a hit: the last serving lines of the gap, then the lines just above the hit (a message a
        terminal wrapped: the parsers read a line with the ones after it, so they may find it there)."""
        block = self.block
        assert block is not None
        data = block.data
        starts = []
        p = line_start
        for _ in range(_FOLLOW_LINES):
            if p <= gap:
                break
            p = max(gap, data.rfind(b"\n", 0, p - 1) + 1)
            starts.append(p)
        starts.reverse()
        self._frequent(gap, starts[0] if starts else line_start)
        for k, start in enumerate(starts):
            end = (starts[k + 1] if k + 1 < len(starts) else line_start) - 1
            self._parse(start, end, start, frozenset(), counted=False)

    def _parse(self, line_start: int, line_end: int, hit: int, ids: frozenset[int], counted: bool = True) -> None:
        block = self.block
        assert block is not None and self.cursor is not None
        data = block.data
        line_no = self.cursor.line_at(line_start)
        raw = data[line_start:line_end]
        if len(raw) > logs.MAX_LINE_BYTES:
            # Show the part of a huge line around the keyword, not its first bytes.
            start = max(line_start, hit - logs.MAX_LINE_BYTES // 2)
            raw = data[start:min(line_end, start + logs.MAX_LINE_BYTES)]
            self.notes.truncated_lines += 1
        text = logs.decode_line(raw, line_no, self.notes)
        parsers.feed(parse_line(self.name, line_no, text, following=_following(data, line_end, block.end),
                                truncated=line_end - line_start > logs.MAX_LINE_BYTES), self.col)
        self.names |= prefilter.known_names(bytes(raw))
        if counted:
            # And the keywords a survey would see on it (the hyperscan engine surveys keywords, parses patterns).
            self._count(ids | self.engine.line_keywords(data, line_start, line_end))

    def _count(self, ids: frozenset[int]) -> None:
        self.parsed += 1
        seen = self.seen
        for i in ids:
            seen[i] += 1
            if seen[i] == SATURATION:
                self.saturated.add(i)

    # --- stretches of routine lines --------------------------------------------------------------
    def _open_stretch(self, pos: int) -> None:
        block = self.block
        assert block is not None and self.cursor is not None
        self.stretch = _Stretch(start=block.offset + pos, first_line=self.cursor.line_at(pos), pos=pos,
                                run_starts=[0] * len(prefilter.COUNT_MARKERS))

    def _close_stretch(self, upto: int) -> None:
        """End the stretch at ``upto`` (current block): parse its last lines as context, count the rest."""
        block = self.block
        st = self.stretch
        assert block is not None and st is not None and self.cursor is not None
        self.stretch = None
        lo, context = self._context(st, upto)
        budget = self.extra < EXTRA_LINES
        if len(context) > CONTEXT_LINES or lo > st.pos or st.start < block.offset:
            # A crash loop: begin at the last start-up, so that its run is read from its first line.
            run_from = None
            for k in range(len(context) - 1, max(-1, len(context) - 1 - RUN_CONTEXT_LINES), -1):
                if self._starts_run(context[k][0], context[k][1]):
                    run_from = k
                    break
            if run_from is not None and budget:
                context = context[run_from:]
            else:
                context = context[-(CONTEXT_LINES if budget else 8):]
            skipped_to = context[0][0] if context else upto
        else:
            skipped_to = st.pos  # short enough: every line of it is parsed
        for line_start, line_end, _hit, _ids in context:
            self._count_starts(st, line_start, line_end, -1)  # parsed below, so not among the counted
        if skipped_to > st.pos or st.start < block.offset:
            self._note_stretch(st, skipped_to)
        # The last serving lines of the part not parsed, then the context in order.
        if skipped_to > st.pos:
            self._frequent(st.pos, skipped_to)
        gap = skipped_to
        for line_start, line_end, hit, ids in context:
            if line_start < gap:
                continue
            self._lead_in(gap, line_start)
            self._parse(line_start, line_end, hit, ids)
            self.extra += 1
            gap = line_end + 1
        self.gap_start = gap

    def _context(self, st: _Stretch, upto: int) -> tuple[int, list[tuple[int, int, int, frozenset[int]]]]:
        """The candidate lines of the last CONTEXT_BYTES of a stretch (from the start of a line), as
        ``_close_stretch`` reads them: only its last RUN_CONTEXT_LINES lines are ever looked at (the last
        start-up among them), or its last CONTEXT_LINES, or all of it when it holds no more than that. So the
        window grows from its end (8 KiB, then x4) until it holds what those choices need: a dense stretch's
        end costs a few kilobytes through the pattern automaton, not half a megabyte (same lines chosen)."""
        data = self.block.data  # type: ignore[union-attr]
        window = _CONTEXT_WINDOW
        while True:
            lo = max(st.pos, upto - min(window, CONTEXT_BYTES))
            if lo > st.pos and data[lo - 1:lo] != b"\n":
                nl = data.find(b"\n", lo, upto)
                lo = upto if nl < 0 else nl + 1
            context = self.engine.lines(data, lo, upto)
            if window >= CONTEXT_BYTES or lo <= st.pos or len(context) > RUN_CONTEXT_LINES:
                return lo, context
            if len(context) > CONTEXT_LINES and any(
                    self._starts_run(line_start, line_end) for line_start, line_end, _h, _i in context):
                return lo, context  # the last start-up of the whole window is in this one
            window *= 4

    def _note_stretch(self, st: _Stretch, skipped_to: int) -> None:
        block = self.block
        assert block is not None and self.cursor is not None
        last_line = self.cursor.line_at(skipped_to) - 1
        lines = last_line - st.first_line + 1
        if lines <= 0:
            return
        size = block.offset + skipped_to - st.start
        starts = prefilter.start_ups(st.run_starts)
        # Its API server lines were all in the context parsed after it, and it has engine lines a survey did not
        # count (there were API server lines in the same piece): the engine lines counted are a lower bound.
        at_least = "at least " if st.run_starts[1] <= 0 and st.uncounted else ""
        starts = max(starts, 0)
        self.stretches += 1
        self.stretch_lines += lines
        self.stretch_bytes += size
        self.stretch_starts += starts
        self.stretch_ids |= st.ids
        if len(self.stretch_notes) < _MAX_STRETCH_NOTES:
            what = f"{at_least}{starts:,} start-up(s) (a crash loop) and lines" if starts else "lines"
            self.stretch_notes.append(f"lines {st.first_line:,}-{last_line:,} ({size / 1e6:,.1f} MB): {what} that "
                                      "repeat what is shown; counted, not parsed one by one")

    def _frequent(self, start: int, end: int) -> None:
        if end > start and self.block is not None and self.cursor is not None:
            _frequent(self.block.data, start, end, self.name, self.cursor, self.col, self.notes, self.frequent_seen,
                      self.serving_procs)


class _Cursor:
    """Line numbers for positions in a block, counted incrementally as positions move forward (a position
    behind the count, in the context before a block or a stretch being closed, is counted back from it).

    It records its progress on the block, so the reader only counts the rest of it.
    """

    __slots__ = ("block",)

    def __init__(self, block: logs.Block):
        self.block = block

    def line_at(self, line_start: int) -> int:
        b = self.block
        if line_start >= b.counted_to:
            b.counted_lines += b.data.count(b"\n", b.counted_to, line_start)
            b.counted_to = line_start
            return b.first_line + b.counted_lines
        return b.first_line + b.counted_lines - b.data.count(b"\n", line_start, b.counted_to)


def _following(data: bytes, line_end: int, size: int) -> str:
    """The next couple of lines (for messages wrapped by a terminal or a paste)."""
    if line_end >= size:
        return ""
    end = line_end + 1
    for _ in range(_FOLLOW_LINES):
        nxt = data.find(b"\n", end, size)
        if nxt < 0:
            end = size
            break
        end = nxt + 1
    chunk = data[line_end + 1:min(end, line_end + 1 + _FOLLOW_BYTES)]
    return " ".join(part.strip() for part in chunk.decode("utf-8", errors="replace").splitlines())


_TAIL_WINDOW = 64 * 1024


# The process prefix of a serving line ("(APIServer pid=1) "), as lines.parse_line reads it.
_PROC_KEY = lazy_re.compile(rb"\(([A-Za-z_][\w.:/=-]*(?:\s[\w.:/=-]+)*?(?:\s+pid=\d+)?)(?:,\s*ip=[\w.:]+)?\)\s")


def _frequent(data: bytes, start: int, end: int, name: str, cursor: _Cursor, col: Collector, notes: logs.ReadNotes,
              seen: set[bytes], serving_procs: set[bytes]) -> None:
    """Between two hits: feed only the first and the last serving line of each frequent kind, in file order.
    Once the server is serving, a request line only says so, which is known: then the last metrics line
    (requests in flight) and the first line of each kind from a process not yet seen serving (its own phase).

    The last such line is almost always near the end of the gap, so only the tail is searched first; the
    whole gap is searched for a kind already seen in this file, or while nothing has been seen yet (a kind a
    server never prints, like V0's "Added request" in a V1 log, then costs one block, not the whole file).
    """
    found = []
    tail = max(start, end - _TAIL_WINDOW)
    serving = col.state.phase == Phase.SERVING
    for needle in FREQUENT:
        if serving:
            first = data.find(needle, start, min(end, start + _TAIL_WINDOW))
            if first >= 0:
                line_start = max(start, data.rfind(b"\n", 0, first) + 1)
                m = _PROC_KEY.search(data, line_start, min(first, line_start + 300))
                key = m.group(1) if m else b""
                if key not in serving_procs:
                    serving_procs.add(key)
                    found.append(line_start)
            if needle != FREQUENT[0]:
                continue  # the metrics line still counts the requests in flight
        pos = data.rfind(needle, tail, end)
        if pos < 0 and tail > start and (needle in seen or not seen):
            pos = data.rfind(needle, start, tail + len(needle))
        if pos >= 0:
            seen.add(needle)
            found.append(max(start, data.rfind(b"\n", 0, pos) + 1))
            if not serving:
                # The first one is where the phase changes (the server became ready, then busy).
                first = data.find(needle, start, pos)
                if first >= 0:
                    found.append(max(start, data.rfind(b"\n", 0, first) + 1))
    fed = -1
    for line_start in sorted(set(found)):
        if line_start <= fed:
            continue
        line_end = data.find(b"\n", line_start, end)
        if line_end < 0:
            line_end = end
        line_no = cursor.line_at(line_start)
        text = logs.decode_line(data[line_start:line_end], line_no, notes)
        parsers.feed(parse_line(name, line_no, text), col)
        fed = line_end
        # And the line after it: a terminal or a log shipper may have wrapped it there ("...Avg generation
        # throug" / "hput: 834.0 tokens/s, Running: 39 reqs"). Lines of a gap hold no keyword: never fed twice.
        if line_end + 1 < end:
            nxt = data.find(b"\n", line_end + 1, end)
            nxt = end if nxt < 0 else nxt
            text = logs.decode_line(data[line_end + 1:nxt], line_no + 1, notes)
            parsers.feed(parse_line(name, line_no + 1, text), col)
            fed = nxt
