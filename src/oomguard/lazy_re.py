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
from typing import Any

__all__ = ["LazyPattern", "compile", "is_pattern"]


class LazyPattern:
    """A ``re.Pattern`` compiled the first time it matches; ``pattern`` and ``flags`` without compiling."""

    __slots__ = ("pattern", "_flags", "_compiled")

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
        return compiled

    # the methods parsers call, without a __getattr__ hop
    def search(self, *args: Any, **kwargs: Any):
        return self.compiled.search(*args, **kwargs)

    def match(self, *args: Any, **kwargs: Any):
        return self.compiled.match(*args, **kwargs)

    def fullmatch(self, *args: Any, **kwargs: Any):
        return self.compiled.fullmatch(*args, **kwargs)

    def finditer(self, *args: Any, **kwargs: Any):
        return self.compiled.finditer(*args, **kwargs)

    def findall(self, *args: Any, **kwargs: Any):
        return self.compiled.findall(*args, **kwargs)

    def sub(self, *args: Any, **kwargs: Any):
        return self.compiled.sub(*args, **kwargs)

    def subn(self, *args: Any, **kwargs: Any):
        return self.compiled.subn(*args, **kwargs)

    def split(self, *args: Any, **kwargs: Any):
        return self.compiled.split(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # groups, groupindex, scanner...
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
