"""A parser's Python regular expression as a Hyperscan expression over the raw bytes of log lines.

The parsers run their patterns on a line's *message*: decoded (bad UTF-8 as U+FFFD), ANSI colours and the
prefixes (container, journald, vLLM's process and level) stripped, docker's JSON unwrapped. The fast path
(``diagnose/prefilter.py``) runs Hyperscan over the raw bytes, before any of that, to find the lines worth
parsing. So a translated expression must match every raw line whose message the Python pattern matches
(a superset: a line it misses is a line the parsers never see), and should match little else (each extra
line costs a decode and a parse). ``translate`` walks the pattern as Python's own parser reads it and
writes each construct so that this holds:

- **bytes, not Hyperscan's UTF-8 mode** (whose results are undefined on invalid UTF-8, which logs have).
  A character class matches one *character*: its ASCII members as bytes, its non-ASCII members as their
  UTF-8 sequences; a class with unlisted non-ASCII members (``.``, ``\\w``, ``[^"]``) takes any run of 1-4
  bytes >= 0x80 for one of them, which also covers an undecodable byte (one U+FFFD to the parser).
  ``\\n`` is never a member (a message has none): a match never spans two lines. An unbounded repeat of a
  class is a byte class (``[^"]*`` stays ``[^"\\n]*``).
- ``^`` is dropped (the message starts somewhere in the raw line, after its prefixes).
- ``$`` is the end of the raw line after trailing whitespace, or an ANSI escape, docker's ``\\n"`` / ``"``
  and whatever follows it (the parser saw those stripped).
- ``\\b`` is kept after an ASCII word character (there a byte-level boundary is a superset of Python's
  Unicode one); elsewhere it is dropped (before a word, an ANSI colour code's last letter may touch it), as is
  ``\\B``.
- A negative lookaround of one ASCII character class, or a negative lookahead of a short ASCII literal
  (``(?!=None)``), is written out exactly; other lookarounds and backreferences are dropped (a superset).
- ``"`` also matches ``\\"`` (a message inside docker's JSON).
- Bounded repeats above ``MAX_BOUND`` become unbounded; lazy repeats are greedy (the same lines match).
- A leading or trailing part that can match empty is removed and a trailing ``X{m,n}`` becomes ``X{m}``:
  the same lines match, and a line is reported about once instead of once per possible end.

What it does not handle (Unicode case folding of non-ASCII letters, a ``\\n`` in a pattern, constructs of
a future ``re``) raises ``Unsupported``; the caller then searches for the pattern's keywords instead.
``tests/unit/diagnose/test_scan_expr.py`` checks the superset property on the parsers' own patterns.
"""

from __future__ import annotations

import re
from typing import Any

from oomguard.records import field, record

try:  # Python 3.11+
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser as _sre  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _sre  # type: ignore[no-redef]

MAX_BOUND = 16


class Unsupported(ValueError):
    """A pattern this translator cannot write as a superset expression."""


@record(frozen=True)
class Expression:
    text: bytes  # Hyperscan syntax, every byte that is not a letter or digit escaped
    caseless: bool


_NL = 10
_ASCII = frozenset(range(128)) - {_NL}
_WORD = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_DIGIT = frozenset(b"0123456789")
# Python's \s for str patterns is str.isspace(): these ASCII bytes, and the non-ASCII code points below.
_SPACE = frozenset((9, 11, 12, 13, 28, 29, 30, 31, 32))
_UNICODE_SPACE = (0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000)
# What a parser strips around a message that can sit right before or after it in the raw line.
_AFTER_MESSAGE = frozenset(_SPACE | {ord("\\"), ord('"'), 0x1B})
_BEFORE_MESSAGE = frozenset(_SPACE | {ord('"'), ord(":"), ord("]"), ord("|"), ord(">"), ord(")")})
_ANSI = rb"(?:\x1b|\x5cu001[bB])\x5b[\x20-\x3f]*[\x40-\x7e]"  # ESC [ ... final byte (also JSON's \u001b)
_HIGH_CHAR = rb"[\x80-\xff]{1,4}"
_OTHER_BYTES = frozenset(_ASCII | set(range(0x80, 0x100)))


@record
class _Class:
    """One character: ASCII bytes, non-ASCII code point ranges, or (``high``) any non-ASCII character."""

    ascii: set[int] = field(default_factory=set)
    ranges: list[tuple[int, int]] = field(default_factory=list)
    high: bool = False

    def add(self, lo: int, hi: int) -> None:
        self.ascii.update(c for c in range(lo, min(hi, 127) + 1) if c != _NL)
        if hi >= 128:
            self.ranges.append((max(lo, 128), hi))

    def negated(self) -> _Class:
        # The non-ASCII part of a negation is "all" (a superset): the listed non-ASCII members are not exact.
        return _Class(set(_ASCII - self.ascii), [], True)

    def ascii_only(self) -> bool:
        return not self.ranges and not self.high


def _category(name: Any) -> _Class:
    if name in (_c.CATEGORY_DIGIT, _c.CATEGORY_UNI_DIGIT):
        return _Class(set(_DIGIT), [], True)
    if name in (_c.CATEGORY_WORD, _c.CATEGORY_UNI_WORD):
        return _Class(set(_WORD), [], True)
    if name in (_c.CATEGORY_SPACE, _c.CATEGORY_UNI_SPACE):
        return _Class(set(_SPACE), [(c, c) for c in _UNICODE_SPACE])
    if name in (_c.CATEGORY_NOT_DIGIT, _c.CATEGORY_UNI_NOT_DIGIT):
        return _Class(set(_ASCII - _DIGIT), [], True)
    if name in (_c.CATEGORY_NOT_WORD, _c.CATEGORY_UNI_NOT_WORD):
        return _Class(set(_ASCII - _WORD), [], True)
    if name in (_c.CATEGORY_NOT_SPACE, _c.CATEGORY_UNI_NOT_SPACE):
        return _Class(set(_ASCII - _SPACE), [], True)
    raise Unsupported(f"category {name}")


def _class_of(op: Any, av: Any) -> _Class | None:
    """The node as one character class, or None when it is not a single character."""
    if op == _c.LITERAL:
        cls = _Class()
        cls.add(av, av)
        return cls
    if op == _c.NOT_LITERAL:
        cls = _Class()
        cls.add(av, av)
        return cls.negated()
    if op == _c.ANY:
        return _Class(set(_ASCII), [], True)
    if op == _c.IN:
        cls = _Class()
        negate = False
        for iop, iav in av:
            if iop == _c.NEGATE:
                negate = True
            elif iop == _c.LITERAL:
                cls.add(iav, iav)
            elif iop == _c.RANGE:
                cls.add(*iav)
            elif iop == _c.CATEGORY:
                sub = _category(iav)
                cls.ascii |= sub.ascii
                cls.ranges += sub.ranges
                cls.high |= sub.high
            else:
                raise Unsupported(f"class item {iop}")
        return cls.negated() if negate else cls
    return None


def _byte(c: int) -> bytes:
    return bytes([c]) if chr(c).isalnum() and c < 128 else b"\\x%02x" % c


def _byte_set(members: set[int]) -> bytes:
    out = []
    items = sorted(members)
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(_byte(items[i]) if i == j else _byte(items[i]) + b"-" + _byte(items[j]))
        i = j + 1
    return b"[" + b"".join(out) + b"]"


_UTF8_SPANS = ((0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))


def _utf8_ranges(lo: int, hi: int) -> list[bytes]:
    """Byte sequences covering the UTF-8 encodings of code points lo..hi (exact for one code point)."""
    out = []
    for a, b in _UTF8_SPANS:
        x, y = max(lo, a), min(hi, b)
        if x > y:
            continue
        ex, ey = chr(x).encode("utf-8", "surrogatepass"), chr(y).encode("utf-8", "surrogatepass")
        if x == y:
            out.append(b"".join(_byte(c) for c in ex))
        else:
            out.append(_byte_set(set(range(ex[0], ey[0] + 1))) + b"[\\x80-\\xbf]" * (len(ex) - 1))
    return out


def _emit_class(cls: _Class) -> bytes:
    parts = []
    if cls.ascii:
        parts.append(_byte_set(cls.ascii) if len(cls.ascii) > 1 else _byte(next(iter(cls.ascii))))
    if cls.high:
        parts.append(_HIGH_CHAR)
    else:
        for lo, hi in cls.ranges:
            parts += _utf8_ranges(lo, hi)
    if not parts:
        raise Unsupported("an empty class")
    return parts[0] if len(parts) == 1 else b"(?:" + b"|".join(parts) + b")"


def _emit_byte_class(cls: _Class) -> bytes:
    """A class as one byte class, for an unbounded repeat (any non-ASCII member: every byte >= 0x80)."""
    members = set(cls.ascii)
    if cls.high or cls.ranges:
        members |= set(range(0x80, 0x100))
    if not members:
        raise Unsupported("an empty class")
    return _byte_set(members)


# --- trimming: parts that can match empty at either end --------------------------------------------------
_DROPPED_AT = (_c.AT_BEGINNING, _c.AT_BEGINNING_STRING, _c.AT_NON_BOUNDARY)
_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT) + ((_c.POSSESSIVE_REPEAT,) if hasattr(_c, "POSSESSIVE_REPEAT") else ())


def _skippable(node: tuple[Any, Any]) -> bool:
    """Can match empty and constrains nothing: removing it from either end leaves the same lines."""
    op, av = node
    if op in _REPEATS:
        return av[0] == 0
    if op == _c.AT:
        return av in _DROPPED_AT
    if op == _c.ASSERT:
        return True
    if op == _c.ASSERT_NOT:
        return _lookaround(av) is None
    if op in (_c.GROUPREF, _c.GROUPREF_EXISTS):
        return True
    if op == _c.SUBPATTERN:
        return all(_skippable(n) for n in av[-1])
    if op == _c.BRANCH:
        return any(all(_skippable(n) for n in alt) for alt in av[1])
    if hasattr(_c, "ATOMIC_GROUP") and op == _c.ATOMIC_GROUP:
        return all(_skippable(n) for n in av)
    return False


def _trim(seq: list[Any], at_start: bool, at_end: bool) -> list[Any]:
    seq = list(seq)
    for end in ((-1,) if at_end else ()) + ((0,) if at_start else ()):
        while seq:
            if _skippable(seq[end]):
                seq.pop(end)
                continue
            op, av = seq[end]
            if op in _REPEATS and av[1] != av[0]:
                # X{m,n} at either end: X{m} matches the same lines (X^k contains X^m at that end).
                seq[end] = (op, (av[0], av[0], av[2]))
            elif op == _c.SUBPATTERN:
                seq[end] = (op, (*av[:-1], _trim(av[-1], end == 0, end == -1)))
            elif op == _c.BRANCH:
                seq[end] = (op, (av[0], [_trim(alt, end == 0, end == -1) for alt in av[1]]))
            if _skippable(seq[end]):
                continue  # an alternative became empty: the whole part can be left out
            break
    return seq


# --- lookarounds --------------------------------------------------------------------------------------
def _lookaround(av: Any) -> tuple[str, Any] | None:
    """An exactly translatable negative lookaround: ("class", _Class) or ("literal", bytes); else None."""
    direction, body = av
    nodes = list(body)
    if len(nodes) == 1:
        cls = _class_of(*nodes[0])
        if cls is not None and cls.ascii_only() and cls.ascii:
            edge = _AFTER_MESSAGE if direction == 1 else _BEFORE_MESSAGE
            if not cls.ascii & edge:
                return ("class", cls)
    if direction == 1 and 2 <= len(nodes) <= 8 and all(op == _c.LITERAL and av2 < 128 for op, av2 in nodes):
        text = bytes(av2 for _, av2 in nodes)
        if text[0] not in _AFTER_MESSAGE and _NL not in text:
            return ("literal", text)
    return None


def _not_followed_by(text: bytes) -> bytes:
    """``(?!text)`` without lookahead: the next character differs from text's, or the line ends, at each step."""
    out = b""
    for c in reversed(text):
        tail = b"|" + _byte(c) + out if out else b""
        out = b"(?:" + _byte_set(_OTHER_BYTES - {c}) + b"|$" + tail + b")"
    return out


# --- emission -----------------------------------------------------------------------------------------
_END = (b"(?:" + _emit_class(_Class(set(_SPACE), [(c, c) for c in _UNICODE_SPACE])) + b")*"
        + rb"(?:(?:\x1b|\x5c[nrtu\x22]|\x22)[^\n]*)?$")


def _first_ascii_word(node: tuple[Any, Any]) -> bool:
    """Every match of ``node`` starts with an ASCII word character."""
    op, av = node
    cls = _class_of(op, av)
    if cls is not None:
        return cls.ascii_only() and bool(cls.ascii) and cls.ascii <= _WORD
    if op in _REPEATS:
        return av[0] >= 1 and _seq_first_ascii_word(list(av[2]))
    if op == _c.SUBPATTERN:
        return _seq_first_ascii_word(list(av[-1]))
    if op == _c.BRANCH:
        return all(_seq_first_ascii_word(list(alt)) for alt in av[1])
    return False


def _seq_first_ascii_word(seq: list[Any]) -> bool:
    return bool(seq) and _first_ascii_word(seq[0])


def _last_ascii_word(node: tuple[Any, Any]) -> bool:
    op, av = node
    cls = _class_of(op, av)
    if cls is not None:
        return cls.ascii_only() and bool(cls.ascii) and cls.ascii <= _WORD
    if op in _REPEATS:
        return av[0] >= 1 and _seq_last_ascii_word(list(av[2]))
    if op == _c.SUBPATTERN:
        return _seq_last_ascii_word(list(av[-1]))
    if op == _c.BRANCH:
        return all(_seq_last_ascii_word(list(alt)) for alt in av[1])
    return False


def _seq_last_ascii_word(seq: list[Any]) -> bool:
    return bool(seq) and _last_ascii_word(seq[-1])


class _Writer:
    def __init__(self, caseless: bool) -> None:
        self.caseless = caseless

    def seq(self, nodes: list[Any], at_start: bool = False, at_end: bool = False) -> bytes:
        """``at_start`` / ``at_end``: the nodes begin / end every match (where a lookaround may consume the
        character it looks at: the match only grows by it)."""
        out = []
        last = len(nodes) - 1
        for i, node in enumerate(nodes):
            op, av = node
            if op == _c.AT and av == _c.AT_BOUNDARY:
                # Only after a word: before one, the boundary may be an ANSI colour code's final letter ("\x1b[0mOOM"),
                # and leaving it out costs the scan less than accepting either (a third of its time, measured).
                if i > 0 and _last_ascii_word(nodes[i - 1]) and not (i + 1 < len(nodes) and _first_ascii_word(nodes[i + 1])):
                    out.append(b"\\b")
                continue
            out.append(self.node(op, av, at_start and i == 0, at_end and i == last))
        return b"".join(out)

    def node(self, op: Any, av: Any, at_start: bool = False, at_end: bool = False) -> bytes:
        if op == _c.LITERAL:
            if av == _NL:
                raise Unsupported("a newline in the pattern")
            if av == ord('"'):
                return b"(?:\\x5c?\\x22)"  # a quote, or docker JSON's escaped \"
            if av >= 128:
                ch = chr(av)
                if self.caseless and ch.lower() != ch.upper():
                    raise Unsupported(f"a non-ASCII letter matched ignoring case ({ch!r})")
                return b"".join(_byte(b) for b in ch.encode("utf-8", "surrogatepass"))
            return _byte(av)
        cls = _class_of(op, av)
        if cls is not None:
            return _emit_class(cls)
        if op == _c.BRANCH:
            return b"(?:" + b"|".join(self.seq(list(alt), at_start, at_end) for alt in av[1]) + b")"
        if op == _c.SUBPATTERN:
            add, remove, body = av[1], av[2], list(av[-1])
            inner = self.seq(body, at_start, at_end)
            if add & re.IGNORECASE and not self.caseless:
                return b"(?i:" + inner + b")"
            if remove & re.IGNORECASE and self.caseless:
                return b"(?-i:" + inner + b")"
            return b"(?:" + inner + b")"
        if hasattr(_c, "ATOMIC_GROUP") and op == _c.ATOMIC_GROUP:
            return b"(?:" + self.seq(list(av)) + b")"
        if op in _REPEATS:
            lo, hi, body = av[0], av[1], list(av[2])
            cls = _class_of(*body[0]) if len(body) == 1 else None
            if cls is not None and not cls.ascii_only() and hi != _c.MAXREPEAT:
                hi *= 4  # one class, as bytes: n characters are at most 4n bytes
            unbounded = hi == _c.MAXREPEAT or hi > MAX_BOUND * (1 if cls is None else 4)
            lo = min(lo, MAX_BOUND)
            inner = _emit_byte_class(cls) if cls is not None else b"(?:" + self.seq(body) + b")"
            if unbounded:
                return inner + (b"*" if lo == 0 else b"+" if lo == 1 else b"{%d,}" % lo)
            return inner + (b"{%d}" % lo if lo == hi else b"{%d,%d}" % (lo, hi))
        if op == _c.AT:
            if av in _DROPPED_AT:
                return b""
            if av in (_c.AT_END, _c.AT_END_STRING):
                return _END
            if av == _c.AT_BOUNDARY:
                return b""  # only kept next to a word character (seq)
            raise Unsupported(f"anchor {av}")
        if op == _c.ASSERT:
            return b""
        if op == _c.ASSERT_NOT:
            exact = _lookaround(av)
            # Written out, a lookaround consumes the character it looks at: only where that merely lengthens the
            # match (a lookbehind that begins it, a lookahead that ends it). Elsewhere it is dropped.
            if exact is None or not (at_start if av[0] == -1 else at_end):
                return b""
            kind, what = exact
            if kind == "literal":
                return _not_followed_by(what)
            other = _byte_set(_OTHER_BYTES - what.ascii)  # any other character, non-ASCII ones included
            if av[0] == 1:
                return b"(?:" + other + b"|$)"
            return b"(?:^|" + other + b"|" + _ANSI + b")"
        if op == _c.GROUPREF:
            return b"[^\\n]*"
        if op == _c.GROUPREF_EXISTS:
            yes, no = av[1], av[2]
            return b"(?:" + self.seq(list(yes)) + b"|" + (self.seq(list(no)) if no else b"") + b")"
        raise Unsupported(f"construct {op}")


def translate(pattern: str, flags: int = 0) -> Expression:
    """``pattern`` (as ``re.compile(pattern, flags)`` reads it) as a Hyperscan expression that matches every
    raw line whose message the pattern matches (see the module docstring)."""
    try:
        parsed = _sre.parse(pattern, flags)
    except re.error as exc:
        raise Unsupported(f"not a pattern: {exc}") from None
    caseless = bool((flags | parsed.state.flags) & re.IGNORECASE)
    nodes = _trim(list(parsed), True, True)
    if not nodes or all(_skippable(n) for n in nodes):
        raise Unsupported("matches every line")
    text = _Writer(caseless).seq(nodes, True, True)
    if not text:
        raise Unsupported("matches every line")
    return Expression(text, caseless)


# --- the fallback: literals every match contains ------------------------------------------------------
MIN_KEYWORD = 3


def keywords(pattern: str, flags: int = 0, given: tuple[bytes, ...] = ()) -> tuple[bytes, ...]:
    """Literals (UTF-8) at least one of which is in every line the pattern matches, for a pattern ``translate``
    cannot write: ``given`` (a cue's own keywords) when there are some, else, for each top-level alternative,
    its longest run of literal characters (case is the caller's: it matches them ignoring case when the
    pattern does). Raises ``Unsupported`` when some alternative has no literal of ``MIN_KEYWORD`` characters."""
    if given:
        return tuple(given)
    try:
        parsed = _sre.parse(pattern, flags)
    except re.error as exc:
        raise Unsupported(f"not a pattern: {exc}") from None
    nodes = list(parsed)
    alternatives = [list(alt) for alt in nodes[0][1][1]] if len(nodes) == 1 and nodes[0][0] == _c.BRANCH else [nodes]
    caseless = bool((flags | parsed.state.flags) & re.IGNORECASE)
    out = []
    for alt in alternatives:
        best = _longest_literal(alt)
        if len(best) < MIN_KEYWORD:
            raise Unsupported("an alternative without a literal to search for")
        if caseless and any(ord(c) >= 128 and c.lower() != c.upper() for c in best):
            raise Unsupported("a non-ASCII letter matched ignoring case")  # a byte search folds ASCII only
        out.append(best.encode("utf-8", "surrogatepass"))
    return tuple(dict.fromkeys(out))


def _longest_literal(nodes: list[Any]) -> str:
    best, run = "", ""
    for op, av in nodes:
        if op == _c.LITERAL and av != _NL:
            run += chr(av)
            continue
        if op == _c.SUBPATTERN and not (av[1] | av[2]) & re.IGNORECASE:
            inner = _longest_literal(list(av[-1]))
            if inner and len(inner) == _literal_length(list(av[-1])):
                run += inner  # a group of literals only: the run goes on through it
                continue
            best = max(best, run, inner, key=len)
            run = ""
            continue
        if op in _REPEATS and av[0] >= 1:
            best = max(best, run, _longest_literal(list(av[2])), key=len)
        else:
            best = max(best, run, key=len)
        run = ""
    return max(best, run, key=len)


def _literal_length(nodes: list[Any]) -> int:
    """How many characters the nodes match when they are literals only, else -1."""
    return len(nodes) if all(op == _c.LITERAL for op, _ in nodes) else -1
