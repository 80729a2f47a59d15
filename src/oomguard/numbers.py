"""The one place where outside text becomes a number.

Every reader of the outside world (launch flags, ``--config`` YAML, config.json, JSON-valued flags,
logs, nvidia-smi, topology, /proc and cgroup files, manifests, HTTP answers) converts through
this module instead of calling ``int()`` / ``float()`` on what it read. Python's own conversions
are unsafe on hostile text: ``int()`` raises ValueError past 4,300 digits (and is quadratic up
to there), ``float('1e999')`` is infinity, ``float('nan')`` poisons every comparison, and
``int(float(x) * unit)`` raises OverflowError. Here the text is checked *before* conversion
(grammar, length) and the value *after* (finite, inside the caller's range).

Use:

    from oomguard.numbers import NumberError, parse_int, parse_float, as_int, as_float, input_int

    parse_int("8192")                      -> 8192       (str -> int; NumberError otherwise)
    parse_float("0.9", lo=0, hi=1)         -> 0.9
    parse_int("1,478", thousands=True)     -> 1478       (log figures printed with separators)
    as_int(value_from_json, lo=1)          -> int        (an already-typed JSON/YAML value)
    input_int(text, field="--max-num-seqs", file=path, line=3)
                                           -> int, or InputError "path:3: --max-num-seqs: '1e999' is not ..."
    int_or_none(text) / float_or_none(text) -> the number, or None (lenient readers that skip a cell)

``NumberError`` is a ``ValueError`` carrying ``text`` (shortened for messages) and ``why``;
``err.located(field=..., file=..., line=...)`` turns it into the one-line ``InputError``.

The grammar is Python's own literal grammar as vLLM parses its flags (``int()``/``float()``):
an optional sign, ASCII digits with single underscores between them (``1_000``), for floats a
fraction and an exponent. Refused with a reason: non-ASCII digits (Arabic-Indic ``١٢٣``,
fullwidth ``１２``: Python would accept them, but no tool oomguard reads prints them and a
look-alike numeral in a launch is more likely a paste accident than intent), hex/octal
(``0x10``: vLLM's ``int()`` refuses it too), more than ``MAX_CHARS`` characters, NaN and
infinities, anything outside the caller's ``lo``..``hi``.
"""

from __future__ import annotations

import math
import re

from oomguard.errors import InputError
import oomguard.lazy_re as lazy_re

# No figure a person or a tool writes for vLLM has more characters than this (a byte count of a
# multi-terabyte host is 14 digits; the exact decimal expansion of a double is up to ~60 with its
# exponent spelled out). Longer text is refused before int()/float() see it.
MAX_CHARS = 64
# Default magnitude bounds: int64 for integers (what torch and the kernel hold; cgroup v1 prints
# 2**63 - 4096 for "unlimited"), and the same for floats so that a later int() never overflows.
INT_LIMIT = (1 << 63) - 1
FLOAT_LIMIT = float(1 << 63)

# The most GPUs one launch can span (TP x PP x DP, and --num-gpus): vLLM's largest published
# deployments use a few thousand; a larger count is a typo, and searches and per-stage ledgers
# are sized by it, so it is refused rather than walked.
MAX_GPUS = 65536

_DIGITS = r"[0-9](?:_?[0-9])*"
_INT = lazy_re.compile(rf"[+-]?{_DIGITS}")
_FLOAT = lazy_re.compile(rf"[+-]?(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][+-]?{_DIGITS})?")
_NONFINITE = lazy_re.compile(r"[+-]?(?:inf|infinity|nan)", re.IGNORECASE)


class NumberError(ValueError):
    """Text or a value that is not a finite number in the stated range."""

    def __init__(self, text: object, why: str) -> None:
        shown = text if isinstance(text, str) else repr(text)
        if len(shown) > 24:
            shown = shown[:20] + "..."
        self.text = shown
        self.why = why
        super().__init__(f"{shown!r} {why}")

    def located(self, *, field: str | None = None, file: str | None = None, line: int | None = None) -> InputError:
        """The one-line bad-input error: ``FILE:LINE: FIELD: 'TEXT' is not a number``."""
        prefix = f"{field}: " if field else ""
        return InputError(f"{prefix}{self}", file=file, line=line)


def _why_not(s: str, kind: str) -> str:
    if any(not ch.isascii() and ch.isdecimal() for ch in s):  # Unicode category Nd: ١٢٣, １２
        return f"is not {kind} (write it with ASCII digits 0-9)"
    if re.fullmatch(r"[+-]?0[xXoObB][0-9a-fA-F_]+", s):
        return f"is not {kind} (hexadecimal, octal and binary are not accepted; write it in decimal)"
    if kind == "an integer" and _FLOAT.fullmatch(s):
        return "is not a whole number"
    return f"is not {kind}"


def _clean(text: str, thousands: bool) -> str:
    s = text.strip()
    if thousands and "," in s:
        # "1,478,032" as logs print it; a stray comma elsewhere is still refused below.
        if re.fullmatch(r"[+-]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?", s):
            s = s.replace(",", "")
    return s


def _range(value: float | int, original: object, lo: float | None, hi: float | None) -> None:
    if lo is not None and value < lo:
        raise NumberError(original, f"is out of range (at least {_bound(lo)})")
    if hi is not None and value > hi:
        raise NumberError(original, f"is out of range (at most {_bound(hi)})")


def _bound(b: float) -> str:
    if isinstance(b, float) and not b.is_integer():
        return f"{b:g}"
    return f"{int(b):,}" if abs(b) < 1e15 else f"{b:.3g}"


def _numeral(text: str, thousands: bool, caller: str) -> tuple[str, bool]:
    """``text`` ready for the numeral patterns, and whether it is plain ASCII digits (the common case: no
    pattern needed). Refuses what is not text, and more than MAX_CHARS characters, before any conversion."""
    if not isinstance(text, str):
        raise TypeError(f"{caller} expects text, got {type(text).__name__}")
    s = text.strip()
    if s.isdigit() and s.isascii() and len(s) <= 18:
        return s, True
    s = _clean(text, thousands)
    if len(s) > MAX_CHARS:
        raise NumberError(text, f"has too many digits (more than {MAX_CHARS})")
    return s, False


def parse_int(text: str, *, lo: int | None = -INT_LIMIT, hi: int | None = INT_LIMIT, thousands: bool = False) -> int:
    """A whole number written as text ('8192', '+5', '1_000'; '1,478' with ``thousands``)."""
    s, plain = _numeral(text, thousands, "parse_int")
    if not plain and not _INT.fullmatch(s):
        raise NumberError(text, "is not a number (empty)" if not s else _why_not(s, "an integer"))
    value = int(s)
    _range(value, text, lo, hi)
    return value


def parse_float(text: str, *, lo: float | None = -FLOAT_LIMIT, hi: float | None = FLOAT_LIMIT,
                thousands: bool = False) -> float:
    """A finite number written as text ('0.9', '1e-3', '.5', '12'); NaN and infinities refused."""
    s, plain = _numeral(text, thousands, "parse_float")
    if not plain and _NONFINITE.fullmatch(s):
        raise NumberError(text, "is not a finite number")
    if not plain and not _FLOAT.fullmatch(s):
        raise NumberError(text, "is not a number (empty)" if not s else _why_not(s, "a number"))
    value = float(s)
    if not math.isfinite(value):
        raise NumberError(text, "is too large to be a number (overflows to infinity)")
    _range(value, text, lo, hi)
    return value


def parse_number(text: str, *, lo: float | None = -FLOAT_LIMIT, hi: float | None = FLOAT_LIMIT,
                 thousands: bool = False) -> int | float:
    """An int when the text is a whole numeral ('12'), else a float ('12.5', '1e3')."""
    s = _clean(text, thousands) if isinstance(text, str) else text
    if isinstance(s, str) and len(s) <= MAX_CHARS and _INT.fullmatch(s):
        value = int(s)
        _range(value, text, lo, hi)
        return value
    return parse_float(text, lo=lo, hi=hi, thousands=thousands)


def as_int(value: object, *, lo: int | None = -INT_LIMIT, hi: int | None = INT_LIMIT, strings: bool = False) -> int:
    """An already-typed value (from JSON, YAML, a caller) as an int: bools refused, floats only when
    whole and finite (JSON's ``4096.0``), text only with ``strings`` (then parsed as above)."""
    if isinstance(value, bool):
        raise NumberError(value, "is a boolean, not a number")
    if isinstance(value, int):
        _range(value, value, lo, hi)
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NumberError(value, "is not a finite number")
        if not value.is_integer():
            raise NumberError(value, "is not a whole number")
        _range(value, value, lo, hi)
        return int(value)
    if strings and isinstance(value, str):
        return parse_int(value, lo=lo, hi=hi)
    raise NumberError(value, f"is {_kind(value)}, not a number")


def as_float(value: object, *, lo: float | None = -FLOAT_LIMIT, hi: float | None = FLOAT_LIMIT,
             strings: bool = False) -> float:
    """An already-typed value as a finite float in range (ints accepted; bools refused)."""
    if isinstance(value, bool):
        raise NumberError(value, "is a boolean, not a number")
    if isinstance(value, int):
        if abs(value) > 1 << 1000:  # float() of a longer int raises OverflowError
            raise NumberError(value, "is too large to be a number")
        _range(value, value, lo, hi)
        return float(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NumberError(value, "is not a finite number")
        _range(value, value, lo, hi)
        return value
    if strings and isinstance(value, str):
        return parse_float(value, lo=lo, hi=hi)
    raise NumberError(value, f"is {_kind(value)}, not a number")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return "text"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def is_finite_number(value: object) -> bool:
    """True for an int or a finite float (not a bool): the check before arithmetic on a typed value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) if isinstance(value, float) else abs(value) <= 1 << 1000


def int_or_none(text: str | None, **bounds) -> int | None:
    """``parse_int`` for readers that skip what they cannot read (a cell of a table)."""
    if text is None:
        return None
    try:
        return parse_int(text, **bounds)
    except NumberError:
        return None


def float_or_none(text: str | None, **bounds) -> float | None:
    """``parse_float`` for readers that skip what they cannot read."""
    if text is None:
        return None
    try:
        return parse_float(text, **bounds)
    except NumberError:
        return None


def input_int(value: object, *, field: str, file: str | None = None, line: int | None = None,
              lo: int | None = -INT_LIMIT, hi: int | None = INT_LIMIT) -> int:
    """Text or a typed value as an int, or the located bad-input error naming file, line and field."""
    try:
        return parse_int(value, lo=lo, hi=hi) if isinstance(value, str) else as_int(value, lo=lo, hi=hi)
    except NumberError as exc:
        raise exc.located(field=field, file=file, line=line) from None


def input_float(value: object, *, field: str, file: str | None = None, line: int | None = None,
                lo: float | None = -FLOAT_LIMIT, hi: float | None = FLOAT_LIMIT) -> float:
    """Text or a typed value as a finite float, or the located bad-input error."""
    try:
        return parse_float(value, lo=lo, hi=hi) if isinstance(value, str) else as_float(value, lo=lo, hi=hi)
    except NumberError as exc:
        raise exc.located(field=field, file=file, line=line) from None


# -- JSON ------------------------------------------------------------------------------------


def json_int(text: str) -> int:
    """``json.loads(parse_int=json_int)``: a JSON integer literal, refused past ``MAX_CHARS`` digits
    (``int()`` would raise its own ValueError past 4,300, and take quadratic time up to there)."""
    if len(text) > MAX_CHARS:
        raise NumberError(text, f"has too many digits (more than {MAX_CHARS})")
    return int(text)


def nonfinite_at(data: object, limit: int = 100_000) -> tuple[str, float] | None:
    """The path ('a.b[2]') and value of the first NaN / infinity in parsed JSON, or None.

    Python's decoder reads ``NaN``, ``Infinity`` and ``1e999`` as floats; a reader that names the
    field refuses them with this (iterative: depth is bounded by the loaders, not here)."""
    stack: list[tuple[object, str]] = [(data, "")]
    seen = 0
    while stack and seen < limit:
        v, at = stack.pop()
        seen += 1
        if isinstance(v, float) and not math.isfinite(v):
            return at or "(top level)", v
        if isinstance(v, dict):
            stack.extend((c, f"{at}.{k}" if at else str(k)) for k, c in v.items())
        elif isinstance(v, list):
            stack.extend((c, f"{at}[{i}]") for i, c in enumerate(v))
    return None


def json_loads(text: str | bytes) -> object:
    """``json.loads`` for JSON from outside: integers capped at ``MAX_CHARS`` digits, and NaN,
    Infinity or an overflowing float anywhere refused naming its path. Raises ValueError
    (``json.JSONDecodeError`` or ``NumberError``), as ``json.loads`` does."""
    import json

    data = json.loads(text, parse_int=json_int)
    bad = nonfinite_at(data)
    if bad is not None:
        raise NumberError(bad[1], f"at {bad[0]} is not a finite number (NaN, Infinity and 1e999 are refused)")
    return data
