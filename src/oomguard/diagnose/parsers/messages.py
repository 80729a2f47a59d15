"""vLLM's own error messages, recognised in any shape a report gives them: the message catalog.

``src/oomguard/data/vllm_messages.json`` holds the messages vLLM (and torch, NCCL, Python, pydantic
around it) can print, derived from vLLM's source by ``scripts/extract_vllm_messages.py``: a template
per message (literal words, ``{}`` where a value is formatted in), where it is raised, and the failure
class the place says (the extractor's ``CLASS_RULES``). This module reads a candidate line the way a
person would, whatever was done to it on the way into the report:

1. **normalise**: colour codes (and their ESC-less remnants ``[36m``), rich's box drawing, markdown
   (fences, quotes, ``+``/``-`` diff prefixes, backticks), process prefixes (``(EngineCore pid=1)``,
   ``[rank0]:``), timestamps and level words, the exception's name (``ValueError:``); case and
   whitespace;
2. **find the templates that could be meant** through an index of each template's rarest words
   (``choose_anchors``), so a line meets a handful of templates, not thousands;
3. **score** each against the line's words, placeholders matching anything: every literal word in
   order is an exact match (quality 1); the first words of a template up to where the line stops is
   a truncation; most of its words in order is a fragment; most of its words in any order is a
   paraphrase (lower qualities, see ``_quality``).

The best template's class becomes one cue ``msg:<class>`` (``features.py``), with the quality in its
words and its line. A line whose best match is a warning, or a message the class rules leave
unclassed, gives no cue: it is vLLM's, but it says no class.

Cost: the catalog is loaded on the first candidate line only (``catalog()``); candidate lines are
error records, exception lines and prose (never INFO / DEBUG / WARNING records) that the prefilter
let through; results are memoised by normalised text, and at most ``MAX_LINES_HEAD`` + ``MAX_LINES_TAIL``
distinct lines of a file (lines that differ only in their numbers count once) are matched: the first ones
and the last ones, where a run dies; when lines in between are skipped, the output says so.
"""

from __future__ import annotations

import json
from collections import deque
from functools import lru_cache
from pathlib import Path

from oomguard.diagnose.events import EXCEPTION_NAME, LogLine, error_record
import oomguard.lazy_re as lazy_re  # parsers' patterns compile when first run (diagnose's start-up)
from oomguard.records import record

CATALOG_FILE = Path(__file__).resolve().parents[2] / "data" / "vllm_messages.json"
MAX_LINES_HEAD = 500
MAX_LINES_TAIL = 1500
MAX_LINE_CHARS = 2000
# Below this a match is too weak to say anything (a few common words in common).
MIN_QUALITY = 0.45
# Templates scored per line, those sharing most anchor words with it (bounds the cost of a wordy line).
MAX_CANDIDATES = 24
# At or above this a match is the message itself (all its words, or most of them up to a cut): ``msg:<class>``;
# below it ``msg:<class>:partial``.
STRONG_QUALITY = 0.8
# A cut message on a line people wrote counts from half its words on (0.55 + 0.4 x 0.5).
PROSE_TRUNCATION_MIN = 0.75
# A paraphrase on a line people wrote counts from this quality on: below it the likeness is a few shared words ("I use
# vllm as backend to test the performance" against a benchmark's argument check, 0.51), not a failure stated. CHOSEN,
# not fitted: in the 950 failure records no prose line matched by paraphrase at all; the one such line in the corpus is
# the healthy C17-H6 (a question about a serving engine), which it made a false alarm.
PROSE_PARAPHRASE_MIN = 0.55
# Levels whose messages state a failure; a warning's never does (vLLM warns and carries on).
FAILURE_KINDS_EXCLUDED = frozenset({"warning"})

# What the byte scan must let through for this module (diag-speed's scan reads every parser's SCAN): error
# records and exception lines. Prose reaches the parsers through the other parsers' keywords.
SCAN: tuple[object, ...] = ("ERROR", "CRITICAL", "Error", "Exception", "error:", "Traceback")

_ANSI = lazy_re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\^\[\[[0-9;]*m|(?<![\w\]])\[[0-9]{1,3}(?:;[0-9]{1,3}){0,3}m")
_BOX = lazy_re.compile(r"[\u2500-\u257f\u2580-\u259f]+")
_PREFIXES = lazy_re.compile(
    r"^(?:\s*(?:```\w*|>+|[+-](?=\s|[A-Z])|\*\*?|`|#+\s|\|))*\s*"  # markdown / quote / diff / table
    r"(?:\[rank\d+\]:\s*)?"
    r"(?:\([\w.:/=-]+(?:\s+[\w.:/=-]+)*?(?:\s+pid=\d+)?(?:,\s*ip=[\w.:]+)?\)\s*)*"  # (EngineCore_DP0 pid=1, ip=...)
    r"(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?\s*)?"
    r"(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)[:\s]+(?:\d\d-\d\d\s+)?(?:\d\d:\d\d:\d\d(?:[.,]\d+)?\s+)?"
    r"(?:\[?[\w./-]+\.py(?::\d+)?\]\s*)?)?"
    r"(?:\[rank\d+\]:\s*)?",
)
_EXCEPTION = lazy_re.compile(EXCEPTION_NAME + r"\s*:\s*")
# a word keeps its hyphens ("device-side", a flag's name "--tool-call-parser" is one word)
_TOKEN = lazy_re.compile(r"[a-z][a-z0-9_]*(?:-[a-z0-9_]+)*(?:'[a-z]+)?|\d+(?:\.\d+)?")
_PLACEHOLDER = lazy_re.compile(r"\{n?\}")
_TOKEN_OR_SLOT = lazy_re.compile(_TOKEN.pattern + r"|\x00")
_DIGITS = lazy_re.compile(r"\d+")
_OTHER_LEVEL = lazy_re.compile(r"(?:^|[\s\[|:(-])(?:INFO|DEBUG|TRACE|WARN|WARNING|NOTICE|UserWarning|FutureWarning|"
                          r"DeprecationWarning)(?:[\s\]|:)-]|$)")
# Traceback frames and source lines, a caret line: never a message
_NOT_MESSAGES = ("File \"", "Traceback", "  ", "^", "~", "raise ", "return ", "self.", "During handling", "--", "$ ",
                 "vllm serve", "python ")
# Words too common in reports to anchor a template, whatever the catalog's counts say.
_STOP = frozenset("the a an of to in is be for and or not with on at by it this that are was as from has have "
                  "if please use can must should when which than only but no got".split())


@record(frozen=True)
class Template:
    text: str
    words: tuple[str, ...]  # literal words in order (placeholders dropped)
    wordset: frozenset[str]
    slack: tuple[int, ...]  # how many line tokens may stand before each word (a placeholder's value, or none)
    cls: str | None
    kind: str  # exception type, "error" / "critical" / "warning" (logger), "argparse"
    module: str
    function: str


@record(frozen=True)
class Match:
    template: Template
    quality: float
    how: str  # "exact", "truncated", "fragment", "paraphrase"

    @property
    def failure_class(self) -> str | None:
        t = self.template
        return None if t.kind in FAILURE_KINDS_EXCLUDED else t.cls


class Catalog:
    """The templates by id, built on first use; ``index``: anchor word -> template ids (stored in the file)."""

    def __init__(self, entries: list[dict], releases: tuple[str, ...]) -> None:
        self.entries = entries
        self.releases = releases
        self._templates: dict[int, Template | None] = {}
        index: dict[str, list[int]] = {}
        for i, m in enumerate(entries):
            for w in m.get("a", ()):
                index.setdefault(w, []).append(i)
        self.index = index

    def __len__(self) -> int:
        return len(self.entries)

    def template(self, i: int) -> Template | None:
        try:
            return self._templates[i]
        except KeyError:
            m = self.entries[i]
            words, slack = _words_and_slack(m["t"])
            t = Template(m["t"], words, frozenset(words), slack, m.get("c"), m["x"], m["m"], m.get("f", "")) \
                if len(words) >= 3 else None
            self._templates[i] = t
            return t


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def template_words(text: str) -> tuple[str, ...]:
    """A template's literal words as the matcher compares them (placeholders and numbers dropped, lower case)."""
    return _words_and_slack(text)[0]


_SLOT = "\x00"
PLACEHOLDER_SLACK = 12  # a formatted value: a number, a name, a list of a few items


def _words_and_slack(text: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    words: list[str] = []
    slack: list[int] = []
    pending = 0
    for tok in _TOKEN_OR_SLOT.findall(_PLACEHOLDER.sub(" " + _SLOT + " ", text).lower()):
        if tok == _SLOT:
            pending += PLACEHOLDER_SLACK
        elif not tok[0].isdigit():
            words.append(tok)
            slack.append(pending)
            pending = 0
        else:
            pending += 1
    return tuple(words), tuple(slack)


def choose_anchors(texts: list[str]) -> list[list[str]]:
    """Each template's anchor words: its rarest word across the catalog, and the rarest of each third of it (a
    cut line keeps the first third, a fragment one of the others). The extractor stores them, so loading the
    catalog is reading it."""
    seqs = [template_words(t) for t in texts]
    df: dict[str, int] = {}
    for ws in seqs:
        for w in set(ws):
            df[w] = df.get(w, 0) + 1

    def rarest(ws) -> list[str]:  # noqa: ANN001
        ranked = sorted({w for w in ws if w not in _STOP and len(w) > 2}, key=lambda w: (df[w], w))
        return ranked[:1]

    out = []
    for ws in seqs:
        k = max(1, len(ws) // 3)
        chosen: list[str] = []
        for part in (ws, ws[:k], ws[k:2 * k], ws[2 * k:]):
            for w in rarest(part):
                if w not in chosen:
                    chosen.append(w)
        out.append(chosen or sorted(set(ws))[:1])
    return out


@lru_cache(maxsize=1)
def catalog(path: str | None = None) -> Catalog:
    """The catalog, read on first use (see benchmarks/diagnose_throughput.py --catalog for its load time)."""
    with open(path or CATALOG_FILE, encoding="utf-8") as fh:
        data = json.load(fh)
    return Catalog(data["messages"], tuple(data.get("releases", ())))


def normalise(text: str) -> tuple[str, str | None]:
    """(the message as plain lower-case words, the exception name in front of it or None)."""
    text = _ANSI.sub("", text[:MAX_LINE_CHARS])
    text = _BOX.sub(" ", text)
    text = _PREFIXES.sub("", text, count=1)
    exc = None
    m = _EXCEPTION.match(text)
    if m:
        exc = m.group(1)
        text = text[m.end():]
    text = text.replace("`", "").replace("**", "")
    return " ".join(text.lower().split()), exc


def _quality(t: Template, line: list[str], lineset: set[str]) -> tuple[float, str]:
    words = t.words
    n = len(words)
    common = len(t.wordset & lineset)
    if common < min(4, len(t.wordset)) or common < 0.25 * len(t.wordset):
        return 0.0, ""  # too few of its words for any kind of match (the cheap test first)
    # literal words in order; between two of them only what a placeholder (or a word or two of rewording) holds
    pos = matched = stray = 0
    last_pos = -1
    first_miss = -1
    for i, w in enumerate(words):
        try:
            at = line.index(w, pos)
        except ValueError:
            if first_miss < 0:
                first_miss = i
            continue
        if last_pos >= 0:
            stray += max(0, at - last_pos - 1 - t.slack[i] - 2)
        matched += 1
        pos = at + 1
        last_pos = at
    tight = stray <= 2 + matched // 4
    if matched == n and tight:
        return 1.0, "exact"
    if tight and first_miss >= 4 and matched == first_miss and first_miss >= 0.25 * n and last_pos >= len(line) - 3:
        # the line stops inside the message (a cut paste, a terminal's width): its first words, then nothing
        return 0.55 + 0.4 * first_miss / n, "truncated"
    share = matched / n
    if tight and matched >= 4 and share >= 0.6:
        return 0.35 + 0.55 * share, "fragment"
    if len(line) >= 6:
        # a piece from the middle of the message, and little else on the line: the line's words in the template's
        # order (read from the line's side: the template's earlier words must not take the line's first ones)
        tpos = inside = 0
        for w in line:
            try:
                tpos = words.index(w, tpos) + 1
                inside += 1
            except ValueError:
                continue
        if inside >= 6 and inside >= 0.8 * len(line):
            return min(0.75, 0.4 + 0.025 * inside), "fragment"
    overlap = common / len(t.wordset)
    if len(t.wordset) >= 5 and overlap >= 0.75 and common >= 0.5 * len(lineset):
        # most of its words, in other order or other words between them, and the line is mostly about it
        return 0.6 * overlap, "paraphrase"
    return 0.0, ""


def match_text(text: str) -> Match | None:
    """The best template for one line of text (None below ``MIN_QUALITY``)."""
    return _match(*normalise(text))


@lru_cache(maxsize=8192)
def _match(norm: str, exc: str | None) -> Match | None:
    line = [w for w in tokens(norm) if not w[0].isdigit()]
    if len(line) < 3:
        return None
    cat = catalog()
    lineset = set(line)
    hits: dict[int, float] = {}
    for w in lineset:
        ids = cat.index.get(w, ())
        for i in ids:
            hits[i] = hits.get(i, 0.0) + 1.0 / len(ids)  # a rarer anchor says more
    # the templates whose anchors on the line say most first; the rest are not looked at
    candidates = sorted(hits, key=lambda i: (-hits[i], i))[:MAX_CANDIDATES] if len(hits) > MAX_CANDIDATES else hits
    best: Match | None = None
    best_key = (0.0, 0)
    for i in candidates:
        t = cat.template(i)
        if t is None:
            continue
        q, how = _quality(t, line, lineset)
        if q < MIN_QUALITY:
            continue
        if exc and t.kind == exc:
            q = min(1.0, q + 0.05)  # the same exception type as the raise: a little more sure
        key = (q, len(t.words))
        if key > best_key:
            best, best_key = Match(t, round(q, 3), how), key
    return best


def is_candidate(line: LogLine) -> bool:
    """Lines that can carry a failure message: error records, exception lines, prose (not INFO/WARNING records)."""
    msg = line.message
    if line.kernel or not msg or msg.startswith(_NOT_MESSAGES) or msg.endswith(" \\") or msg.count(" --") >= 3:
        return False  # a traceback's frames and code, a command line (continued with a backslash, or its flags)
    if line.level in ("ERROR", "CRITICAL"):
        return True
    if line.level is not None or _OTHER_LEVEL.search(line.message[:100]):
        return False  # INFO / WARNING records, vLLM's or another logger's (NCCL's "NCCL INFO", Python's "- INFO -")
    return line.prose or error_record(line.message)


@record
class MessageHit:
    feature: str
    file: str
    line: int
    text: str
    quality: float
    how: str
    template: str
    where: str
    prose: bool = False  # a line people wrote (not a log record): their words, however exact


@record
class LineBuffer:
    """The candidate lines of one read, bounded: the first ``MAX_LINES_HEAD`` and the last ``MAX_LINES_TAIL``
    distinct texts of each file (``skipped`` counts those in between). An entry is (line number, text, prose)."""

    head: dict[str, list[tuple[int, str, bool]]]
    tail: dict[str, deque]
    seen: dict[str, set[str]]
    skipped: dict[str, int]

    @classmethod
    def new(cls) -> LineBuffer:
        return cls({}, {}, {}, {})

    def add(self, line: LogLine) -> None:
        text = line.raw.strip()
        if not text:
            return
        # lines that differ only in their numbers (pids, times, sizes: a crash loop's restarts) match alike
        key = _DIGITS.sub("", text)
        seen = self.seen.setdefault(line.file, set())
        if key in seen:
            return
        entry = (line.line, text, bool(line.prose))
        head = self.head.setdefault(line.file, [])
        if len(head) < MAX_LINES_HEAD:
            head.append(entry)
            seen.add(key)
            return
        tail = self.tail.setdefault(line.file, deque())
        if len(seen) < MAX_LINES_HEAD + MAX_LINES_TAIL * 4:
            seen.add(key)  # bounded: past this, repeats in the tail are matched again (memoised anyway)
        tail.append(entry)
        if len(tail) > MAX_LINES_TAIL:
            tail.popleft()
            self.skipped[line.file] = self.skipped.get(line.file, 0) + 1

    def lines(self):
        for file, head in self.head.items():
            for no, text, prose in head:
                yield file, no, text, prose
            for no, text, prose in self.tail.get(file, ()):
                yield file, no, text, prose


def note(line: LogLine, buffer: LineBuffer) -> None:
    if is_candidate(line):
        buffer.add(line)


def hits(buffer: LineBuffer, skip: set[tuple[str, int]] | frozenset = frozenset()) -> list[MessageHit]:
    """The best-matching line of each class (first in file order among equals), leaving out the lines in
    ``skip`` (those another parser already read as an error: one line, one cue)."""
    best: dict[str, MessageHit] = {}
    for file, no, text, prose in buffer.lines():
        if (file, no) in skip:
            continue
        m = match_text(text)
        if m is None or m.failure_class is None:
            continue
        if prose and m.how == "paraphrase" and m.quality < PROSE_PARAPHRASE_MIN:
            continue
        if prose and m.how == "truncated" and m.quality < PROSE_TRUNCATION_MIN:
            # a message's first words in someone's text ("- Free memory on device: 78.6/79.2 GiB on startup") are
            # often a measurement, not the error: the words that state the failure come later
            continue
        feature = f"msg:{m.failure_class}"
        known = best.get(feature)
        if known is None or m.quality > known.quality:
            t = m.template
            best[feature] = MessageHit(feature, file, no, text[:300], m.quality, m.how, t.text,
                                       f"{t.module}:{t.function}" if t.function else t.module, prose)
    return list(best.values())


def notes(buffer: LineBuffer) -> list[str]:
    return [f"{file}: the message catalog read the first {MAX_LINES_HEAD} and last {MAX_LINES_TAIL} error lines; "
            f"{n} distinct ones in between were not matched against it" for file, n in buffer.skipped.items() if n]
