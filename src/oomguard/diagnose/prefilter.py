"""The fast path: which raw lines deserve a closer look, found in one pass over the bytes.

A multi-gigabyte log is mostly request and throughput lines. Running dozens of regular expressions on
each of them in Python would be far too slow, so the bytes are searched once by one automaton, and only
the lines it selects reach the parsers. Three engines do that search, best first:

- ``hyperscan`` (the ``hyperscan`` package): the parsers' **own patterns** compiled together
  (``parsers/scanset.py`` gathers them from the cue table and the parser modules; ``scan_expr.py``
  writes each for the raw bytes so that it matches a superset of the lines the parser would act on).
  A line is selected when it matches something a parser uses, not merely a word of it (1 GB of serving
  traffic: a dozen lines instead of 3 million). The compiled databases are kept on disk
  (``scan_cache.py``);
- ``re2`` (``google-re2``, a dependency) and ``re`` (the standard library, for platforms with neither):
  the literal keywords below (``KEYWORDS``, ``CASELESS``) as one pattern; slower, and every line holding
  a keyword is parsed; the same conclusions.

``OOMGUARD_PREFILTER_ENGINE=hyperscan|re2|re`` picks one (tests use it to force the fallback); an
engine that cannot load falls back to the next. Every engine answers the same two questions (``survey``
and ``lines``, below), and a test runs the corpus through each one.

Adding a cue or a parser pattern
--------------------------------
For the hyperscan engine nothing: a rule added to ``parsers/cues.py``'s ``TABLE``, or a compiled
pattern added at module level in a parser module, is in the scan (a parser's literal substring test,
``"NCCL WARN" in msg``, goes in that module's ``SCAN`` tuple; a helper pattern too broad to select lines
by, in its ``NOT_SCANNED``). For the keyword engines: a literal that every such line contains, in
``KEYWORDS`` below (grouped by parser) or the cue's own keywords, in UTF-8 bytes for non-ASCII words
(``"显存".encode()``). Keep literals specific: one that appears on ordinary serving lines makes every
line a hit. ``tests/unit/diagnose/test_diagnose_fast_path.py`` runs the whole labelled corpus with
each engine and with a "parse every line" reference, so a line the parsers understand that an engine
misses shows up there.

The very frequent serving lines (throughput, HTTP access, request bookkeeping) are *not* selected:
they would turn every line into a hit. The scanner instead looks for them (``FREQUENT``) with
``bytes.rfind`` in the gaps between hits and keeps only the last one of each gap, which is enough to
know the server was serving and how many requests were in flight.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any, Protocol

from oomguard.diagnose.parsers.cues import CASELESS_KEYWORDS as CUE_CASELESS
from oomguard.diagnose.parsers.cues import KEYWORDS as CUE_KEYWORDS
from oomguard.diagnose.events import EXCEPTION_SUFFIXES
from oomguard.diagnose.parsers.frames import KEYWORDS as FRAME_KEYWORDS
import oomguard.lazy_re as lazy_re
from oomguard.records import field, record

# Every line the parsers understand contains at least one of these. Keep them
# specific: a keyword that appears on ordinary serving lines costs throughput.
KEYWORDS: tuple[bytes, ...] = (
    # errors, exceptions, tracebacks (parsers/errors.py)
    b"Error", b"ERROR", b"error:", b"error ", b"CRITICAL", b"Exception", b"Traceback", b'File "',
    b"usage: vllm", b"usage: api_server", b"usage: python", b"unrecognized argument", b"invalid choice", b"ambiguous option",
    b"out of memory", b"Out of memory", b"Tried to allocate", b"OutOfMemory", b"OOM", b"oom", b"CUBLAS_STATUS", b"CUDACachingAllocator",
    b"INTERNAL ASSERT", b"illegal memory", b"illegal instruction", b"device-side assert", b"misaligned address",
    b"unspecified launch failure", b"CUDA error", b"HIP error", b"NCCL",
    b"not enough", b"Not enough", b"insufficient", b"Insufficient", b"can't allocate", b"Cannot allocate",
    b"cannot allocate", b"bad_alloc", b"low on memory", b"No available memory", b"Killed", b"killed", b"KILL",
    b"exit code", b"exitcode", b"exit status", b"exited", b"died", b"Failed with result", b"status=9",
    b"not supported", b"Not supported", b"unsupported", b"Unsupported", b"does not support", b"divisible",
    b"Value error", b"validation error", b"Input should", b"Field required", b"must be", b"is greater than", b"is larger than", b"exceeds",
    b"NotImplemented", b"not implemented", b"Failed to", b"failed to", b"fatal", b"Fatal",
    # memory lines (parsers/memory.py)
    b"GiB", b" GB", b"GB;", b"blocks:", b"blocks", b"oncurrency", b"KV cache size", b"KV cache memory",
    b"KV cache is", b"in KV cache", b"KV Cache", b"kv_cache", b"cache blocks", b"total_gpu_memory",
    b"weights take", b"non_torch", b"activation peak", b"Memory profiling", b"memory profiling",
    b"Free memory", b"free memory", b"max seq len", b"max_model_len", b"max model len", b"model length",
    b"max_position_embeddings", b"max_num_seqs", b"max_num_batched_tokens", b"Mamba", b"mamba",
    b"swap space", b"swap_space", b"gpu_memory_utilization",
    # phase markers (parsers/identity.py)
    b"oading", b"Starting to load", b"Capturing", b"capturing", b"CUDA graph", b"cudagraph", b"CUDAGraph",
    b"Graph capturing", b"compile", b"Compil", b"profil", b"Profil", b"warm", b"Warm",
    b"init engine", b"Initializing", b"initializ", b"API server", b"Uvicorn running", b"startup complete",
    b"Started server", b"Starting vLLM", b"Available routes", b"Chunked prefill", b"detected platform",
    b"weights format", b"EngineCore", b"VllmWorkerProcess",
    # identity: version, args, model (parsers/identity.py)
    b"version", b"Version", b"non-default args", b"args: Namespace", b"with config:", b"Namespace(",
    b"VLLM_", b"model_tag", b"\xe2\x96\x88",  # the banner's block character
    b"vLLM ", b"VLLM ", b"vllm ", b"vllm=", b"vllm-", b"vllm:",  # "vllm==0.8.3", "vllm-0.24.0", "| vLLM 0.11.2 |"
    # kernel / container / init system (parsers/kernel.py)
    b"oom-kill", b"oom_reaper", b"invoked oom", b"Memory cgroup", b"memory cgroup", b"anon-rss",
    b"OOMKilled", b"memory.max", b"memory: usage",
    # words of the paraphrase tier (parsers/paraphrase.py), English and Chinese
    b"VRAM", b"ran out", b"run out", b"fit on", b"fit in", "显存".encode(), "内存".encode(), "缓存".encode(),
    "杀".encode(), "不足".encode(), "不够".encode(), "太小".encode(), "装不下".encode(), b"ther process", b"ther program", b"ther job", b"ther model", b"ther container", b"ther instance",
    b"second process", "进程".encode(), "程序".encode(),
    # environment failures (parsers/environment.py)
    b"No module named", b"Please install", b"please install", b"Nccl", b"limit", b"Assertion `", b"process group", b"store based barrier", b"shared object", b"cannot import", b"emplate", b"placement group",
    b"GPU available", b"fulfill resource", b" GPU\n", b"out of resource",
) + FRAME_KEYWORDS + CUE_KEYWORDS  # report cues: one table, parsers/cues.py

# Matched ignoring ASCII case: cues the parsers look for with re.IGNORECASE (people write "CUDA OUT OF MEMORY",
# "System RAM is exhausted"). Same rules as KEYWORDS; an entry here need not be repeated there.
CASELESS: tuple[bytes, ...] = (
    b"out of memory", b"out of vram", b"ran out", b"run out", b"runs out", b"running out", b"low on memory",
    b"exhausted", b"insufficient", b"not enough", b"killed", b"oom-kill", b"oom kill", b"oom_kill",
    b"fit on", b"fit in", b"too small", b"too little", b"not big enough", b"cache is full", b"cache full",
    b"exit code", b"exit status", b"exitcode",
    # not "kv cache": every throughput line says "GPU KV cache usage"
) + CUE_CASELESS  # the report cues matched ignoring case (parsers/cues.py)

# Frequent serving lines, handled with rfind between hits (see module docstring).
FREQUENT: tuple[bytes, ...] = (
    b"Avg prompt throughput",
    b'"POST /',
    b"Received request",
    b"Added request",
    b"Finished request",
)

# Every literal the engines search for: an index into ALL is a keyword's id.
ALL: tuple[bytes, ...] = KEYWORDS + CASELESS
_CASELESS_FROM = len(KEYWORDS)

# What a keyword id stands for, in the notes ("... (matching: keyword 'Error', ...)").
KEYWORD_LABELS: tuple[str, ...] = tuple(f"keyword {k.decode('utf-8', 'replace').strip()!r}" for k in ALL)

ENGINES = ("hyperscan", "re2", "re")
ENGINE_ENV = "OOMGUARD_PREFILTER_ENGINE"


def run_start_markers() -> tuple[bytes, ...]:
    """What the first lines of a vLLM start-up say (the identity parser's own list): where a run begins."""
    from oomguard.diagnose.parsers.identity import _STARTING

    return tuple(m.encode() for m in _STARTING)


# Start-ups are counted (a crash loop's size) by the two lines a start-up prints: the engine's
# "Initializing a V1 LLM engine (v0.10.1) ..." / V0's "Initializing an LLM engine (v0.6.3) ...", and the API
# server's version line (see ``start_ups``). Few on purpose: each occurrence costs a callback (hyperscan: in the
# survey's own pass; a start-up is kilobytes, so that is a few hundred thousand per GB at most, about 0.15 CPU-s
# per marker). So a survey counts the engine lines only where no API server line is (``Survey.uncounted``).
COUNT_MARKERS: tuple[bytes, ...] = (b"LLM engine (v", b"vLLM API server version")


def start_ups(counts: list[int]) -> int:
    """How many start-ups the COUNT_MARKERS counts (one per marker) stand for: the API server's version lines when
    there are some (one per start of the server, where a data-parallel start prints an engine line per engine),
    else the engine lines (an offline ``LLM()``, an engine's own log)."""
    return counts[1] if counts[1] else counts[0]


@record
class Survey:
    """What a stretch of bytes holds, without looking at its lines one by one."""

    ids: set[int] = field(default_factory=set)  # indices into ALL present anywhere in it (and not known)
    run_starts: list[int] = field(default_factory=list)  # occurrences of each of COUNT_MARKERS
    # Only from engines that find the lines anyway (the fallbacks): reused instead of a second pass.
    lines: list[tuple[int, int, int, frozenset[int]]] | None = None
    # Where each id of ``ids`` first ends (an absolute offset just past its first match), from engines that
    # say so (hyperscan): the scanner then looks at those lines only, not the whole block.
    at: dict[int, int] = field(default_factory=dict)
    # Engine lines present but not counted (run_starts[0] is 0): the API server's lines count this piece's
    # start-ups (``start_ups``), so the engine's are only looked for, not counted (one callback less per start-up).
    uncounted: bool = False


class Engine(Protocol):
    name: str
    labels: tuple[str, ...]  # what each id stands for (a pattern's name, or a keyword), for the notes
    surveys_keywords: bool  # survey ids are keywords while ``lines`` reports patterns
    fallbacks: tuple[tuple[str, str], ...]  # patterns searched for by keywords instead, and why

    def survey(self, data: bytes, start: int, end: int, known: frozenset[int] = frozenset()) -> Survey:
        """Which keywords occur in ``data[start:end]``, and how many start-ups begin there. Keywords in
        ``known`` may be left out of ``ids`` (an engine may skip looking for them)."""

    def lines(self, data: bytes, start: int, end: int) -> list[tuple[int, int, int, frozenset[int]]]:
        """Every line of ``data[start:end]`` worth parsing, in order: (line start, line end without the
        newline, position of its first hit, the ids found in it)."""

    def line_keywords(self, data: bytes, start: int, end: int) -> frozenset[int]:
        """Ids a survey would report for this line that ``lines`` does not (none when they are the same)."""

    def new_names(self, data: bytes, start: int, end: int, names: frozenset[bytes]) -> list[int]:
        """Where lines of ``data[start:end]`` name an exception not in ``names`` (see ``known_names``): just past
        each such name. A stretch's keywords are all routine in a crash loop whose every start-up ends in a
        traceback, so a new exception there would be counted, not parsed, without this."""


def line_bounds(data: bytes, pos: int, start: int, end: int) -> tuple[int, int]:
    """The line of ``data[start:end]`` holding position ``pos``: (its start, its end without the newline)."""
    line_start = max(start, data.rfind(b"\n", start, pos) + 1)
    line_end = data.find(b"\n", pos, end)
    return line_start, end if line_end < 0 else line_end


# A word character of an exception's name (Python's \w, any non-ASCII byte included), and the suffixes of a name
# as the errors parser reads it (events.EXCEPTION_NAME). The name is watched when a colon follows it: "ValueError: ..."
# (a bare name at the end of a line is not: an alternative for it costs 3x on dense error text, where every line
# says "Error").
_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") | frozenset(range(0x80, 0x100))
_EXCEPTION_SUFFIXES = tuple(suffix.encode() for suffix in EXCEPTION_SUFFIXES)
_NAME = lazy_re.compile(rb"(?<![A-Za-z0-9_\x80-\xff])([A-Za-z0-9_\x80-\xff]*)(?:" + b"|".join(_EXCEPTION_SUFFIXES) + rb"):")


def known_names(raw: bytes) -> set[bytes]:
    """The exception names on a parsed line, less their suffix (``b"Runtime"`` for ``RuntimeError: ...``)."""
    return set(_NAME.findall(raw)) if b":" in raw else set()


def _byte_class(allowed: frozenset[int]) -> bytes:
    out, run = [], []
    for c in sorted(allowed):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append((run[0], run[-1]))
        run = [c]
    out.append((run[0], run[-1]))
    return b"[" + b"".join(b"\\x%02x" % a if a == b else b"\\x%02x-\\x%02x" % (a, b) for a, b in out) + b"]"


def new_exception_expression(names: frozenset[bytes]) -> bytes:
    """A Hyperscan expression for a name of an exception, then ``:``, whose name less its suffix is not in
    ``names``: the complement of that finite set over name characters, written from its trie (the empty name, a
    bare ``Error:``, counts as known)."""
    trie: dict = {}
    for name in names | {b""}:
        node = trie
        for c in name:
            node = node.setdefault(c, {})
        node[None] = True
    word = _byte_class(_NAME_BYTES)

    def rest(node: dict) -> bytes:
        children = sorted(k for k in node if k is not None)
        parts = [_byte_class(_NAME_BYTES - set(children)) + word + b"*"] if children else [word + b"+"]
        parts += [b"\\x%02x" % c + rest(node[c]) for c in children]
        body = b"(?:" + b"|".join(parts) + b")"
        return body if None in node else body + b"?"

    before = b"(?:^|" + _byte_class(frozenset(range(256)) - _NAME_BYTES - {10}) + b")"
    return before + rest(trie) + b"(?:" + b"|".join(_EXCEPTION_SUFFIXES) + b"):"


class _Hyperscan:
    """The parsers' own patterns (``parsers/scanset.py``, written for bytes by ``scan_expr.py``) in one
    automaton, for the lines that get parsed: a line is a candidate when it matches something a parser acts
    on, not merely a word (ids ``0 .. n-1``, one per pattern; a pattern Hyperscan cannot take is searched
    for by its keywords under its own id: ``scan_expressions``).

    Surveys (a stretch of routine lines: is anything *new* in this block?) search the literal keyword table
    instead (ids ``n ..``, one per entry of ``ALL``; each reported once per call): a literal search runs at
    memory speed on dense error text, where two hundred regular expressions crawl (measured: about 3x),
    and after the first surveys of a stretch it leaves out the keywords already routine
    (``_MAX_PARTIAL_DBS``). A parsed line's keywords (``line_keywords``) are counted beside its patterns,
    so the scanner knows which keywords are routine. Every database is kept compiled on disk
    (``scan_cache``)."""

    name = "hyperscan"
    surveys_keywords = True  # a survey's ids are keywords, not the ids ``lines`` reports (scanner: _refute)
    _MAX_PARTIAL_DBS = 8

    def __init__(self) -> None:
        import hyperscan  # type: ignore[import-not-found]

        from oomguard.diagnose.parsers.scanset import scan_patterns

        self._hs = hyperscan
        patterns = scan_patterns()
        self._n = len(patterns)
        self._markers = self._n + len(ALL)  # ids of COUNT_MARKERS in the survey databases
        self.labels = tuple(p.name for p in patterns) + KEYWORD_LABELS
        self._source = _source_key(patterns)
        self._refused: frozenset[str] = frozenset()
        self._lines_db = self._db("lines", frozenset())
        self._survey_db = self._db("keywords", frozenset())
        self._partial: dict[frozenset[int], Any] = {}
        self._names: dict[frozenset[bytes], Any] = {}

    @property
    def fallbacks(self) -> tuple[tuple[str, str], ...]:
        return scan_expressions(self._refused)[4]

    def _db(self, kind: str, leave_out: frozenset[int]) -> Any:
        from oomguard.diagnose import scan_cache

        name = kind if not leave_out else f"{kind}-partial"
        key = self._source + f"\0{kind}\0{sorted(leave_out)}".encode()
        return scan_cache.load_or_build(name, key, lambda: self._build(kind, leave_out), self._hs.HS_MODE_BLOCK)

    def _build(self, kind: str, leave_out: frozenset[int]) -> Any:
        hs = self._hs
        if kind == "keywords":
            keep = [i for i in range(len(ALL)) if self._n + i not in leave_out]
            db = hs.Database(mode=hs.HS_MODE_BLOCK)
            db.compile(expressions=[_hs_literal(ALL[i]) for i in keep] + [_hs_literal(m) for m in COUNT_MARKERS],
                       ids=[self._n + i for i in keep] + [self._markers + k for k in range(len(COUNT_MARKERS))],
                       flags=[hs.HS_FLAG_SINGLEMATCH | (hs.HS_FLAG_CASELESS if i >= _CASELESS_FROM else 0)
                              for i in keep] + [hs.HS_FLAG_SINGLEMATCH, 0])  # the engine's line: only whether it is there
            return db
        try:
            return self._compile()
        except hs.error:
            # An expression scan_expr wrote that this Hyperscan refuses: that pattern falls back to keywords.
            self._refused = _refused(hs, *scan_expressions())
            return self._compile()

    def _compile(self) -> Any:
        hs = self._hs
        _labels, exprs, ids, flags, _ = scan_expressions(self._refused)
        db = hs.Database(mode=hs.HS_MODE_BLOCK)
        db.compile(expressions=exprs, ids=ids, flags=flags)
        return db

    def survey(self, data: bytes, start: int, end: int, known: frozenset[int] = frozenset()) -> Survey:
        return self.survey_with(self.survey_db(known)[0], data, start, end)

    def survey_db(self, known: frozenset[int] = frozenset()) -> tuple[Any, frozenset[int]]:
        """The database a survey leaving out ``known`` scans, and the ids it leaves out (none when it is the full
        one: after _MAX_PARTIAL_DBS different sets, and for an empty ``known``)."""
        known = frozenset(i for i in known if i >= self._n)
        if not known:
            return self._survey_db, frozenset()
        db = self._partial.get(known)
        if db is None:
            db = self._db("keywords", known) if len(self._partial) < self._MAX_PARTIAL_DBS else self._survey_db
            self._partial[known] = db
        return db, (known if db is not self._survey_db else frozenset())

    def survey_with(self, db: Any, data: Any, start: int, end: int, scratch: Any = None) -> Survey:
        """A survey of ``data[start:end]`` with one of ``survey_db``'s databases (``scratch``: a thread's own, for
        a database scanned by several threads at once)."""
        # One pass: the keywords (one report each, SINGLEMATCH) and the start-up markers (the API server's line at
        # every occurrence, a callback each: a start-up is kilobytes long; the engine's once) are in the same
        # database, so the bytes are read once.
        out = Survey(run_starts=[0] * len(COUNT_MARKERS))
        ids = out.ids
        at = out.at
        starts = out.run_starts
        markers = self._markers

        def on_match(i: int, _from: int, to: int, _flags: int, _ctx: Any) -> None:
            if i >= markers:
                starts[i - markers] += 1
            else:
                ids.add(i)
                at[i] = start + to

        db.scan(memoryview(data)[start:end], match_event_handler=on_match, scratch=scratch)
        if starts[0] and not starts[1]:
            starts[0] = data.count(COUNT_MARKERS[0], start, end)  # no API server line here: the engine's count
        elif starts[0]:
            starts[0] = 0
            out.uncounted = True
        return out

    def new_names(self, data: bytes, start: int, end: int, names: frozenset[bytes]) -> list[int]:
        return self.names_with(self.names_db(names), data, start, end)

    def names_db(self, names: frozenset[bytes], build: bool = True) -> Any:
        """The database of ``new_names`` for ``names`` (None when it is not built yet and ``build`` is false)."""
        db = self._names.get(names)
        if db is None and build:
            if len(self._names) >= 8:
                self._names.clear()
            hs = self._hs
            db = self._names[names] = hs.Database(mode=hs.HS_MODE_BLOCK)
            db.compile(expressions=[new_exception_expression(names)], ids=[0], flags=[hs.HS_FLAG_MULTILINE])
        return db

    def names_with(self, db: Any, data: Any, start: int, end: int, scratch: Any = None) -> list[int]:
        found: list[int] = []

        def on_match(_i: int, _from: int, to: int, _flags: int, _ctx: Any) -> None:
            found.append(start + to)

        db.scan(memoryview(data)[start:end], match_event_handler=on_match, scratch=scratch)
        return found

    def line_keywords(self, data: bytes, start: int, end: int) -> frozenset[int]:
        """The keyword ids (as surveys report them) of the line ``data[start:end]``."""
        ids: set[int] = set()

        def on_match(i: int, _from: int, _to: int, _flags: int, _ctx: Any) -> None:
            ids.add(i)

        # Its newline too: " GPU\n" is a keyword.
        self._survey_db.scan(memoryview(data)[start:min(end + 1, len(data))], match_event_handler=on_match)
        ids.difference_update(range(self._markers, self._markers + len(COUNT_MARKERS)))
        return frozenset(ids)

    def lines(self, data: bytes, start: int, end: int) -> list[tuple[int, int, int, frozenset[int]]]:
        hits: list[tuple[int, int]] = []
        add = hits.append

        def on_match(i: int, _from: int, to: int, _flags: int, _ctx: Any) -> None:
            add((to, i))

        self._lines_db.scan(memoryview(data)[start:end], match_event_handler=on_match)
        hits.sort()
        out: list[tuple[int, int, int, frozenset[int]]] = []
        line_end = -1
        first = 0
        ids: set[int] = set()
        line_start = 0
        for to, i in hits:
            # ``to`` is just past the match; an expression never holds a newline and never matches empty
            # (scan_expr), so its last byte is on the line it matched.
            pos = start + to - 1
            if pos > line_end:
                if ids:
                    out.append((line_start, line_end, first, frozenset(ids)))
                line_start, line_end = line_bounds(data, pos, start, end)
                first = pos
                ids = set()
            ids.add(i)
        if ids:
            out.append((line_start, line_end, first, frozenset(ids)))
        return out


ScanSet = tuple[tuple[str, ...], list[bytes], list[int], list[int], tuple[tuple[str, str], ...]]


def _source_key(patterns: tuple[Any, ...]) -> bytes:
    """What every database is built from, before any translation: each pattern as the parsers hold it, the
    translator's and this module's source (a change to how patterns are written or compiled is a change of
    key), the keyword table (the last fallback). A cached database is looked up by this, so a run with a warm cache translates nothing."""
    import hashlib
    from pathlib import Path

    from oomguard.diagnose import scan_expr

    h = hashlib.sha256()
    for p in patterns:
        h.update(repr((p.name, p.pattern, p.flags, p.keywords, p.once)).encode() + b"\0")
    try:
        h.update(Path(scan_expr.__file__).read_bytes() + Path(__file__).read_bytes())  # how they are compiled
    except OSError:  # no source to read (a frozen build): a key that changes every run, so never stale
        h.update(os.urandom(16))
    h.update(repr((ALL, _CASELESS_FROM)).encode())
    return h.digest()


def _refused(hs: Any, labels: tuple[str, ...], exprs: list[bytes], ids: list[int], flags: list[int],
             _fallbacks: object) -> frozenset[str]:
    """The patterns whose expressions Hyperscan refuses, one expression at a time (only after the whole set
    failed to compile)."""
    bad = set()
    for e, i, f in zip(exprs, ids, flags, strict=True):
        try:
            hs.Database(mode=hs.HS_MODE_BLOCK).compile(expressions=[e], ids=[0], flags=[f])
        except hs.error:
            bad.add(labels[i])
    return frozenset(bad)


@lru_cache(maxsize=2)
def scan_expressions(refused: frozenset[str] = frozenset()) -> ScanSet:
    """What the hyperscan engine compiles: (labels, expressions, ids, flags, fallbacks). One id per pattern of
    ``parsers/scanset.py``; ``fallbacks`` names each pattern searched for by keywords instead, with the reason
    (``scan_expr`` cannot write it, or Hyperscan refused what it wrote: the names in ``refused``)."""
    import hyperscan  # type: ignore[import-not-found]

    from oomguard.diagnose import scan_expr
    from oomguard.diagnose.parsers.scanset import scan_patterns

    hs = hyperscan
    labels: list[str] = []
    exprs: list[bytes] = []
    ids: list[int] = []
    flags: list[int] = []
    fallbacks: list[tuple[str, str]] = []
    for p in scan_patterns():
        pid = len(labels)
        labels.append(p.name)
        try:
            if p.name in refused:
                raise scan_expr.Unsupported("Hyperscan refused its expression")
            e = scan_expr.translate(p.pattern, p.flags)
        except scan_expr.Unsupported as exc:
            reason = str(exc)
            caseless = bool(p.flags & re.IGNORECASE)
            try:
                words = [(w, caseless) for w in scan_expr.keywords(p.pattern, p.flags, p.keywords)]
            except scan_expr.Unsupported:
                # Not even a literal to search for: the whole keyword table (every line it selects).
                reason += "; no literal of its own: the whole keyword table"
                words = [(w, i >= _CASELESS_FROM) for i, w in enumerate(ALL)]
            fallbacks.append((p.name, reason))
            for w, case in words:
                exprs.append(_hs_literal(w))
                ids.append(pid)
                flags.append(hs.HS_FLAG_CASELESS if case else 0)
            continue
        exprs.append(e.text)
        ids.append(pid)
        # MULTILINE: ``$`` (scan_expr's end of a message) and ``^`` are a line's, not the block's.
        flags.append(hs.HS_FLAG_MULTILINE | (hs.HS_FLAG_CASELESS if e.caseless else 0)
                     | (hs.HS_FLAG_SINGLEMATCH if p.once else 0))
    return tuple(labels), exprs, ids, flags, tuple(fallbacks)


def _hs_literal(word: bytes) -> bytes:
    """A literal for Hyperscan's pattern syntax: every byte that is not a letter or digit as ``\\xHH``."""
    return b"".join(bytes([c]) if chr(c).isalnum() and c < 128 else b"\\x%02x" % c for c in word)


class _Regex:
    """One combined pattern of the keywords (RE2's automaton, or a trie-shaped ``re`` pattern): slower, and
    more lines reach the parsers (every line holding a keyword); the same conclusions. An id is an index
    into ``ALL``."""

    labels: tuple[str, ...] = KEYWORD_LABELS
    surveys_keywords = False
    fallbacks: tuple[tuple[str, str], ...] = ()

    def line_keywords(self, data: bytes, start: int, end: int) -> frozenset[int]:
        return frozenset()  # its lines' ids are keywords already

    def new_names(self, data: bytes, start: int, end: int, names: frozenset[bytes]) -> list[int]:
        found = []
        for m in _NAME.finditer(data, start, end):
            if m.group(1) and m.group(1) not in names:  # a bare "Error:" is known
                found.append(m.end())
        return found

    def __init__(self, name: str, pattern: Any) -> None:
        self.name = name
        self._rx = pattern

    def survey(self, data: bytes, start: int, end: int, known: frozenset[int] = frozenset()) -> Survey:
        found = self.lines(data, start, end)
        ids: set[int] = set()
        for *_, line_ids in found:
            ids |= line_ids
        return Survey(ids, [data.count(m, start, end) for m in COUNT_MARKERS], found)

    def lines(self, data: bytes, start: int, end: int) -> list[tuple[int, int, int, frozenset[int]]]:
        out = []
        pos = start
        search = self._rx.search
        while pos < end:
            m = search(data, pos, end)
            if m is None:
                break
            hit = m.start()
            # " GPU\n" ends with the newline of its own line.
            line_start, line_end = line_bounds(data, min(hit + len(m.group()) - 1, end - 1), start, end)
            raw = data[line_start:min(line_end + 1, end)]
            lower = raw.lower()
            out.append((line_start, line_end, hit, frozenset(
                i for i, k in enumerate(ALL) if (k in raw if i < _CASELESS_FROM else k in lower))))
            pos = line_end + 1
        return out



def _build(name: str) -> Engine:
    if name == "hyperscan":
        return _Hyperscan()
    if name == "re2":
        import re2  # type: ignore[import-not-found]

        options = re2.Options()
        options.max_mem = 64 << 20
        # Order is irrelevant for a prefilter: we only need *a* match per line.
        caseless = b"(?i:" + b"|".join(re.escape(k) for k in CASELESS) + b")"
        return _Regex("re2", re2.compile(b"|".join(re.escape(k) for k in KEYWORDS) + b"|" + caseless, options))
    from oomguard.diagnose.trie import alternation

    # Trie-shaped: far faster than a flat alternation in ``re``.
    return _Regex("re", re.compile(alternation(KEYWORDS) + b"|(?i:" + alternation(CASELESS) + b")"))


@lru_cache(maxsize=4)
def engine(preferred: str | None = None) -> Engine:
    """The best engine that loads, starting from ``preferred`` (default: ``$OOMGUARD_PREFILTER_ENGINE``,
    else hyperscan). ``engine().name`` is what ran; the inputs' notes say it when it is a fallback."""
    wanted = preferred or os.environ.get(ENGINE_ENV, "").strip().lower() or ENGINES[0]
    order = ENGINES[ENGINES.index(wanted):] if wanted in ENGINES else ENGINES
    for name in order:
        try:
            return _build(name)
        except Exception:  # noqa: BLE001 - not installed, no SSSE3, a build problem: the next engine
            continue
    raise AssertionError("the re engine always loads")

