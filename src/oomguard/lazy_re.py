"""Regular expressions compiled on first use.

diagnose's parsers hold ~320 module-level patterns; compiling them all at import was the largest
part of its start-up (~0.1 s), while a log uses about a third of them: the byte scan
(diagnose/prefilter.py) tells which patterns a line can match, so the others are never run.
``compile`` returns a ``LazyPattern``: the source and flags are there at once (the scan builds
its database from them), the compiled pattern on the first match. Behaviour is ``re``'s own.

    >>> WORD = compile(r"\\bOOM\\b", re.IGNORECASE)
    >>> WORD.pattern, bool(WORD.flags & re.IGNORECASE), WORD.search("an oom here").group()
    ('\\\\bOOM\\\\b', True, 'oom')
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["LazyPattern", "compile", "is_pattern"]


# The methods parsers call: after the first compile they are the compiled pattern's own bound methods, set on
# the instance, so a lazy pattern in a per-line loop costs what a compiled one does (no wrapper frame).
_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner")


class LazyPattern:
    """A ``re.Pattern`` compiled the first time it matches; ``pattern`` and ``flags`` without compiling.

    Not the same object as the compiled pattern: ``match.re is LAZY`` is always False. Compare a match's
    pattern by equality (``match.re == LAZY``: same source and flags) or keep the match of each pattern
    apart; tests/unit/test_lazy_re.py refuses identity tests on patterns in src/."""

    def __init__(self, pattern: str | bytes, flags: int = 0):
        self.pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern | None = None

    @property
    def flags(self) -> int:
        """As ``re.Pattern.flags``: a str pattern without ASCII is UNICODE too."""
        if isinstance(self.pattern, str) and not self._flags & re.ASCII:
            return self._flags | re.UNICODE
        return self._flags

    @property
    def compiled(self) -> re.Pattern:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern, self._flags)
            for name in _METHODS:  # found on the instance from now on; __getattr__ is not asked again
                self.__dict__[name] = getattr(compiled, name)
        return compiled

    def __getattr__(self, name: str) -> Any:  # search/match... before the first compile; groups, groupindex...
        if name.startswith("_"):  # not re's (and never recurse through _compiled before __init__)
            raise AttributeError(name)
        return getattr(self.compiled, name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (LazyPattern, re.Pattern)):
            return (self.pattern, self.flags) == (other.pattern, other.flags)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.pattern, self.flags))

    def __repr__(self) -> str:
        return f"lazy_re.compile({self.pattern!r}, {self._flags})"

    def __reduce__(self):
        return (LazyPattern, (self.pattern, self._flags))


def compile(pattern: str | bytes, flags: int = 0) -> LazyPattern:  # noqa: A001 - re.compile's name, on purpose
    """``re.compile``, deferred to the first match."""
    return LazyPattern(pattern, flags)


def is_pattern(value: object) -> bool:
    """A compiled or a lazy pattern."""
    return isinstance(value, (re.Pattern, LazyPattern))
