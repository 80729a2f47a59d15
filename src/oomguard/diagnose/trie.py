"""A regular expression for "any of these words" shaped as a trie: shared prefixes factored out.

Python's ``re`` tries a flat alternation of hundreds of words one after the other at every position; the trie
shape decides by the next character, so it is many times faster (measured: parse_cues' keyword search went from
about 0.4 ms to a few microseconds a line). It matches what the flat alternation of the same words sorted
longest first matches: at a position the longest word (siblings differ in their next character, so only one
branch can go on, and the optional rest is tried before stopping there).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any


def alternation(words: Iterable[str] | Iterable[bytes]) -> Any:
    """The trie-shaped pattern (``str`` for str words, ``bytes`` for bytes words) matching any of ``words``."""
    items = list(words)
    is_bytes = bool(items) and isinstance(items[0], bytes)
    root: dict[Any, Any] = {}
    for word in items:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[None] = True

    def piece(ch: Any) -> Any:
        return re.escape(bytes([ch])) if is_bytes else re.escape(ch)

    empty: Any = b"" if is_bytes else ""

    def emit(node: dict[Any, Any]) -> Any:
        alternatives = [piece(ch) + emit(child) for ch, child in sorted((k, v) for k, v in node.items() if k is not None)]
        if not alternatives:
            return empty
        bar, open_, close = (b"|", b"(?:", b")") if is_bytes else ("|", "(?:", ")")
        body = alternatives[0] if len(alternatives) == 1 else open_ + bar.join(alternatives) + close
        if None in node:
            # The word can end here; the longer ones are tried first.
            return open_ + body + close + (b"?" if is_bytes else "?")
        return body

    return emit(root)
