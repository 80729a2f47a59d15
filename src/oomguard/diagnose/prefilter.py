"""The fast path: which raw lines deserve a closer look, found in one pass over the bytes.

A multi-gigabyte log is mostly request and throughput lines. Running dozens of
regular expressions on each of them would be far too slow, so the bytes are
searched once for a set of literal keywords, and only lines containing one
reach the parsers. Three engines do that search, best first:

- ``hyperscan`` (the ``hyperscan`` package: Intel's multi-literal matcher, GB/s),
- ``re2`` (``google-re2``, a dependency): one combined pattern,
- ``re`` (the standard library): a trie-shaped pattern, for platforms with neither.

``OOMGUARD_PREFILTER_ENGINE=hyperscan|re2|re`` picks one (tests use it to
force the fallback); an engine that cannot load falls back to the next. Every
engine answers the same two questions (``survey`` and ``lines``, below), and
a test runs the corpus through each one.

Adding a keyword for a new cue
------------------------------
``KEYWORDS`` is plain data: one ``bytes`` literal per entry, grouped by the
parser that needs it. A parser that learns a new cue (a message, a word, a
table header) adds a literal that every such line contains to the group of
its parser (or a new group with a comment naming the parser), in UTF-8 bytes
for non-ASCII words (``"显存".encode()``). Keep literals specific: one that
appears on ordinary serving lines makes every line a hit and costs
throughput. ``tests/unit/diagnose/test_diagnose_fast_path.py`` runs the whole
labelled corpus with this prefilter and with a "parse every line" reference
and fails when a line the parsers understand has no keyword, so a missing
keyword shows up there.

The very frequent serving lines (throughput, HTTP access, request
bookkeeping) are *not* keywords: they would turn every line into a hit. The
scanner instead looks for them (``FREQUENT``) with ``bytes.rfind`` in the
gaps between hits and keeps only the last one of each gap, which is enough to
know the server was serving and how many requests were in flight.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from oomguard.diagnose.parsers.cues import CASELESS_KEYWORDS as CUE_CASELESS
from oomguard.diagnose.parsers.cues import KEYWORDS as CUE_KEYWORDS
from oomguard.diagnose.parsers.frames import KEYWORDS as FRAME_KEYWORDS

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

ENGINES = ("hyperscan", "re2", "re")
ENGINE_ENV = "OOMGUARD_PREFILTER_ENGINE"


def run_start_markers() -> tuple[bytes, ...]:
    """What the first lines of a vLLM start-up say (the identity parser's own list): where a run begins."""
    from oomguard.diagnose.parsers.identity import _STARTING

    return tuple(m.encode() for m in _STARTING)


# Start-ups are counted (a crash loop's size) by the two lines every start-up prints once: the engine's
# "Initializing a V1 LLM engine (v0.10.1) ..." / V0's "Initializing an LLM engine (v0.6.3) ...", and the API
# server's version line; a count is the larger of the two. Few on purpose: each occurrence costs a callback.
COUNT_MARKERS: tuple[bytes, ...] = (b"LLM engine (v", b"vLLM API server version")


@dataclass
class Survey:
    """What a stretch of bytes holds, without looking at its lines one by one."""

    ids: set[int] = field(default_factory=set)  # indices into ALL present anywhere in it (and not known)
    run_starts: list[int] = field(default_factory=list)  # occurrences of each of COUNT_MARKERS
    # Only from engines that find the lines anyway (the fallbacks): reused instead of a second pass.
    lines: list[tuple[int, int, int, frozenset[int]]] | None = None


class Engine(Protocol):
    name: str

    def survey(self, data: bytes, start: int, end: int, known: frozenset[int] = frozenset()) -> Survey:
        """Which keywords occur in ``data[start:end]``, and how many start-ups begin there. Keywords in
        ``known`` may be left out of ``ids`` (an engine may skip looking for them)."""

    def lines(self, data: bytes, start: int, end: int) -> list[tuple[int, int, int, frozenset[int]]]:
        """Every line of ``data[start:end]`` holding a keyword, in order: (line start, line end without the
        newline, position of its first keyword, indices into ALL of every keyword in it)."""


def _line_bounds(data: bytes, pos: int, start: int, end: int) -> tuple[int, int]:
    line_start = max(start, data.rfind(b"\n", start, pos) + 1)
    line_end = data.find(b"\n", pos, end)
    return line_start, end if line_end < 0 else line_end


class _Hyperscan:
    """Two databases over the same literals: one reporting each keyword once (a survey costs a few callbacks
    per block, however dense the text), one reporting every occurrence (for the lines that get parsed)."""

    name = "hyperscan"
    _MAX_PARTIAL_DBS = 8  # surveys that leave known keywords out: one compile (~5 ms) per set of them

    def __init__(self) -> None:
        import hyperscan  # type: ignore[import-not-found]

        self._hs = hyperscan
        n = len(ALL)
        self._n = n
        self._words = [_hs_literal(k) for k in ALL]
        self._case = [hyperscan.HS_FLAG_CASELESS if i >= _CASELESS_FROM else 0 for i in range(n)]
        self._survey_db = self._survey(frozenset())
        self._partial: dict[frozenset[int], Any] = {}
        self._lines_db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._lines_db.compile(expressions=self._words, ids=list(range(n)), flags=self._case)

    def _survey(self, leave_out: frozenset[int]) -> Any:
        hs = self._hs
        keep = [i for i in range(self._n) if i not in leave_out]
        db = hs.Database(mode=hs.HS_MODE_BLOCK)
        db.compile(
            expressions=[self._words[i] for i in keep] + [_hs_literal(m) for m in COUNT_MARKERS],
            ids=keep + list(range(self._n, self._n + len(COUNT_MARKERS))),
            # Start-up markers report every occurrence: they count start-ups.
            flags=[self._case[i] | hs.HS_FLAG_SINGLEMATCH for i in keep] + [0] * len(COUNT_MARKERS),
        )
        return db

    def survey(self, data: bytes, start: int, end: int, known: frozenset[int] = frozenset()) -> Survey:
        out = Survey(run_starts=[0] * len(COUNT_MARKERS))
        ids = out.ids
        starts = out.run_starts
        n = self._n
        db = self._survey_db
        if known:
            # Dense routine text is mostly known keywords: a database without them scans it about twice as fast.
            db = self._partial.get(known)
            if db is None:
                db = self._survey(known) if len(self._partial) < self._MAX_PARTIAL_DBS else self._survey_db
                self._partial[known] = db

        def on_match(i: int, _from: int, _to: int, _flags: int, _ctx: Any) -> None:
            if i < n:
                ids.add(i)
            else:
                starts[i - n] += 1

        db.scan(memoryview(data)[start:end], match_event_handler=on_match)
        return out

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
            # ``to - 1`` is the keyword's last byte (for " GPU\n" the newline, which ends its own line).
            pos = start + to - 1
            if pos > line_end:
                if ids:
                    out.append((line_start, line_end, first, frozenset(ids)))
                line_start, line_end = _line_bounds(data, pos, start, end)
                first = max(line_start, pos - len(ALL[i]) + 1)
                ids = set()
            ids.add(i)
        if ids:
            out.append((line_start, line_end, first, frozenset(ids)))
        return out


def _hs_literal(word: bytes) -> bytes:
    """A literal for Hyperscan's pattern syntax: every byte that is not a letter or digit as ``\\xHH``."""
    return b"".join(bytes([c]) if chr(c).isalnum() and c < 128 else b"\\x%02x" % c for c in word)


class _Regex:
    """One combined pattern (RE2's automaton, or a trie-shaped ``re`` pattern); slower, same answers."""

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
            line_start, line_end = _line_bounds(data, min(hit + len(m.group()) - 1, end - 1), start, end)
            raw = data[line_start:min(line_end + 1, end)]
            lower = raw.lower()
            out.append((line_start, line_end, hit, frozenset(
                i for i, k in enumerate(ALL) if (k in raw if i < _CASELESS_FROM else k in lower))))
            pos = line_end + 1
        return out


def _trie_pattern(words: tuple[bytes, ...]) -> bytes:
    """A regex with shared prefixes factored out: far faster than a flat alternation in ``re``."""
    root: dict[Any, Any] = {}
    for word in words:
        node = root
        for byte in word:
            node = node.setdefault(byte, {})
        node[None] = True

    def emit(node: dict[Any, Any]) -> bytes:
        alternatives = [re.escape(bytes([b])) + emit(child) for b, child in sorted((k, v) for k, v in node.items() if k is not None)]
        if not alternatives:
            return b""
        body = alternatives[0] if len(alternatives) == 1 else b"(?:" + b"|".join(alternatives) + b")"
        if None in node:
            # The word can end here; anything longer is optional and need not match.
            return b"(?:" + body + b")?"
        return body

    return emit(root)


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
    return _Regex("re", re.compile(_trie_pattern(KEYWORDS) + b"|(?i:" + _trie_pattern(CASELESS) + b")"))


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

